"""Checks for notebook 08 (BERT fine-tuning)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, describe, rand_int


def check_first_piece_labels(fn: Callable) -> None:
    """Exercise: (word_index, tags) → one label per token: the word's tag on its first piece, -100 else."""
    def make(gen):
        n_words = rand_int(gen, 1, 6)
        index: list = [None]
        for w in range(n_words):
            index += [w] * rand_int(gen, 1, 4)
        index.append(None)
        if rand_int(gen, 0, 3) == 0:                       # padding after [SEP]
            index += [None] * rand_int(gen, 1, 3)
        return index, [rand_int(gen, 0, 17) for _ in range(n_words)]

    def reference(word_index, tags):
        labels = []
        for t, w in enumerate(word_index):
            first = w is not None and (t == 0 or word_index[t - 1] != w)
            labels.append(tags[w] if first else -100)
        return labels

    check_function(fn, reference, make, name="first_piece_labels", trials=30,
                   hint="walk over word_index; a token starts word w when word_index[t] is w (not None) "
                        "and the token before it belongs to another word; put tags[w] there and -100 on "
                        "every other token ([CLS], [SEP], padding, '##' continuation pieces). Return a list")


def check_best_span(fn: Callable) -> None:
    """Exercise: (start_logits (T,), end_logits (T,), max_len) → the (s, e) with the best start + end."""
    from ..bert import best_span

    def make(gen):
        t = rand_int(gen, 1, 12)
        return torch.randn(t, generator=gen), torch.randn(t, generator=gen), rand_int(gen, 1, 5)

    def reference(start_logits, end_logits, max_len):
        return best_span(start_logits, end_logits, max_len)[:2]

    def as_ints(*args):  # accept tensors or numpy ints inside the pair
        got = fn(*args)
        try:
            return tuple(int(x) for x in got)
        except (TypeError, ValueError):
            return got

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {describe(fn)}")
    check_function(as_ints, reference, make, name="best_span", trials=40,
                   hint="score every pair s ≤ e < s + max_len by start_logits[s] + end_logits[e] and "
                        "return the best (s, e) as a pair of ints; a one-token span (s == e) is allowed")


def check_token_f1(fn: Callable) -> None:
    """Exercise: (prediction, gold) strings → SQuAD's token-overlap F1 after normalisation."""
    from ..tasks import _f1

    words = ["the", "a", "an", "Denver", "broncos", "Broncos", "Super", "bowl", "50", "in", "1990"]
    punct = ["", "", ",", ".", "!", "'s"]

    def phrase(gen):
        return " ".join(words[rand_int(gen, 0, len(words))] + punct[rand_int(gen, 0, len(punct))]
                        for _ in range(rand_int(gen, 0, 6)))

    def make(gen):
        return phrase(gen), phrase(gen)

    check_function(fn, _f1, make, name="token_f1", trials=40,
                   hint="normalise both strings with squad_normalize (lower case, no punctuation, no "
                        "a/an/the), split on spaces, count the shared tokens with collections.Counter "
                        "(min of the two counts per token); F1 = 2PR/(P+R) with P = shared/len(pred), "
                        "R = shared/len(gold); 0.0 when nothing is shared")
