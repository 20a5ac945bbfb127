"""Notebook 09's checks: the GPT the notebook builds (attention, MLP, block, model) proven on the
course checkpoint, each planted mistake named; top-k with ties and k ≥ V, top-p and the dtype of
what filters return, and yours_if_solved (later cells run on the student's function once it
passes)."""

import math

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects, top_k_lowest_ids
from onehot2gpt_exercises import checking
from torch import nn

# ------------------------------------------------------------------ the GPT, built as a student might


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class Attention(nn.Module):
    """An independent causal self-attention: a loop over heads, einsum, triu mask. `slip` plants one
    common mistake."""

    slip = ""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, D = x.shape
        H, hs = self.n_heads, D // self.n_heads
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        if self.slip == "view":  # one view straight to (B, H, T, hs)
            q, k, v = (z.reshape(B, H, T, hs) for z in (q, k, v))
            heads = [(q[:, h], k[:, h], v[:, h]) for h in range(H)]
        else:
            heads = [
                (q[..., h * hs : (h + 1) * hs], k[..., h * hs : (h + 1) * hs], v[..., h * hs : (h + 1) * hs])
                for h in range(H)
            ]
        outs = []
        for qh, kh, vh in heads:
            s = torch.einsum("btd,bsd->bts", qh, kh)
            s = s if self.slip == "no scale" else s / math.sqrt(hs)
            later = torch.ones(T, T, dtype=torch.bool).triu(1)
            if self.slip == "mask after":
                w = torch.softmax(s, -1).masked_fill(later, 0.0)
            else:
                w = torch.softmax(s.masked_fill(later, float("-inf")), -1)
            outs.append(w @ vh)
        if self.slip == "view":
            return self.out_proj(torch.stack(outs, 1).reshape(B, T, D))
        return self.out_proj(torch.cat(outs, -1))


class MLP(nn.Module):
    act = staticmethod(_gelu_tanh)

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.act(self.linear1(x)))


class Block(nn.Module):
    post_norm = False

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(d_model), Attention(d_model, n_heads)
        self.norm2, self.ff = nn.LayerNorm(d_model), MLP(d_model, d_ff)

    def forward(self, x):
        if self.post_norm:
            x = self.norm1(x + self.attn(x))
            return self.norm2(x + self.ff(x))
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class Model(nn.Module):
    slip = ""

    def __init__(self, config, block=Block):
        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(block(c.d_model, c.n_heads, c.d_ff) for _ in range(c.n_layers))
        self.final_norm = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight

    def forward(self, ids):
        h = self.tok_emb(ids)
        if self.slip != "no positions":
            h = h + self.pos_emb.weight[: ids.shape[1]]
        for block in self.blocks:
            h = block(h)
        logits = self.lm_head(h if self.slip == "no final norm" else self.final_norm(h))
        return logits.softmax(-1) if self.slip == "softmax" else logits


def _with(cls, **attributes):
    return type(cls.__name__, (cls,), attributes)


def test_the_build_checks_pass_an_independent_solution(capsys):
    ex.check_causal_self_attention(Attention)
    ex.check_gpt_mlp(MLP)
    ex.check_gpt_block(Block)
    ex.check_gpt_model(Model)
    out = capsys.readouterr().out
    for name in ("causal_self_attention", "gpt_mlp", "gpt_block", "gpt_model"):
        assert f"✓ {name}" in out


@pytest.mark.parametrize(
    "slip, reason",
    [("view", "without moving an axis"), ("mask after", "after the softmax"), ("no scale", "not scaled")],
)
def test_check_causal_self_attention_names_each_planted_mistake(slip, reason):
    assert_rejects(ex.check_causal_self_attention, _with(Attention, slip=slip), reason)


@pytest.mark.parametrize(
    "act, reason",
    [(torch.nn.functional.gelu, r"exact \(erf\) GELU"), (torch.relu, "ReLU"), (lambda z: z, "no non-linearity")],
)
def test_check_gpt_mlp_names_each_planted_mistake(act, reason):
    assert_rejects(ex.check_gpt_mlp, _with(MLP, act=staticmethod(act)), reason)


