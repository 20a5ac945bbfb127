"""Bad input to the word-vector tools (issue 48's "NaN in, NaN out" and "out of range" cases):
neighbours of a zero or NaN vector, negative counts, NaN co-occurrence counts and a GloVe run
that explodes. Each gives a clear error naming the argument, or a correct result."""

import math
import re
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt.fasttext import train_fasttext
from onehot2gpt.glove import glove_loss, glove_weight
from onehot2gpt.utils import TrainingDiverged
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _glove import train_glove  # noqa: E402  (the recipe's loop)

WORDS = ["king", "queen", "man", "woman", "apple", "pear"]


@pytest.fixture(scope="module")
def wv():
    gen = torch.Generator().manual_seed(0)
    return WordVectors(torch.randn(4 + len(WORDS), 5, generator=gen), Vocab(WORDS))


@pytest.mark.parametrize(
    "query, message",
    [
        (torch.zeros(5), r"^most_similar: the query vector is all zeros: it has no direction"),
        (torch.full((5,), math.nan), r"^most_similar: the query vector holds NaN or infinite values \(5 of 5\)"),
        (torch.tensor([1.0, math.inf, 0, 0, 0]), r"^most_similar: the query vector holds NaN or infinite values \(1"),
    ],
    ids=["zero", "NaN", "inf"],
)
def test_most_similar_refuses_a_vector_without_a_direction(wv, query, message):
    # a zero or NaN query used to list the first words of the vocabulary ("the", ",", ".")
    with pytest.raises(ValueError, match=message):
        wv.most_similar(query, k=3)


def test_most_similar_names_the_word_whose_vector_is_zero():
    vectors = torch.randn(4 + len(WORDS), 5, generator=torch.Generator().manual_seed(1))
    vectors[4 + WORDS.index("pear")] = 0.0
    with pytest.raises(ValueError, match=r"the vector of 'pear' is all zeros"):
        WordVectors(vectors, Vocab(WORDS)).most_similar("pear")


def test_most_similar_refuses_vectors_that_hold_nan():
    vectors = torch.randn(4 + len(WORDS), 5, generator=torch.Generator().manual_seed(2))
    vectors[4 + WORDS.index("apple"), 2] = math.nan
    with pytest.raises(ValueError, match=r"the word vectors hold NaN \(first at 'apple'\)"):
        WordVectors(vectors, Vocab(WORDS)).most_similar("king")


@pytest.mark.parametrize(
    "k, error, message",
    [
        (-3, ValueError, r"^k=-3 must be at least 1; how many neighbours"),
        (0, ValueError, r"^k=0 must be at least 1"),
        (2.5, TypeError, r"^k must be an int, got float 2.5"),
    ],
)
def test_most_similar_and_analogy_refuse_a_count_below_one(wv, k, error, message):
    with pytest.raises(error, match=message):
        wv.most_similar("king", k=k)
    with pytest.raises(error, match=message):
        wv.analogy("man", "king", "woman", k=k)


def test_most_similar_lists_every_word_left_when_k_exceeds_the_vocabulary(wv):
    near = wv.most_similar("king", k=100)
    assert [w for w, _ in near if w in WORDS] and "king" not in [w for w, _ in near]
    assert len(near) == len(wv) - 1  # every other word, the query itself left out


@pytest.fixture(scope="module")
def fasttext_vectors():
    sentences = [["the", "king", "and", "the", "queen"], ["a", "man", "and", "a", "woman"]] * 20
    return train_fasttext(
        sentences, d_model=8, window=2, min_count=1, epochs=1, buckets=50, batch_size=64, progress=False
    )


@pytest.mark.parametrize(
    "topn, error, message",
    [(-1, ValueError, r"^topn=-1 must be at least 1"), (0, ValueError, r"^topn=0"), (1.5, TypeError, r"^topn must")],
)
def test_fasttext_most_similar_refuses_a_count_below_one(fasttext_vectors, topn, error, message):
    # topn=-1 used to return []
    with pytest.raises(error, match=message):
        fasttext_vectors.most_similar("kingly", topn=topn)
    assert len(fasttext_vectors.most_similar("kingly", topn=2)) == 2


def _pairs(counts):
    gen = torch.Generator().manual_seed(3)
    P = len(counts)
    return torch.randn(P, 4, generator=gen), torch.randn(P, 4, generator=gen), torch.zeros(P), torch.zeros(P)


