"""Notebook 06's checks: independent solutions pass, typical wrong answers are rejected with the
concept first, and the common mistakes are recognised in words."""

import math

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects


def _norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return g * (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps) + b


def _block(x, p, n_heads, mask=None, activation=torch.relu, eps=1e-5, *, pre_norm=False, residual=True, scale=None):
    """A post-norm encoder block written from the paper with per-head loops, no library."""
    B, T, D = x.shape
    hs = D // n_heads
    W, bias = p["self_attn.in_proj.weight"], p["self_attn.in_proj.bias"]

    def attention(h):
        heads = []
        for i in range(n_heads):
            rows = [slice(j * D + i * hs, j * D + (i + 1) * hs) for j in range(3)]
            q, k, v = (h @ W[r].T + bias[r] for r in rows)
            s = q @ k.transpose(1, 2) / (scale or math.sqrt(hs))
            if mask is not None:
                s = s.masked_fill(~mask.expand(B, 1, T, T)[:, 0], float("-inf"))
            heads.append(torch.softmax(s, -1) @ v)
        return torch.cat(heads, -1) @ p["self_attn.out_proj.weight"].T + p["self_attn.out_proj.bias"]

    def ff(h):
        hidden = activation(h @ p["ff.linear1.weight"].T + p["ff.linear1.bias"])
        return hidden @ p["ff.linear2.weight"].T + p["ff.linear2.bias"]

    def n1(h):
        return _norm(h, p["norm1.weight"], p["norm1.bias"], eps)

    def n2(h):
        return _norm(h, p["norm2.weight"], p["norm2.bias"], eps)

    if pre_norm:
        x = x + attention(n1(x))
        return x + ff(n2(x))
    keep = 1.0 if residual else 0.0
    x = n1(keep * x + attention(x))
    return n2(keep * x + ff(x))


def test_encoder_block_check_passes_an_independent_solution(capsys):
    ex.check_encoder_block(_block)
    assert "✓ encoder_block" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, p, h, mask=None, *a: _block(x, p, h, mask, *a, pre_norm=True), "pre-norm"),
        (lambda x, p, h, mask=None, *a: _block(x, p, h, mask, *a, residual=False), "residual"),
        (lambda x, p, h, mask=None, *a: _block(x, p, h, None, *a), "mask is ignored"),
        (lambda x, p, h, mask=None, *a: _block(x, p, h, mask, *a, scale=math.sqrt(x.size(-1))), "√D"),
        (lambda x, p, h, mask=None, *a: _block(x, p, h, mask, *a)[:, :1], None),  # one position only
        (lambda x, p, h, mask=None, *a: _block(x, p, h, mask), "activation"),  # ReLU whatever is passed
    ],
)
def test_encoder_block_check_rejects_typical_mistakes(wrong, words):
    assert_rejects(ex.check_encoder_block, wrong, match=words)


def test_layer_norm_check_names_the_unbiased_variance():
    def unbiased(x, g, b, eps):
        return g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + b

    assert_rejects(ex.check_layer_norm, unbiased, match="D − 1")


def test_positional_encoding_check_names_swapped_sine_and_cosine():
    def swapped(n, d):
        pos = torch.arange(n, dtype=torch.float32)[:, None]
        angles = pos / 10000 ** (torch.arange(0, d, 2) / d)
        table = torch.zeros(n, d)
        table[:, 0::2], table[:, 1::2] = torch.cos(angles), torch.sin(angles)
        return table

    assert_rejects(ex.check_positional_encoding, swapped, match="swapped")


def test_greedy_decode_check_names_a_leading_bos():
    def with_bos(model, src, bos, eos, max_new):
        return torch.cat([torch.tensor([bos]), model.greedy_decode(src, bos, eos, max_new)[0]])

    assert_rejects(ex.check_greedy_decode, with_bos, match="<bos>")


# ------------------------------------------------------------------ the decoder block


def _decoder_by_hand(y, memory, p, n_heads, self_mask=None, memory_mask=None, slip=""):
    """A decoder block with a loop over heads and einsum, independent of the library."""
    D = y.shape[-1]
    hs = D // n_heads

    def norm(h, i):
        mean, var = h.mean(-1, keepdim=True), h.var(-1, unbiased=False, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5) * p[f"norm{i}.weight"] + p[f"norm{i}.bias"]

    def attend(queries, source, name, mask):
        w, b = p[f"{name}.in_proj.weight"], p[f"{name}.in_proj.bias"]
        q, k, v = queries @ w[:D].T + b[:D], source @ w[D : 2 * D].T + b[D : 2 * D], source @ w[2 * D :].T + b[2 * D :]
        heads = []
        for i in range(n_heads):
            cols = slice(i * hs, (i + 1) * hs)
            scores = torch.einsum("btd,bsd->bts", q[..., cols], k[..., cols]) / math.sqrt(hs)
            if mask is not None:  # (T, T) causal, or (B, 1, 1, S) padding
                scores = scores.masked_fill(~(mask[:, 0] if mask.dim() == 4 else mask), float("-inf"))
            heads.append(torch.softmax(scores, -1) @ v[..., cols])
        return torch.cat(heads, -1) @ p[f"{name}.out_proj.weight"].T + p[f"{name}.out_proj.bias"]

    h = norm(y + attend(y, y, "self_attn", None if slip == "no causal mask" else self_mask), 1)
    source, mask = (h, self_mask) if slip == "cross reads itself" else (memory, memory_mask)
    h = norm(h + attend(h, source, "cross_attn", mask), 2)
    f = (
        torch.relu(h @ p["ff.linear1.weight"].T + p["ff.linear1.bias"]) @ p["ff.linear2.weight"].T
        + p["ff.linear2.bias"]
    )
    return norm(h + f, 3)


def test_check_decoder_block_passes_an_independent_solution(capsys):
    ex.check_decoder_block(_decoder_by_hand)
    assert "✓ decoder_block" in capsys.readouterr().out


@pytest.mark.parametrize(
    "slip, reason",
    [("no causal mask", "self-attention is not masked"), ("cross reads itself", "reads the decoder's own states")],
)
def test_check_decoder_block_names_each_planted_mistake(slip, reason):
    assert_rejects(ex.check_decoder_block, lambda *args: _decoder_by_hand(*args, slip=slip), reason)
