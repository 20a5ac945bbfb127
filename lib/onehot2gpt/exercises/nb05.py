"""Checks for notebook 05 (attention)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


def check_attention_with_loops(fn: Callable) -> None:
    """Exercise: q (T_q, d), K (T_k, d), V (T_k, d_v) → (output (T_q, d_v), weights (T_q, T_k))."""
    from ..attention import scaled_dot_product_attention

    def make(gen):
        tq, tk, d, dv = (rand_int(gen, 1, 6) for _ in range(4))
        return (torch.randn(tq, d, generator=gen), torch.randn(tk, d, generator=gen),
                torch.randn(tk, dv, generator=gen))

    check_function(fn, scaled_dot_product_attention, make, name="attention_with_loops",
                   hint="for each query i: scores[j] = q[i]·K[j] / sqrt(d) for every key j; "
                        "weights = softmax over j; output[i] = sum_j weights[j] * V[j]. "
                        "Return (output, weights)")


def check_causal_mask(fn: Callable) -> None:
    """Exercise: T → (T, T) bool mask, True where query i may attend to key j (j ≤ i)."""
    from ..attention import causal_mask

    check_function(fn, causal_mask, lambda gen: (rand_int(gen, 1, 9),), name="causal_mask",
                   hint="position i may look at positions 0..i only: True on and below the "
                        "diagonal, e.g. torch.ones(T, T, dtype=torch.bool).tril()")


def check_split_heads(fn: Callable) -> None:
    """Exercise: x (B, T, D), n_heads → (B, n_heads, T, D / n_heads)."""
    from ..attention import split_heads

    def make(gen):
        b, t, h, hs = (rand_int(gen, 1, 5) for _ in range(4))
        return torch.randn(b, t, h * hs, generator=gen), h

    check_function(fn, split_heads, make, name="split_heads",
                   hint="view the last dimension as (n_heads, D // n_heads): x.view(B, T, H, hs), "
                        "then swap the T and H axes with .transpose(1, 2); head h must hold "
                        "features h*hs … (h+1)*hs - 1")
