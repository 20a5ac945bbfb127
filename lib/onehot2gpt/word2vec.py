"""word2vec: skip-gram and CBOW with negative sampling, and the word vectors they learn.

Taught in notebook 02. Follows Mikolov et al. 2013a, "Efficient Estimation of Word Representations
in Vector Space" (skip-gram, CBOW), and 2013b, "Distributed Representations of Words and Phrases and
their Compositionality" (negative sampling, sub-sampling), with the details of their word2vec.c. In order:

* the models, :class:`SkipGram` / :class:`CBOW` and :func:`negative_sampling_loss`, trained with autograd;
* the examples: :func:`skipgram_pairs` / :func:`cbow_examples`, sub-sampling
  (:func:`keep_probabilities`) and the noise words (:func:`noise_distribution`, :class:`NoiseSampler`);
* the fast trainer, :func:`train_word2vec`: hand-derived gradients (:func:`negative_sampling_grads`)
  and ``index_add_`` updates on big minibatches (:func:`epoch_batches`), in one or several
  lock-free ("Hogwild!") threads. Unlike word2vec.c, the context words of one centre share their
  noise words (Ji et al. 2016, "Parallelizing Word2Vec in Shared and Distributed Memory"), and a
  word's summed update within one minibatch is damped (:data:`MAX_ROW_STEP`).

Training returns :class:`~onehot2gpt.word_vectors.WordVectors` (neighbours, analogies, evaluation,
save/load). The course checkpoint is made with ``python recipes/word2vec-wikitext2.py --out DIR``.

Example:
    >>> from onehot2gpt.checkpoints import load
    >>> wv = load("word2vec-wikitext2").model
    >>> wv.analogy("france", "paris", "germany")
    [('berlin', 0.7386)]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from onehot2gpt.progress import progress_bar
from onehot2gpt.utils import TrainingDiverged, as_ids, check_choice, check_finite_loss, check_int, check_number
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors

MODELS = ("skipgram", "cbow")


@dataclass(frozen=True)
class Word2VecConfig:
    """Training settings; the defaults are the course checkpoint's (and gensim's, with sg=1)."""

    model: str = "skipgram"  # "skipgram" or "cbow"
    d_model: int = 100  # vector size
    window: int = 5  # max words on each side; each centre draws b in 1..window
    negative: int = 5  # noise words per centre (shared by its context words)
    min_count: int = 5  # rarer words are dropped from the corpus, like word2vec.c
    sample: float = 1e-3  # sub-sampling threshold t (see keep_probabilities); 0 = off
    epochs: int = 5
    lr: float = 0.025  # SGD step size, decayed linearly to min_lr
    min_lr: float = 1e-4
    batch_size: int = 4096  # (context, centre) pairs per update: big enough to amortise Python,
    # small enough that a frequent word's summed updates stay stable
    seed: int = 0

    def __post_init__(self):
        check_choice(self.model, "model", MODELS)
        for name in ("d_model", "window", "negative", "min_count", "epochs", "batch_size"):
            check_int(getattr(self, name), name, 1)
        check_number(self.sample, "sample", 0, fix="0 turns sub-sampling off")
        check_number(self.lr, "lr", 0, low_open=True)
        check_number(self.min_lr, "min_lr", 0, self.lr, low_open=True, fix="the rate decays from lr to min_lr")


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer (1 or more), got {value!r}")


class SkipGram(nn.Module):
    """Skip-gram with negative sampling: predict each context word from the centre word.

    ``in_embed`` holds the word vectors we keep, ``out_embed`` the vectors words have as
    predictions. Initialised like word2vec.c: in uniform(−0.5/d_model, 0.5/d_model), out zeros.
    """

    def __init__(self, vocab_size: int, d_model: int, generator: torch.Generator | None = None):
        super().__init__()
        _check_positive(vocab_size=vocab_size, d_model=d_model)
        self.in_embed = nn.Embedding(vocab_size, d_model)
        self.out_embed = nn.Embedding(vocab_size, d_model)
        with torch.no_grad():
            self.in_embed.weight.copy_((torch.rand(vocab_size, d_model, generator=generator) - 0.5) / d_model)
            self.out_embed.weight.zero_()

    def forward(self, centers: Tensor, contexts: Tensor, negatives: Tensor) -> Tensor:
        """centers (B,), contexts (B,), negatives (B, K) ids → mean loss (scalar)."""
        return negative_sampling_loss(self.in_embed(centers), self.out_embed(contexts), self.out_embed(negatives))


class CBOW(SkipGram):
    """CBOW with negative sampling: predict the centre word from the mean of its context vectors."""

    def forward(self, centers: Tensor, contexts: Tensor, negatives: Tensor) -> Tensor:
        """centers (B,), contexts (B, C) ids padded with -1, negatives (B, K) → mean loss (the
        arguments in :meth:`SkipGram.forward`'s order)."""
        found = (contexts >= 0).unsqueeze(-1)  # (B, C, 1)
        summed = (self.in_embed(contexts.clamp_min(0)) * found).sum(1)  # (B, D)
        mean = summed / found.sum(1).clamp_min(1)
        return negative_sampling_loss(mean, self.out_embed(centers), self.out_embed(negatives))


def negative_sampling_loss(center_vecs: Tensor, context_vecs: Tensor, negative_vecs: Tensor) -> Tensor:
    """(B, D), (B, D), (B, K, D) → mean over B of −log σ(u_o·v_c) − Σ_k log σ(−u_k·v_c).

    ``center_vecs`` are input vectors v_c, ``context_vecs`` the output vectors u_o of the words
    really seen next to them, ``negative_vecs`` the output vectors u_k of K noise words.

    Example:
        >>> v = torch.zeros(1, 2); negative_sampling_loss(v, v, torch.zeros(1, 3, 2))  # 4 · ln 2
        tensor(2.7726)
    """
    positive = (context_vecs * center_vecs).sum(-1)  # (B,)
    negative = torch.bmm(negative_vecs, center_vecs.unsqueeze(2)).squeeze(2)  # (B, K)
    return (-F.logsigmoid(positive) - F.logsigmoid(-negative).sum(-1)).mean()


def keep_probabilities(counts: Tensor, sample: float = 1e-3) -> Tensor:
    """Word counts (V,) → probability (V,) of keeping each occurrence of the word.

    A word with frequency f = count / total is kept with probability ``(sqrt(f / t) + 1) · t / f``
    (clipped to 1), t = ``sample``: word2vec.c's formula. The paper's keep = sqrt(t / f) sub-samples
    every word with f > t; this one only words with f > φ²·t ≈ 2.6 t (φ the golden ratio).
    ``sample=0`` keeps everything; words with count 0 get 1.

    Example:
        >>> keep_probabilities(torch.tensor([900., 90., 10.]), sample=0.01)
        tensor([0.1165, 0.4444, 1.0000])
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)
    check_number(sample, "sample", 0, fix="0 turns sub-sampling off")
    if sample == 0:
        return torch.ones_like(counts, dtype=torch.float32)
    threshold = sample * counts.sum()  # t · N, in counts rather than frequencies
    keep = ((counts / threshold).sqrt() + 1) * threshold / counts.clamp_min(1e-12)
    return keep.clamp(max=1.0).float()


def _keep_mask(ids: Tensor, keep_probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """(N,) ids → (N,) bool: True for the occurrences that survive sub-sampling."""
    return torch.rand(ids.shape, generator=generator) < keep_probs[ids]


def noise_distribution(counts: Tensor, power: float = 0.75) -> Tensor:
    """Word counts (V,) → noise distribution (V,) ∝ count^power, summing to 1 (negative samples).

    Example:
        >>> noise_distribution(torch.tensor([16., 1.]), power=0.5)
        tensor([0.8000, 0.2000])
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.sum() <= 0:
        raise ValueError("all counts are zero: count the words of a non-empty corpus first")
    weights = counts.clamp_min(0) ** power
    return (weights / weights.sum()).float()


def _sentence_room(sentence_ids: Tensor | None, n: int) -> tuple[Tensor, Tensor]:
    """How many words each position has to its left and right inside its sentence: (n,), (n,).

    A sentence is a run of equal ``sentence_ids``; None means one sentence.
    """
    position = torch.arange(n)
    if sentence_ids is None:
        return position, n - 1 - position
    starts = torch.ones(n, dtype=torch.bool)
    starts[1:] = sentence_ids[1:] != sentence_ids[:-1]
    first = starts.nonzero().squeeze(1)  # (S,) start of each run
    run = starts.cumsum(0) - 1  # (n,) run of each position
    last = torch.cat([first[1:], torch.tensor([n])]) - 1  # (S,) end of each run
    return position - first[run], last[run] - position


def _context_matrix(ids: Tensor, left: Tensor, right: Tensor, centres: Tensor, width: int) -> Tensor:
    """Centre positions (n,) → context ids (n, 2·width) at offsets -width..-1, +1..+width.

    ``left``/``right`` (N,) are the sentence room of every position (:func:`_sentence_room`);
    -1 marks offsets beyond it, i.e. outside the sequence or in another sentence.
    """
    offsets = torch.cat([torch.arange(-width, 0), torch.arange(1, width + 1)])  # (2w,)
    inside = (offsets >= -left[centres, None]) & (offsets <= right[centres, None])  # (n, 2w)
    pos = (centres[:, None] + offsets).clamp_(0, max(len(ids) - 1, 0))  # (n, 2w)
    return torch.where(inside, ids[pos], -1)


def _check_sequence(ids, window: int, sentence_ids) -> tuple[Tensor, Tensor | None]:
    ids = as_ids(ids, allow_empty=True)
    if ids.dim() != 1:
        raise ValueError(
            f"ids must be 1-D (one token stream), got shape {tuple(ids.shape)}; "
            "concatenate sentences and pass sentence_ids to keep them apart"
        )
    check_int(window, "window", 1, fix="the words on each side")
    if sentence_ids is not None:
        sentence_ids = torch.as_tensor(sentence_ids, dtype=torch.long)
        if sentence_ids.shape != ids.shape:
            raise ValueError(
                f"sentence_ids must have one entry per id: shape {tuple(ids.shape)}, got {tuple(sentence_ids.shape)}"
            )
    return ids, sentence_ids


def context_windows(
    ids, window: int, generator: torch.Generator | None = None, shrink: bool = True, sentence_ids=None
) -> Tensor:
    """Ids (N,) → the context ids of every position, (N, 2·window), -1 where there is none.

    The columns are the offsets -window..-1, +1..+window. With ``shrink`` each centre draws its
    own window b uniform in 1..window, as word2vec.c does, so near words count more; offsets beyond
    b are -1. Contexts never cross a sentence: ``sentence_ids`` (N,) is equal for the words of one
    sentence, e.g. ``torch.repeat_interleave(torch.arange(S), lengths)``.

    Example:
        >>> context_windows(torch.tensor([7, 8, 9]), 1, shrink=False)
        tensor([[-1,  8],
                [ 7,  9],
                [ 8, -1]])
    """
    ids, sentence_ids = _check_sequence(ids, window, sentence_ids)
    left, right = _sentence_room(sentence_ids, len(ids))
    ctx = _context_matrix(ids, left, right, torch.arange(len(ids)), window)  # (N, 2W)
    if shrink:
        reach = torch.randint(1, window + 1, (len(ids), 1), generator=generator)  # (N, 1)
        distance = torch.cat([torch.arange(window, 0, -1), torch.arange(1, window + 1)])
        ctx = ctx.masked_fill(distance > reach, -1)
    return ctx


def skipgram_pairs(
    ids, window: int, generator: torch.Generator | None = None, shrink: bool = True, sentence_ids=None
) -> tuple[Tensor, Tensor]:
    """Ids (N,) → (centres (P,), contexts (P,)): every (word, neighbour) pair within the window.

    Pairs come centre by centre, each centre's contexts left to right. ``shrink=False`` gives
    all pairs within ``window`` (deterministic); ``shrink=True`` draws each centre's window b in
    1..window like word2vec.c. Pairs never cross sentences given by ``sentence_ids`` (N,); see
    :func:`context_windows`.

    Example:
        >>> skipgram_pairs(torch.tensor([7, 8, 9]), 1, shrink=False)
        (tensor([7, 8, 8, 9]), tensor([8, 7, 9, 8]))
    """
    ids, sentence_ids = _check_sequence(ids, window, sentence_ids)
    ctx = context_windows(ids, window, generator, shrink, sentence_ids)  # (N, 2W)
    found = ctx >= 0
    return ids[:, None].expand_as(ctx)[found], ctx[found]


def cbow_examples(
    ids, window: int, generator: torch.Generator | None = None, shrink: bool = True, sentence_ids=None
) -> tuple[Tensor, Tensor]:
    """Ids (N,) → (contexts (N', 2·window) padded with -1, centres (N',)) for CBOW.

    Same windows as :func:`context_windows`; positions without any context word are dropped.

    Example:
        >>> cbow_examples(torch.tensor([7, 8, 9]), 1, shrink=False)
        (tensor([[-1,  8],
                [ 7,  9],
                [ 8, -1]]), tensor([7, 8, 9]))
    """
    ids, sentence_ids = _check_sequence(ids, window, sentence_ids)
    ctx = context_windows(ids, window, generator, shrink, sentence_ids)
    has_context = (ctx >= 0).any(1)
    return ctx[has_context], ids[has_context]


def negative_sampling_grads(
    input_vecs: Tensor,
    output_vecs: Tensor,
    mask: Tensor | None = None,
    input_scale: Tensor | float = 1.0,
    output_scale: Tensor | float = 1.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Loss and hand-derived gradients for M input vectors sharing one target and K noise words.

    input_vecs (B, M, D), output_vecs (B, 1+K, D) (row 0 the true word, rows 1..K the noise), mask
    (B, M) or None → (summed loss, d loss/d input_vecs (B, M, D), d loss/d output_vecs (B, 1+K, D))
    of −log σ(u_0·v_m) − Σ_k log σ(−u_k·v_m) summed over the unmasked (b, m). With s = u·v, d/ds of
    −log σ(s) is σ(s) − 1 and of −log σ(−s) is σ(s): d/dv_m = Σ_j g_jm u_j, d/du_j = Σ_m g_jm v_m.
    The gradients are multiplied by ``input_scale`` (B, M) and ``output_scale`` (B, 1+K), scalars
    or tensors: the trainer passes −lr (times a damping), which turns them into SGD steps.

    Example:
        >>> loss, dv, du = negative_sampling_grads(torch.zeros(1, 1, 2), torch.ones(1, 2, 2))
        >>> dv                                  # (σ(0) − 1)·u_0 + σ(0)·u_1
        tensor([[[0., 0.]]])
    """
    scores = torch.bmm(output_vecs, input_vecs.transpose(1, 2))  # (B, 1+K, M)
    g = torch.sigmoid(scores)
    g[:, 0] -= 1  # true word: σ(s) − 1
    # Loss from the same scores: softplus(−s) = −log σ(s), softplus(s) = −log σ(−s).
    loss_terms = F.softplus(torch.cat([-scores[:, :1], scores[:, 1:]], 1))  # (B, 1+K, M)
    if mask is not None:
        weights = mask.unsqueeze(1).to(g.dtype)  # (B, 1, M)
        loss_terms *= weights
        g *= weights
    g_inputs = g * (input_scale.unsqueeze(1) if isinstance(input_scale, Tensor) else input_scale)
    g_outputs = g * (output_scale.unsqueeze(2) if isinstance(output_scale, Tensor) else output_scale)
    grad_inputs = torch.bmm(g_inputs.transpose(1, 2), output_vecs)  # (B, M, D)
    grad_outputs = torch.bmm(g_outputs, input_vecs)  # (B, 1+K, D)
    return loss_terms.sum(), grad_inputs, grad_outputs


def _alias_table(probs: Tensor) -> tuple[Tensor, Tensor]:
    """Walker's alias method: probs (V,) → (accept (V,), alias (V,)) for O(1) exact draws.

    Draw i uniform in 0..V-1 and u uniform in [0, 1): the sample is i if u < accept[i], else
    alias[i]. Cheaper than torch.multinomial's binary search and than word2vec.c's 10^8-entry table.
    """
    V = len(probs)
    scaled = (probs.double() * V).tolist()
    accept, alias = [1.0] * V, list(range(V))
    small = [i for i, p in enumerate(scaled) if p < 1.0]
    large = [i for i, p in enumerate(scaled) if p >= 1.0]
    while small and large:
        s, l = small.pop(), large.pop()
        accept[s], alias[s] = scaled[s], l
        scaled[l] -= 1.0 - scaled[s]
        (small if scaled[l] < 1.0 else large).append(l)
    return torch.tensor(accept, dtype=torch.float32), torch.tensor(alias)


class NoiseSampler:
    """Draws noise words from a distribution probs (V,), e.g. :func:`noise_distribution`.

    ``sampler(shape, generator)`` → ids of that shape, each drawn with probability ``probs[id]``
    (as ``torch.multinomial(probs, n, replacement=True)``), in O(1) by the alias method.

    Example:
        >>> NoiseSampler(torch.tensor([0.0, 1.0]))((2, 3))
        tensor([[1, 1, 1],
                [1, 1, 1]])
    """

    def __init__(self, probs: Tensor):
        probs = torch.as_tensor(probs)
        if probs.dim() != 1 or not len(probs) or (probs < 0).any() or not math.isclose(probs.sum(), 1, abs_tol=1e-4):
            raise ValueError(
                "probs must be a non-empty 1-D tensor of probabilities summing to 1, e.g. noise_distribution(counts)"
            )
        self.accept, self.alias = _alias_table(probs)

    def __call__(self, shape: tuple[int, ...], generator: torch.Generator | None = None) -> Tensor:
        i = torch.randint(len(self.accept), tuple(shape), generator=generator)
        return torch.where(torch.rand(tuple(shape), generator=generator) < self.accept[i], i, self.alias[i])


def encode_corpus(sentences, vocab: Vocab | None = None, min_count: int = 5) -> tuple[Vocab, Tensor, Tensor]:
    """Sentences → (vocab, ids (N,), sentence_ids (N,)); words not in the vocab are dropped.

    Without ``vocab``, one is built from the words seen ``min_count`` times, most frequent first
    and with no specials. ``sentence_ids`` numbers the sentences, so that windows never cross one.
    """
    if isinstance(sentences, (str, Tensor)) or not isinstance(sentences, Sequence):
        raise TypeError(
            "sentences must be a list of token lists (e.g. wikitext_sentences()) or a list of 1-D id tensors"
        )
    sentences = [s for s in sentences if len(s)]
    if not sentences:
        raise ValueError(
            "the corpus is empty: pass at least one non-empty sentence, e.g. onehot2gpt.data.wikitext_sentences()"
        )
    if isinstance(sentences[0], Tensor):
        if vocab is None:
            raise ValueError(
                "sentences are id tensors, so pass the vocab that made them: train_word2vec(ids, vocab=vocab)"
            )
        ids = torch.cat([s.long().reshape(-1) for s in sentences])
    else:
        if vocab is None:
            # No specials: word2vec drops rare words instead of mapping them to <unk>, and ids
            # in frequency order make "the 30,000 most frequent words" the first 30,000 rows.
            vocab = Vocab.build(sentences, min_freq=min_count, specials=())
        lookup = vocab.stoi.get
        ids = torch.tensor([lookup(t, -1) for s in sentences for t in s], dtype=torch.long)
    lengths = torch.tensor([len(s) for s in sentences])
    sentence_ids = torch.repeat_interleave(torch.arange(len(sentences)), lengths)
    known = ids >= 0  # drop unknown words
    ids, sentence_ids = ids[known], sentence_ids[known]
    if ids.numel() == 0:
        raise ValueError(
            f"no word of the corpus is in the vocabulary (min_count={min_count}); lower min_count or pass more text"
        )
    if torch.bincount(sentence_ids).max() < 2:
        raise ValueError(
            "every sentence has fewer than two known words, so no word has a context; "
            "pass longer sentences or lower min_count"
        )
    if ids.max() >= len(vocab):
        raise ValueError(
            f"ids must lie in 0..{len(vocab) - 1} (the vocab size); encode the sentences with the vocab you pass"
        )
    return vocab, ids, sentence_ids


def epoch_batches(
    ids: Tensor,
    sentence_ids: Tensor,
    keep: Tensor,
    window: int,
    batch_size: int,
    generator: torch.Generator | None = None,
) -> list[tuple[Tensor, Tensor]]:
    """One epoch of examples → shuffled batches of (contexts (B, 2b) with -1 pads, centres (B,)).

    Sub-sample with ``keep`` (V,) (:func:`keep_probabilities`), draw each centre's window b, then
    group the centres by b, so that a batch holds windows of one width (little padding) and about
    ``batch_size`` (context, centre) pairs. :func:`train_word2vec` calls it once per epoch.
    """
    kept = _keep_mask(ids, keep, generator)
    ids = ids[kept]
    left, right = _sentence_room(sentence_ids[kept], len(ids))
    reach = torch.randint(1, window + 1, (len(ids),), generator=generator)
    reach[(left == 0) & (right == 0)] = 0  # alone: no example
    batches = []
    for b in range(1, window + 1):
        centres = (reach == b).nonzero().squeeze(1)
        if len(centres) == 0:
            continue
        centres = centres[torch.randperm(len(centres), generator=generator)]
        ctx = _context_matrix(ids, left, right, centres, b)  # (n, 2b)
        rows = max(1, batch_size // (2 * b))
        batches += zip(ctx.split(rows), ids[centres].split(rows))
    order = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in order]


# A word that occurs n times in a batch gets the sum of its n updates, which is what n steps of
# plain SGD would do while the step is small; when lr · n is large that sum overshoots and
# training diverges (small vocabularies, sample=0, big lr), so the sum is scaled by
# min(1, MAX_ROW_STEP / (lr · n)). With the default lr it bites only for n > 16 and early on.
MAX_ROW_STEP = 0.4


def _damping(ids: Tensor, lr: float, vocab_size: int, weights: Tensor | None = None) -> Tensor:
    """Ids (n,) of one batch → (n,) factor min(1, MAX_ROW_STEP / (lr · count of the id))."""
    counts = torch.bincount(ids, weights=weights, minlength=vocab_size)[ids]  # (n,)
    return (MAX_ROW_STEP / lr / counts.float().clamp_min(1.0)).clamp_(max=1.0)


def train_step(
    in_w: Tensor, out_w: Tensor, contexts: Tensor, centres: Tensor, negatives: Tensor, lr: float, cbow: bool = False
) -> tuple[float, int]:
    """One SGD step in place on both tables; returns (summed loss, number of predictions).

    contexts (B, C) with -1 pads, centres (B,), negatives (B, K); as in word2vec.c, the context
    words are the inputs and the centre is predicted, in both models. The step is −lr times the
    gradient of the summed loss, except that a word seen very often in one batch has its summed
    step damped (:data:`MAX_ROW_STEP`) and CBOW gives every context word the whole error of their
    mean."""
    B, C = contexts.shape
    V, D = in_w.shape
    found = contexts >= 0  # (B, C)
    rows = contexts.clamp_min(0).view(-1)  # pads read row 0 ...
    targets = torch.cat([centres[:, None], negatives], 1).view(-1)  # (B·(1+K),)
    inputs = in_w.index_select(0, rows).view(B, C, D)
    outputs = out_w.index_select(0, targets).view(B, -1, D)  # (B, 1+K, D)
    input_step = -lr * _damping(rows, lr, V, found.view(-1).float()).view(B, C)
    output_step = -lr * _damping(targets, lr, V).view(B, -1)
    if cbow:
        n_found = found.sum(1, keepdim=True)  # (B, 1)
        mean = (inputs * found.unsqueeze(2)).sum(1) / n_found  # (B, D)
        loss, grad_mean, step_outputs = negative_sampling_grads(mean.unsqueeze(1), outputs, output_scale=output_step)
        # word2vec.c gives every context word the whole error of the mean, not 1/C of it.
        step_inputs = grad_mean * (input_step * found).unsqueeze(2)  # (B, C, D)
        n_predictions = B
    else:
        loss, step_inputs, step_outputs = negative_sampling_grads(inputs, outputs, found, input_step, output_step)
        n_predictions = int(found.sum())
    # index_add_ with the default alpha=1 takes torch's fast scatter-add path.
    in_w.index_add_(0, rows, step_inputs.view(-1, D))  # ... and add 0 to it
    out_w.index_add_(0, targets, step_outputs.view(-1, D))
    return float(loss), n_predictions


def train_word2vec(
    sentences: Sequence[Sequence[str]] | Sequence[Tensor],
    *,
    vocab: Vocab | None = None,
    d_model: int = 100,
    window: int = 5,
    negative: int = 5,
    min_count: int = 5,
    sample: float = 1e-3,
    epochs: int = 5,
    lr: float = 0.025,
    min_lr: float = 1e-4,
    batch_size: int = 4096,
    model: str = "skipgram",
    seed: int = 0,
    threads: int | None = None,
    progress: bool = True,
    corpus_name: str | None = None,
    max_steps: int | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> WordVectors:
    """Train skip-gram or CBOW with negative sampling; sentences → :class:`WordVectors` (V, d_model).

    ``sentences``: token lists (a vocabulary of the words seen ``min_count`` times is built, most
    frequent first) or 1-D id tensors made with ``vocab``. Unknown words are dropped, as word2vec.c
    does; windows never cross sentences. ``batch_size`` counts (context, centre) pairs per update.
    The settings are :class:`Word2VecConfig`'s.

    ``threads=None`` trains in one Python thread (``threads=1``: one CPU thread), deterministic for
    a ``seed``. ``threads=n > 1`` runs n single-threaded workers on shares of the minibatches,
    updating the shared tables without locks ("Hogwild!"): not bit-reproducible. The returned
    vectors' config records the settings, the loss of each epoch and the seconds taken.

    ``max_steps`` stops after that many updates (the rate still decays on the whole run's
    schedule); ``on_step(step, loss)`` gets each update's number (0, 1, ...) and mean loss per
    prediction, so a hand-written loop can be compared with this one step by step.
    """
    arguments = locals()
    cfg = Word2VecConfig(**{f.name: arguments[f.name] for f in fields(Word2VecConfig)})  # checks the settings
    if threads is not None:
        check_int(threads, "threads", 1)
    if max_steps is not None:
        check_int(max_steps, "max_steps", 1)
    start = time.perf_counter()
    vocab, ids, sentence_ids = encode_corpus(sentences, vocab, min_count)
    generator = torch.Generator().manual_seed(seed)
    counts = torch.bincount(ids, minlength=len(vocab))
    keep = keep_probabilities(counts, sample)
    draw_noise = NoiseSampler(noise_distribution(counts))
    net = (CBOW if model == "cbow" else SkipGram)(len(vocab), d_model, generator)
    in_w, out_w = net.in_embed.weight.data, net.out_embed.weight.data
    history = []
    steps = [0]  # updates done, over all workers
    # out starts at zeros: every prediction's loss starts at (1 + negative)·ln 2; 1000× that is a run exploding
    uniform = (1 + negative) * math.log(2)
    diverged: list[BaseException] = []  # set by the worker that stops: the others stop too
    workers = threads or 1
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(1 if workers > 1 else threads)  # workers > 1: no nested thread pools
    try:
        with progress_bar(
            total=epochs,
            disable=not progress,
            desc=f"word2vec {model}",
            unit="epoch",
            bar_format="{l_bar}{bar}| {n:.2f}/{total} [{elapsed}<{remaining}{postfix}]",
        ) as bar:
            # batch_size counts pairs over all workers: each of n workers updates the shared
            # tables from values up to n − 1 steps old, so n steps of batch_size / n act like
            # one step of batch_size.
            for epoch in range(epochs):
                if max_steps is not None and steps[0] >= max_steps:
                    break
                batches = epoch_batches(ids, sentence_ids, keep, window, max(1, batch_size // workers), generator)
                seeds = torch.randint(2**62, (workers,), generator=generator).tolist()
                totals = [[0.0, 0] for _ in range(workers)]

                def work(worker: int) -> None:
                    noise_generator = torch.Generator().manual_seed(seeds[worker])
                    for i in range(worker, len(batches), workers):
                        if (max_steps is not None and steps[0] >= max_steps) or diverged:
                            break
                        contexts, centres = batches[i]
                        negatives = draw_noise((len(centres), negative), noise_generator)
                        step_lr = lr - (lr - min_lr) * (epoch + i / len(batches)) / epochs
                        loss, n = train_step(in_w, out_w, contexts, centres, negatives, step_lr, cbow=model == "cbow")
                        totals[worker][0] += loss
                        totals[worker][1] += n
                        steps[0] += 1
                        try:
                            check_finite_loss(
                                loss / max(n, 1),
                                steps[0] - 1,
                                lr=lr,
                                what=f"word2vec (epoch {epoch + 1})",
                                start=uniform,
                            )
                        except TrainingDiverged as error:
                            diverged.append(error)
                            raise
                        if on_step is not None:
                            on_step(steps[0] - 1, loss / max(n, 1))
                        if worker == 0 and i % 64 == 0:
                            bar.n = epoch + i / len(batches)
                            bar.set_postfix(loss=f"{totals[0][0] / max(totals[0][1], 1):.3f}", lr=f"{step_lr:.4f}")

                if workers == 1:
                    work(0)
                else:
                    with ThreadPoolExecutor(workers) as pool:
                        list(pool.map(work, range(workers)))  # list() re-raises worker errors
                history.append(sum(t[0] for t in totals) / max(sum(t[1] for t in totals), 1))
                check_finite_loss(
                    history[-1], steps[0] - 1, lr=lr, what=f"word2vec (epoch {epoch + 1}, mean loss)", start=uniform
                )
                bar.n = epoch + 1
                bar.set_postfix(loss=f"{history[-1]:.3f}")
    finally:
        torch.set_num_threads(old_threads)
    config = {
        **asdict(cfg),
        "threads": threads or old_threads,
        "workers": workers,
        "corpus": corpus_name,
        "n_tokens": len(ids),
        "train_seconds": round(time.perf_counter() - start, 1),
        "loss_per_epoch": [round(x, 4) for x in history],
    }
    return WordVectors(in_w.clone(), vocab, config)
