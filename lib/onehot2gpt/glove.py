"""GloVe: word vectors fitted to the logarithm of co-occurrence counts.

Taught in notebook 02. Follows Pennington, Socher & Manning (2014), "GloVe: Global Vectors for Word
Representation": count how often each word j occurs near each word i, then fit vectors to the counts.

* :func:`cooccurrence`: X_ij, where every occurrence of j within ``window`` words of i adds 1/d for
  distance d, symmetric, never across a sentence boundary;
* :func:`glove_weight`: f(x) = (x / x_max)^α below x_max, 1 above (the paper's x_max = 100,
  α = 3/4; the course checkpoint uses x_max = 10, the reference code's demo value);
* :func:`glove_loss`: Σ f(X_ij) (w_i · w̃_j + b_i + b̃_j − log X_ij)² over the pairs with X_ij > 0;
* :class:`GloVe`: the two tables and biases the loss fits; the word vector is w + w̃, as in the
  paper. The course checkpoint is trained with AdaGrad (the paper's optimiser) by
  ``python recipes/glove-wikitext2.py --out DIR`` (its loop: ``recipes/_glove.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from onehot2gpt.utils import check_int, check_number, check_positive_int, check_tensor


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
