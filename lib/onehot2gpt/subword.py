"""WordPiece: BERT's subword tokenizer (notebook 07; Devlin et al. 2018, Wu et al. 2016).

A rare word is split into pieces the vocabulary knows ("unaffable" → ``un ##aff ##able``), so
almost nothing is unknown. :func:`pretokenize` splits text into words and punctuation exactly as
BERT's ``BasicTokenizer``; :class:`WordPieceTokenizer` splits each word greedily, longest piece
first (``##`` marks a piece that continues a word); :meth:`WordPieceTokenizer.train` learns a
vocabulary (:mod:`onehot2gpt.subword_training`). A BERT ``vocab.txt`` loads with
:meth:`WordPieceTokenizer.load` and gives the same ids as Hugging Face's ``BertTokenizerFast``.

Example:
    >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                           "un", "##aff", "##able", "!"])
    >>> tok.tokenize("Unaffable!")
    ['un', '##aff', '##able', '!']
    >>> tok.encode("Unaffable!")
    [2, 5, 6, 7, 8, 3]
    >>> tok.decode([2, 5, 6, 7, 8, 3])
    'unaffable!'
    >>> tok("Unaffable!")["token_type_ids"]          # Hugging Face's call: every list
    [0, 0, 0, 0, 0, 0]
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch

from .training import pad_batch
from .utils import InvalidIds, as_ids, check_int, check_text

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIALS = (PAD, UNK, CLS, SEP, MASK)
PREFIX = "##"  # marks a piece that continues a word: "un", "##aff", "##able"
_TOKENS = "a token is a str, e.g. 'bank'; to turn ids into tokens use convert_ids_to_tokens"

# -------------------------------------------------------------------------- pre-tokenisation
# BERT's character classes (Hugging Face tokenization_bert.py and tokenizers' bert normalizer).


def _is_control(ch: str) -> bool:
    """Control, format, private-use or surrogate (Cc, Cf, Co, Cs); tab and newlines are spaces.
    Unassigned code points (Cn) are kept, as Hugging Face's fast tokenizer keeps them."""
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_cjk(ch: str) -> bool:
    """A CJK ideograph (the Unicode blocks BERT's ``_is_chinese_char`` lists). Hiragana, Katakana
    and Hangul are not: those scripts put spaces between words."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def is_punctuation(ch: str) -> bool:
    """Any ASCII symbol that is not a letter or digit (``$``, ``^``, ``+`` too), or category P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


class _CharMap:
    """``"".join(rule(ch) for ch in text)`` as ``str.translate``: each distinct character is
    classified once (a corpus has a few thousand), then the table does the work."""

    def __init__(self, rule: Callable[[str], str]):
        self.rule = rule
        self.table: dict[int, str] = {}
        self.seen: set[str] = set()

    def __call__(self, text: str) -> str:
        for ch in set(text) - self.seen:
            out = self.rule(ch)
            if out != ch:
                self.table[ord(ch)] = out
            self.seen.add(ch)
        return text.translate(self.table)


def _clean_char(ch: str) -> str:
    """1. drop NUL, U+FFFD and control characters; every whitespace → " "; spaces around CJK ideographs."""
    if ord(ch) in (0, 0xFFFD) or _is_control(ch):
        return ""
    return " " if _is_whitespace(ch) else f" {ch} " if _is_cjk(ch) else ch


_clean = _CharMap(_clean_char)
# 2. after NFD ("é" → "e" + U+0301): drop the combining marks (category Mn)
_drop_marks = _CharMap(lambda ch: "" if unicodedata.category(ch) == "Mn" else ch)
# 3. spaces around every punctuation mark, so that str.split() splits there too
_space_punct = _CharMap(lambda ch: f" {ch} " if is_punctuation(ch) else ch)


