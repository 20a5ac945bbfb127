"""Extractive question answering (SQuAD 1.1, task 4 of the BERT paper's figure 4) for notebook 08:
a question and a paragraph → the answer's start and end pieces.

:func:`encode_squad` builds ``[CLS] question [SEP] paragraph [SEP]``; :func:`predict_spans` and
:func:`decode_answer` turn a :class:`~onehot2gpt.bert.BertForQuestionAnswering`'s scores back into
the paragraph's own text; :func:`null_margins` lets the null span (``[CLS]``) say "no answer in
this passage"; :func:`answer_question` does it all for one passage; ``squad_*`` are the official
metrics. Training and scoring: :func:`onehot2gpt.bert_tasks.finetune` and ``evaluate`` with ``task="qa"``.

Example:
    >>> squad_f1("the Denver Broncos", ["Denver Broncos", "Broncos"])
    1.0
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Sequence

import torch

from .bert import best_span
from .subword import is_punctuation
from .training import pad_batch
from .utils import check_int, check_number, check_tensor, check_text, evaluating

# -- encoding questions and passages, decoding spans ----------------------------------------------


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the words and punctuation marks of `text`, split where
    BERT's pre-tokenizer splits (whitespace, and around every punctuation mark), so that the
    WordPiece tokens of each span are exactly the tokens of the text there.

    Example:
        >>> word_spans("Denver's (NFL)")
        [(0, 6), (6, 7), (7, 8), (9, 10), (10, 13), (13, 14)]
    """
    spans = []
    for m in re.finditer(r"\S+", check_text(text, "text", empty_ok=True)):
        start = m.start()
        for k, ch in enumerate(m.group()):
            if is_punctuation(ch):
                if start < m.start() + k:
                    spans.append((start, m.start() + k))
                spans.append((m.start() + k, m.start() + k + 1))
                start = m.start() + k + 1
        if start < m.end():
            spans.append((start, m.end()))
    return spans


def encode_squad(tokenizer, examples: Sequence[dict], max_len: int = 192, max_question_len: int = 64) -> dict:
    """SQuAD examples (dicts with "question", "context", "answers" as :func:`~onehot2gpt.data.read_squad`
    gives them) → ``[CLS] question [SEP] context [SEP]`` features:

    - tensors (B, T): input_ids, token_type_ids (1 from the context on), attention_mask,
      context_mask (bool: True at the context's tokens, where an answer may start and end);
    - tensors (B,): start_positions, end_positions (token indices of the first gold answer's
      first and last piece), answerable (bool: that answer is inside the window);
    - lists for decoding: "context", "offsets" (per token of the row, the character span of the
      context word it belongs to, None outside the context), "answers" (the gold texts), "id".

    One window per question: the question is cut to `max_question_len` tokens and the context to
    what is left of `max_len`. An example whose answer that cut removes is kept but marked
    ``answerable`` False with start = end = 0 ([CLS], BERT's SQuAD 2.0 convention); drop such rows
    for training with ``select(features, features["answerable"])``. Tokens map back to the text
    through whole words (:func:`word_spans`), so an answer inside a word ("1990" of "1990s") is
    widened to the whole word. ValueError when the first gold answer's text is not at its
    ``answer_start``: an offset that points elsewhere means the data was edited.
    """
    rows: dict[str, list] = {
        k: [] for k in ("input_ids", "token_type_ids", "context_mask", "start", "end", "answerable", "offsets")
    }
    for ex in examples:
        question = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(ex["question"]))[:max_question_len]
        context = ex["context"]
        spans = word_spans(context)
        # 1. The context's pieces, each remembering its word.
        pieces, piece_word = [], []
        for w, (a, b) in enumerate(spans):
            ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(context[a:b]))
            pieces += ids
            piece_word += [w] * len(ids)
        # 2. The first gold answer: characters → the words it touches → their pieces.
        inside = []
        if ex.get("answers"):
            a0 = _check_answer_start(ex)
            a1 = a0 + len(ex["answers"][0]["text"])
            touched = {w for w, (a, b) in enumerate(spans) if a < a1 and b > a0}
            inside = [p for p, w in enumerate(piece_word) if w in touched]
        # 3. Cut the context to the window; the answer must survive whole.
        budget = max_len - len(question) - 3
        if budget < 1:
            raise ValueError(
                f"max_len={max_len} leaves no room for the context after a "
                f"{len(question)}-token question; raise max_len or lower max_question_len"
            )
        pieces, piece_word = pieces[:budget], piece_word[:budget]
        first = len(question) + 2  # [CLS] question [SEP] → context
        answerable = bool(inside) and inside[-1] < budget
        start, end = (first + inside[0], first + inside[-1]) if answerable else (0, 0)
        ids = [tokenizer.cls_id] + question + [tokenizer.sep_id] + pieces + [tokenizer.sep_id]
        rows["input_ids"].append(ids)
        rows["token_type_ids"].append([0] * first + [1] * (len(pieces) + 1))
        rows["context_mask"].append([0] * first + [1] * len(pieces) + [0])
        rows["start"].append(start)
        rows["end"].append(end)
        rows["answerable"].append(answerable)
        rows["offsets"].append([None] * first + [spans[w] for w in piece_word] + [None])
    return {
        "input_ids": pad_batch(rows["input_ids"], tokenizer.pad_id),
        "token_type_ids": pad_batch(rows["token_type_ids"], 0),
        "attention_mask": pad_batch([[1] * len(r) for r in rows["input_ids"]], 0),
        "context_mask": pad_batch(rows["context_mask"], 0).bool(),
        "start_positions": torch.tensor(rows["start"], dtype=torch.long),
        "end_positions": torch.tensor(rows["end"], dtype=torch.long),
        "answerable": torch.tensor(rows["answerable"], dtype=torch.bool),
        "context": [ex["context"] for ex in examples],
        "offsets": rows["offsets"],
        "answers": [[a["text"] for a in ex.get("answers", [])] for ex in examples],
        "id": [ex.get("id") for ex in examples],
    }


