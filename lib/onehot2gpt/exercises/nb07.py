"""Checks for notebook 07 (BERT pre-training)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


_LETTERS = "abcdefgh"


def check_wordpiece(fn: Callable) -> None:
    """Exercise: (word, vocab: set of pieces) → greedy longest-match-first pieces, ["[UNK]"] if stuck."""
    from ..subword import WordPieceTokenizer

    def make(gen):
        pieces = {"[UNK]"}
        for _ in range(rand_int(gen, 3, 15)):
            length = rand_int(gen, 1, 4)
            piece = "".join(_LETTERS[rand_int(gen, 0, 4)] for _ in range(length))
            pieces.add(piece if rand_int(gen, 0, 2) else "##" + piece)
        word = "".join(_LETTERS[rand_int(gen, 0, 4)] for _ in range(rand_int(gen, 1, 8)))
        return word, pieces

    def reference(word, vocab):
        return WordPieceTokenizer(sorted(vocab)).wordpiece(word)

    check_function(fn, reference, make, name="wordpiece", trials=30,
                   hint="start at position 0; take the LONGEST piece word[start:end] that is in the "
                        "vocabulary (prefix '##' unless start == 0), then continue from `end`; if no "
                        "piece fits at some position the whole word becomes ['[UNK]']")


def check_segment_ids(fn: Callable) -> None:
    """Exercise: tokens of "[CLS] A [SEP]" or "[CLS] A [SEP] B [SEP]" → segment ids (0 for A's part)."""
    def make(gen):
        tokens = ["[CLS]"] + ["a"] * rand_int(gen, 0, 5) + ["[SEP]"]
        if rand_int(gen, 0, 3):
            tokens += ["b"] * rand_int(gen, 0, 5) + ["[SEP]"]
        return (tokens,)

    def reference(tokens):
        first = tokens.index("[SEP]")
        return [0] * (first + 1) + [1] * (len(tokens) - first - 1)

    check_function(fn, reference, make, name="segment_ids", trials=12,
                   hint="everything up to and including the FIRST [SEP] is segment 0 ([CLS] too); "
                        "everything after it (sentence B and its [SEP]) is segment 1. Return a list")


def check_apply_masking(fn: Callable) -> None:
    """Exercise: (ids, chosen, action, random_ids, mask_id) → (inputs, labels) by the 80/10/10 rule."""
    def make(gen):
        b, t = rand_int(gen, 1, 4), rand_int(gen, 2, 10)
        ids = torch.randint(5, 50, (b, t), generator=gen)
        chosen = torch.rand(b, t, generator=gen) < 0.4
        return (ids, chosen, torch.rand(b, t, generator=gen),
                torch.randint(5, 50, (b, t), generator=gen), 4)

    def reference(ids, chosen, action, random_ids, mask_id):
        inputs = ids.clone()
        inputs[chosen & (action < 0.8)] = mask_id
        swap = chosen & (action >= 0.8) & (action < 0.9)
        inputs[swap] = random_ids[swap]
        return inputs, torch.where(chosen, ids, torch.full_like(ids, -100))

    check_function(fn, reference, make, name="apply_masking",
                   hint="at chosen positions: action < 0.8 → mask_id; 0.8 ≤ action < 0.9 → the id from "
                        "random_ids; otherwise keep the token. labels = the ORIGINAL id at chosen "
                        "positions and -100 everywhere else. Don't modify ids in place (clone it)")
