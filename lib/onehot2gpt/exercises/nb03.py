"""Checks for notebook 03 (language models)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


_WORDS = ["潮水", "退了", "就", "知道", "誰", "沒穿", "褲子", "the", "tide", "goes", "out"]


def _reference_next_token_pairs(tokens):
    padded = ["<bos>"] + list(tokens) + ["<eos>"]
    return [(tuple(padded[:t]), padded[t]) for t in range(1, len(padded))]


def check_next_token_pairs(fn: Callable) -> None:
    """Exercise: a sentence (list of tokens) → [(context tuple, next token)], from <bos> to <eos>."""
    def make(gen):
        n = rand_int(gen, 0, 7)
        return ([_WORDS[i] for i in torch.randint(0, len(_WORDS), (n,), generator=gen).tolist()],)

    check_function(fn, _reference_next_token_pairs, make, name="next_token_pairs",
                   hint="put '<bos>' in front and '<eos>' at the end; for t = 1 .. len(padded) - 1 "
                        "the context is tuple(padded[:t]) and the target is padded[t]")


def check_perplexity(fn: Callable) -> None:
    """Exercise: natural-log probabilities of the predicted tokens (N,) → perplexity (a float)."""
    def make(gen):
        n = rand_int(gen, 1, 30)
        return (torch.rand(n, generator=gen).clamp_min(1e-3).log(),)

    check_function(fn, lambda lp: float(torch.exp(-lp.double().mean())), make, name="perplexity",
                   hint="perplexity = exp(-mean(log_probs)): the exponential of the average "
                        "negative log-probability per token")


def _reference_bigram_prob(pair_counts, prev, word):
    total = sum(c for (p, _), c in pair_counts.items() if p == prev)
    return pair_counts.get((prev, word), 0) / total if total else 0.0


def check_bigram_prob(fn: Callable) -> None:
    """Exercise: bigram counts {(prev, word): count}, prev, word → P(word | prev) by counting."""
    words = ["the", "cat", "dog", "sat", "ran"]

    def make(gen):
        counts = {}
        for _ in range(rand_int(gen, 3, 15)):
            a, b = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
            counts[(a, b)] = counts.get((a, b), 0) + rand_int(gen, 1, 5)
        prev, word = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
        return counts, prev, word

    check_function(fn, _reference_bigram_prob, make, name="bigram_prob", trials=20,
                   hint="P(word | prev) = count(prev, word) / Σ_w count(prev, w); return 0.0 when "
                        "prev was never seen (that zero is exactly why n-gram LMs need smoothing)")
