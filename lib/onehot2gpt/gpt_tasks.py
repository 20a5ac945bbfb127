"""Fine-tuning a GPT for classification the GPT-1 way: input transformations, a linear head on the
extract token, and the auxiliary language-modelling loss.

Written for the GPT notebook (09). Follows Radford et al., "Improving Language Understanding by
Generative Pre-Training" (GPT-1, 2018), §3.2–3.3 and figure 1: a linear layer W_y reads the final
hidden state of the last real token, ``<extract>`` (:class:`GPTForSequenceClassification`; one
score per answer in :class:`GPTForMultipleChoice`), and training maximises L3 = L2 + λ·L1, the
classification loss plus λ times the next-token loss on the same input (:func:`gpt1_loss`,
:func:`finetune_gpt` with the paper's recipe, :func:`evaluate_gpt`).

The input transformations and encoders live in :mod:`onehot2gpt.gpt_inputs` (this module offers
them too). Rows are right-padded; causal attention means a real token never sees the padding after
it, so no attention mask is needed: the head reads position ``length − 1`` and L1 skips padding.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import causal_mask
from .gpt import GPT
from .gpt_inputs import (  # noqa: F401 (notebook 09 reads the input transformations from here)
    GPT1_SPECIALS,
    check_labels,
    classification_input,
    encode_choices_for_gpt,
    encode_for_gpt,
    entailment_input,
    multiple_choice_inputs,
    shuffled_ending_choices,
    similarity_inputs,
)
from .progress import progress_bar
from .training import epoch_batches, fine_tuning_optimizer, optimizer_step
from .utils import as_ids, check_finite_loss, check_int, check_number, check_tensor, evaluating

# ------------------------------------------------------------------------------ the head


def gpt_hidden_states(gpt: GPT, ids) -> torch.Tensor:
    """ids (B, T) → the final hidden states LN(h_n) (B, T, D), which ``gpt.lm_head`` maps to GPT's logits:
    the steps of ``GPT.forward`` without a cache (:class:`~onehot2gpt.gpt.GPT` returns logits only)."""
    c = gpt.config
    ids = as_ids(ids, c.vocab_size, dims=2)
    T = ids.size(1)
    if T > c.max_len:
        raise ValueError(
            f"the rows have {T} positions but the model has learned positions for "
            f"max_len={c.max_len} only; encode with max_len ≤ {c.max_len}"
        )
    positions = torch.arange(T, device=ids.device)  # (T,)
    x = gpt.dropout(gpt.tok_emb(ids) + gpt.pos_emb(positions))  # (B, T, D)
    mask = causal_mask(T, T, device=ids.device)  # (T, T)
    for block in gpt.blocks:
        x, _, _ = block(x, mask)
    return gpt.final_norm(x)  # (B, T, D)


def last_positions(ids, lengths=None, attention_mask=None) -> torch.Tensor:
    """The index of each row's last real token (B,) from `lengths` (B,) or a right-padded 0/1
    `attention_mask` (B, T); neither means no padding (every row ends at T − 1).

    Example:
        >>> last_positions(torch.zeros(2, 4, dtype=torch.long), lengths=torch.tensor([4, 2]))
        tensor([3, 1])
    """
    ids = as_ids(ids, dims=2, allow_empty=True)
    B, T = ids.shape
    if lengths is not None and attention_mask is not None:
        raise ValueError("give lengths or attention_mask, not both")
    if attention_mask is not None:
        if tuple(attention_mask.shape) != (B, T):
            raise ValueError(
                f"attention_mask must have the shape of the ids {(B, T)}; got {tuple(attention_mask.shape)}"
            )
        lengths = (attention_mask != 0).sum(1)
        right_padded = torch.arange(T, device=ids.device) < lengths[:, None]  # (B, T)
        if not torch.equal(right_padded, attention_mask != 0):
            raise ValueError(
                "attention_mask must be right-padded (1 … 1 0 … 0 in every row): the "
                "head reads the last real token, the extract token"
            )
    if lengths is None:
        return torch.full((B,), T - 1, dtype=torch.long, device=ids.device)
    lengths = torch.as_tensor(lengths, device=ids.device)
    if lengths.shape != (B,) or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be B={B} integers; got {tuple(lengths.shape)} {lengths.dtype}")
    if B and (int(lengths.min()) < 1 or int(lengths.max()) > T):
        raise ValueError(f"lengths must lie between 1 and T={T}; got {lengths.tolist()}")
    return lengths.long() - 1


class GPTClassifierOutput(NamedTuple):
    """What :class:`GPTForSequenceClassification` returns."""

    logits: torch.Tensor  # (B, n_labels): W_y on the extract token's final hidden state
    lm_logits: torch.Tensor  # (B, T, V): the tied output layer on every position, for L1


class GPTForSequenceClassification(nn.Module):
    """GPT-1's classifier: a linear layer W_y (after dropout) on the final hidden state of each row's
    last real token, the extract token. forward(input_ids (B, T), lengths (B,) or attention_mask
    (B, T), right-padded) → :class:`GPTClassifierOutput` (class logits (B, n_labels), LM logits
    (B, T, V)).

    For similarity add the :meth:`extract_states` of both orders and apply ``classifier``; for
    multiple choice use :class:`GPTForMultipleChoice`.
    """

    def __init__(self, gpt: GPT, n_labels: int, dropout: float = 0.1):
        super().__init__()
        if not isinstance(gpt, GPT):
            raise TypeError(f"gpt must be an onehot2gpt.gpt.GPT; got {type(gpt).__name__}")
        check_int(n_labels, "n_labels", 1)
        self.gpt, self.n_labels = gpt, n_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(gpt.config.d_model, n_labels)
        nn.init.normal_(self.classifier.weight, std=0.02)  # GPT-1's initialisation, N(0, 0.02²)
        nn.init.zeros_(self.classifier.bias)

    def extract_states(self, input_ids, lengths=None, attention_mask=None):
        """→ (the extract token's final hidden state (B, D), all final hidden states (B, T, D))."""
        hidden = gpt_hidden_states(self.gpt, input_ids)  # (B, T, D)
        last = last_positions(input_ids, lengths, attention_mask)  # (B,)
        return hidden[torch.arange(hidden.size(0), device=hidden.device), last], hidden

    def logits_and_states(self, input_ids, lengths=None, attention_mask=None):
        """→ (class logits (B, n_labels), final hidden states (B, T, D)): the forward pass without
        the LM logits, which :func:`gpt1_loss` computes only where a real next token is predicted."""
        h, hidden = self.extract_states(input_ids, lengths, attention_mask)
        return self.classifier(self.dropout(h)), hidden

    def forward(self, input_ids, lengths=None, attention_mask=None) -> GPTClassifierOutput:
        h, hidden = self.extract_states(input_ids, lengths, attention_mask)
        return GPTClassifierOutput(self.classifier(self.dropout(h)), self.gpt.lm_head(hidden))


class GPTForMultipleChoice(GPTForSequenceClassification):
    """GPT-1's multiple-choice head: every answer is its own row ``<start> context <delim> answer_k
    <extract>`` (:func:`encode_choices_for_gpt`), read by the same GPT; a linear layer (after dropout)
    turns each row's extract state into one score, and a softmax over the K scores of a question
    picks the answer. forward(input_ids (B, K, T), lengths (B, K) or attention_mask (B, K, T),
    right-padded) → :class:`GPTClassifierOutput` (scores (B, K), LM logits (B, K, T, V)).
    """

    def __init__(self, gpt: GPT, dropout: float = 0.1):
        super().__init__(gpt, n_labels=1, dropout=dropout)

    def logits_and_states(self, input_ids, lengths=None, attention_mask=None):
        """→ (scores (B, K), final hidden states (B·K, T, D), one row per answer)."""
        fix = "multiple choice reads (B, K, T), K answers per question: encode with encode_choices_for_gpt"
        check_tensor(input_ids, "input_ids", dims=3, fix=fix)
        B, K, T = input_ids.shape
        flat = lambda x: None if x is None else torch.as_tensor(x).flatten(0, 1)  # (B·K, …)
        for name, x, shape in (("lengths", lengths, (B, K)), ("attention_mask", attention_mask, (B, K, T))):
            if x is not None and tuple(torch.as_tensor(x).shape) != shape:
                raise ValueError(
                    f"{name} must be shaped {shape} like the questions and answers; "
                    f"got {tuple(torch.as_tensor(x).shape)}"
                )
        scores, hidden = super().logits_and_states(input_ids.flatten(0, 1), flat(lengths), flat(attention_mask))
        return scores.view(B, K), hidden

    def forward(self, input_ids, lengths=None, attention_mask=None) -> GPTClassifierOutput:
        scores, hidden = self.logits_and_states(input_ids, lengths, attention_mask)
        return GPTClassifierOutput(scores, self.gpt.lm_head(hidden).view(*input_ids.shape, -1))


# ------------------------------------------------------------------------------ the loss


class GPT1Loss(NamedTuple):
    """L3 = L2 + λ·L1 and its two parts (scalars)."""

    total: torch.Tensor  # L3
    clf: torch.Tensor  # L2: cross-entropy of the labels
    lm: torch.Tensor  # L1: next-token cross-entropy over the real positions


def _lm_sum(gpt, hidden, ids, lengths) -> tuple[torch.Tensor, int]:
    """(Summed next-token cross-entropy of the real positions, their count) from the final hidden
    states (R, T, D) of rows `ids` (R, T): token t + 1 is the target of position t while
    t + 1 < length, so ``<start>`` is never predicted and ``<extract>`` is. The LM logits are
    computed at those positions only (the output layer is the model's largest)."""
    keep = torch.arange(1, ids.size(1), device=ids.device) < lengths[:, None]  # (R, T − 1)
    logits = gpt.lm_head(hidden[:, :-1][keep])  # (n, V)
    loss = F.cross_entropy(logits.float(), ids[:, 1:][keep], reduction="sum")
    return loss, int(keep.sum())


def _check_fit(model, ids, labels=None) -> None:
    """Multiple-choice rows (N, K, T) for a :class:`GPTForMultipleChoice` only, and labels below its
    number of classes: the head's labels, or the K answers of a question."""
    choices = isinstance(model, GPTForMultipleChoice)
    if choices != (ids.dim() == 3):
        fix = "it needs (N, K, T) rows, from encode_choices_for_gpt" if choices else "use GPTForMultipleChoice"
        raise ValueError(f"{type(model).__name__} cannot read input_ids shaped {tuple(ids.shape)}: {fix}")
    if labels is not None:
        check_labels(labels, ids.size(1) if choices else model.n_labels, choices)


def _rows(ids, lengths) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (R, T), lengths (R,)): multiple-choice data (N, K, T) as N·K rows; other data as it is."""
    if ids.dim() == 3:
        return ids.flatten(0, 1), (None if lengths is None else torch.as_tensor(lengths).flatten())
    return ids, lengths


def gpt1_loss(model: GPTForSequenceClassification, batch: dict, lm_weight: float = 0.5) -> GPT1Loss:
    """GPT-1's fine-tuning objective on a batch (input_ids (B, T), lengths (B,), labels (B,); for a
    :class:`GPTForMultipleChoice` input_ids (B, K, T) and lengths (B, K)) → :class:`GPT1Loss`: L2 the
    mean cross-entropy of the labels (over the K answers' scores for multiple choice), L1 the mean
    next-token loss over the real tokens of the batch (padding excluded; every answer's row for
    multiple choice), total L3 = L2 + λ·L1 (just L2 for λ = 0)."""
    check_number(lm_weight, "lm_weight", 0, fix="λ, the weight of the next-token loss")
    ids, labels = batch["input_ids"], batch["labels"]
    _check_fit(model, ids, labels)
    rows, row_lengths = _rows(ids, batch.get("lengths"))
    row_lengths = last_positions(rows, row_lengths) + 1  # (R,)
    logits, hidden = model.logits_and_states(ids, row_lengths.view(ids.shape[:-1]))
    clf = F.cross_entropy(logits, labels)
    with torch.set_grad_enabled(torch.is_grad_enabled() and lm_weight != 0):  # λ = 0: L1 only reported
        lm_sum, count = _lm_sum(model.gpt, hidden, rows, row_lengths)
    lm = lm_sum / max(count, 1)
    return GPT1Loss(clf if lm_weight == 0 else clf + lm_weight * lm, clf, lm)


# ------------------------------------------------------------------ fine-tuning and scoring


def _check_data(model, data: dict, training: bool) -> None:
    need = ["input_ids", "lengths"] + (["labels"] if training else [])
    missing = [k for k in need if k not in data]
    if missing:
        raise KeyError(
            f"the data lacks {', '.join(missing)}: build it with encode_for_gpt"
            f"{' and pass the labels' if 'labels' in missing else ''}"
        )
    _check_fit(model, data["input_ids"], data.get("labels"))
    last_positions(*_rows(data["input_ids"], data["lengths"]))  # lengths fit the rows


def _batch(data: dict, index: torch.Tensor, device) -> dict[str, torch.Tensor]:
    """Rows `index`, cut to the batch's longest row (padding costs time)."""
    T = int(data["lengths"][index].max())
    return {
        k: (v[index][..., :T] if k == "input_ids" else v[index]).to(device)
        for k, v in data.items()
        if k in ("input_ids", "lengths", "labels")
    }


def _longest(lengths) -> torch.Tensor:
    """Each row's length (N,): for multiple choice (N, K), its longest answer's."""
    lengths = torch.as_tensor(lengths)
    return lengths.amax(-1) if lengths.dim() == 2 else lengths


def finetune_gpt(
    model: GPTForSequenceClassification,
    data: dict,
    *,
    lm_weight: float = 0.5,
    epochs: int = 3,
    batch_size: int = 32,
    lr: float = 6.25e-5,
    warmup: float = 0.002,
    weight_decay: float = 0.01,
    clip: float = 1.0,
    max_steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
    desc: str = "fine-tune",
    group_by_length: bool = False,
) -> dict[str, list[float]]:
    """Fine-tune on `data` (:func:`encode_for_gpt` with labels; for a :class:`GPTForMultipleChoice`,
    :func:`encode_choices_for_gpt`) by GPT-1's recipe → the losses per step: {"total": L3, "clf": L2,
    "lm": L1}. A batch holds `batch_size` rows of `data`: texts, or questions with all their answers.

    AdamW (weight decay 0.01 on matrices only), lr rising linearly over the first `warmup` share of
    the steps (GPT-1: 0.2%) then falling linearly to 0, `epochs` shuffled passes (seeded), gradients
    clipped to norm `clip`. Dropout draws from torch's global generator: call
    :func:`onehot2gpt.utils.set_seed` first to repeat a run. A batch runs only up to its longest
    row; `group_by_length` puts rows of about the same length (a question's longest answer) in a
    batch, so that little padding is left (:func:`onehot2gpt.training.epoch_batches`).
    """
    _check_data(model, data, training=True)
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
    lengths = _longest(data["lengths"])
    history: dict[str, list[float]] = {"total": [], "clf": [], "lm": []}
    # at worst (an untrained model) the loss starts near ln(choices) + λ·ln V: 1000× that is a run exploding
    lm_level = lm_weight * math.log(model.gpt.config.vocab_size)
    model.train()
    with progress_bar(total=steps, desc=desc, disable=not progress, mininterval=1.0) as bar:
        while len(history["total"]) < steps:
            for index in epoch_batches(lengths, batch_size, g, group_by_length):
                batch = _batch(data, index, device)
                loss = gpt1_loss(model, batch, lm_weight)
                optimizer_step(loss.total, opt, sched, params, clip)
                ids = batch["input_ids"]
                level = math.log(ids.size(1) if ids.dim() == 3 else model.n_labels) + lm_level  # K answers or classes
                check_finite_loss(loss.total, len(history["total"]), lr=lr, what=desc, start=level)
                for k, v in zip(history, loss):
                    history[k].append(v.item())
                bar.update()
                if len(history["total"]) % 20 == 0:
                    bar.set_postfix(loss=f"{loss.total.item():.3f}", refresh=False)
                if len(history["total"]) == steps:
                    break
    model.eval()
    return history


@torch.no_grad()
def evaluate_gpt(model: GPTForSequenceClassification, data: dict, batch_size: int = 64) -> dict:
    """Score `model` on `data` in eval mode → {"predictions" (N,)} and, with labels, "accuracy",
    "loss" (mean cross-entropy of the labels, L2) and "lm_loss" (next-token loss per real token, L1).
    For multiple choice a prediction is the index of the answer with the highest score."""
    _check_data(model, data, training=False)
    with evaluating(model):
        device = next(model.parameters()).device
        N = data["input_ids"].size(0)
        predictions, clf_sum, lm_sum, lm_count = [], 0.0, 0.0, 0
        # Rows in order of length, so that a batch holds rows of about the same length and little
        # padding (the predictions are put back in the rows' order below).
        order = _longest(data["lengths"]).argsort(stable=True)
        back = order.argsort()  # the inverse permutation
        for index in order.split(batch_size):
            batch = _batch(data, index, device)
            logits, hidden = model.logits_and_states(batch["input_ids"], batch["lengths"])
            predictions.append(logits.argmax(-1).cpu())
            if "labels" in batch:
                clf_sum += F.cross_entropy(logits.float(), batch["labels"], reduction="sum").item()
                rows, row_lengths = _rows(batch["input_ids"], batch["lengths"])
                s, c = _lm_sum(model.gpt, hidden, rows, last_positions(rows, row_lengths) + 1)
                lm_sum, lm_count = lm_sum + s.item(), lm_count + c
    result: dict = {"predictions": torch.cat(predictions)[back]}
    if "labels" in data:
        result["accuracy"] = (result["predictions"] == data["labels"].cpu()).float().mean().item()
        result["loss"] = clf_sum / N
        result["lm_loss"] = lm_sum / max(lm_count, 1)
    return result
