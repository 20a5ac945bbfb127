"""GloVe: word vectors fitted to the logarithm of co-occurrence counts.

Taught in notebook 02. Follows Pennington, Socher & Manning (2014), "GloVe: Global Vectors for Word
Representation": count how often each word j occurs near each word i, then fit vectors to the counts.

* :func:`cooccurrence`: X_ij, where every occurrence of j within ``window`` words of i adds 1/d for
  distance d, symmetric, never across a sentence boundary;
* :func:`glove_weight`: f(x) = (x / x_max)^α below x_max, 1 above (the paper's x_max = 100,
  α = 3/4; the course checkpoint uses x_max = 10, the reference code's demo value);
* :func:`glove_loss`: Σ f(X_ij) (w_i · w̃_j + b_i + b̃_j − log X_ij)² over the pairs with X_ij > 0;
* :func:`train_glove`: AdaGrad over shuffled batches of the pairs (the paper's optimiser and
  learning rate, 0.05); the word vector is w + w̃, as in the paper. The course checkpoint is made
  with ``python recipes/glove-wikitext2.py --out DIR``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from onehot2gpt.utils import (
    check_finite_loss,
    check_int,
    check_number,
    check_positive_int,
    check_positive_number,
    check_tensor,
)
from onehot2gpt.vocab import Vocab
from onehot2gpt.word2vec import encode_corpus
from onehot2gpt.word_vectors import WordVectors


def _check_ids(ids, vocab_size: int, sentence_ids) -> tuple[Tensor, Tensor]:
    if not isinstance(ids, Tensor) or ids.dim() != 1 or ids.dtype not in (torch.int32, torch.int64):
        raise TypeError("ids must be a 1-D integer tensor of word ids (encode_corpus gives one)")
    check_positive_int(vocab_size, "vocab_size")
    ids = ids.long()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"ids must lie in 0..{vocab_size - 1}: encode the corpus with the same vocabulary")
    if sentence_ids is None:
        sentence_ids = torch.zeros_like(ids)
    elif not isinstance(sentence_ids, Tensor) or sentence_ids.shape != ids.shape:
        raise ValueError("sentence_ids must be a tensor of the ids' shape (one sentence number per word)")
    return ids, sentence_ids.long()


def cooccurrence(
    ids: Tensor, vocab_size: int, window: int = 10, sentence_ids: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Word ids (N,) → the non-zero co-occurrence counts as (rows, cols, counts), each (P,).

    For every pair of positions at distance d ≤ `window` in the same sentence, X[i, j] and
    X[j, i] each grow by 1/d. Rows and cols are sorted (row-major); counts are float32.
    """
    ids, sentence_ids = _check_ids(ids, vocab_size, sentence_ids)
    check_int(window, "window", 1)
    keys, weights = [], []
    for d in range(1, min(window, len(ids) - 1) + 1):
        same = sentence_ids[:-d] == sentence_ids[d:]
        left, right = ids[:-d][same], ids[d:][same]
        for a, b in ((left, right), (right, left)):  # symmetric
            keys.append(a * vocab_size + b)
            weights.append(torch.full((len(a),), 1.0 / d))
    if not keys or sum(len(k) for k in keys) == 0:
        raise ValueError("no two words share a sentence within the window: pass longer sentences")
    keys, weights = torch.cat(keys), torch.cat(weights)
    unique, inverse = torch.unique(keys, return_inverse=True)
    counts = torch.zeros(len(unique), dtype=torch.float64).index_add_(0, inverse, weights.double())
    return unique // vocab_size, unique % vocab_size, counts.float()


def glove_weight(x: Tensor, x_max: float = 100.0, alpha: float = 0.75) -> Tensor:
    """GloVe's weighting f(x) = (x / x_max)^α for x < x_max, else 1."""
    if not isinstance(x, Tensor):
        raise TypeError("x must be a tensor of co-occurrence counts")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(
            f"glove_weight: x holds {int((~torch.isfinite(x)).sum())} NaN or infinite counts; pass the finite "
            f"co-occurrence counts that cooccurrence gives"
        )
    check_number(x_max, "x_max", 0, low_open=True)
    check_number(alpha, "alpha", 0, low_open=True)
    return (x / x_max).pow(alpha).clamp(max=1.0)


def glove_loss(
    w: Tensor, w_ctx: Tensor, b: Tensor, b_ctx: Tensor, counts: Tensor, x_max: float = 100.0, alpha: float = 0.75
) -> Tensor:
    """The summed GloVe objective over a batch of pairs: f(X) (w · w̃ + b + b̃ − log X)².

    w, w_ctx (P, D): the two words' vectors; b, b_ctx (P,): their biases; counts (P,) > 0."""
    check_tensor(counts, "counts", dims=1, floating=True, fix="the co-occurrence counts X of the pairs, (P,)")
    for name, t, dims in (("w", w, 2), ("w_ctx", w_ctx, 2), ("b", b, 1), ("b_ctx", b_ctx, 1)):
        check_tensor(t, name, dims=dims, floating=True)
        if t.shape[0] != counts.shape[0]:
            raise ValueError(
                f"glove_loss: {name} has {t.shape[0]} rows but counts has {counts.shape[0]}: give one row per pair"
            )
    if w.shape != w_ctx.shape:
        raise ValueError(f"glove_loss: w {tuple(w.shape)} and w_ctx {tuple(w_ctx.shape)} must have the same shape")
    bad = ~torch.isfinite(counts)
    if bad.any():
        raise ValueError(
            f"glove_loss: counts holds NaN or infinite values ({int(bad.sum())} of {counts.numel()}, first at "
            f"pair {int(bad.nonzero()[0])}); every count must be a finite number > 0, as cooccurrence gives"
        )
    if (counts <= 0).any():
        raise ValueError("GloVe fits only pairs that occur: every count must be > 0")
    error = (w * w_ctx).sum(-1) + b + b_ctx - counts.log()
    return (glove_weight(counts, x_max, alpha) * error.pow(2)).sum()


class GloVe(nn.Module):
    """The parameters: word vectors w and context vectors w̃ (V, D), biases b and b̃ (V, 1).

    Initialised as in the reference code: uniform in ±0.5 / D. Rows are looked up with sparse
    gradients, so that an optimiser step touches only the words of the batch."""

    def __init__(self, vocab_size: int, d_model: int = 100, generator: torch.Generator | None = None):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size")
        check_positive_int(d_model, "d_model")

        def uniform(*shape):
            return nn.Parameter((torch.rand(*shape, generator=generator) - 0.5) / d_model)

        self.w, self.w_ctx = uniform(vocab_size, d_model), uniform(vocab_size, d_model)
        self.b, self.b_ctx = uniform(vocab_size, 1), uniform(vocab_size, 1)

    def forward(self, rows: Tensor, cols: Tensor, counts: Tensor, x_max: float = 100.0, alpha: float = 0.75) -> Tensor:
        """The summed weighted squared error of the pairs (rows, cols, counts)."""
        look = lambda table, ids: F.embedding(ids, table, sparse=True)
        return glove_loss(
            look(self.w, rows),
            look(self.w_ctx, cols),
            look(self.b, rows)[:, 0],
            look(self.b_ctx, cols)[:, 0],
            counts,
            x_max,
            alpha,
        )

    def vectors(self) -> Tensor:
        """w + w̃, the word vectors the paper uses (V, D)."""
        return (self.w + self.w_ctx).detach().clone()


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
    check_positive_number(lr, "lr")
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
