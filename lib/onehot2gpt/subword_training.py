"""Training a WordPiece vocabulary (notebook 07, through :meth:`WordPieceTokenizer.train
<onehot2gpt.subword.WordPieceTokenizer.train>`; Wu et al. 2016; Schuster & Nakajima 2012)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence

from .subword import PREFIX, SPECIALS, pretokenize
from .utils import check_choice, check_int


def _merge_name(a: str, b: str) -> str:
    """("un", "##aff") → "unaff"; ("##g", "##s") → "##gs"."""
    return a + b[len(PREFIX) :]


def _pairs(pieces: Sequence[str]) -> list[tuple[str, str]]:
    return list(zip(pieces, pieces[1:]))


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    lower: bool = True,
    specials: Sequence[str] = SPECIALS,
    score: str = "wordpiece",
) -> list[str]:
    """Learn a WordPiece vocabulary of at most `vocab_size` tokens from an iterable of texts.

    Every word (from :func:`pretokenize`) starts as characters, "hugs" → ``h ##u ##g ##s``. Each
    step merges the adjacent pair with the highest score ``count(ab) / (count(a) * count(b))``
    (ties: the alphabetically first pair); pairs seen fewer than `min_frequency` times are never
    merged. This score favours pairs of rare pieces; ``score="frequency"`` merges the most frequent
    pair instead (as BPE and Hugging Face's ``WordPieceTrainer`` do): fewer tokens per word.

    Returns `specials` (so ``[PAD]`` = 0), then the characters (word starts, then ``##``
    continuations, each sorted), then the merged pieces in the order learned.

    Example (the Hugging Face course's corpus; its first merge is "##g" + "##s"):
        >>> corpus = ["hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5]
        >>> train_wordpiece(corpus, vocab_size=13)[5:]
        ['b', 'h', 'p', '##g', '##n', '##s', '##u', '##gs']
    """
    if isinstance(texts, str):
        raise TypeError(
            "train_wordpiece takes an iterable of texts, e.g. a list of lines, not one string; wrap it as [text]"
        )
    check_choice(score, "score", ("wordpiece", "frequency"))
    check_int(min_frequency, "min_frequency", 1, fix="pairs seen fewer times are never merged")
    word_counts: Counter[str] = Counter()
    for text in texts:
        word_counts.update(pretokenize(text, lower=lower))
    if not word_counts:
        raise ValueError("cannot train on empty text: give at least one word")

    # Work on distinct words: each is a list of pieces with a frequency.
    words = [[w[0]] + [PREFIX + ch for ch in w[1:]] for w in word_counts]
    freqs = list(word_counts.values())
    alphabet = sorted(
        {p for pieces in words for p in pieces} - set(specials), key=lambda p: (p.startswith(PREFIX), p)
    )  # "b", "h", ..., "##g", "##n", ...
    vocab = list(specials) + alphabet
    if vocab_size < len(vocab):
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than the {len(specials)} specials "
            f"plus the {len(alphabet)} characters of the corpus; ask for at least "
            f"{len(vocab)}"
        )
    known = set(vocab)

    # Counts, and indexes so that a merge only revisits the words and pairs it changes.
    piece_count: Counter[str] = Counter()
    pair_count: Counter[tuple[str, str]] = Counter()
    words_with: dict[tuple[str, str], set[int]] = {}  # pair → ids of words that contain it
    pairs_with: dict[str, set[tuple[str, str]]] = {}  # piece → pairs it is part of
    for i, (pieces, f) in enumerate(zip(words, freqs)):
        for p in pieces:
            piece_count[p] += f
        for pair in _pairs(pieces):
            pair_count[pair] += f
            words_with.setdefault(pair, set()).add(i)
    for pair in pair_count:
        pairs_with.setdefault(pair[0], set()).add(pair)
        pairs_with.setdefault(pair[1], set()).add(pair)

    def pair_score(pair: tuple[str, str]) -> float:
        if score == "frequency":
            return pair_count[pair]
        return pair_count[pair] / (piece_count[pair[0]] * piece_count[pair[1]])

    # A max-heap of (-score, pair). Scores change as counts change; rather than updating entries
    # we push the new score and skip stale entries when they come to the top.
    heap = [(-pair_score(pair), pair) for pair, c in pair_count.items() if c >= min_frequency]
    heapq.heapify(heap)

    while len(vocab) < vocab_size and heap:
        neg_score, pair = heapq.heappop(heap)
        if pair_count[pair] < min_frequency or -neg_score != pair_score(pair):
            continue  # stale: merged already, or its score has changed (a newer entry exists)
        a, b = pair
        merged = _merge_name(a, b)
        if merged not in known:
            vocab.append(merged)
            known.add(merged)

        touched: set[tuple[str, str]] = set()
        for i in words_with.pop(pair):
            old, f = words[i], freqs[i]
            new, j = [], 0
            while j < len(old):  # left to right: "##a ##a ##a" → "##aa ##a"
                if j + 1 < len(old) and old[j] == a and old[j + 1] == b:
                    new.append(merged)
                    j += 2
                else:
                    new.append(old[j])
                    j += 1
            words[i] = new
            for p in old:
                piece_count[p] -= f
            for p in new:
                piece_count[p] += f
            for q in _pairs(old):
                pair_count[q] -= f
                touched.add(q)
            for q in _pairs(new):
                pair_count[q] += f
                touched.add(q)
                words_with.setdefault(q, set()).add(i)
                pairs_with.setdefault(q[0], set()).add(q)
                pairs_with.setdefault(q[1], set()).add(q)
            for q in set(_pairs(old)) - set(_pairs(new)):
                if q != pair:
                    words_with[q].discard(i)
        for q in touched:
            if pair_count[q] <= 0:  # gone from every word: forget it
                del pair_count[q]
                words_with.pop(q, None)
                pairs_with[q[0]].discard(q)
                pairs_with[q[1]].discard(q)
        if score == "wordpiece":  # a, b and merged changed counts, so all their pairs' scores did
            touched = touched.union(*(pairs_with.get(p, ()) for p in (a, b, merged)))
        for q in touched:
            if pair_count.get(q, 0) >= min_frequency:
                heapq.heappush(heap, (-pair_score(q), q))
    return vocab
