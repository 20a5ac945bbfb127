"""GPT-1's input transformations (Radford et al., 2018, §3.3 and figure 1): every task as token
rows ``<start> … <extract>``, and texts and labels as the tensors :mod:`onehot2gpt.gpt_tasks`
fine-tunes on. Notebook 09 reads these names from :mod:`onehot2gpt.gpt_tasks`, which offers them too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from numbers import Integral

import torch

from .subword import longest_first
from .utils import check_int

GPT1_SPECIALS = ("<start>", "<delim>", "<extract>")
START, DELIM, EXTRACT = GPT1_SPECIALS


def _is_id(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _tokens(seq, specials: Sequence, what: str) -> list:
    """A token list (strings) or id list as a list, of the same kind as `specials` and free of them."""
    if isinstance(seq, str):
        raise TypeError(f"{what} must be a list of tokens or ids, not a string: tokenize it first")
    if not hasattr(seq, "__iter__"):
        raise TypeError(f"{what} must be a list of tokens or ids, got {type(seq).__name__} {seq!r}")
    seq = seq.tolist() if isinstance(seq, torch.Tensor) else list(seq)
    kind, same = ("ids", _is_id) if _is_id(specials[0]) else ("strings", lambda t: isinstance(t, str))
    if not all(map(same, specials)):
        raise TypeError(f"the special tokens {list(specials)} must all be strings or all be ids")
    wrong = [t for t in seq if not same(t)]
    if wrong:
        raise TypeError(
            f"{what} holds {wrong[0]!r} but the special tokens {list(specials)} are {kind}: "
            f"give tokens and specials of one kind (for ids pass the specials' ids, "
            f"e.g. start=vocab['<start>'])"
        )
    if len(set(specials)) != len(specials):
        raise ValueError(f"the special tokens {list(specials)} must be distinct")
    inside = sorted({repr(t) for t in seq if t in set(specials)})
    if inside:
        raise ValueError(
            f"{what} already holds the special token(s) {', '.join(inside)}: pass the "
            f"bare text (or the special's id collides with an ordinary token)"
        )
    return seq


def classification_input(text, start=START, extract=EXTRACT) -> list:
    """Text classification: ``[start] text [extract]``; tokens (strings) or ids → a list of the same.

    Example:
        >>> classification_input(["a", "fine", "film"])
        ['<start>', 'a', 'fine', 'film', '<extract>']
        >>> classification_input([7, 8], start=1, extract=3)
        [1, 7, 8, 3]
    """
    return [start, *_tokens(text, (start, extract), "text"), extract]


def entailment_input(premise, hypothesis, start=START, delim=DELIM, extract=EXTRACT) -> list:
    """Entailment: ``[start] premise [delim] hypothesis [extract]``.

    Example:
        >>> entailment_input(["it", "rains"], ["it", "is", "wet"])
        ['<start>', 'it', 'rains', '<delim>', 'it', 'is', 'wet', '<extract>']
    """
    specials = (start, delim, extract)
    return [start, *_tokens(premise, specials, "premise"), delim, *_tokens(hypothesis, specials, "hypothesis"), extract]


def similarity_inputs(a, b, start=START, delim=DELIM, extract=EXTRACT) -> tuple[list, list]:
    """Similarity has no natural order: both ``[start] a [delim] b [extract]`` and
    ``[start] b [delim] a [extract]``. The model encodes each on its own and adds the two final
    extract states before the linear layer.

    Example:
        >>> similarity_inputs([5], [6, 7], start=1, delim=2, extract=3)
        ([1, 5, 2, 6, 7, 3], [1, 6, 7, 2, 5, 3])
    """
    return entailment_input(a, b, start, delim, extract), entailment_input(b, a, start, delim, extract)


def multiple_choice_inputs(context, answers, start=START, delim=DELIM, extract=EXTRACT) -> list[list]:
    """Multiple choice: one ``[start] context [delim] answer_k [extract]`` per answer; each is scored
    by a linear layer and a softmax runs over the k scores.

    Example:
        >>> multiple_choice_inputs(["q"], [["a"], ["b", "c"]])
        [['<start>', 'q', '<delim>', 'a', '<extract>'], ['<start>', 'q', '<delim>', 'b', 'c', '<extract>']]
    """
    if isinstance(answers, str) or len(answers) == 0:
        raise ValueError("answers must be a non-empty list of answers, each a list of tokens or ids")
    return [entailment_input(context, answer, start, delim, extract) for answer in answers]


def check_labels(labels, n_labels: int, choices: bool = False) -> None:
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= n_labels):
        has = f"each question has {n_labels} answers" if choices else f"the head has n_labels={n_labels}"
        raise ValueError(
            f"labels range from {int(labels.min())} to {int(labels.max())} but {has} (labels 0 … {n_labels - 1})"
        )


# -- the tensors ------------------------------------------------------------------------------------


def _special_ids(special_ids, needed: Sequence[str]) -> dict[str, int]:
    """The ids of the `needed` specials from a mapping (a dict or a Vocab) or a 3-tuple in
    :data:`GPT1_SPECIALS` order."""
    if isinstance(special_ids, (list, tuple)):
        if len(special_ids) != 3:
            raise ValueError(
                f"special_ids as a sequence holds the ids of {GPT1_SPECIALS} in this "
                f"order; got {len(special_ids)} values"
            )
        special_ids = dict(zip(GPT1_SPECIALS, special_ids))
    missing = [name for name in needed if name not in special_ids]
    if missing:
        raise ValueError(
            f"special_ids lacks {', '.join(missing)}: GPT-1's inputs need the ids of "
            f"{', '.join(needed)}; add them to the vocabulary (and the model's embedding)"
        )
    return {name: check_int(special_ids[name], f"special_ids[{name!r}]", 0) for name in needed}


def _label_ids(labels, label_names, n: int, what: str = "text") -> torch.Tensor:
    if len(labels) != n:
        raise ValueError(f"got {n} {what}s but {len(labels)} labels; give one label per {what}")
    if label_names is not None:
        index = {name: i for i, name in enumerate(label_names)}
        unknown = sorted({repr(y) for y in labels if isinstance(y, str) and y not in index})
        if unknown:
            raise ValueError(f"unknown labels {unknown[:5]}; the label names are {list(label_names)}")
        labels = [index[y] if isinstance(y, str) else y for y in labels]
    if any(isinstance(y, str) for y in labels):
        raise ValueError("string labels need label_names to map them to 0, 1, …")
    out = torch.tensor([int(y) for y in labels], dtype=torch.long)
    if out.numel() and int(out.min()) < 0:
        raise ValueError(f"labels must be ≥ 0 (class ids); got {int(out.min())}")
    if label_names is not None:
        check_labels(out, len(label_names))
    return out


def encode_for_gpt(
    encode: Callable[[str], Sequence[int]],
    texts: Sequence,
    labels=None,
    special_ids=None,
    max_len: int = 128,
    *,
    truncation: bool = True,
    pad_id: int = 0,
    label_names: Sequence[str] | None = None,
) -> dict[str, torch.Tensor]:
    """Texts → GPT-1 inputs: input_ids (B, T) right-padded with `pad_id`, lengths (B,), labels (B,).

    A text is a string (classification: ``<start> text <extract>``) or a pair (premise, hypothesis)
    (entailment: ``<start> premise <delim> hypothesis <extract>``); `encode` maps a string to ids.
    `special_ids` gives the ids of :data:`GPT1_SPECIALS` as a dict (or Vocab) or a 3-tuple in that
    order. Labels are ints, or strings looked up in `label_names`.

    Truncation rule (the rows must fit `max_len`, at most the model's max_len): the specials always
    stay; a text keeps its first ``max_len − 2`` tokens, a pair loses tokens from the end of its
    longer side first (BERT's "longest first"). With ``truncation=False`` too long a row is a
    ValueError. `pad_id` may be any id: padded positions are never read.

    Example:
        >>> letters = lambda text: [ord(ch) - ord("a") + 4 for ch in text]     # a → 4, b → 5, …
        >>> enc = encode_for_gpt(letters, ["ab", "c"], [1, 0], {"<start>": 1, "<extract>": 3}, max_len=8)
        >>> enc["input_ids"].tolist(), enc["lengths"].tolist()
        ([[1, 4, 5, 3], [1, 6, 3, 0]], [4, 3])
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of texts (or of (premise, hypothesis) pairs), not one string")
    if len(texts) == 0:
        raise ValueError("no texts to encode")
    pairs = [not isinstance(t, str) for t in texts]
    for t, pair in zip(texts, pairs):
        if pair and (len(t) != 2 or not all(isinstance(s, str) for s in t)):
            raise TypeError(f"each text is a string or a (premise, hypothesis) pair of strings; got {t!r}")
    specials = _special_ids(special_ids, GPT1_SPECIALS if any(pairs) else (START, EXTRACT))
    check_int(max_len, "max_len", 3 if any(pairs) else 2, fix="a shorter row leaves no room for the special tokens")
    rows = []
    for i, (text, pair) in enumerate(zip(texts, pairs)):
        parts = [_encoded(encode, s) for s in (text if pair else [text])]
        budget = max_len - len(parts) - 1  # minus start, delim, extract
        if sum(map(len, parts)) > budget:
            if not truncation:
                raise ValueError(
                    f"text {i} needs {sum(map(len, parts)) + len(parts) + 1} tokens with its "
                    f"specials but max_len={max_len}; raise max_len or pass truncation=True"
                )
            keep = longest_first(len(parts[0]), len(parts[1]), budget) if pair else (budget,)
            parts = [p[:k] for p, k in zip(parts, keep)]
        if pair:
            rows.append(entailment_input(*parts, specials[START], specials[DELIM], specials[EXTRACT]))
        else:
            rows.append(classification_input(parts[0], specials[START], specials[EXTRACT]))
    T = max(map(len, rows))
    out = {
        "input_ids": torch.tensor([r + [pad_id] * (T - len(r)) for r in rows], dtype=torch.long),
        "lengths": torch.tensor([len(r) for r in rows], dtype=torch.long),
    }
    if labels is not None:
        out["labels"] = _label_ids(labels, label_names, len(texts))
    return out


def _encoded(encode, text: str) -> list[int]:
    ids = encode(text)
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if not all(map(_is_id, ids)):
        raise TypeError(f"encode must map a string to token ids; for {text!r} it gave {ids[:5]!r}…")
    return [int(i) for i in ids]


def encode_choices_for_gpt(
    encode: Callable[[str], Sequence[int]],
    contexts: Sequence[str],
    answers: Sequence[Sequence[str]],
    labels=None,
    special_ids=None,
    max_len: int = 128,
    *,
    truncation: bool = True,
    pad_id: int = 0,
) -> dict[str, torch.Tensor]:
    """Multiple-choice questions → GPT-1 inputs: input_ids (N, K, T), one right-padded row
    ``<start> context <delim> answer_k <extract>`` per answer (:func:`multiple_choice_inputs`),
    lengths (N, K), and labels (N,), the index of each question's right answer.

    Every question needs the same number K ≥ 2 of answers. Rows are encoded and truncated as the
    pairs of :func:`encode_for_gpt` (a row keeps its specials and loses tokens from its longer side).

    Example:
        >>> letters = lambda text: [ord(ch) - ord("a") + 4 for ch in text]     # a → 4, b → 5, …
        >>> enc = encode_choices_for_gpt(letters, ["ab"], [["c", "dd"]], [1], (1, 2, 3), max_len=8)
        >>> enc["input_ids"].tolist(), enc["lengths"].tolist(), enc["labels"].tolist()
        ([[[1, 4, 5, 2, 6, 3, 0], [1, 4, 5, 2, 7, 7, 3]]], [[6, 7]], [1])
    """
    if isinstance(contexts, str) or isinstance(answers, str):
        raise TypeError(
            "contexts and answers must be lists (one context, and one list of answers, per question), not strings"
        )
    if len(contexts) != len(answers):
        raise ValueError(
            f"got {len(contexts)} contexts but {len(answers)} answer lists; give one list of answers per context"
        )
    if len(contexts) == 0:
        raise ValueError("no questions to encode")
    for i, options in enumerate(answers):
        if isinstance(options, str) or not all(isinstance(a, str) for a in options):
            raise TypeError(f"answers[{i}] must be a list of answer strings; got {options!r}")
    counts = sorted({len(options) for options in answers})
    if len(counts) > 1 or counts[0] < 2:
        raise ValueError(
            f"every question needs the same number of answers, at least 2; got {counts}: "
            f"the answers are scored against each other by one softmax"
        )
    K = counts[0]
    if labels is not None:
        labels = _label_ids(labels, None, len(contexts), "question")  # the index of the right answer
        check_labels(labels, K, choices=True)
    pairs = [(context, answer) for context, options in zip(contexts, answers) for answer in options]
    rows = encode_for_gpt(encode, pairs, None, special_ids, max_len, truncation=truncation, pad_id=pad_id)
    N, T = len(contexts), rows["input_ids"].size(1)
    out = {"input_ids": rows["input_ids"].view(N, K, T), "lengths": rows["lengths"].view(N, K)}
    if labels is not None:
        out["labels"] = labels
    return out


def shuffled_ending_choices(
    sentences: Sequence[str], n: int | None = None, *, seed: int = 0, min_words: int = 8, max_words: int = 30
) -> tuple[list[str], list[list[str]], list[int]]:
    """A multiple-choice task that only word order can solve, made from plain sentences →
    (contexts, answers, labels) for :func:`encode_choices_for_gpt`.

    Each sentence of `min_words` … `max_words` words is cut in half: the context is its first half,
    the two answers its second half as written and shuffled (the last word, usually ".", kept last),
    and labels[i] (0 or 1, at random) the index of the true ending. Both answers hold the same words,
    so only knowing which orders English uses tells them apart. The sentences are shuffled with
    `seed` and the first `n` usable ones taken (all if n is None); an ending without two different
    words before its last has no other order and is skipped.

    Example:
        >>> contexts, answers, labels = shuffled_ending_choices(["a b c d e f g h ."], seed=0)
        >>> contexts, answers[0][labels[0]]
        (['a b c d'], 'e f g h .')
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of sentences, not one string")
    if not all(isinstance(s, str) for s in sentences):
        bad = next(s for s in sentences if not isinstance(s, str))
        raise TypeError(f"each sentence must be a string (words separated by spaces); got {bad!r}")
    check_int(min_words, "min_words", 5, fix="an ending of at least three words, two of them to reorder")
    check_int(max_words, "max_words", min_words, fix="need min_words ≤ max_words")
    if n is not None:
        check_int(n, "n", 1, fix="the number of questions, or None for all")
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    contexts: list[str] = []
    answers: list[list[str]] = []
    labels: list[int] = []
    for i in order:
        words = sentences[i].split()
        if not min_words <= len(words) <= max_words:
            continue
        cut = len(words) // 2
        ending, last = words[cut:-1], words[-1:]
        if len(set(ending)) < 2:
            continue  # every order of it is the same
        shuffled = ending[:]
        while shuffled == ending:
            rng.shuffle(shuffled)
        true, false = " ".join(ending + last), " ".join(shuffled + last)
        label = rng.randrange(2)
        contexts.append(" ".join(words[:cut]))
        answers.append([true, false] if label == 0 else [false, true])
        labels.append(label)
        if len(contexts) == n:
            break
    if not contexts or (n is not None and len(contexts) < n):
        raise ValueError(
            f"only {len(contexts)} of the {len(sentences)} sentences have {min_words} to "
            f"{max_words} words and an ending that can be reordered; asked for "
            f"{n if n is not None else 'at least one'}. Give more sentences or widen the range"
        )
    return contexts, answers, labels
