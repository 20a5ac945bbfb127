"""Checks for notebook 05 (attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .checking import attention_variant, check_function, rand_int, same_shape

# Exercise 1: attention with loops


def _attention_with_loops_diagnose(got, expected, q, K, V):
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], torch.Tensor)):
        return None
    w = got[1]
    if w.shape != expected[1].shape:
        return None
    scores = q @ K.T
    if torch.allclose(w, torch.softmax(scores, -1), atol=1e-5):
        return "the weights are a softmax of the raw dot products: the scores are not divided by √d"
    if torch.allclose(w, torch.softmax(scores / math.sqrt(q.shape[1]), 0), atol=1e-5):
        return "each column sums to 1, not each row: the softmax must run over the keys, one query at a time"
    return None


def check_attention_with_loops(fn: Callable) -> None:
    """Exercise: q (T_q, d), K (T_k, d), V (T_k, d_v) → (output (T_q, d_v), weights (T_q, T_k))."""
    from onehot2gpt.attention import scaled_dot_product_attention

    def make(gen):
        tq, tk, d, dv = (rand_int(gen, 1, 6) for _ in range(4))
        return (
            torch.randn(tq, d, generator=gen),
            torch.randn(tk, d, generator=gen),
            torch.randn(tk, dv, generator=gen),
        )

    check_function(
        fn,
        scaled_dot_product_attention,
        make,
        name="attention_with_loops",
        concept="each query scores every key by a dot product scaled by 1/√d; the softmax turns one query's scores "
        "into weights that sum to 1 over the keys; the output for that query is the weighted average of the values",
        diagnose=_attention_with_loops_diagnose,
        hint="for query i: s_ij = q_i·k_j / √d for every key j, a_i = softmax over j of s_i, out_i = Σ_j a_ij v_j; "
        "the answer is the pair of the outputs (T_q, d_v) and the weights (T_q, T_k)",
    )


# Exercise 2: the causal mask


def _causal_mask_diagnose(got, expected, T):
    if not same_shape(got, expected):
        return None
    if got.dtype != torch.bool:
        if torch.equal(got.to(torch.bool), expected):
            return (
                "the right pattern, stored as numbers: a 0/1 float mask is *added* to the scores by PyTorch's "
                "attention, so it would block nothing; masks here are True/False"
            )
        return None
    if T > 1 and torch.equal(got, expected.T):
        return "each query sees the keys after it: the mask looks into the future, not the past"
    if torch.equal(got, expected & ~torch.eye(T, dtype=torch.bool)):
        return "a query must also see its own position (j = i is allowed)"
    return None


def check_causal_mask(fn: Callable) -> None:
    """Exercise: T → (T, T) bool mask, True where query i may attend to key j (j ≤ i)."""
    from onehot2gpt.attention import causal_mask

    check_function(
        fn,
        causal_mask,
        lambda gen: (rand_int(gen, 1, 9),),
        name="causal_mask",
        concept="row i is query i, column j is key j; query i may read keys 0 … i (its past and itself), never a "
        "later one. The mask is a yes/no answer per pair, so it is boolean: True = may attend. A float mask means "
        "something else to PyTorch (a number added to the scores), so 0/1 floats would not hide anything",
        diagnose=_causal_mask_diagnose,
        hint="a (T, T) boolean matrix, True where key j ≤ query i: which triangle of it, the diagonal included, is "
        "True, and which dtype makes PyTorch read it as yes/no?",
    )


# Exercise 3: split the heads


def _split_heads_diagnose(got, expected, x, n_heads):
    if not same_shape(got, expected):
        return None
    B, T, D = x.shape
    hs = D // n_heads
    if n_heads > 1 and hs > 1 and torch.equal(got, x.view(B, T, hs, n_heads).permute(0, 3, 1, 2)):
        return (
            "right shape, but each head got every H-th feature: head h must own one contiguous block of D/H features; "
            "which axis did you split into (H, D/H)?"
        )
    if torch.equal(got, x.reshape(B, n_heads, T, hs)) and not torch.equal(got, expected):
        return (
            "right shape, but the heads' features are scrambled: reshaping (B, T, D) straight to (B, H, T, D/H) mixes "
            "positions into heads. Which axis did you split?"
        )
    return None


def check_split_heads(fn: Callable) -> None:
    """Exercise: x (B, T, D), n_heads → (B, n_heads, T, D / n_heads)."""
    from onehot2gpt.attention import split_heads

    def make(gen):
        b, t, h, hs = (rand_int(gen, 1, 5) for _ in range(4))
        return torch.randn(b, t, h * hs, generator=gen), h

    check_function(
        fn,
        split_heads,
        make,
        name="split_heads",
        concept="the D features of every position are cut into H consecutive groups of D/H (head h owns features "
        "h·D/H … (h+1)·D/H − 1); then the head axis moves in front of the positions, so each head holds a (T, D/H) "
        "matrix of its own",
        diagnose=_split_heads_diagnose,
        hint="cut the last axis into H groups of hs = D / H features, which gives (B, T, H, hs); which two axes must "
        "then swap to reach (B, H, T, hs)?",
    )


# Exercise 4: multi-head attention from its weights


def library_multi_head_attention(x, W_qkv, b_qkv, W_o, b_o, n_heads: int, mask=None):
    """The library's `MultiHeadAttention` with these weights: x (B, T, D), W_qkv (3D, D),
    b_qkv (3D,), W_o (D, D), b_o (D,) → (output (B, T, D), weights (B, H, T, T))."""
    from onehot2gpt.attention import MultiHeadAttention

    D = x.size(-1)
    with torch.random.fork_rng():  # its random initialisation is overwritten: leave the seed alone
        mha = MultiHeadAttention(D, n_heads).eval()
    mha.load_state_dict({"in_proj.weight": W_qkv, "in_proj.bias": b_qkv, "out_proj.weight": W_o, "out_proj.bias": b_o})
    with torch.no_grad():
        return mha(x, mask=mask, need_weights=True)


def _mha_diagnose(got, expected, x, W_qkv, b_qkv, W_o, b_o, n_heads, mask=None):
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(g, torch.Tensor) for g in got)):
        return None
    out, w = got
    variants = [
        (
            dict(scale="D"),
            "the scores are divided by √D, the full width; each head's dot products run over its D/H features, so "
            "divide by √(D/H)",
        ),
        (dict(scale=1.0), "the scores are not scaled: divide each head's dot products by √(D/H)"),
        (
            dict(heads="view"),
            "the heads were cut with one view straight to (B, H, T, D/H), without moving an axis: that hands each "
            "head a run of positions, not its own block of features. Split the feature axis into (H, D/H) first, "
            "then bring the head axis in front of the positions",
        ),
        (
            dict(heads="round-robin"),
            "each head got every H-th feature: head h must own one contiguous block of D/H features",
        ),
        (dict(use_mask=False), "the mask is ignored: masked keys must get zero weight"),
        (
            dict(mask_after=True),
            "the mask is applied after the softmax: the masked weights are zero, but the others no longer sum to 1. "
            "Remove the masked keys from the scores, before the softmax",
        ),
        (dict(out_proj=False), "the heads are concatenated but never mixed: the output projection W^O is missing"),
    ]
    if mask is None:
        variants = [v for v in variants if not any("mask" in key for key in v[0])]
    for change, words in variants:
        v_out, v_w = attention_variant(x, W_qkv, b_qkv, W_o, b_o, n_heads, mask, **change)
        if (
            out.shape == v_out.shape
            and torch.allclose(out, v_out, atol=1e-5)
            and not torch.allclose(v_out, expected[0], atol=1e-5)
        ):
            return words
        if (
            "out_proj" not in change
            and w.shape == v_w.shape
            and torch.allclose(w, v_w, atol=1e-5)
            and not torch.allclose(v_w, expected[1], atol=1e-5)
        ):
            return words
    if w.shape == expected[1].shape and torch.allclose(w, expected[1], atol=1e-5):
        return (
            "the weights are right, the output is not: merge the heads back to (B, T, D) in head order, then apply "
            "W^O and its bias"
        )
    return None


def check_multi_head_attention(fn: Callable) -> None:
    """Exercise: x (B, T, D), W_qkv (3D, D), b_qkv (3D,), W_o (D, D), b_o (D,), n_heads,
    mask=None (bool, broadcastable to (B, H, T, T)) → (output (B, T, D), weights (B, H, T, T)),
    equal to the library's MultiHeadAttention with the same weights."""

    def make(gen):
        b, t, h, hs = rand_int(gen, 1, 4), rand_int(gen, 1, 7), rand_int(gen, 1, 5), rand_int(gen, 1, 5)
        d = h * hs
        x = torch.randn(b, t, d, generator=gen)
        weights = (
            torch.randn(3 * d, d, generator=gen) / math.sqrt(d),
            torch.randn(3 * d, generator=gen),
            torch.randn(d, d, generator=gen) / math.sqrt(d),
            torch.randn(d, generator=gen),
        )
        kind = rand_int(gen, 0, 3)
        if kind == 0:
            mask = None
        elif kind == 1:
            mask = torch.ones(t, t, dtype=torch.bool).tril()  # causal (T, T)
        else:
            lengths = torch.randint(1, t + 1, (b,), generator=gen)
            lengths[0] = max(1, t - 1)  # at least one padded key when T > 1
            mask = (torch.arange(t)[None, :] < lengths[:, None])[:, None, None, :]  # padding (B, 1, 1, T)
        return (x, *weights, h, mask)

    check_function(
        fn,
        library_multi_head_attention,
        make,
        name="multi_head_attention",
        concept="one projection gives every head's queries, keys and values at once (the rows of W_qkv are W^Q, W^K, "
        "W^V stacked); each is split into H heads of D/H features; every head attends on its own, scaled by √(D/H) "
        "and with masked keys removed before the softmax; the heads' outputs are concatenated back to D features and "
        "mixed by W^O",
        diagnose=_mha_diagnose,
        hint="the shapes along the way: x (B, T, D) → q, k, v each (B, T, D) → each (B, H, T, hs) → scores (B, H, T, "
        "T), divided by √hs, masked keys at −∞ before the softmax over the keys → weighted values (B, H, T, hs) → "
        "heads side by side again (B, T, D) → W^O and its bias; the answer is the pair (output, weights)",
    )