def _check_answer_start(ex: dict) -> int:
    """The first gold answer's ``answer_start``, after checking that its text is there."""
    answer, context = ex["answers"][0], ex["context"]
    start, text = answer["answer_start"], answer["text"]
    whole = isinstance(start, int) and not isinstance(start, bool) and start >= 0
    found = context[start : start + len(text)] if whole else ""
    if not whole or found != text:
        where = context.find(text)
        hint = f"does occur at character {where}: fix answer_start" if where >= 0 else "does not occur in the context"
        raise ValueError(
            f"SQuAD question {ex.get('id')!r}: the answer {text!r} should start at character "
            f"{start!r} of the context, but {found!r} stands there; the text {hint}"
        )
    return start


def decode_answer(features: dict, i: int, start: int, end: int) -> str:
    """The text of row `i` of :func:`encode_squad`'s features from token `start` to token `end`:
    the original context's characters from the start of the first word to the end of the last
    (its case, accents and spacing kept). "" when the span is not inside the context (e.g. [CLS]).

    Example:
        >>> from onehot2gpt.checkpoints import load
        >>> example = {"id": "1", "question": "Who won?", "context": "The Denver Broncos won the game.",
        ...            "answers": [{"text": "Denver Broncos", "answer_start": 4}]}
        >>> features = encode_squad(load("all-MiniLM-L6-v2").tokenizer, [example])
        >>> start, end = features["start_positions"][0].item(), features["end_positions"][0].item()
        >>> decode_answer(features, 0, start, end), decode_answer(features, 0, 0, 0)
        ('Denver Broncos', '')
    """
    offsets = features["offsets"][check_int(i, "i", 0, len(features["offsets"]) - 1, fix="a row of the features")]
    if not 0 <= start <= end < len(offsets) or offsets[start] is None or offsets[end] is None:
        return ""
    return features["context"][i][offsets[start][0] : offsets[end][1]]


def predict_spans(
    start_logits: torch.Tensor, end_logits: torch.Tensor, context_mask: torch.Tensor, max_answer_len: int = 30
) -> list[tuple[int, int]]:
    """Start and end logits (B, T), context_mask (B, T) → per row the (start, end) token span
    inside the context with the highest start + end score, at most `max_answer_len` tokens long
    (:func:`onehot2gpt.bert.best_span`); (0, 0) for a row without context."""
    _check_shapes(start_logits, end_logits, context_mask)
    spans = []
    for s, e, allowed in zip(start_logits.detach().cpu(), end_logits.detach().cpu(), context_mask.cpu()):
        best = best_span(s, e, max_answer_len, allowed)
        spans.append((0, 0) if best is None else best[:2])
    return spans