def pretokenize(text: str, lower: bool = True, strip_accents: bool | None = None) -> list[str]:
    """Text → words and punctuation marks, as BERT's BasicTokenizer splits them.

    Removes control characters, puts spaces around Chinese/Japanese ideographs (each is a word),
    lower-cases and strips accents (``strip_accents=None`` means: strip when ``lower``), then
    splits on whitespace and around every punctuation mark.

    Example:
        >>> pretokenize("Héllo, wörld! 你好 don't")
        ['hello', ',', 'world', '!', '你', '好', 'don', "'", 't']
    """
    check_text(text, "text", empty_ok=True, fix=_ONE_TEXT)
    text = _clean(text)
    if strip_accents or (strip_accents is None and lower):
        text = _drop_marks(unicodedata.normalize("NFD", text))
    if lower:
        # Per character, as BERT's fast tokenizer does: str.lower() alone would turn a
        # word-final capital sigma into "ς" rather than "σ".
        text = text.replace("\u03a3", "\u03c3").lower()
    return _space_punct(text).split()


_ONE_TEXT = "one text as a string; for several texts use encode_batch, for a list of words encode_words"


# ------------------------------------------------------------------------------- tokenizer


class WordPieceTokenizer:
    """BERT's tokenizer: :func:`pretokenize`, then greedy longest-match-first WordPiece per word.

    `vocab` is the token list in id order (a BERT ``vocab.txt``). The special tokens among
    ``[PAD] [UNK] [CLS] [SEP] [MASK]`` that the vocabulary has are matched as they are in the
    text ("the [MASK] sat"), like Hugging Face does, and are skipped by ``decode``.
    """

    def __init__(self, vocab: Sequence[str], lower: bool = True, unk_token: str = UNK, max_chars_per_word: int = 100):
        if isinstance(vocab, str) or not all(isinstance(t, str) and t for t in vocab):
            raise TypeError(
                "vocab must be a list of non-empty token strings in id order; "
                "to read a vocab.txt use WordPieceTokenizer.load(path)"
            )
        self.itos: list[str] = list(vocab)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dups = sorted(t for t, c in Counter(self.itos).items() if c > 1)[:5]
            raise ValueError(f"vocab has repeated tokens {dups}; each token must appear once")
        if unk_token not in self.stoi:
            raise ValueError(
                f"the unknown token {unk_token!r} is not in the vocabulary; add it "
                "(train_wordpiece puts [UNK] at id 1) or pass unk_token=..."
            )
        self.lower = lower
        self.unk_token = unk_token
        self.max_chars_per_word = check_int(
            max_chars_per_word, "max_chars_per_word", 1, fix="a longer word becomes [UNK] (BERT: 100)"
        )
        self.special_tokens = [t for t in SPECIALS if t in self.stoi]
        self._special_ids = {self.stoi[t] for t in self.special_tokens}
        # Longest first, so that a special token containing another one is matched whole.
        alternatives = "|".join(map(re.escape, sorted(self.special_tokens, key=len, reverse=True)))
        self._special_re = re.compile(f"({alternatives})")
        self._longest = max(map(len, self.itos))  # no piece can be longer: bounds the search
        self._cache: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ construction, files

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, **options) -> WordPieceTokenizer:
        """A tokenizer of the vocabulary :func:`~onehot2gpt.subword_training.train_wordpiece` learns
        from `texts` (`options`: its ``min_frequency``, ``lower``, ``specials``, ``score``); it
        lower-cases as the vocabulary was trained."""
        from .subword_training import train_wordpiece

        return cls(train_wordpiece(texts, vocab_size, **options), lower=options.get("lower", True))

    @classmethod
    def load(cls, path: str | Path, **kwargs) -> WordPieceTokenizer:
        """Read a BERT ``vocab.txt``: one token per line, the id is the line number (from 0)."""
        path = Path(path)
        if path.is_dir():
            path = path / "vocab.txt"
        with open(path, encoding="utf-8") as fh:
            vocab = [line.rstrip("\n") for line in fh]
        return cls(vocab, **kwargs)

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as a BERT ``vocab.txt`` (a directory gets ``vocab.txt`` inside)."""
        path = Path(path)
        if path.is_dir():
            path = path / "vocab.txt"
        bad = [t for t in self.itos if "\n" in t or "\r" in t]
        if bad:
            raise ValueError(f"tokens with line breaks cannot be saved one per line: {bad[:3]}")
        path.write_text("".join(t + "\n" for t in self.itos), encoding="utf-8")

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab_size={len(self)}, lower={self.lower})"

    def _special_id(self, token: str) -> int:
        if token not in self.stoi:
            raise KeyError(
                f"this vocabulary has no {token} token; train with it in `specials` "
                f"or add it to vocab.txt (BERT's order: {', '.join(SPECIALS)})"
            )
        return self.stoi[token]

    @property
    def pad_id(self) -> int:
        return self._special_id(PAD)

    @property
    def unk_id(self) -> int:
        return self.stoi[self.unk_token]

    @property
    def cls_id(self) -> int:
        return self._special_id(CLS)

    @property
    def sep_id(self) -> int:
        return self._special_id(SEP)

    @property
    def mask_id(self) -> int:
        return self._special_id(MASK)

    # ------------------------------------------------------------------------- tokenising

    def wordpiece(self, word: str) -> list[str]:
        """One pre-tokenised word → its pieces, longest match first ("unaffable" → ``un ##aff
        ##able`` in this module's example); ``[UNK]`` if impossible."""
        return list(self._pieces(check_text(word, "word", empty_ok=True, fix="one word; for a text use tokenize")))

    def _pieces(self, word: str) -> tuple[str, ...]:
        """:meth:`wordpiece`, remembering the answer (a corpus repeats its words)."""
        if word in self._cache:
            return self._cache[word]
        if len(word) > self.max_chars_per_word:
            return (self.unk_token,)
        pieces, start = [], 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            while end > start:  # shrink from the right until the piece is in the vocabulary
                piece = word[start:end] if start == 0 else PREFIX + word[start:end]
                if piece in self.stoi:
                    break
                end -= 1
            else:
                pieces = [self.unk_token]  # no piece fits here: the whole word is unknown
                break
            pieces.append(piece)
            start = end
        if len(self._cache) > 200_000:
            self._cache.clear()
        self._cache[word] = tuple(pieces)
        return self._cache[word]

    def tokenize(self, text: str) -> list[str]:
        """Text → WordPiece tokens (strings), as in this module's example."""
        check_text(text, "text", empty_ok=True, fix=_ONE_TEXT)
        tokens: list[str] = []
        # re.split with a group keeps the special tokens: odd positions hold them.
        parts = self._special_re.split(text) if self.special_tokens else [text]
        for k, part in enumerate(parts):
            if k % 2:
                tokens.append(part)
            else:
                for word in pretokenize(part, lower=self.lower):
                    tokens.extend(self._pieces(word))
        return tokens

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        """Token (or list of tokens) → id(s); tokens not in the vocabulary get ``unk_id``."""
        if isinstance(tokens, str) or not hasattr(tokens, "__iter__"):
            return self.stoi.get(check_text(tokens, "tokens", empty_ok=True, fix=_TOKENS), self.unk_id)
        return [
            self.stoi.get(t if isinstance(t, str) else check_text(t, "each token", fix=_TOKENS), self.unk_id)
            for t in tokens
        ]

    def convert_ids_to_tokens(self, ids) -> str | list[str]:
        """Id (or list / 1-D tensor of ids) → token(s)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if not hasattr(ids, "__iter__"):
            return self._token(ids)
        return [self._token(i) for i in ids]

    def _token(self, i: int) -> str:
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise InvalidIds(f"ids holds {type(i).__name__} {i!r}: token ids are ints (a float is never rounded)")
        if not 0 <= int(i) < len(self):
            raise IndexError(
                f"id {int(i)} is outside the vocabulary (0..{len(self) - 1}); "
                "decode with the tokenizer that encoded the ids"
            )
        return self.itos[int(i)]

    # ------------------------------------------------------------------------- encoding

    def encode(self, text: str, text_pair: str | None = None, **options) -> list[int]:
        """Text (and optional second text) → its ids, ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``
        (Hugging Face's ``tokenizer.encode``). `options` are those of calling the tokenizer
        (``add_special_tokens``, ``max_len``, ``truncation``), which also gives the token types and
        the attention mask. An empty `text` is a ValueError.
        """
        check_text(text, "text", fix=_ONE_TEXT)
        return self(text, text_pair, **options)["input_ids"]

    def __call__(
        self,
        text: str,
        text_pair: str | None = None,
        add_special_tokens: bool = True,
        max_len: int | None = None,
        truncation: bool = False,
    ) -> dict[str, list[int]]:
        """Text (and optional second text) → ``input_ids``, ``token_type_ids``,
        ``attention_mask``, each a list of T ints (like calling a Hugging Face tokenizer).

        With special tokens: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``; token type 0 up to
        and including the first ``[SEP]``, 1 for B and its ``[SEP]``. A result longer than
        `max_len` is an error unless ``truncation=True``, which cuts the longer text first.
        An empty `text_pair` ("") is treated as None, as Hugging Face does. In the example
        "able" is unknown (id 1): the vocabulary has only "##able", which continues a word.

        Example:
            >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "!"])
            >>> enc = tok("un", "able")
            >>> enc["input_ids"], enc["token_type_ids"]
            ([2, 5, 3, 1, 3], [0, 0, 0, 1, 1])
        """
        check_text(text, "text", empty_ok=True, fix=_ONE_TEXT)
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None
        if text_pair is not None:
            check_text(text_pair, "text_pair", empty_ok=True, fix=_ONE_TEXT)
        if text_pair:  # "" counts as no second text, as in Hugging Face ("  " does not)
            ids_b = self.convert_tokens_to_ids(self.tokenize(text_pair))
        ids_a, ids_b = self._fit(ids_a, ids_b, add_special_tokens, max_len, truncation)
        return self._assemble(ids_a, ids_b, add_special_tokens)

    def _fit(
        self, ids_a: list[int], ids_b: list[int] | None, add_special_tokens: bool, max_len: int | None, truncation: bool
    ) -> tuple[list[int], list[int] | None]:
        """Check the length against `max_len`, truncating (Hugging Face's "longest_first")."""
        if max_len is not None:
            check_int(max_len, "max_len", 1, fix="the longest encoding allowed, in tokens (512 for BERT)")
        n_special = (2 if ids_b is None else 3) if add_special_tokens else 0
        total = len(ids_a) + (len(ids_b) if ids_b is not None else 0) + n_special
        if truncation and max_len is None:
            raise ValueError("truncation=True needs max_len, e.g. max_len=512 for BERT")
        if max_len is None or total <= max_len:
            return ids_a, ids_b
        if not truncation:
            raise ValueError(
                f"the encoding has {total} tokens but max_len is {max_len}; "
                "pass truncation=True to cut it to fit, or split the text"
            )
        budget = max_len - n_special
        if budget < 0:
            raise ValueError(f"max_len={max_len} leaves no room: the special tokens alone take {n_special}")
        if ids_b is None:
            return ids_a[:budget], None
        n_a, n_b = longest_first(len(ids_a), len(ids_b), budget)
        return ids_a[:n_a], ids_b[:n_b]

    def _assemble(self, ids_a: list[int], ids_b: list[int] | None, add_special_tokens: bool) -> dict[str, list[int]]:
        if add_special_tokens:
            ids_a = [self.cls_id] + ids_a + [self.sep_id]
            if ids_b is not None:
                ids_b = ids_b + [self.sep_id]
        ids_b = ids_b or []
        input_ids = ids_a + ids_b
        return {
            "input_ids": input_ids,
            "token_type_ids": [0] * len(ids_a) + [1] * len(ids_b),
            "attention_mask": [1] * len(input_ids),
        }

    def encode_words(
        self, words: Sequence[str], max_len: int | None = None, truncation: bool = False
    ) -> dict[str, list]:
        """A list of words (e.g. one sentence of a tagging data set) → ``encode``'s lists plus
        ``word_index``: for each token the index of the word it came from, None for specials.

        Label a word by its first piece: the positions where ``word_index`` changes value.

        Example:
            >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "!"])
            >>> tok.encode_words(["Unaffable", "!"])["word_index"]
            [None, 0, 0, 0, 1, None]
        """
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise TypeError(
                "encode_words takes a list of words (strings), e.g. text.split(); for a whole string use encode"
            )
        ids, word_index = [], []
        for k, word in enumerate(words):
            pieces = self.convert_tokens_to_ids(self.tokenize(word))
            ids += pieces
            word_index += [k] * len(pieces)
        ids, _ = self._fit(ids, None, True, max_len, truncation)
        out = self._assemble(ids, None, True)
        out["word_index"] = [None] + word_index[: len(ids)] + [None]
        return out

    def encode_batch(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        max_len: int | None = None,
        truncation: bool = False,
    ) -> dict:
        """B texts (and optional B second texts) → LongTensors of shape (B, T), padded on the
        right with ``pad_id`` to the longest; ``attention_mask`` is 0 at padding."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of texts; for one text use encode")
        if not texts:
            raise ValueError("encode_batch needs at least one text")
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(text_pairs)} text_pairs; pass one pair per text")
        pairs = text_pairs if text_pairs is not None else [None] * len(texts)
        rows = [self(a, b, max_len=max_len, truncation=truncation) for a, b in zip(texts, pairs)]
        pad = {"input_ids": self.pad_id, "token_type_ids": 0, "attention_mask": 0}
        return {key: pad_batch([r[key] for r in rows], value) for key, value in pad.items()}  # (B, T) each

    # ------------------------------------------------------------------------- decoding

    def decode(self, ids, skip_special_tokens: bool = True, clean_up_spaces: bool = True) -> str:
        """Ids (list or 1-D tensor) → text: ``##`` pieces join the piece before them.

        Like Hugging Face's WordPiece decoder, ``clean_up_spaces`` removes the space before
        ``. , ! ?``; lower-casing, accents and the spaces around other punctuation are lost.
        """
        ids = ids if isinstance(ids, (torch.Tensor, list, tuple)) else list(ids)
        ids = as_ids(ids, len(self.itos), dims=1, allow_empty=True).tolist()
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._special_ids]
        out = []
        for k, token in enumerate(self.convert_ids_to_tokens(ids)):
            if k > 0:  # the first token keeps a "##", as in Hugging Face
                token = token[len(PREFIX) :] if token.startswith(PREFIX) else " " + token
            out.append(_clean_up_spaces(token) if clean_up_spaces else token)
        return "".join(out)


def longest_first(n_a: int, n_b: int, budget: int) -> tuple[int, int]:
    """How many tokens of each text to keep so that ``n_a + n_b <= budget``: shorten the longer
    text, down to the length of the shorter if need be, then both equally (the longer text, or
    the second on a tie, keeps the odd token). The same lengths as Hugging Face's tokenizers.

    Example:
        >>> longest_first(6, 4, 7)
        (4, 3)
    """
    check_int(budget, "budget", 0, fix="the number of tokens both texts may keep together")
    if n_a + n_b <= budget:
        return n_a, n_b
    short = min(n_a, n_b, budget // 2)  # the shorter text keeps all it has, up to half the budget
    return (short, budget - short) if n_a <= n_b else (budget - short, short)


_CLEAN_UPS = [
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
]


def _clean_up_spaces(token: str) -> str:
    """Hugging Face's clean-up, applied per token (so in effect only to `` .``, `` ,`` ...)."""
    for old, new in _CLEAN_UPS:
        token = token.replace(old, new)
    return token
