"""Checks for notebook 01 (one-hot and the vocabulary)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int, random_ids


def check_one_hot(fn: Callable) -> None:
    """Exercise: ids (T,) and vocab_size → one-hot matrix (T, vocab_size)."""
    from onehot2gpt.vocab import one_hot

    check_function(
        fn,
        one_hot,
        lambda g: random_ids(g),
        name="one_hot",
        concept="a one-hot matrix has one row per token and one column per vocabulary entry; each row is all zeros "
        "except a single 1 in the column of that token's id, and it holds real numbers (floats), because these "
        "vectors are multiplied with weight matrices later",
        hint="the answer is a float matrix of shape (number of tokens, vocab_size) whose entry (t, id_t) is 1 and "
        "every other entry 0: which tensor do you start from, and can you set every row's 1 at once by indexing with "
        "the row numbers and the ids together?",
    )


def check_bag_of_words(fn: Callable) -> None:
    """Exercise: ids (T,) and vocab_size → count vector (vocab_size,)."""
    from onehot2gpt.vocab import bag_of_words

    check_function(
        fn,
        bag_of_words,
        lambda g: random_ids(g),
        name="bag_of_words",
        concept="a bag of words keeps how often each vocabulary entry occurs and forgets the order: it is one vector "
        "as long as the vocabulary, the sum of the sentence's one-hot rows (counts, so a repeated word counts twice), "
        "in floats",
        hint="a bag of words is the sum of the one-hot rows: order is lost, counts are kept; return floats of shape "
        "(vocab_size,)",
    )


def _reference_encode(tokens, stoi, unk_id):
    return [stoi.get(t, unk_id) for t in tokens]


def library_encode(tokens, stoi, unk_id):
    """What notebook 01's cells after exercise 4 use while `my_encode` does not pass its check yet:
    ``Vocab.encode_tokens`` for a bare token→id dict (every unseen token → `unk_id`)."""
    return _reference_encode(tokens, stoi, unk_id)


def check_encode(fn: Callable) -> None:
    """Exercise: tokens, a token→id dict and the <unk> id → list of ids."""
    words = ["the", "cat", "dog", "sat", "on", "mat", "a", "bird", "car", "bank"]

    def make(gen):
        known = [words[i] for i in torch.randperm(len(words), generator=gen)[:5].tolist()]
        stoi = {"<pad>": 0, "<unk>": 1, **{w: i + 2 for i, w in enumerate(known)}}
        n = rand_int(gen, 1, 10)
        tokens = [words[i] for i in torch.randint(0, len(words), (n,), generator=gen).tolist()]
        return tokens, stoi, 1

    check_function(
        fn,
        _reference_encode,
        make,
        name="encode",
        concept="encoding maps each token to its id in the vocabulary, one id per token in the same order; a token "
        "the vocabulary does not know must still get an id: the one reserved for unknown tokens, never the padding id",
        hint="look each token up in the dict; a token that is not there gets unk_id instead: which method of a Python "
        "dict returns a default for a missing key?",
    )


def check_cosine_similarity(fn: Callable) -> None:
    """Exercise: two vectors (D,) → their cosine similarity (a float or 0-d tensor)."""
    from onehot2gpt.vocab import cosine_similarity

    def make(gen):
        d = rand_int(gen, 2, 10)
        return torch.randn(d, generator=gen), torch.randn(d, generator=gen)

    check_function(
        fn,
        lambda a, b: float(cosine_similarity(a, b)),
        make,
        name="cosine_similarity",
        concept="cosine similarity compares directions, not lengths: the dot product of the two vectors divided by "
        "the product of their lengths, so it lies between -1 and 1 and scaling a vector does not change it",
        hint="cos(a, b) = a·b / (‖a‖ ‖b‖): the dot product of the two vectors over the product of their Euclidean "
        "lengths, one number",
    )
