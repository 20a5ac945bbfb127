"""The training run of ``glove-wikitext2.py``: count the co-occurrences, fit GloVe with AdaGrad over
shuffled batches of the pairs (the paper's optimiser and learning rate, 0.05) and return w + w̃.
Only the recipe trains GloVe; notebook 02 loads the committed vectors."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence

import torch
from onehot2gpt.glove import GloVe, cooccurrence, glove_weight
from onehot2gpt.utils import check_finite_loss, check_number, check_positive_int
from onehot2gpt.vocab import Vocab
from onehot2gpt.word2vec import encode_corpus
from onehot2gpt.word_vectors import WordVectors
from tqdm.auto import tqdm

__all__ = ["train_glove"]


def train_glove(
    sentences: Sequence[Sequence[str]],
    *,
    vocab: Vocab | None = None,
    d_model: int = 100,
    window: int = 10,
    min_count: int = 5,
    x_max: float = 100.0,
    alpha: float = 0.75,
    epochs: int = 15,
    lr: float = 0.05,
    batch_size: int = 8192,
    seed: int = 0,
    progress: bool = True,
    corpus_name: str | None = None,
) -> WordVectors:
    """Count co-occurrences in `sentences` (token lists), fit GloVe with AdaGrad, return w + w̃.

    The vocabulary is word2vec's (:func:`onehot2gpt.word2vec.encode_corpus`: words seen
    `min_count` times, most frequent first), so the two can be compared word for word."""
    # the arguments that the returned vectors' config records
    settings = {k: v for k, v in locals().items() if k not in ("sentences", "vocab", "progress", "corpus_name")}
    check_positive_int(epochs, "epochs")
    check_positive_int(batch_size, "batch_size")
    check_number(lr, "lr", 0, low_open=True, fix="a positive learning rate, e.g. 0.05")
    start = time.perf_counter()
    vocab, ids, sentence_ids = encode_corpus(sentences, vocab, min_count)
    rows, cols, counts = cooccurrence(ids, len(vocab), window, sentence_ids)
    count_seconds = time.perf_counter() - start
    generator = torch.Generator().manual_seed(seed)
    model = GloVe(len(vocab), d_model, generator)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=lr, initial_accumulator_value=1.0)
    losses = []
    steps = epochs * math.ceil(len(counts) / batch_size)
    bar = tqdm(total=steps, desc="GloVe", disable=not progress)
    # torch's sparse AdaGrad warns once that it skips its sparse-tensor checks; its inputs are ours
    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    # The loss per pair of vectors that predict nothing (all zero): f(X) (log X)², at most. A run
    # whose loss per pair climbs far above it is exploding (a too-high lr) and is stopped.
    baseline = float((glove_weight(counts, x_max, alpha) * counts.log().pow(2)).max())
    step = 0
    for epoch in range(epochs):
        order = torch.randperm(len(counts), generator=generator)
        total = 0.0
        for batch in order.split(batch_size):
            loss = model(rows[batch], cols[batch], counts[batch], x_max, alpha)
            what = f"GloVe (epoch {epoch + 1})"
            total += check_finite_loss(loss, step, lr=lr, what=what, start=baseline * len(batch))
            step += 1
            optimizer.zero_grad()
            (0.5 * loss).backward()  # the reference code's step: the gradient of ½ f·error² per pair
            optimizer.step()
            bar.update()
        losses.append(total / len(counts))
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    bar.close()
    config = {
        "model": "glove",
        **settings,
        "pairs": int(len(counts)),
        "tokens": int(len(ids)),
        "epoch_losses": [round(x, 5) for x in losses],
        "count_seconds": round(count_seconds, 1),
        "train_seconds": round(time.perf_counter() - start, 1),
        "corpus": corpus_name,
        "threads": torch.get_num_threads(),
    }
    return WordVectors(model.vectors(), vocab, config)