def _check_shapes(start_logits, end_logits, context_mask) -> None:
    for value, name in zip((start_logits, end_logits, context_mask), ("start_logits", "end_logits", "context_mask")):
        check_tensor(value, name, fix="pass the model's output tensors (B, T)")
    if not start_logits.shape == end_logits.shape == context_mask.shape or start_logits.dim() != 2:
        raise ValueError(
            f"start logits {tuple(start_logits.shape)}, end logits {tuple(end_logits.shape)} "
            f"and context_mask {tuple(context_mask.shape)} must have the same (B, T) shape"
        )


# ------------------------------------------------- 4b: "no answer in this passage" (the null span)


def null_margins(
    start_logits: torch.Tensor, end_logits: torch.Tensor, context_mask: torch.Tensor, max_answer_len: int = 30
) -> tuple[list[tuple[int, int]], torch.Tensor]:
    """Start and end logits (B, T) with ``[CLS]`` at position 0, context_mask (B, T) → (the best
    context span per row, as :func:`predict_spans`; margins (B,)): the best span's score
    ``start[s] + end[e]`` (s ≤ e, at most `max_answer_len` tokens) minus the null span's
    ``start[0] + end[0]``. A margin at or below a threshold means "no answer in this passage"
    (:func:`abstains`), BERT's SQuAD 2.0 rule.

    The logits must hold [CLS]'s scores (call the model with [CLS] in its span_mask, as
    :func:`answer_question` does): ValueError for NaN, a -inf [CLS] score or a row without context.

    Example:
        >>> s, e = torch.tensor([[2., 0., 3.]]), torch.tensor([[1., 0., 4.]])
        >>> null_margins(s, e, torch.tensor([[False, True, True]]))
        ([(2, 2)], tensor([4.]))
    """
    _check_shapes(start_logits, end_logits, context_mask)
    spans, margins = [], []
    for i, (s, e, allowed) in enumerate(
        zip(start_logits.detach().float().cpu(), end_logits.detach().float().cpu(), context_mask.cpu().bool())
    ):
        best = best_span(s, e, max_answer_len, allowed)  # refuses NaN
        if best is None:
            raise ValueError(f"row {i} has no context token with a finite score: nothing to answer from")
        null = float(s[0] + e[0])
        if not math.isfinite(null):
            raise ValueError(
                f"row {i}: the [CLS] (null) score is {null}; call the model with [CLS] in its "
                f"span_mask (span_mask[:, 0] = True), as evaluate() does"
            )
        spans.append(best[:2])
        margins.append(best[2] - null)
    return spans, torch.tensor(margins)


def abstains(margins: torch.Tensor, threshold: float) -> torch.Tensor:
    """margins (B,) from :func:`null_margins` → bool (B,): True where the null span wins, i.e. the
    best span beats it by no more than `threshold`: "no answer in this passage"."""
    check_number(threshold, "null_threshold", fix="a score margin, e.g. 0.0")
    return torch.as_tensor(margins) <= threshold


def null_accuracy(answerable: torch.Tensor, unanswerable: torch.Tensor, threshold: float) -> dict[str, float]:
    """Margins of answerable and unanswerable questions and a threshold → {"answered": the share of
    answerable questions the model answers, "abstained": the share of unanswerable ones it declines,
    "balanced": their mean}."""
    if not len(answerable) or not len(unanswerable):
        raise ValueError(f"answerable has {len(answerable)} margins, unanswerable {len(unanswerable)}: need 1+ of each")
    answered = 1 - abstains(answerable, threshold).float().mean().item()
    abstained = abstains(unanswerable, threshold).float().mean().item()
    return {"answered": answered, "abstained": abstained, "balanced": (answered + abstained) / 2}


