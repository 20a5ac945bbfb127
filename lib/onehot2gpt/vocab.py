"""Tokens, vocabularies and one-hot vectors.

Taught in notebook 01. A :class:`Vocab` maps tokens to integer ids with a frequency cut-off and
the four special tokens every later model uses; :func:`one_hot` turns ids into 1-of-N vectors and
:func:`bag_of_words` sums them. Like every tokenizer of the course it has ``encode(text) -> ids``
and ``decode(ids) -> text``, and it also maps token lists (``encode_tokens``, ``decode_tokens``).

Example:
    >>> vocab = Vocab.build([tokenize_words("the cat sat on the mat")])
    >>> vocab.encode_tokens(["the", "dog"])          # "dog" was never seen
    [4, 1]
    >>> vocab.decode_tokens([4, 1])
    ['the', '<unk>']
    >>> vocab.encode("The cat sat.")                 # text: split into words first
    [4, 5, 8, 1]
    >>> vocab.decode([4, 5, 8])
    'the cat sat'
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from .utils import as_ids, check_choice, check_int, check_text

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)

# Letters/digits (with inner apostrophes or hyphens: "don't", "well-known"), any single CJK
# character, or any other single non-space symbol (punctuation).
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+(?:['’\-][^\W{_CJK}]+)*|[^\w\s]", re.UNICODE)
_JOIN = "join a list of tokens with ' '.join(tokens) first"


def _drop_invisible(text: str) -> str:
    """`text` without control and format characters (Unicode Cc, Cf: NUL, ESC, zero-width space
    and joiners, soft hyphen, byte-order mark…), which are never tokens; tab, newline and carriage
    return stay (they are spaces). BERT's tokenizer drops the same (:mod:`onehot2gpt.subword`)."""
    invisible = [c for c in set(text) if c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")]
    return text.translate(dict.fromkeys(map(ord, invisible))) if invisible else text


def tokenize_words(text: str, lower: bool = True) -> list[str]:
    """Split text into words and punctuation marks; every Chinese character is its own token.
    Control and zero-width characters are dropped (a word they split stays one word).

    Example:
        >>> tokenize_words("Don't panic, it's 42!")
        ["don't", 'panic', ',', "it's", '42', '!']
    """
    check_text(text, "text", empty_ok=True, fix=_JOIN)
    text = _drop_invisible(unicodedata.normalize("NFC", text))
    if lower:
        text = text.lower()
    return _WORD_RE.findall(text)


def tokenize_chars(text: str, keep_spaces: bool = True) -> list[str]:
    """Split text into characters (Unicode code points after NFC normalisation); control and
    zero-width characters are dropped, tab and newline kept (as spaces).

    Example:
        >>> tokenize_chars("潮水 退了", keep_spaces=False)
        ['潮', '水', '退', '了']
    """
    check_text(text, "text", empty_ok=True, fix=_JOIN)
    chars = list(_drop_invisible(unicodedata.normalize("NFC", text)))
    return chars if keep_spaces else [c for c in chars if not c.isspace()]


SPLITS = ("words", "chars")  # how Vocab.encode splits a text: tokenize_words, or into characters


class Vocab:
    """A two-way map between tokens and ids. Specials come first: <pad>=0, <unk>=1, <bos>=2, <eos>=3.

    `split` says how :meth:`encode` cuts a text into tokens: ``"words"`` (:func:`tokenize_words`)
    or ``"chars"`` (every character); by default ``"chars"`` when every token is one character,
    else ``"words"``."""

    def __init__(
        self,
        tokens: Sequence[str],
        counts: dict[str, int] | None = None,
        specials: Sequence[str] = SPECIALS,
        split: str | None = None,
    ):
        if split is not None:
            check_choice(split, "split", SPLITS, fix="or None to infer it from the tokens")
        self.specials = tuple(specials)
        tokens = tokens if isinstance(tokens, str) else list(tokens)  # an iterator is read once
        if isinstance(tokens, str) or not all(isinstance(t, str) for t in [*tokens, *self.specials]):
            raise TypeError(
                f"tokens and specials must be lists of strings, got tokens={tokens!r:.60}, "
                f"specials={self.specials!r:.60}; for a text's characters pass list(text)"
            )
        self.itos: list[str] = list(self.specials) + [t for t in tokens if t not in self.specials]
        if len(set(self.itos)) != len(self.itos):
            raise ValueError("tokens must be unique; pass each token once")
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        self.counts: dict[str, int] = dict(counts or {})
        inferred = "chars" if all(len(t) == 1 for t in self.itos[len(self.specials) :]) else "words"
        self.split: str = split or inferred

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        min_freq: int = 1,
        max_size: int | None = None,
        specials: Sequence[str] = SPECIALS,
    ) -> Vocab:
        """Count tokens in an iterable of token lists; keep those seen at least `min_freq` times,
        most frequent first (ties alphabetical), at most `max_size` of them (specials not counted)."""
        check_int(min_freq, "min_freq", 1)
        if max_size is not None:
            check_int(max_size, "max_size", 0, fix="the most tokens to keep besides the specials, or None for all")
        if isinstance(token_lists, str):
            raise TypeError(
                "Vocab.build takes a list of token lists, e.g. [tokenize_words(line) for line in lines], not a string"
            )
        counter: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError(
                    "each item must be a list of tokens, not a string; "
                    "tokenize it first with tokenize_words or tokenize_chars"
                )
            counter.update(tokens)
        if not counter:
            raise ValueError("cannot build a vocabulary from empty text: give at least one token")
        kept = sorted(
            (t for t, c in counter.items() if c >= min_freq and t not in specials), key=lambda t: (-counter[t], t)
        )
        if max_size is not None:
            kept = kept[:max_size]
        return cls(kept, counts={t: counter[t] for t in kept}, specials=specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        return self.lookup(token)

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, specials={list(self.specials)})"

    @property
    def unk_id(self) -> int | None:
        return self.stoi.get(UNK)

    @property
    def pad_id(self) -> int | None:
        return self.stoi.get(PAD)

    def lookup(self, token: str, strict: bool = False) -> int:
        """The id of `token`; unseen tokens get the <unk> id unless `strict` (then KeyError)."""
        if token in self.stoi:
            return self.stoi[token]
        check_text(token, "token", empty_ok=True, fix="to turn ids into tokens use vocab.decode_tokens")
        if strict or self.unk_id is None:
            raise KeyError(
                f"{token!r} is not in the vocabulary ({len(self)} tokens); "
                "build the vocabulary with it, lower min_freq, or map it to <unk>"
            )
        return self.unk_id

    def encode_tokens(self, tokens: Sequence[str], strict: bool = False) -> list[int]:
        """Token list → id list (unseen tokens → <unk>, or a KeyError if `strict`)."""
        if isinstance(tokens, str):
            raise TypeError(
                "encode_tokens takes a list of tokens, e.g. vocab.encode_tokens(tokenize_words(text)); "
                "for a text use vocab.encode(text)"
            )
        return [self.lookup(t, strict=strict) for t in tokens]

    def decode_tokens(self, ids: Iterable[int]) -> list[str]:
        """Id list (or 1-D tensor) → token list."""
        ids = as_ids(
            list(ids) if not isinstance(ids, (torch.Tensor, list, tuple)) else ids, len(self), dims=1, allow_empty=True
        )
        return [self.itos[i] for i in ids.tolist()]

    def tokenize(self, text: str) -> list[str]:
        """A text → its tokens, split as :attr:`split` says (words, lower-cased; or characters)."""
        check_text(text, "text", empty_ok=True, fix="for a list of tokens use vocab.encode_tokens")
        if not text:
            raise ValueError("text is empty: give at least one character to encode")
        return tokenize_words(text) if self.split == "words" else tokenize_chars(text)

    def encode(self, text: str, strict: bool = False) -> list[int]:
        """A text → ids: :meth:`tokenize`, then :meth:`encode_tokens` (unseen tokens → <unk>, or a
        KeyError if `strict`)."""
        return self.encode_tokens(self.tokenize(text), strict=strict)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids (list or 1-D tensor) → text: the tokens joined by spaces (words) or nothing (chars)."""
        return (" " if self.split == "words" else "").join(self.decode_tokens(ids))

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as JSON (tokens in id order, specials, counts, split)."""
        data = {"specials": list(self.specials), "itos": self.itos, "counts": self.counts, "split": self.split}
        Path(path).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        specials = data["specials"]
        return cls(data["itos"][len(specials) :], counts=data.get("counts"), specials=specials, split=data.get("split"))


