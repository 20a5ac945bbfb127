"""Word vectors with their vocabulary: nearest neighbours, analogies, evaluation, save and load.

Taught in notebook 02; returned by word2vec and GloVe training and by ``FastTextVectors.word_vectors``.
The evaluations follow gensim's conventions (``evaluate_word_analogies``, ``evaluate_word_pairs``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from onehot2gpt.checkpoints import CheckpointError, save_checkpoint
from onehot2gpt.utils import check_int
from onehot2gpt.vocab import Vocab


class WordVectors:
    """Word vectors (V, D) with their vocabulary: look-up, neighbours, analogies, evaluation."""

    def __init__(self, vectors: Tensor, vocab: Vocab, config: dict | None = None):
        vectors = torch.as_tensor(vectors, dtype=torch.float32)
        if vectors.dim() != 2 or vectors.shape[0] != len(vocab):
            raise ValueError(
                f"vectors must have shape (vocab size, d_model) = ({len(vocab)}, D), got "
                f"{tuple(vectors.shape)}; the vectors and vocabulary do not belong together"
            )
        self.vectors, self.vocab, self.config = vectors, vocab, dict(config or {})
        self._unit: Tensor | None = None

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"WordVectors(words={len(self)}, d_model={self.d_model})"

    def __contains__(self, word: str) -> bool:
        return word in self.vocab.stoi

    def __getitem__(self, word: str) -> Tensor:
        return self.vectors[self._id(word)]

    @property
    def d_model(self) -> int:
        """The size of each vector."""
        return self.vectors.shape[1]

    @property
    def unit_vectors(self) -> Tensor:
        """(V, D) vectors scaled to length 1 (zero vectors stay zero), so dot product = cosine."""
        if self._unit is None:
            self._unit = self.vectors / self.vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return self._unit

    def _id(self, word: str) -> int:
        if word in self.vocab.stoi:
            return self.vocab.stoi[word]
        hint = (
            f"; the vectors were trained on lower-cased text, try {word.lower()!r}"
            if isinstance(word, str) and word.lower() in self.vocab.stoi
            else ""
        )
        raise KeyError(
            f"{word!r} is not in the vocabulary ({len(self)} words); check with `{word!r} in wv` first{hint}"
        )

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words."""
        return float(self.unit_vectors[self._id(a)] @ self.unit_vectors[self._id(b)])

    def most_similar(
        self, word_or_vector: str | Tensor, k: int = 10, exclude: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """The k words with the highest cosine to a word (itself excluded) or to a vector (D,),
        leaving out the words in `exclude` (a list of words, or one word as a string); fewer when
        the vocabulary has fewer words left. A vector of zeros (no direction) or of NaN is refused."""
        check_int(k, "k", 1, fix="how many neighbours to list")
        exclude = {exclude} if isinstance(exclude, str) else set(exclude)
        if isinstance(word_or_vector, str):
            query, what = self[word_or_vector], f"the vector of {word_or_vector!r}"
            exclude.add(word_or_vector)
        else:
            query, what = torch.as_tensor(word_or_vector, dtype=torch.float32), "the query vector"
            if query.shape != (self.d_model,):
                raise ValueError(f"query vector must have shape ({self.d_model},), got {tuple(query.shape)}")
        if not bool(torch.isfinite(query).all()):
            raise ValueError(
                f"most_similar: {what} holds NaN or infinite values ({int((~torch.isfinite(query)).sum())} of "
                f"{self.d_model}), so no cosine can be computed; pass a finite vector (vectors from a diverged "
                f"training are NaN: train again with a lower learning rate)"
            )
        if not bool(query.any()):
            raise ValueError(
                f"most_similar: {what} is all zeros: it has no direction, so every word is equally near "
                f"(cosine 0); pass a non-zero vector"
            )
        sims = self.unit_vectors @ (query / query.norm().clamp_min(1e-12))  # (V,)
        if bool(sims.isnan().any()):
            bad = self.vocab.itos[int(sims.isnan().nonzero()[0])]
            raise ValueError(
                f"most_similar: the word vectors hold NaN (first at {bad!r}), so no cosine can be trusted; "
                f"train the vectors again with a lower learning rate, or load a checkpoint"
            )
        banned = sorted({self._id(w) for w in exclude if w in self})
        sims[banned] = -math.inf
        top = sims.topk(min(k, len(self) - len(banned)))
        return [(self.vocab.itos[i], round(float(s), 4)) for s, i in zip(top.values, top.indices.tolist())]

    def analogy(self, a: str, b: str, c: str, k: int = 1) -> list[tuple[str, float]]:
        """ "a is to b as c is to ?" by 3CosAdd: the k (word, cosine) pairs nearest unit(b) − unit(a)
        + unit(c), leaving out a, b and c (Mikolov et al. 2013a). A ValueError when a = b or a = c:
        the answer is then c (or b), a word the method leaves out."""
        for same, other in ((b, c), (c, b)):
            if a == same:
                raise ValueError(
                    f"analogy({a!r}, {b!r}, {c!r}): a is {same!r} too, so the answer is "
                    f"{other!r}, a query word, which 3CosAdd leaves out. Ask with a "
                    f"different from b and from c, e.g. analogy('man', 'king', 'woman')"
                )
        unit = self.unit_vectors
        query = unit[self._id(b)] - unit[self._id(a)] + unit[self._id(c)]
        return self.most_similar(query, k, exclude=(a, b, c))

    def _case_map(self, restrict_vocab: int | None, case_insensitive: bool) -> dict[str, int]:
        """Word → id over the first `restrict_vocab` words; lower-cased keys with the most frequent
        spelling winning if `case_insensitive`, like gensim's evaluate_* functions."""
        if restrict_vocab is not None:
            check_int(restrict_vocab, "restrict_vocab", 1, fix="how many of the most frequent words to search, or None")
        n = len(self) if restrict_vocab is None else min(restrict_vocab, len(self))
        words = self.vocab.itos[:n]
        if not case_insensitive:
            return {w: i for i, w in enumerate(words)}
        return {w.lower(): i for i, w in reversed(list(enumerate(words)))}

    def evaluate_analogies(
        self, questions: Iterable[Sequence[str]], restrict_vocab: int | None = 30000, case_insensitive: bool = True
    ) -> dict:
        """Accuracy on (section, a, b, c, d) analogy questions, e.g. data.read_analogies().

        As gensim's ``evaluate_word_analogies``: only the ``restrict_vocab`` most frequent words are
        searched, a question with a word outside them is skipped, and the answer is the 3CosAdd
        nearest word other than a, b, c. Returns ``{"accuracy", "n_correct", "n_used", "n_total",
        "coverage", "per_section": {section: accuracy}}``."""
        lookup = self._case_map(restrict_vocab, case_insensitive)
        norm = str.lower if case_insensitive else str
        sections, rows = [], []
        questions = list(questions)
        for q in questions:
            if len(q) != 5:
                raise ValueError(f"each question must be (section, a, b, c, d), got {q!r}")
            words = [norm(w) for w in q[1:]]
            if all(w in lookup for w in words):
                sections.append(q[0])
                rows.append([lookup[w] for w in words])
        searched = len(self) if restrict_vocab is None else min(restrict_vocab, len(self))
        unit = self.unit_vectors[:searched]  # (R, D)
        correct = torch.zeros(len(rows), dtype=torch.bool)
        ids = torch.tensor(rows, dtype=torch.long).view(-1, 4)  # (Q, 4): a, b, c, d
        for start in range(0, len(rows), 1024):
            a, b, c, d = ids[start : start + 1024].T
            sims = (unit[b] - unit[a] + unit[c]) @ unit.T  # (q, R)
            sims.scatter_(1, torch.stack([a, b, c], 1), -math.inf)
            correct[start : start + 1024] = sims.argmax(1) == d
        asked, right = Counter(sections), Counter(s for s, ok in zip(sections, correct.tolist()) if ok)
        n_used, n_correct = len(rows), int(correct.sum())
        return {
            "accuracy": n_correct / n_used if n_used else float("nan"),
            "n_correct": n_correct,
            "n_used": n_used,
            "n_total": len(questions),
            "coverage": n_used / len(questions) if questions else float("nan"),
            "per_section": {s: right[s] / n for s, n in asked.items()},
        }

    def evaluate_wordsim(self, pairs: Iterable[Sequence], case_insensitive: bool = True) -> dict:
        """Spearman correlation of cosines with human scores on (word1, word2, score) pairs,
        e.g. data.read_wordsim353(); pairs with an unknown word are skipped, as gensim does.
        Returns ``{"spearman", "pearson", "n_used", "n_total", "coverage"}``."""
        from scipy.stats import pearsonr, spearmanr

        lookup = self._case_map(None, case_insensitive)
        norm = str.lower if case_insensitive else str
        pairs = list(pairs)
        human, model = [], []
        for w1, w2, score in pairs:
            if norm(w1) in lookup and norm(w2) in lookup:
                human.append(float(score))
                model.append(float(self.unit_vectors[lookup[norm(w1)]] @ self.unit_vectors[lookup[norm(w2)]]))
        enough = len(human) >= 2
        return {
            "spearman": float(spearmanr(human, model).statistic) if enough else float("nan"),
            "pearson": float(pearsonr(human, model).statistic) if enough else float("nan"),
            "n_used": len(human),
            "n_total": len(pairs),
            "coverage": len(human) / len(pairs) if pairs else float("nan"),
        }

    # self.config fields stored outside the training record ("info") of config.json
    _SHAPE_FIELDS = ("vocab_size", "d_model", "dim", "stored_dtype")

    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint folder (:mod:`onehot2gpt.checkpoints`): ``weights.safetensors`` (the
        (V, D) matrix "vectors" in float16), ``vocab.json``, and ``config.json`` with the training
        record (self.config) and the files' sha256."""
        half = self.vectors.to(torch.float16)
        if not torch.isfinite(half).all():
            raise ValueError("some vectors overflow float16 (|x| > 65504); the training diverged")
        return save_checkpoint(
            directory,
            "word2vec",
            "WordVectors",
            {"vocab_size": len(self), "d_model": self.d_model},
            {"vectors": half},
            tokenizer=self.vocab,
            info={k: v for k, v in self.config.items() if k not in self._SHAPE_FIELDS},
            dtype=torch.float16,
        )


def word_vectors_from_checkpoint(record: dict, weights: dict, vocab: Vocab) -> WordVectors:
    """WordVectors from a checkpoint's config.json `record`, its checked `weights` ({"vectors": (V, D)})
    and its vocabulary (what :func:`onehot2gpt.checkpoints.load` calls for kind "word2vec")."""
    config = dict(record["config"])
    if "dim" in config and "d_model" not in config:  # checkpoints saved before the rename say "dim"
        config["d_model"] = config.pop("dim")
    shape = (config.get("vocab_size"), config.get("d_model"))
    if set(weights) != {"vectors"} or tuple(weights["vectors"].shape) != shape:
        found = {k: tuple(v.shape) for k, v in weights.items()}
        raise CheckpointError(
            f"the weights in weights.safetensors do not match config.json: expected one "
            f"tensor 'vectors' of shape (vocab_size, d_model) = {shape}, found {found}"
        )
    info = {("d_model" if k == "dim" else k): v for k, v in record["info"].items()}  # training settings, renamed too
    return WordVectors(
        weights["vectors"].float(), vocab, {**info, **config, "stored_dtype": record.get("dtype", "float16")}
    )
