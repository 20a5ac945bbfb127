"""Checks for notebook 04 (ELMo)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


def check_reverse_padded(fn: Callable) -> None:
    """Exercise: ids (B, T) right-padded, lengths (B,) → each row's real tokens reversed, padding kept."""
    from ..elmo import reverse_padded

    def make(gen):
        b, t = rand_int(gen, 1, 5), rand_int(gen, 1, 8)
        lengths = torch.randint(1, t + 1, (b,), generator=gen)
        ids = torch.randint(4, 50, (b, t), generator=gen)
        ids[torch.arange(t)[None, :] >= lengths[:, None]] = 0                 # <pad>
        return ids, lengths

    check_function(fn, reverse_padded, make, name="reverse_padded",
                   hint="for row b, positions 0..lengths[b]-1 take the tokens in reverse order, "
                        "e.g. ids[b, :n].flip(0); positions from lengths[b] on keep their <pad>")


def check_scalar_mix(fn: Callable) -> None:
    """Exercise: layers (B, T, L, D), s (L,), gamma → γ · Σ_j softmax(s)_j · layers[..., j, :]."""
    def make(gen):
        b, t, n_layers, d = (rand_int(gen, 1, 5) for _ in range(4))
        return (torch.randn(b, t, n_layers, d, generator=gen), torch.randn(n_layers, generator=gen),
                float(torch.rand(1, generator=gen) * 2))

    def reference(layers, s, gamma):
        return gamma * torch.einsum("btld,l->btd", layers, torch.softmax(s, 0))

    check_function(fn, reference, make, name="scalar_mix",
                   hint="w = torch.softmax(s, dim=0) has one weight per layer; multiply layer j by "
                        "w[j], sum over the layer dimension (dim -2), then scale by gamma")


def check_sense_score(fn: Callable) -> None:
    """Exercise: vectors (N, D) and sense labels (N,) → mean cosine within senses − across senses."""
    def make(gen):
        n = rand_int(gen, 3, 9)
        labels = torch.randint(0, 2, (n,), generator=gen)
        labels[0], labels[1] = 0, 1                                          # both kinds of pair exist
        labels[2] = labels[rand_int(gen, 0, 2)]
        return torch.randn(n, 4, generator=gen), labels

    from ..probing import sense_grouping_score as reference

    check_function(fn, reference, make, name="sense_score",
                   hint="normalise the rows, take all pairwise cosines, average those of pairs with "
                        "the same label (leaving out each vector with itself) and subtract the "
                        "average over pairs with different labels")