def test_check_gpt_block_names_a_post_norm_block():
    assert_rejects(ex.check_gpt_block, _with(Block, post_norm=True), "post-norm")


@pytest.mark.parametrize(
    "slip, reason",
    [
        ("no positions", "position embedding is missing"),
        ("no final norm", "final LayerNorm"),
        ("softmax", "probabilities"),
    ],
)
def test_check_gpt_model_names_each_planted_mistake(slip, reason):
    assert_rejects(ex.check_gpt_model, _with(Model, slip=slip), reason)


def test_a_build_check_names_weights_that_are_not_the_checkpoints():
    class Renamed(MLP):
        def __init__(self, d_model, d_ff):
            nn.Module.__init__(self)
            self.up, self.down = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    with pytest.raises(AssertionError, match=r"MyMLP's weights are not the checkpoint's: missing \['linear1.bias'"):
        ex.check_gpt_mlp(Renamed)


def test_a_build_check_says_when_not_written():
    class Todo(Block):
        def forward(self, x):
            raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        ex.check_gpt_block(Todo)


def test_the_library_stand_in_has_mygpts_interface_and_passes():
    ex.check_gpt_model(ex.LibraryGPT)
    gpt = ex.nb09.course_gpt()
    stand_in = ex.LibraryGPT(gpt.config)
    assert [n for n, _ in stand_in.named_parameters()] == [n for n, _ in Model(gpt.config).named_parameters()]


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
    # the student's next real try still gets the concept only, without the hint.
    assert ex.yours_if_solved(_top_k_keep_ties, ex.check_top_k_filter, filter_top_k) is filter_top_k
    assert not checking._WRONG_ATTEMPTS
    with pytest.raises(AssertionError) as first:
        ex.check_top_k_filter(_top_k_keep_ties)
    assert "Think about:" in str(first.value) and "Hint:" not in str(first.value)


def test_check_top_k_refuses_nan_in_place_of_minus_infinity():
    """NaN is not −inf (issue 48: a filter writing NaN passed, and the notebook's sampler then crashed)."""
    from onehot2gpt.sampling import filter_top_k

    def nan_filter(logits, k):
        out = filter_top_k(logits, k)
        return out.masked_fill(out == float("-inf"), float("nan"))

    with pytest.raises(AssertionError, match="wrote NaN"):
        ex.check_top_k_filter(nan_filter)


def test_a_build_check_names_dropout_left_on_in_eval():
    """Issue 47: a block or model that still drops units after .eval() answers the same input twice
    differently; the check says so in words."""
    import torch.nn.functional as F

    class DropsInEval(ex.LibraryGPT):
        def forward(self, ids):
            return F.dropout(super().forward(ids), 0.1, training=True)

    assert_rejects(ex.check_gpt_model, DropsInEval, match="dropout that ignores .eval")


def test_yours_if_solved_does_not_run_a_slow_check_again_on_the_answer_that_just_passed(capsys):
    """The check cell passes; yours_if_solved right after takes the same, unchanged class without
    building the model again. A changed answer is checked again."""
    calls = []

    class Counted(ex.LibraryGPT):
        def forward(self, ids):
            calls.append(1)
            return super().forward(ids)

    checking.reset_attempts()
    ex.check_gpt_model(Counted)
    n = len(calls)
    assert checking.yours_if_solved(Counted, ex.check_gpt_model, ex.LibraryGPT) is Counted
    assert len(calls) == n, "the check ran again"

    def forward(self, ids):  # the student edits the method after passing
        calls.append(1)
        return ex.LibraryGPT.forward(self, ids) * 2

    Counted.forward = forward
    assert checking.yours_if_solved(Counted, ex.check_gpt_model, ex.LibraryGPT) is ex.LibraryGPT
    assert len(calls) > n
