"""The training pieces the library's loops share (the loops sit beside their models): AdamW with
weight decay on the matrices only (Loshchilov & Hutter 2019; as BERT, GPT-2 and nanoGPT decay),
the fine-tuning recipe, one update step, the course's two learning-rate schedules, padding a batch
of id lists and one epoch's batches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

__all__ = [
    "adamw",
    "fine_tuning_optimizer",
    "optimizer_step",
    "cosine_lr",
    "inverse_sqrt_schedule",
    "pad_batch",
    "epoch_batches",
]


def adamw(
    parameters: Iterable[torch.nn.Parameter],
    *,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.AdamW:
    """AdamW with two parameter groups: tensors of 2 or more dimensions (weight matrices,
    embeddings) decayed by `weight_decay`, the others (biases, LayerNorms) not at all. It runs
    torch's multi-tensor ("foreach") update on every device (on a CPU torch would pick the
    per-tensor loop); the two give the same numbers (tests/test_training.py).

    Example:
        >>> opt = adamw(torch.nn.Linear(3, 2).parameters(), lr=1e-3, weight_decay=0.1)
        >>> [(len(g["params"]), g["weight_decay"]) for g in opt.param_groups]
        [(1, 0.1), (1, 0.0)]
    """
    params = list(parameters)
    return torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=lr,
        betas=betas,
        foreach=True,
    )


def fine_tuning_optimizer(
    model,
    n_rows: int,
    *,
    epochs: int,
    batch_size: int,
    max_steps: int | None,
    lr: float,
    warmup: float,
    weight_decay: float,
):
    """The fine-tuning recipe shared by BERT (:func:`onehot2gpt.bert_tasks.finetune`) and GPT-1
    (:func:`onehot2gpt.gpt_tasks.finetune_gpt`) → (optimizer, scheduler, steps): :func:`adamw` on
    the trainable parameters, the rate rising linearly over the first `warmup` share of the steps,
    then falling linearly to 0."""
    steps = epochs * math.ceil(n_rows / batch_size)
    if max_steps is not None:
        steps = min(steps, max_steps)
    if steps < 1:
        raise ValueError(f"nothing to train: {n_rows} rows, epochs={epochs}, max_steps={max_steps}")
    opt = adamw((p for p in model.parameters() if p.requires_grad), lr=lr, weight_decay=weight_decay)
    n_warm = max(1, int(warmup * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / n_warm if s < n_warm else max(0.0, (steps - s) / max(1, steps - n_warm))
    )
    return opt, sched, steps


def optimizer_step(loss, optimizer, scheduler, parameters, clip: float = 1.0) -> None:
    """One update: backward, clip the gradient norm to `clip`, step the optimizer and the schedule."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, clip)
    optimizer.step()
    scheduler.step()


def cosine_lr(step: int, *, lr: float, min_lr: float, warmup: int, iters: int) -> float:
    """Learning rate of update `step` (0, 1, …): nanoGPT's linear warm-up to `lr` over `warmup`
    updates, then half a cosine down to `min_lr`, which the last of the `iters` updates uses.

    Example:
        >>> [cosine_lr(s, lr=1.0, min_lr=0.0, warmup=1, iters=4) for s in range(4)]
        [0.5, 1.0, 0.5, 0.0]
    """
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step >= iters - 1:
        return min_lr
    progress = (step - warmup) / (iters - 1 - warmup)  # 0 → 1 over the decay
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def inverse_sqrt_schedule(warmup: int):
    """lr factor of the paper, scaled to 1 at the end of warm-up: min(s/w, √(w/s))."""
    return lambda step: min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5)


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int = 0) -> torch.Tensor:
    """List of id lists → (N, longest) LongTensor, right-padded with `pad_id`."""
    if not rows:
        raise ValueError("nothing to pad: give at least one sequence")
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


GROUP_BATCHES = 50  # group_by_length: rows are sorted by length within 50 batches' worth


def epoch_batches(
    lengths: torch.Tensor, batch_size: int, generator: torch.Generator, group_by_length: bool = False
) -> list[torch.Tensor]:
    """One epoch's batches of row ids: every row once, in ``ceil(n / batch_size)`` batches.

    By default a random permutation cut into batches. With `group_by_length` (Hugging Face's
    "length-grouped sampler") the permutation is cut into chunks of ``GROUP_BATCHES`` batches, each
    chunk sorted by length and cut into batches, and the batches shuffled: rows of about the same
    length share a batch, so a batch trimmed to its longest row holds little padding.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.is_complex():
        raise TypeError(
            f"lengths must be a 1-d integer tensor (one length per row); got "
            f"{lengths.dtype} of shape {tuple(lengths.shape)}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):  # (utils' check: this module imports none)
        raise TypeError(f"batch_size must be a positive int, got {type(batch_size).__name__} {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive int (at least 1), got {batch_size}")
    perm = torch.randperm(len(lengths), generator=generator)
    if not group_by_length:
        return list(perm.split(batch_size))
    batches = []
    for chunk in perm.split(batch_size * GROUP_BATCHES):
        longest_first = lengths[chunk].argsort(descending=True, stable=True)
        batches += chunk[longest_first].split(batch_size)
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
