"""Notebook 09's checks: a GPT block's forward from its weights, top-k with ties and k ≥ V,
top-p and the dtype of what filters return, and yours_if_solved (later cells run on the
student's function once it passes)."""

import math

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects, top_k_lowest_ids
from onehot2gpt_exercises import checking

# ------------------------------------------------------------------ a GPT block, written as a student might


def _layer_norm(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return gain * (x - mean) / torch.sqrt(var + eps) + bias


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _block(x, w, n_heads, *, mask=True, prenorm=True, residual=True, scale=True, gelu=_gelu_tanh, split="consecutive"):
    """One pre-norm block with einsum and loops over heads, independent of the library."""
    B, T, D = x.shape
    hs = D // n_heads
    h = _layer_norm(x, w["norm1.weight"], w["norm1.bias"]) if prenorm else x
    qkv = h @ w["attn.in_proj.weight"].T + w["attn.in_proj.bias"]  # (B, T, 3D)
    q, k, v = qkv[..., :D], qkv[..., D : 2 * D], qkv[..., 2 * D :]
    heads = []
    for i in range(n_heads):
        cols = slice(i * hs, (i + 1) * hs) if split == "consecutive" else slice(i, D, n_heads)
        s = torch.einsum("btd,bsd->bts", q[..., cols], k[..., cols])
        if scale:
            s = s / math.sqrt(hs)
        if mask:
            s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
        heads.append(torch.softmax(s, -1) @ v[..., cols])
    a = torch.cat(heads, -1) @ w["attn.out_proj.weight"].T + w["attn.out_proj.bias"]
    x = x + a if residual else a
    if not prenorm:
        x = _layer_norm(x, w["norm1.weight"], w["norm1.bias"])
    h = _layer_norm(x, w["norm2.weight"], w["norm2.bias"]) if prenorm else x
    m = gelu(h @ w["ff.linear1.weight"].T + w["ff.linear1.bias"]) @ w["ff.linear2.weight"].T + w["ff.linear2.bias"]
    x = x + m if residual else m
    return x if prenorm else _layer_norm(x, w["norm2.weight"], w["norm2.bias"])


def test_check_gpt_block_passes_an_independent_solution(capsys):
    ex.check_gpt_block(_block)
    assert "✓ gpt_block" in capsys.readouterr().out


@pytest.mark.parametrize(
    "slip, reason",
    [
        (dict(mask=False), "causal mask is missing"),
        (dict(prenorm=False), "post-norm"),
        (dict(residual=False), "residual connections are missing"),
        (dict(scale=False), "not scaled"),
        (dict(gelu=torch.nn.functional.gelu), "exact"),
        (dict(split="round-robin"), "heads' features are scrambled"),
    ],
)
def test_check_gpt_block_names_each_slip(slip, reason):
    assert_rejects(ex.check_gpt_block, lambda x, w, h: _block(x, w, h, **slip), reason)


def test_check_gpt_block_rejects_a_wrong_dtype_and_shape():
    assert_rejects(ex.check_gpt_block, lambda x, w, h: _block(x, w, h).double(), "dtype")
    ex.reset_attempts()
    assert_rejects(ex.check_gpt_block, lambda x, w, h: _block(x, w, h)[:, -1], "shape")


def test_check_gpt_block_uses_trained_looking_layer_norms():
    """A solution that forgets LayerNorm's gain and bias must fail: the check's weights have them."""

    def no_affine(x, w, h):
        w = dict(
            w,
            **{
                f"norm{i}.{p}": torch.ones_like(w[f"norm{i}.{p}"]) * (p == "weight")
                for i in (1, 2)
                for p in ("weight", "bias")
            },
        )
        return _block(x, w, h)

    assert_rejects(ex.check_gpt_block, no_affine)


def test_check_gpt_block_says_when_not_written():
    def todo(x, w, n_heads):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        ex.check_gpt_block(todo)


# ------------------------------------------------------------------ top-k: ties, k ≥ V, dtype


def _top_k_keep_ties(logits, k):
    kth = logits.sort(-1, descending=True).values[..., min(k, logits.shape[-1]) - 1 : min(k, logits.shape[-1])]
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_highest_ids(logits, k):
    flipped = top_k_lowest_ids(logits.flip(-1), k)  # ties: higher id first
    return flipped.flip(-1)


def _top_k_without_k_above_v(logits, k):
    logits.topk(k, dim=-1)  # raises when k > V: k above V must keep every token
    return top_k_lowest_ids(logits, k)


def test_check_top_k_passes_an_independent_solution(capsys):
    ex.check_top_k_filter(top_k_lowest_ids)
    assert "✓ top_k_filter" in capsys.readouterr().out


def test_check_top_k_tests_ties_and_k_at_least_v():
    seen = []

    def spy(logits, k):
        rows = logits.reshape(-1, logits.shape[-1])
        n = min(k, rows.shape[-1])
        kth = rows.sort(-1, descending=True).values[:, n - 1 : n]
        seen.append((k - logits.shape[-1], bool(((rows >= kth).sum(-1) > n).any())))
        return top_k_lowest_ids(logits, k)

    ex.check_top_k_filter(spy)
    assert any(tie for _, tie in seen), "no test has a tie at the k-th place"
    assert any(extra == 0 for extra, _ in seen), "no test has k = V"
    assert any(extra > 0 for extra, _ in seen), "no test has k > V"


@pytest.mark.parametrize(
    "wrong, reason",
    [
        (_top_k_keep_ties, "kept every tied token"),
        (_top_k_highest_ids, "higher token ids"),
        (_top_k_without_k_above_v, "raised"),
        (lambda logits, k: top_k_lowest_ids(logits, k).double(), "dtype"),
        (lambda logits, k: top_k_lowest_ids(logits, k) > float("-inf"), "dtype"),  # a bool mask, not logits
    ],
)
def test_check_top_k_rejects(wrong, reason):
    assert_rejects(ex.check_top_k_filter, wrong, reason)


def test_check_top_p_rejects_a_wrong_dtype():
    from onehot2gpt.sampling import filter_top_p

    assert_rejects(ex.check_top_p_filter, lambda logits, p: filter_top_p(logits, p).double(), "dtype")


# ------------------------------------------------------------------ yours_if_solved


def test_yours_if_solved_returns_the_student_function_once_it_passes(capsys):
    chosen = ex.yours_if_solved(top_k_lowest_ids, ex.check_top_k_filter, lambda logits, k: None)
    assert chosen is top_k_lowest_ids
    out = capsys.readouterr().out
    assert "your top_k_lowest_ids" in out and "✓" not in out  # the check itself ran quietly


def test_yours_if_solved_falls_back_when_unwritten_or_wrong(capsys):
    from onehot2gpt.sampling import filter_top_k

    def todo(logits, k):
        raise NotImplementedError

    assert ex.yours_if_solved(todo, ex.check_top_k_filter, filter_top_k) is filter_top_k
    assert "filter_top_k instead" in capsys.readouterr().out
    # A wrong function falls back too, and the quiet run is not counted as a wrong attempt:
    # the student's next real try still gets the concept only, without the code-level hint.
    assert ex.yours_if_solved(_top_k_keep_ties, ex.check_top_k_filter, filter_top_k) is filter_top_k
    assert not checking._WRONG_ATTEMPTS
    with pytest.raises(AssertionError) as first:
        ex.check_top_k_filter(_top_k_keep_ties)
    assert "Think about:" in str(first.value) and "Hint:" not in str(first.value)