@pytest.mark.parametrize(
    "counts, message",
    [
        (
            torch.tensor([2.0, math.nan, 1.0]),
            r"^glove_loss: counts holds NaN or infinite values \(1 of 3, first at pair 1\)",
        ),
        (
            torch.tensor([math.inf, 1.0]),
            r"^glove_loss: counts holds NaN or infinite values \(1 of 2, first at pair 0\)",
        ),
    ],
    ids=["NaN", "inf"],
)
def test_glove_loss_refuses_a_non_finite_count(counts, message):
    # a NaN count used to make the loss NaN, with no word
    with pytest.raises(ValueError, match=message):
        glove_loss(*_pairs(counts), counts)


def test_glove_loss_refuses_counts_that_do_not_match_the_pairs():
    w, w_ctx, b, b_ctx = _pairs(torch.ones(3))
    with pytest.raises(ValueError, match=r"^glove_loss: w has 3 rows but counts has 2"):
        glove_loss(w, w_ctx, b, b_ctx, torch.ones(2))
    with pytest.raises(TypeError, match=r"^counts must be a torch\.Tensor, got list"):
        glove_loss(w, w_ctx, b, b_ctx, [1.0, 2.0, 3.0])


def _two_families(n=200):
    gen = torch.Generator().manual_seed(0)
    sentences = []
    for _ in range(n):
        family = int(torch.randint(0, 2, (1,), generator=gen))
        words = [f"{'ab'[family]}{int(torch.randint(0, 3, (1,), generator=gen))}" for _ in range(3)]
        sentences.append(words + [f"{'xy'[family]}{int(torch.randint(0, 3, (1,), generator=gen))}" for _ in range(3)])
    return sentences


@pytest.mark.parametrize("lr", [1e6, 100.0])
def test_train_glove_stops_when_the_loss_explodes(lr):
    # lr=1e6 used to climb to a loss of 5e24, finite, and return the vectors
    message = rf"^GloVe \(epoch 1\) diverged at step \d+: .*exploding\. Lower the learning rate \(now {re.escape(f'{lr:g}')}\)"
    with pytest.raises(TrainingDiverged, match=message):
        train_glove(_two_families(), d_model=8, window=3, min_count=1, epochs=5, batch_size=16, lr=lr, progress=False)


def test_train_glove_with_a_sound_learning_rate_still_trains():
    wv = train_glove(_two_families(), d_model=8, window=3, min_count=1, epochs=5, batch_size=16, lr=0.1, progress=False)
    losses = wv.config["epoch_losses"]
    assert losses[-1] < losses[0] and bool(torch.isfinite(wv.vectors).all())


def test_train_fasttext_stops_when_the_loss_explodes():
    sentences = [["the", "king", "and", "the", "queen"], ["a", "man", "and", "a", "woman"]] * 20
    with pytest.raises(TrainingDiverged, match=r"^fastText \(epoch \d\) diverged at step \d+: .*the run is exploding"):
        train_fasttext(
            sentences, d_model=8, window=2, min_count=1, epochs=3, buckets=50, batch_size=64, lr=1e6, progress=False
        )


def test_evaluate_analogies_refuses_a_search_of_no_words(wv):
    questions = [("s", "man", "king", "woman", "queen")]
    # restrict_vocab=-1 used to search all words but the last one, silently
    with pytest.raises(ValueError, match=r"^restrict_vocab=-1 must be at least 1"):
        wv.evaluate_analogies(questions, restrict_vocab=-1)
    assert wv.evaluate_analogies(questions, restrict_vocab=None)["n_used"] == 1


def test_glove_weight_refuses_nan_counts():
    with pytest.raises(ValueError, match=r"^glove_weight: x holds 1 NaN or infinite counts"):
        glove_weight(torch.tensor([math.nan, 1.0, 200.0]))


@pytest.mark.parametrize(
    "layers, mask, error, message",
    [
        ([[[[1.0]]]], torch.ones(1, 1), TypeError, r"^layers must be a torch\.Tensor, got list"),  # AttributeError
        (torch.zeros(1, 2, 3, 4), [[1, 0]], TypeError, r"^mask must be a torch\.Tensor, got list; \(B, T\)"),
        (torch.zeros(1, 2, 3, 4, dtype=torch.long), torch.ones(1, 2), TypeError, r"^layers must be a floating"),
    ],
    ids=["layers as a list", "mask as a list", "integer layers"],
)
def test_probing_features_refuse_what_is_not_a_tensor(layers, mask, error, message):
    from onehot2gpt.probing import sentence_features, token_features

    for features in (token_features, sentence_features):
        with pytest.raises(error, match=message):
            features(layers, mask)
