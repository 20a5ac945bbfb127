"""fastText: a word is the sum of its character n-grams, so every word gets a vector.

Taught in notebook 02, beside word2vec. Follows Bojanowski, Grave, Joulin & Mikolov (2017),
"Enriching Word Vectors with Subword Information". A word is written with boundary marks,
``<where>``, cut into its character n-grams of length 3 to 6 (``<wh``, ``whe``, …, ``<whe``, …),
and represented by the mean of its own vector and its n-grams' (as the reference implementation
computes it). An unseen or misspelled word shares most of its n-grams with seen words.

* :func:`char_ngrams` and :func:`ngram_bucket`: a word's n-grams, and the row each one hashes to
  (FNV-1a of the UTF-8 bytes, modulo ``buckets``, as fastText does);
* :func:`subword_table`: for every vocabulary word, its rows (its own, then its n-grams');
* :func:`train_fasttext`: skip-gram with negative sampling on word2vec's examples, each input word
  the mean of its rows; as in fastText, every row receives the whole gradient of the mean;
* :class:`FastTextVectors`: the vector of any word, and :meth:`FastTextVectors.word_vectors` for
  the analogy and WordSim-353 evaluation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from onehot2gpt import word2vec
from onehot2gpt.progress import progress_bar
from onehot2gpt.utils import check_finite_loss, check_int, check_number, check_tensor, check_text
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors

BOW, EOW = "<", ">"


def char_ngrams(word: str, min_n: int = 3, max_n: int = 6) -> list[str]:
    """The character n-grams of ``<word>``, lengths `min_n` … `max_n`, shortest first and left to
    right within a length (a short word's whole ``<word>`` is one of them, as in fastText).

    Example:
        >>> char_ngrams("where", 3, 3)
        ['<wh', 'whe', 'her', 'ere', 're>']
    """
    check_text(word, "word", fix="an empty word has no n-grams")
    check_int(min_n, "min_n", 1)
    check_int(max_n, "max_n", min_n, fix="need 1 ≤ min_n ≤ max_n")
    marked = BOW + word + EOW
    return [marked[i : i + n] for n in range(min_n, max_n + 1) for i in range(len(marked) - n + 1)]


def ngram_bucket(ngram: str, buckets: int) -> int:
    """The row of an n-gram: 32-bit FNV-1a of its UTF-8 bytes, modulo `buckets`."""
    check_int(buckets, "buckets", 1)
    h = 2166136261
    for byte in ngram.encode("utf-8"):
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h % buckets


def subword_table(words: Sequence[str], buckets: int, min_n: int = 3, max_n: int = 6) -> tuple[Tensor, Tensor]:
    """For each word k of `words`, its rows of the input table: k itself, then V + bucket of each
    n-gram. Returned flat, as (rows (R,), offsets (V,)), the layout ``F.embedding_bag`` reads."""
    V = len(words)
    rows, offsets = [], []
    for k, word in enumerate(words):
        offsets.append(len(rows))
        rows.append(k)
        rows.extend(V + ngram_bucket(g, buckets) for g in char_ngrams(word, min_n, max_n))
    return torch.tensor(rows, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)


class FastTextVectors:
    """Trained fastText input vectors: the vocabulary's own rows (V, D), the n-gram rows
    (buckets, D), and the n-gram settings. ``ft[word]`` works for any word with an n-gram."""

    def __init__(
        self,
        word_rows: Tensor,
        ngram_rows: Tensor,
        vocab: Vocab,
        min_n: int = 3,
        max_n: int = 6,
        config: dict | None = None,
    ):
        if (
            word_rows.dim() != 2
            or word_rows.shape[0] != len(vocab)
            or ngram_rows.dim() != 2
            or ngram_rows.shape[1] != word_rows.shape[1]
        ):
            raise ValueError(
                f"expected word rows ({len(vocab)}, D) and n-gram rows (buckets, D), got "
                f"{tuple(word_rows.shape)} and {tuple(ngram_rows.shape)}"
            )
        self.word_rows, self.ngram_rows, self.vocab = word_rows.float(), ngram_rows.float(), vocab
        self.min_n, self.max_n, self.config = min_n, max_n, dict(config or {})
        self._word_vectors: WordVectors | None = None

    @property
    def buckets(self) -> int:
        return self.ngram_rows.shape[0]

    def __contains__(self, word: str) -> bool:
        return word in self.vocab.stoi

    def __getitem__(self, word: str) -> Tensor:
        """The word's vector: the mean of its own row (if it is in the vocabulary) and its n-grams'."""
        if not isinstance(word, str) or not word:
            raise KeyError(f"a word must be a non-empty string, got {word!r}")
        vecs = [self.ngram_rows[ngram_bucket(g, self.buckets)] for g in char_ngrams(word, self.min_n, self.max_n)]
        if word in self.vocab.stoi:
            vecs.insert(0, self.word_rows[self.vocab.stoi[word]])
        if not vecs:
            raise KeyError(
                f"{word!r} is shorter than {self.min_n - 2} characters and not in the vocabulary: "
                f"it has no n-gram of length {self.min_n}, so no vector"
            )
        return torch.stack(vecs).mean(0)

    def word_vectors(self) -> WordVectors:
        """The vectors of the vocabulary's words (as ``ft[word]``), for neighbours and evaluation;
        computed once (the rows never change after training)."""
        if self._word_vectors is None:
            rows, offsets = subword_table(self.vocab.itos, self.buckets, self.min_n, self.max_n)
            table = torch.cat([self.word_rows, self.ngram_rows])
            self._word_vectors = WordVectors(
                F.embedding_bag(rows, table, offsets, mode="mean"), self.vocab, self.config
            )
        return self._word_vectors

    def most_similar(self, word: str, topn: int = 5) -> list[tuple[str, float]]:
        """The `topn` vocabulary words nearest to any `word` (cosine), the word itself left out."""
        check_int(topn, "topn", 1, fix="how many neighbours to list")
        return self.word_vectors().most_similar(self[word], k=topn, exclude=[word])


def train_step(
    table: Tensor,
    out_w: Tensor,
    sub_rows: Tensor,
    sub_offsets: Tensor,
    words: Tensor,
    targets: Tensor,
    noise: Tensor,
    lr: float,
) -> float:
    """One SGD step of skip-gram with negative sampling on subword rows, in place; returns the summed loss.

    `table` (V + buckets, D) holds the words' own rows and the n-gram rows, `out_w` (V, D) the output
    vectors; (`sub_rows`, `sub_offsets`) is :func:`subword_table`'s layout. Each input word `words`
    (P,) is the mean of its rows and predicts `targets` (P,) against `noise` (P, K), with gradients
    from :func:`onehot2gpt.word2vec.negative_sampling_grads`; as in fastText, every row of a word
    receives the whole gradient of the mean. A word in several pairs has its steps summed."""
    check_tensor(table, "table", dims=2, floating=True)
    check_tensor(out_w, "out_w", dims=2, floating=True)
    for name, t in dict(sub_rows=sub_rows, sub_offsets=sub_offsets, words=words, targets=targets, noise=noise).items():
        if not isinstance(t, Tensor) or t.dtype != torch.long:
            raise TypeError(
                f"{name} must be a tensor of int64 ids, got {t.dtype if isinstance(t, Tensor) else type(t).__name__}"
            )
    if (
        out_w.shape[1] != table.shape[1]
        or words.shape != targets.shape
        or words.dim() != 1
        or noise.dim() != 2
        or noise.shape[0] != len(words)
    ):
        raise ValueError(
            f"expected table (N, D), out_w (V, D), words and targets (P,), noise (P, K); got "
            f"{tuple(table.shape)}, {tuple(out_w.shape)}, {tuple(words.shape)}, "
            f"{tuple(targets.shape)}, {tuple(noise.shape)}"
        )
    D = table.shape[1]
    unique, inverse = torch.unique(words, return_inverse=True)  # (U,), (P,)
    lengths = torch.diff(sub_offsets, append=sub_offsets.new_tensor([len(sub_rows)]))[unique]
    first = torch.cumsum(lengths, 0) - lengths  # each word's first row in `flat`
    flat = sub_rows[torch.repeat_interleave(sub_offsets[unique] - first, lengths) + torch.arange(int(lengths.sum()))]
    bags = F.embedding_bag(flat, table, first, mode="mean")  # (U, D) each word's mean
    ids = torch.cat([targets[:, None], noise], 1)  # (P, 1+K): the word, then noise
    loss, input_step, output_step = word2vec.negative_sampling_grads(
        bags[inverse, None], out_w[ids], input_scale=-lr, output_scale=-lr
    )
    word_step = torch.zeros_like(bags).index_add_(0, inverse, input_step[:, 0])  # (U, D) summed per word
    table.index_add_(0, flat, word_step.repeat_interleave(lengths, 0))  # the whole step to every row
    out_w.index_add_(0, ids.reshape(-1), output_step.reshape(-1, D))
    return float(loss)


def train_fasttext(
    sentences: Sequence[Sequence[str]],
    *,
    vocab: Vocab | None = None,
    d_model: int = 100,
    window: int = 5,
    negative: int = 5,
    min_count: int = 5,
    sample: float = 1e-3,
    min_n: int = 3,
    max_n: int = 6,
    buckets: int = 200_000,
    epochs: int = 5,
    lr: float = 0.05,
    min_lr: float = 1e-4,
    batch_size: int = 4096,
    seed: int = 0,
    threads: int | None = 1,
    progress: bool = True,
    corpus_name: str | None = None,
) -> FastTextVectors:
    """Skip-gram with negative sampling where each input word is the mean of its subword rows.

    The examples are word2vec's (:func:`onehot2gpt.word2vec.epoch_batches`); each (context, centre)
    pair reads the context word's subword rows and predicts the centre against `negative` noise
    words, by :func:`train_step`, the rate falling linearly from `lr` to `min_lr`. With `threads` = 1
    (the default) a run is bit-reproducible; None keeps torch's setting."""
    # the arguments that the returned vectors' config records
    settings = {
        k: v for k, v in locals().items() if k not in ("sentences", "vocab", "threads", "progress", "corpus_name")
    }
    for name in ("d_model", "window", "negative", "epochs", "buckets", "batch_size"):
        check_int(settings[name], name, 1)
    check_number(lr, "lr", 0, low_open=True)
    start = time.perf_counter()
    vocab, ids, sentence_ids = word2vec.encode_corpus(sentences, vocab, min_count)
    V = len(vocab)
    sub_rows, sub_offsets = subword_table(vocab.itos, buckets, min_n, max_n)
    counts = torch.bincount(ids, minlength=V)
    keep = word2vec.keep_probabilities(counts, sample)
    draw_noise = word2vec.NoiseSampler(word2vec.noise_distribution(counts))
    generator = torch.Generator().manual_seed(seed)
    # word2vec.c's initialisation: inputs uniform in ±0.5 / d_model, outputs 0
    inputs = (torch.rand(V + buckets, d_model, generator=generator) - 0.5) / d_model
    outputs = torch.zeros(V, d_model)
    history = []
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check_int(threads, "threads", 1))
    bar = progress_bar(
        total=epochs,
        disable=not progress,
        desc="fastText",
        unit="epoch",
        bar_format="{l_bar}{bar}| {n:.2f}/{total} [{elapsed}<{remaining}{postfix}]",
    )
    try:
        for epoch in range(epochs):
            batches = word2vec.epoch_batches(ids, sentence_ids, keep, window, batch_size, generator)
            total, n_total = 0.0, 0
            for i, (contexts, centres) in enumerate(batches):
                found = contexts >= 0
                words = contexts[found]  # (P,) input words
                targets = centres[:, None].expand_as(contexts)[found]  # (P,) words to predict
                noise = draw_noise((len(words), negative), generator)
                step_lr = lr - (lr - min_lr) * (epoch + i / len(batches)) / epochs
                loss = train_step(inputs, outputs, sub_rows, sub_offsets, words, targets, noise, step_lr)
                # the untrained model's loss (outputs 0: every sigmoid ½) is (1 + negative)·ln 2 a pair
                start = (1 + negative) * math.log(2) * len(words)
                total += check_finite_loss(loss, i, lr=lr, what=f"fastText (epoch {epoch + 1})", start=start)
                n_total += len(words)
                if i % 64 == 0:
                    bar.n = epoch + i / len(batches)
                    bar.set_postfix(loss=f"{total / max(n_total, 1):.3f}", lr=f"{step_lr:.4f}")
            history.append(total / max(n_total, 1))
            bar.n = epoch + 1
            bar.set_postfix(loss=f"{history[-1]:.3f}")
        used_threads = torch.get_num_threads()
    finally:
        bar.close()
        torch.set_num_threads(old_threads)
    config = {
        "model": "fasttext-skipgram",
        **settings,
        "corpus": corpus_name,
        "n_tokens": len(ids),
        "threads": used_threads,
        "train_seconds": round(time.perf_counter() - start, 1),
        "loss_per_epoch": [round(x, 4) for x in history],
    }
    return FastTextVectors(inputs[:V].clone(), inputs[V:].clone(), vocab, min_n, max_n, config)