def unanswerable_pairs(examples: Sequence[dict], seed: int = 0) -> list[dict]:
    """SQuAD examples with a "title" → the same questions, each paired with a paragraph of another
    article that contains none of its gold answers (as whole words, after :func:`squad_normalize`):
    questions that passage cannot answer (answers [], id with "/other" appended). Pair examples of
    one side of :func:`split_by_article` among themselves, so both sides stay apart."""
    paragraphs: dict[str, dict[str, str]] = {}  # title → {paragraph: normalised}
    for ex in examples:
        if not isinstance(ex, dict) or not {"title", "context"} <= ex.keys():
            raise ValueError(
                f"each example needs a 'title' and a 'context' (data.read_squad gives both); got {ex!r:.80}"
            )
        paragraphs.setdefault(ex["title"], {})[ex["context"]] = f" {squad_normalize(ex['context'])} "
    if len(paragraphs) < 2:
        raise ValueError(
            f"need questions from at least two articles (to pair each with another's paragraph); got {len(paragraphs)}"
        )
    rng = random.Random(seed)
    titles = list(paragraphs)
    out = []
    for ex in examples:
        golds = [f" {g} " for g in (squad_normalize(a["text"]) for a in ex.get("answers", [])) if g]
        others = [
            p
            for t in titles
            if t != ex["title"]
            for p, low in paragraphs[t].items()
            if not any(g in low for g in golds)
        ]
        if not others:
            raise ValueError(f"question {ex.get('id')!r}: every other article's paragraph contains its answer")
        out.append({**ex, "context": rng.choice(others), "answers": [], "id": f"{ex.get('id')}/other"})
    return out


