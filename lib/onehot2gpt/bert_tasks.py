"""The four ways to use BERT, as data → tensors → metrics: fine-tuning for notebook 08.

Devlin et al. (2018), figure 4, fine-tune one pre-trained encoder for four kinds of task by
changing only the input format and a small output layer (the heads are in :mod:`onehot2gpt.bert`):

1. one sentence → a class from ``[CLS]`` (SST-2 sentiment): :func:`encode_sentences`;
2. one sentence → a tag per word (UD part-of-speech tags): :func:`encode_tagged`,
   :func:`tag_accuracy`; a word is labelled at its first piece only;
3. a sentence pair ``[CLS] A [SEP] B [SEP]`` → a class (SNLI entailment): :func:`encode_pairs`;
4. a question and a paragraph → the answer's start and end tokens (SQuAD 1.1): in
   :mod:`onehot2gpt.qa`, whose functions this module also offers as ``bert_tasks.<name>``.

Every ``encode_*`` takes a :class:`~onehot2gpt.subword.WordPieceTokenizer` and returns a dict of
LongTensors (B, T), right-padded, which :func:`finetune` trains on and :func:`evaluate` scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .progress import progress_bar
from .qa import (  # noqa: F401 (notebook 08 reads the QA functions as bert_tasks.<name>)
    answer_question,
    decode_answer,
    encode_squad,
    null_accuracy,
    null_margins,
    predict_spans,
    split_by_article,
    squad_evaluate,
    squad_exact_match,
    squad_f1,
    squad_normalize,
    unanswerable_pairs,
)
from .training import epoch_batches, fine_tuning_optimizer, optimizer_step, pad_batch
from .utils import IGNORE_INDEX, check_choice, check_finite_loss, evaluating

SNLI_LABELS = ("entailment", "neutral", "contradiction")
# The 17 universal part-of-speech tags of Universal Dependencies (v2), alphabetical.
UPOS_TAGS = tuple("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
TASKS = ("sequence", "token", "qa")


def _label_ids(labels, names: Sequence[str] | None, n: int) -> torch.Tensor:
    """Labels as ints, or as strings looked up in `names` → (B,) LongTensor."""
    if len(labels) != n:
        raise ValueError(f"got {n} texts but {len(labels)} labels; give one label per text")
    if names is None or not any(isinstance(y, str) for y in labels):
        return torch.tensor([int(y) for y in labels], dtype=torch.long)
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted({y for y in labels if y not in index})
    if unknown:
        raise ValueError(f"unknown labels {unknown[:5]}; the label names are {list(names)}")
    return torch.tensor([index[y] for y in labels], dtype=torch.long)


# ------------------------------------------------------------------ 1 and 3: classification


def encode_sentences(
    tokenizer, texts: Sequence[str], labels=None, max_len: int = 128, label_names: Sequence[str] | None = None
) -> dict[str, torch.Tensor]:
    """B texts → ``[CLS] text [SEP]`` as input_ids, token_type_ids, attention_mask (B, T) and,
    given labels (ints, or strings from `label_names`), labels (B,). Longer texts are cut at
    `max_len` tokens.

    Example:
        >>> from onehot2gpt.subword import WordPieceTokenizer
        >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film", "dull"])
        >>> enc = encode_sentences(tok, ["a fine film", "dull"], [1, 0])
        >>> enc["input_ids"], enc["labels"]
        (tensor([[2, 5, 6, 7, 3],
                [2, 8, 3, 0, 0]]), tensor([1, 0]))
    """
    out = tokenizer.encode_batch(list(texts), max_len=max_len, truncation=True)
    if labels is not None:
        out["labels"] = _label_ids(labels, label_names, len(texts))
    return out


def encode_pairs(
    tokenizer,
    premises: Sequence[str],
    hypotheses: Sequence[str],
    labels=None,
    max_len: int = 128,
    label_names: Sequence[str] | None = SNLI_LABELS,
) -> dict[str, torch.Tensor]:
    """B sentence pairs → ``[CLS] A [SEP] B [SEP]`` (token type 0 up to the first [SEP], 1 after)
    as input_ids, token_type_ids, attention_mask (B, T), and labels (B,) if given (SNLI's names
    map to 0, 1, 2 in the order of :data:`SNLI_LABELS`). Too long a pair loses tokens from the
    end of its longer sentence first ("longest first", as BERT's code does)."""
    if len(premises) != len(hypotheses):
        raise ValueError(f"got {len(premises)} premises but {len(hypotheses)} hypotheses")
    out = tokenizer.encode_batch(list(premises), list(hypotheses), max_len=max_len, truncation=True)
    if labels is not None:
        out["labels"] = _label_ids(labels, label_names, len(premises))
    return out


# ------------------------------------------------------------------------- 2: tagging


def encode_tagged(
    tokenizer, sentences: Sequence[Sequence[str]], tags=None, tag_vocab: Sequence[str] = UPOS_TAGS, max_len: int = 128
) -> dict[str, torch.Tensor]:
    """B sentences given as words (and their tags) → input_ids, token_type_ids, attention_mask,
    word_index (B, T) and, with tags, labels (B, T).

    ``word_index`` is the word each token came from, -1 at [CLS], [SEP] and padding. A word's tag
    id sits on its first piece; its other pieces, the specials and padding get -100 (ignored by
    the loss and by :func:`tag_accuracy`), as in the paper's NER experiment (§5.3). A sentence
    longer than `max_len` tokens is cut: the words whose first piece is cut off get no label.

    Example:
        >>> from onehot2gpt.subword import WordPieceTokenizer
        >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "!"])
        >>> enc = encode_tagged(tok, [["Unaffable", "!"]], [["ADJ", "PUNCT"]])
        >>> enc["labels"]     # un ##aff ##able ! between [CLS] and [SEP]
        tensor([[-100,    0, -100, -100,   12, -100]])
    """
    if tags is not None and len(tags) != len(sentences):
        raise ValueError(f"got {len(sentences)} sentences but {len(tags)} tag lists")
    tag_id = {t: i for i, t in enumerate(tag_vocab)}
    rows, labels = [], []
    for k, words in enumerate(sentences):
        enc = tokenizer.encode_words(list(words), max_len=max_len, truncation=True)
        enc["word_index"] = index = [-1 if w is None else w for w in enc["word_index"]]
        rows.append(enc)
        if tags is not None:
            if len(tags[k]) != len(words):
                raise ValueError(f"sentence {k} has {len(words)} words but {len(tags[k])} tags")
            unknown = sorted(set(tags[k]) - set(tag_id))
            if unknown:
                raise ValueError(f"sentence {k} has tags {unknown} that are not in tag_vocab ({', '.join(tag_vocab)})")
            row = [IGNORE_INDEX] * len(index)
            for t, w in enumerate(index):
                if w >= 0 and (t == 0 or index[t - 1] != w):  # the first piece of word w
                    row[t] = tag_id[tags[k][w]]
            labels.append(row)
    pads = {"input_ids": tokenizer.pad_id, "token_type_ids": 0, "attention_mask": 0, "word_index": -1}
    out = {k: pad_batch([row[k] for row in rows], pad) for k, pad in pads.items()}
    if tags is not None:
        out["labels"] = pad_batch(labels, IGNORE_INDEX)
    return out


def tag_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of labelled tokens (label ≠ -100) whose arg-max tag is right: logits (B, T, C),
    labels (B, T) → float in [0, 1]."""
    correct, count = _tag_counts(logits, labels)
    if count == 0:
        raise ValueError("no labelled tokens: every label is -100")
    return correct / count


def _tag_counts(logits, labels) -> tuple[int, int]:
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be labels {tuple(labels.shape)} plus a class dimension")
    chosen = labels != IGNORE_INDEX
    return int((logits.argmax(-1)[chosen] == labels[chosen]).sum()), int(chosen.sum())


def select(features: dict, index) -> dict:
    """The rows `index` (a bool mask or ids, tensor or list) of an ``encode_*`` dict: tensors are
    indexed, lists picked from, so ``select(f, f["answerable"])`` keeps the answerable questions."""
    index = torch.as_tensor(index)
    if index.dtype == torch.bool:
        index = index.nonzero().flatten()
    rows = index.tolist()
    return {k: v[index] if torch.is_tensor(v) else [v[i] for i in rows] for k, v in features.items()}


# ------------------------------------------------------------------ fine-tuning and scoring


_TARGETS = {"sequence": ("labels",), "token": ("labels",), "qa": ("start_positions", "end_positions")}
_ENCODER = {"sequence": "encode_sentences or encode_pairs", "token": "encode_tagged", "qa": "encode_squad"}


def _check_task(task: str, data: dict, training: bool) -> None:
    """ValueError for an unknown task, KeyError naming what `data` lacks for it."""
    check_choice(task, "task", TASKS)
    need = ["input_ids", "token_type_ids", "attention_mask"] + (["context_mask"] if task == "qa" else [])
    if training:
        need += _TARGETS[task]
    missing = [k for k in need if k not in data]
    if missing:
        raise KeyError(
            f"the {task!r} task needs {', '.join(missing)} in the data: build it with "
            f"{_ENCODER[task]}{' and pass the labels' if task != 'qa' else ''}"
        )


def _batch(data: dict, index: torch.Tensor, device) -> dict[str, torch.Tensor]:
    """Rows `index` of every tensor, cut to the batch's longest row (padding costs time)."""
    T = int(data["attention_mask"][index].sum(1).max())
    full = data["input_ids"].size(1)
    return {
        k: (v[index][:, :T] if v.dim() >= 2 and v.size(1) == full else v[index]).to(device)
        for k, v in data.items()
        if torch.is_tensor(v)
    }


def _forward(model, batch: dict, task: str):
    """(loss or None, outputs): logits (B, C) or (B, T, C); for qa (start, end) logits (B, T)."""
    args = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    if task == "qa":
        span_mask = batch["context_mask"].clone()
        span_mask[:, 0] = True  # [CLS]: "the answer is not in this window"
        start, end = model(*args, span_mask=span_mask)
        loss = None
        if "start_positions" in batch:
            loss = (F.cross_entropy(start, batch["start_positions"]) + F.cross_entropy(end, batch["end_positions"])) / 2
        return loss, (start, end)
    logits = model(*args)
    loss = None
    if "labels" in batch:
        loss = F.cross_entropy(logits.flatten(0, -2), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
    return loss, logits


def qa_loss(model, batch: dict) -> torch.Tensor:
    """The fine-tuning loss of extractive QA for a BertForQuestionAnswering on one encode_squad
    batch: the mean of the start and end cross-entropies, each a softmax over the context and
    [CLS] (position 0: "the answer is not in this window")."""
    return _forward(model, batch, "qa")[0]


def finetune(
    model,
    data: dict,
    *,
    task: str,
    epochs: int = 3,
    batch_size: int = 32,
    lr: float = 5e-5,
    warmup: float = 0.1,
    weight_decay: float = 0.01,
    clip: float = 1.0,
    max_steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
    desc: str | None = None,
    group_by_length: bool = False,
) -> list[float]:
    """Fine-tune `model` (a BertFor… head, any device) on `data` (an ``encode_*`` dict with labels)
    → the training loss at every step.

    `task` is "sequence" (BertForSequenceClassification: cross-entropy on labels (B,)), "token"
    (BertForTokenClassification: cross-entropy on labels (B, T), -100 ignored) or "qa"
    (BertForQuestionAnswering: the mean of the start and end cross-entropies over the context
    and [CLS]). The paper's recipe: AdamW (weight decay 0.01 except biases and LayerNorms),
    lr rising linearly for the first `warmup` share of steps then falling linearly to 0,
    `epochs` shuffled passes (seeded), gradients clipped to norm `clip`. Dropout draws from
    torch's global generator: call :func:`onehot2gpt.utils.set_seed` first to repeat a run.
    `group_by_length` batches rows of about the same length (:func:`epoch_batches`): less padding.
    """
    _check_task(task, data, training=True)
    n = data["input_ids"].size(0)
    opt, sched, steps = fine_tuning_optimizer(
        model,
        n,
        epochs=epochs,
        batch_size=batch_size,
        max_steps=max_steps,
        lr=lr,
        warmup=warmup,
        weight_decay=weight_decay,
    )
    params = [q for group in opt.param_groups for q in group["params"]]  # the trainable ones
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    lengths = data["attention_mask"].sum(1)
    losses: list[float] = []
    model.train()
    with progress_bar(total=steps, desc=desc or task, disable=not progress, mininterval=1.0) as bar:
        while len(losses) < steps:
            for index in epoch_batches(lengths, batch_size, g, group_by_length):
                loss, outputs = _forward(model, _batch(data, index, device), task)
                optimizer_step(loss, opt, sched, params, clip)
                # an untrained head starts near ln(its choices): classes, or positions for qa
                choices = (outputs[0] if task == "qa" else outputs).size(-1)
                losses.append(check_finite_loss(loss, len(losses), lr=lr, what=desc or task, start=math.log(choices)))
                bar.update()
                if bar.n % 20 == 0:
                    bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
                if len(losses) == steps:
                    break
    model.eval()
    return losses


@torch.no_grad()
def evaluate(model, data: dict, task: str, batch_size: int = 64, max_answer_len: int = 30) -> dict:
    """Score `model` on `data` (an ``encode_*`` dict) in eval mode → a dict:

    - "sequence": predictions (N,), and with labels accuracy and loss;
    - "token": predictions (N, T) (-100 on padding), and with labels accuracy over the labelled
      tokens and loss;
    - "qa": start_logits, end_logits (N, T) (-inf outside the context and [CLS]), spans (the best
      context span per row, :func:`predict_spans`), and with encode_squad's lists the predicted
      texts ("predictions") and SQuAD's exact_match and f1 in percent; loss with gold positions.
    """
    _check_task(task, data, training=False)
    T = data["input_ids"].size(1)
    total_loss, correct, count, outputs = 0.0, 0, 0, []
    # Rows in order of length, so that a batch holds rows of about the same length and little
    # padding; `back` puts the results in the rows' order again.
    order = data["attention_mask"].sum(1).argsort(stable=True)
    with evaluating(model):
        device = next(model.parameters()).device
        for index in order.split(batch_size):
            batch = _batch(data, index, device)
            loss, out = _forward(model, batch, task)
            k = len(index)
            if task == "qa":  # (2, B, T): start and end logits, -inf where the batch was cut
                outputs.append(torch.stack([F.pad(o.float().cpu(), (0, T - o.size(1)), value=-torch.inf) for o in out]))
            else:
                pred = out.argmax(-1).cpu()
                outputs.append(F.pad(pred, (0, T - pred.size(1)), value=IGNORE_INDEX) if task == "token" else pred)
                if "labels" in batch:
                    c, k = _tag_counts(out, batch["labels"])  # k: the rows, or the tagged tokens
                    correct += c
            if loss is not None:  # weighted by what the loss averages over
                total_loss += loss.item() * k
                count += k
    back = order.argsort()
    if task == "qa":
        start, end = torch.cat(outputs, 1)[:, back]
        spans = predict_spans(start, end, data["context_mask"], max_answer_len)
        result = {"start_logits": start, "end_logits": end, "spans": spans}
        if "offsets" in data and "context" in data:
            result["predictions"] = [decode_answer(data, i, s, e) for i, (s, e) in enumerate(spans)]
            if data.get("answers") and all(data["answers"]):
                result.update(squad_evaluate(result["predictions"], data["answers"]))
    else:
        result = {"predictions": torch.cat(outputs)[back]}
        if "labels" in data:
            result["accuracy"] = correct / max(count, 1)
    if _TARGETS[task][0] in data:
        result["loss"] = total_loss / max(count, 1)
    return result