def one_hot(ids, vocab_size: int) -> torch.Tensor:
    """Ids of shape (T,) or (B, T) → float one-hot vectors of shape (..., vocab_size).

    Example:
        >>> one_hot([2, 0], 3)
        tensor([[0., 0., 1.],
                [1., 0., 0.]])
    """
    check_int(vocab_size, "vocab_size", 1)
    ids = as_ids(ids, vocab_size, dims=(1, 2), allow_empty=True)
    out = torch.zeros(*ids.shape, vocab_size)
    return out.scatter_(-1, ids.unsqueeze(-1), 1.0)


def bag_of_words(ids, vocab_size: int) -> torch.Tensor:
    """Ids of shape (T,) → counts of shape (vocab_size,): the sum of the one-hot vectors; a batch
    (B, T) → one bag per row, (B, vocab_size).

    Example:
        >>> bag_of_words([1, 1, 2], 4)
        tensor([0., 2., 1., 0.])
        >>> bag_of_words([[1, 1], [2, 3]], 4)
        tensor([[0., 2., 0., 0.],
                [0., 0., 1., 1.]])
    """
    return one_hot(ids, vocab_size).sum(-2)  # (…, T, V) → (…, V): sum over the tokens of each row


def cosine_similarity(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine similarity along the last dimension: (..., D), (..., D) → (...)."""
    a, b = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
    for name, v in (("a", a), ("b", b)):
        if not bool(torch.isfinite(v).all()):
            raise ValueError(
                f"cosine_similarity: {name} holds NaN or infinite values ({int((~torch.isfinite(v)).sum())} of "
                f"{v.numel()}); no angle can be measured: pass finite vectors"
            )
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)
