"""Checks for notebook 02 (word2vec)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


def _reference_skipgram_pairs(ids, window):
    from ..word2vec import skipgram_pairs
    centres, contexts = skipgram_pairs(torch.as_tensor(ids), window, shrink=False)
    return list(zip(centres.tolist(), contexts.tolist()))


def check_skipgram_pairs(fn: Callable) -> None:
    """Exercise: ids (list of ints) and window → list of (centre, context) pairs, all offsets
    1..window on both sides, centre by centre, contexts left to right."""
    def make(gen):
        n = rand_int(gen, 1, 12)
        return torch.randint(0, 50, (n,), generator=gen).tolist(), rand_int(gen, 1, 4)

    check_function(fn, _reference_skipgram_pairs, make, name="skipgram_pairs",
                   hint="for each position i, for each j from i - window to i + window, skip j == i "
                        "and j outside 0..len(ids)-1, and append (ids[i], ids[j]); return tuples of ints")


def check_negative_sampling_loss(fn: Callable) -> None:
    """Exercise: centre vectors (B, D), context vectors (B, D), noise vectors (B, K, D) → mean loss."""
    from ..word2vec import negative_sampling_loss

    def make(gen):
        b, d, k = (rand_int(gen, 1, 6) for _ in range(3))
        return (torch.randn(b, d, generator=gen), torch.randn(b, d, generator=gen),
                torch.randn(b, k, d, generator=gen))

    check_function(fn, lambda v, u, n: float(negative_sampling_loss(v, u, n)), make,
                   name="negative_sampling_loss",
                   hint="per example: -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c); F.logsigmoid is the "
                        "stable log σ; torch.bmm(noise, centre.unsqueeze(2)) gives the K scores; "
                        "then average over the batch")


def _reference_analogy(unit_vectors, a, b, c):
    target = unit_vectors[b] - unit_vectors[a] + unit_vectors[c]
    scores = unit_vectors @ target
    scores[[a, b, c]] = -float("inf")
    return int(scores.argmax())


def check_analogy(fn: Callable) -> None:
    """Exercise: unit-length vectors (V, D) and ids a, b, c → id of the best d (3CosAdd)."""
    def make(gen):
        v = torch.randn(30, 8, generator=gen)
        a, b, c = torch.randperm(30, generator=gen)[:3].tolist()
        return v / v.norm(dim=1, keepdim=True), a, b, c

    check_function(fn, _reference_analogy, make, name="analogy",
                   hint="score every word by its dot product with b - a + c (the vectors are unit "
                        "length, so that is cosine up to a constant), rule out a, b and c "
                        "themselves, and return the id with the highest score as an int")


def check_noise_distribution(fn: Callable) -> None:
    """Exercise: word counts (V,) → noise probabilities (V,) ∝ count^0.75."""
    from ..word2vec import noise_distribution
    check_function(fn, noise_distribution,
                   lambda g: (torch.randint(1, 1000, (rand_int(g, 2, 20),),
                                            generator=g).float(),),
                   name="noise_distribution",
                   hint="raise the counts to the power 0.75, then divide by their sum")