@torch.no_grad()
def answer_question(
    model,
    tokenizer,
    context: str,
    question: str,
    max_len: int = 384,
    max_answer_len: int = 30,
    max_question_len: int = 64,
    null_threshold: float | None = 0.0,
) -> dict:
    """Extractive QA on one passage: the span of `context` (s ≤ e, at most `max_answer_len` pieces)
    that a BertForQuestionAnswering picks for `question`, or "no answer in this passage" when it
    beats the null span (start and end on ``[CLS]``) by no more than `null_threshold`
    (:func:`abstains`; the shipped checkpoint's is :func:`onehot2gpt.pretrained.qa_null_threshold`;
    None always answers, as a SQuAD 1.1 model does).

    Returns a dict: "answer" (the passage's own characters; "" when the null wins), "no_answer",
    "best_span" (its text, given or not), "char_span" (a, b) into `context`, "words" (1-based
    positions of its first and last whitespace-separated word, as the BERT paper's SQuAD figure
    counts), "tokens" (the passage's pieces), "p_start", "p_end" (softmax over those pieces),
    "start", "end" (indices into "tokens"), "score" (S·h_s + E·h_e), "null_score" (S·h_[CLS] +
    E·h_[CLS]), "margin" (score − null_score), "null_threshold", and "argmax" (the start and the
    end piece, each chosen alone).

    Nothing is silently cut: a question longer than `max_question_len` pieces or a passage that
    does not fit `max_len` with it is a ValueError saying what to shorten.
    """
    if null_threshold is not None:
        check_number(null_threshold, "null_threshold", fix="a score margin, e.g. 0.0")
    check_text(context, "context", fix="paste the passage that holds the answer")
    check_text(question, "question", fix="type a question about the passage")
    n_question = len(tokenizer.tokenize(question))
    if n_question > max_question_len:
        raise ValueError(
            f"the question is {n_question} word pieces long; the model reads at most "
            f"{max_question_len}: shorten the question"
        )
    n_context = sum(len(tokenizer.tokenize(context[a:b])) for a, b in word_spans(context))
    room = max_len - n_question - 3
    if n_context > room:
        raise ValueError(
            f"the passage is {n_context} word pieces long, but with this question the model "
            f"reads at most {room} (max_len={max_len}): paste only the paragraph that holds "
            f"the answer"
        )
    example = {"question": question, "context": context, "answers": []}
    features = encode_squad(tokenizer, [example], max_len, max_question_len)
    with evaluating(model):
        device = next(model.parameters()).device
        args = (features[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask"))
        span_mask = features["context_mask"].clone()
        span_mask[:, 0] = True  # [CLS]: the null span, "no answer in this passage"
        start_logits, end_logits = model(*args, span_mask=span_mask.to(device))
    (s, e), margin = (x[0] for x in null_margins(start_logits, end_logits, features["context_mask"], max_answer_len))
    start_logits, end_logits = start_logits[0].float().cpu(), end_logits[0].float().cpu()
    inside = features["context_mask"][0]
    first = int(inside.nonzero()[0])
    null_score = float(start_logits[0] + end_logits[0])
    no_answer = null_threshold is not None and bool(abstains(margin, null_threshold))
    a, b = features["offsets"][0][s][0], features["offsets"][0][e][1]
    ids = features["input_ids"][0][inside].tolist()
    return {
        "answer": "" if no_answer else context[a:b],
        "no_answer": no_answer,
        "best_span": context[a:b],
        "char_span": (a, b),
        "words": (len(context[:a].split()) + 1, len(context[:b].split())),
        "tokens": tokenizer.convert_ids_to_tokens(ids),
        "p_start": start_logits[inside].softmax(-1).tolist(),
        "p_end": end_logits[inside].softmax(-1).tolist(),
        "start": s - first,
        "end": e - first,
        "score": float(margin) + null_score,
        "null_score": null_score,
        "margin": float(margin),
        "null_threshold": null_threshold,
        "argmax": (int(start_logits[inside].argmax()), int(end_logits[inside].argmax())),
    }


def squad_normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower-case, drop punctuation, drop the articles a/an/the,
    collapse whitespace (``normalize_answer`` of the official v1.1 evaluation script).

    Example:
        >>> squad_normalize("The  Denver Broncos!")
        'denver broncos'
    """
    check_text(text, "text", empty_ok=True, fix="an answer is a str ('' for no answer)")
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


_PUNCTUATION = set(string.punctuation)


def squad_exact_match(prediction: str, gold_answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0.

    Example:
        >>> squad_exact_match("the Broncos", ["Denver Broncos", "Broncos"])
        1.0
    """
    _check_gold(gold_answers, prediction)
    return float(any(squad_normalize(prediction) == squad_normalize(g) for g in gold_answers))


def squad_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    """Best word-overlap F1 against the gold answers, after :func:`squad_normalize`: with c words
    in common (counted with repeats), precision c / len(prediction), recall c / len(gold).

    Example:
        >>> squad_f1("Denver", ["Denver Broncos"])    # P = 1, R = 1/2
        0.6666666666666666
    """
    _check_gold(gold_answers, prediction)
    return max(token_f1(prediction, g) for g in gold_answers)


def token_f1(prediction: str, gold: str) -> float:
    """Word-overlap F1 of one prediction against one gold answer, after :func:`squad_normalize`
    (0.0 when they share no word).

    Example:
        >>> token_f1("Denver", "Denver Broncos")
        0.6666666666666666
    """
    pred, true = squad_normalize(prediction).split(), squad_normalize(gold).split()
    common = sum((Counter(pred) & Counter(true)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(true)
    return 2 * precision * recall / (precision + recall)


def _check_gold(gold_answers, prediction) -> None:
    check_text(prediction, "prediction", empty_ok=True, fix="the predicted answer's text ('' for no answer)")
    if isinstance(gold_answers, str) or not gold_answers:
        raise TypeError(
            "gold_answers is a non-empty list of strings (SQuAD has up to 3+ per "
            "question); wrap a single answer as [answer]"
        )


def squad_evaluate(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1 over questions, in percent, as the official script reports them."""
    if len(predictions) != len(gold_answers) or not predictions:
        raise ValueError(f"got {len(predictions)} predictions for {len(gold_answers)} questions")
    n = len(predictions)
    return {
        "exact_match": 100 * sum(map(squad_exact_match, predictions, gold_answers)) / n,
        "f1": 100 * sum(map(squad_f1, predictions, gold_answers)) / n,
    }


def split_by_article(
    examples: Sequence[dict], test_fraction: float = 0.3, seed: int = 0
) -> tuple[list[dict], list[dict]]:
    """Examples with a "title" → (train, test): a random `test_fraction` of the articles (at least
    one) goes to test, so no article, and no paragraph, is on both sides. Order is kept."""
    check_number(test_fraction, "test_fraction", 0, 1, low_open=True, high_open=True)
    titles = list(dict.fromkeys(ex["title"] for ex in examples))  # first-seen order
    if len(titles) < 2:
        raise ValueError(f"need at least two articles to split, got {len(titles)}")
    random.Random(seed).shuffle(titles)
    n_test = min(len(titles) - 1, max(1, round(test_fraction * len(titles))))
    test_titles = set(titles[:n_test])
    return (
        [ex for ex in examples if ex["title"] not in test_titles],
        [ex for ex in examples if ex["title"] in test_titles],
    )
