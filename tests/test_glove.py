"""GloVe: co-occurrence counts against a brute-force count, the weighting, the objective, training."""

import math
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt.glove import GloVe, cooccurrence, glove_loss, glove_weight

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _glove import train_glove  # noqa: E402  (the recipe's loop)


def brute_force(ids, sentence_ids, V, window):
    X = torch.zeros(V, V, dtype=torch.float64)
    for i in range(len(ids)):
        for j in range(len(ids)):
            d = abs(i - j)
            if 0 < d <= window and sentence_ids[i] == sentence_ids[j]:
                X[ids[i], ids[j]] += 1.0 / d
    return X


def test_cooccurrence_matches_a_brute_force_count_and_respects_sentences():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 7, (40,), generator=gen)
    sentence_ids = torch.repeat_interleave(torch.arange(4), torch.tensor([12, 1, 20, 7]))
    rows, cols, counts = cooccurrence(ids, 7, window=3, sentence_ids=sentence_ids)
    X = torch.zeros(7, 7)
    X[rows, cols] = counts
    expected = brute_force(ids.tolist(), sentence_ids.tolist(), 7, 3).float()
    torch.testing.assert_close(X, expected)
    assert (counts > 0).all() and torch.equal(X, X.T)
    keys = rows * 7 + cols
    assert torch.equal(keys, keys.sort().values) and len(keys.unique()) == len(keys)


def test_weighting_and_objective():
    x = torch.tensor([1.0, 50.0, 100.0, 1000.0])
    torch.testing.assert_close(glove_weight(x), torch.tensor([0.01**0.75, 0.5**0.75, 1.0, 1.0]))
    gen = torch.Generator().manual_seed(1)
    model = GloVe(6, 4, gen)
    rows, cols, counts = torch.tensor([0, 1, 5]), torch.tensor([2, 2, 3]), torch.tensor([3.0, 150.0, 0.5])
    with torch.no_grad():
        by_hand = sum(
            float(glove_weight(counts[k : k + 1]))
            * (float(model.w[r] @ model.w_ctx[c] + model.b[r, 0] + model.b_ctx[c, 0]) - math.log(counts[k])) ** 2
            for k, (r, c) in enumerate(zip(rows.tolist(), cols.tolist()))
        )
    assert model(rows, cols, counts).item() == pytest.approx(by_hand, rel=1e-5)
    loss = model(rows, cols, counts)
    loss.backward()
    assert model.w.grad.is_sparse  # only the batch's rows are touched
    torch.testing.assert_close(model.vectors(), (model.w + model.w_ctx).detach())


def test_training_fits_the_counts_and_groups_words_that_share_contexts():
    # two word families: a-words occur with x-words, b-words with y-words
    gen = torch.Generator().manual_seed(0)
    sentences = []
    for _ in range(300):
        family = int(torch.randint(0, 2, (1,), generator=gen))
        words = [f"{'ab'[family]}{int(torch.randint(0, 3, (1,), generator=gen))}" for _ in range(3)]
        words += [f"{'xy'[family]}{int(torch.randint(0, 3, (1,), generator=gen))}" for _ in range(3)]
        sentences.append(words)
    wv = train_glove(sentences, d_model=8, window=3, min_count=1, epochs=40, batch_size=16, lr=0.1, progress=False)
    losses = wv.config["epoch_losses"]
    assert losses[-1] < 0.3 * losses[0]
    cos = lambda a, b: float(torch.cosine_similarity(wv[a], wv[b], dim=0))
    assert cos("a0", "a1") > cos("a0", "b1") and cos("x0", "x2") > cos("x0", "y2")


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: cooccurrence([1, 2, 3], 4), TypeError, "1-D integer tensor"),
        (lambda: cooccurrence(torch.tensor([1, 2, 9]), 4), ValueError, "ids must lie in 0..3"),
        (lambda: cooccurrence(torch.tensor([1, 2, 3]), 4, window=0), ValueError, "window=0 must be at least 1"),
        (
            lambda: cooccurrence(torch.tensor([1, 2, 3]), 4, sentence_ids=torch.tensor([0, 1, 2])),
            ValueError,
            "no two words share a sentence",
        ),
        (
            lambda: glove_loss(*(torch.zeros(2, 3),) * 2, *(torch.zeros(2),) * 2, torch.tensor([1.0, 0.0])),
            ValueError,
            "count must be > 0",
        ),
        (lambda: GloVe(0, 4), ValueError, "vocab_size must be a positive int"),
        (lambda: train_glove([["a", "b"]], min_count=1, epochs=0), ValueError, "epochs must be a positive int"),
        (
            lambda: train_glove([["a", "b"]], min_count=1, lr=float("nan")),
            ValueError,
            "lr=nan must be a finite number above 0",
        ),
        (lambda: train_glove("a b c"), TypeError, "list of token lists"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_diverging_run_stops_with_the_step_and_the_fix():
    from onehot2gpt.utils import TrainingDiverged

    sentences = [["a", "b", "c", "a", "b"]] * 20
    with pytest.raises(TrainingDiverged, match="GloVe"):
        train_glove(sentences, d_model=4, window=2, min_count=1, epochs=3, lr=1e30, progress=False)
