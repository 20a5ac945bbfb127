"""Notebook 05's checks: independent solutions pass, typical wrong answers are rejected with the
concept first (and the mistake recognised where the check can), and `yours_or` lets later cells run."""

import math

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects
from onehot2gpt.attention import causal_mask


def _mha(x, W_qkv, b_qkv, W_o, b_o, n_heads, mask=None):
    """Written from the paper's formula, one head at a time, without the library."""
    B, T, D = x.shape
    hs = D // n_heads
    q, k, v = (
        x @ W_qkv[:D].T + b_qkv[:D],
        x @ W_qkv[D : 2 * D].T + b_qkv[D : 2 * D],
        x @ W_qkv[2 * D :].T + b_qkv[2 * D :],
    )
    heads, weights = [], []
    for h in range(n_heads):
        cols = slice(h * hs, (h + 1) * hs)
        scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(hs)  # (B, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask.expand(B, 1, T, T)[:, 0], float("-inf"))
        w = torch.softmax(scores, -1)
        heads.append(w @ v[..., cols])
        weights.append(w)
    return torch.cat(heads, -1) @ W_o.T + b_o, torch.stack(weights, 1)


def test_multi_head_attention_check_passes_an_independent_solution(capsys):
    ex.check_multi_head_attention(_mha)
    assert "✓ multi_head_attention" in capsys.readouterr().out


def _mha_scale(x, W_qkv, b_qkv, W_o, b_o, n_heads, mask=None, scale=None):
    B, T, D = x.shape
    hs = D // n_heads
    q, k, v = (x @ W_qkv.T + b_qkv).split(D, -1)
    q, k, v = (t.view(B, T, n_heads, hs).transpose(1, 2) for t in (q, k, v))
    s = q @ k.transpose(-2, -1) / scale(D, hs)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, -1)
    return (w @ v).transpose(1, 2).reshape(B, T, D) @ W_o.T + b_o, w


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda x, Wq, bq, Wo, bo, h, mask=None: _mha_scale(
                x, Wq, bq, Wo, bo, h, mask, scale=lambda D, hs: math.sqrt(D)
            ),
            "√D",
        ),
        (
            lambda x, Wq, bq, Wo, bo, h, mask=None: _mha_scale(
                x, Wq, bq, Wo, bo, h, None, scale=lambda D, hs: math.sqrt(hs)
            ),
            "mask is ignored",
        ),
        (
            lambda x, Wq, bq, Wo, bo, h, mask=None: (
                _mha(x, Wq, bq, Wo, bo, h, mask)[0] - bo,
                _mha(x, Wq, bq, Wo, bo, h, mask)[1],
            ),
            "weights are right",
        ),
        (lambda x, Wq, bq, Wo, bo, h, mask=None: _mha(x, Wq, bq, Wo, bo, h, mask)[0], None),  # no weights
    ],
)
def test_multi_head_attention_check_rejects_typical_mistakes(wrong, words):
    assert_rejects(ex.check_multi_head_attention, wrong, match=words)


def test_causal_mask_check_rejects_a_float_mask_and_says_why():
    assert_rejects(ex.check_causal_mask, lambda t: torch.ones(t, t).tril(), match="blocks? nothing|block nothing")


def test_causal_mask_check_names_the_future_and_the_diagonal():
    assert_rejects(ex.check_causal_mask, lambda t: torch.ones(t, t, dtype=torch.bool).triu(), match="future")
    ex.reset_attempts()
    assert_rejects(
        ex.check_causal_mask, lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1), match="its own position"
    )


def test_split_heads_check_recognises_scrambled_heads():
    def strided(x, h):  # splits D as (D/H, H): every head gets every H-th feature
        B, T, D = x.shape
        return x.view(B, T, D // h, h).permute(0, 3, 1, 2)

    assert_rejects(ex.check_split_heads, strided, match="every H-th feature")
    ex.reset_attempts()
    assert_rejects(ex.check_split_heads, lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), match="scrambled")


def test_attention_with_loops_check_recognises_missing_scale_and_wrong_softmax_axis():
    def unscaled(q, K, V):
        w = torch.softmax(q @ K.T, -1)
        return w @ V, w

    def by_column(q, K, V):
        w = torch.softmax(q @ K.T / math.sqrt(q.shape[1]), 0)
        return w @ V, w

    assert_rejects(ex.check_attention_with_loops, unscaled, match="not divided")
    ex.reset_attempts()
    assert_rejects(ex.check_attention_with_loops, by_column, match="over the keys")


def test_yours_or_uses_the_solution_once_written_and_the_stand_in_before(capsys):
    def unwritten(T):
        raise NotImplementedError

    def written(T):
        return torch.zeros(T, T, dtype=torch.bool)

    use = ex.yours_or(unwritten, causal_mask)
    assert torch.equal(use(3), causal_mask(3)) and torch.equal(use(2), causal_mask(2))
    assert capsys.readouterr().out.count("not written yet") == 1
    assert torch.equal(ex.yours_or(written, causal_mask)(3), torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ZeroDivisionError):  # a solution's own error is not hidden
        ex.yours_or(lambda T: 1 / 0, causal_mask)(3)
