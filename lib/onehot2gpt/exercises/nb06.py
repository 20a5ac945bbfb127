"""Checks for notebook 06 (the Transformer)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


def check_positional_encoding(fn: Callable) -> None:
    """Exercise: (max_len, d_model) → the sinusoidal table of Vaswani et al. (2017)."""
    from ..transformer import sinusoidal_positions

    def make(gen):
        return rand_int(gen, 1, 30), 2 * rand_int(gen, 1, 9)

    check_function(fn, sinusoidal_positions, make, name="positional_encoding",
                   hint="PE[pos, 2i] = sin(pos / 10000**(2i / d_model)) and PE[pos, 2i+1] = "
                        "cos(pos / 10000**(2i / d_model)); i runs over 0 … d_model/2 - 1, and "
                        "both columns of a pair share the same frequency")


def check_layer_norm(fn: Callable) -> None:
    """Exercise: x (…, D), gain (D,), bias (D,), eps → LayerNorm over the last dimension."""
    import torch.nn.functional as F

    def make(gen):
        shape = tuple(rand_int(gen, 1, 5) for _ in range(rand_int(gen, 1, 4)))
        d = rand_int(gen, 2, 8)
        return (3 * torch.randn(*shape, d, generator=gen) + 1, torch.randn(d, generator=gen),
                torch.randn(d, generator=gen), 1e-5)

    def reference(x, gain, bias, eps):
        return F.layer_norm(x, x.shape[-1:], gain, bias, eps)

    check_function(fn, reference, make, name="layer_norm",
                   hint="mean and variance over the last dimension only (keepdim=True); use the "
                        "biased variance (unbiased=False, divide by D) and put eps inside the "
                        "square root: gain * (x - mean) / sqrt(var + eps) + bias")


def check_greedy_decode(fn: Callable) -> None:
    """Exercise: (model, src (1, S), bos_id, eos_id, max_new) → generated ids (≤ max_new,), no <bos>."""
    from ..transformer import Seq2SeqTransformer, TransformerConfig

    torch.manual_seed(0)
    model = Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=12, tgt_vocab_size=6,
                                                      dropout=0.0)).eval()
    with torch.no_grad():  # favour <eos> a little, so some trials stop early and some run to max_new
        model.lm_head.bias[3] += 0.6

    def make(gen):
        return model, torch.randint(4, 12, (1, rand_int(gen, 2, 9)), generator=gen), 2, 3, 8

    def reference(model, src, bos_id, eos_id, max_new):
        return model.greedy_decode(src, bos_id, eos_id, max_new)[0]

    check_function(fn, reference, make, name="greedy_decode", trials=8,
                   hint="encode once (memory, memory_mask, _ = model.encode(src)); start from "
                        "[[bos_id]]; repeat: logits, _, _ = model.decode(out, memory, memory_mask), "
                        "append logits[0, -1].argmax(), stop after eos_id or max_new tokens; "
                        "return the new ids without <bos> as a 1-D tensor")
