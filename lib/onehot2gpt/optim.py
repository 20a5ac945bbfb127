"""The optimiser pieces every library trainer shares: AdamW with weight decay on the matrices only,
the fine-tuning recipe (warm-up then linear decay), and one update step.

Used by BERT pre-training and GPT training (:mod:`onehot2gpt.training`) and by fine-tuning both
(:mod:`onehot2gpt.tasks`, :mod:`onehot2gpt.gpt_tasks`); notebooks 07–09 write the same steps out in
cells. AdamW is Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (2019); decaying only
the weight matrices and embeddings, not biases and LayerNorm gains, is the recipe of BERT, GPT-2
and nanoGPT.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def adamw(parameters: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float,
          betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.AdamW:
    """AdamW with two parameter groups: tensors of 2 or more dimensions (weight matrices,
    embeddings) decayed by `weight_decay`, the others (biases, LayerNorms) not at all.

    Example:
        >>> opt = adamw(torch.nn.Linear(3, 2).parameters(), lr=1e-3, weight_decay=0.1)
        >>> [(len(g["params"]), g["weight_decay"]) for g in opt.param_groups]
        [(1, 0.1), (1, 0.0)]
    """
    params = list(parameters)
    return torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                             lr=lr, betas=betas)


def fine_tuning_optimizer(model, n_rows: int, *, epochs: int, batch_size: int, max_steps: int | None,
                          lr: float, warmup: float, weight_decay: float):
    """The fine-tuning recipe shared by BERT (:func:`onehot2gpt.tasks.finetune`) and GPT-1
    (:func:`onehot2gpt.gpt_tasks.finetune_gpt`) → (optimizer, scheduler, steps).

    :func:`adamw` on the trainable parameters, the learning rate rising linearly over the first
    `warmup` share of the steps, then falling linearly to 0.
    """
    steps = epochs * math.ceil(n_rows / batch_size)
    if max_steps is not None:
        steps = min(steps, max_steps)
    if steps < 1:
        raise ValueError(f"nothing to train: {n_rows} rows, epochs={epochs}, max_steps={max_steps}")
    opt = adamw((p for p in model.parameters() if p.requires_grad), lr=lr, weight_decay=weight_decay)
    n_warm = max(1, int(warmup * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / n_warm if s < n_warm else max(0.0, (steps - s) / max(1, steps - n_warm)))
    return opt, sched, steps


def optimizer_step(loss, optimizer, scheduler, parameters, clip: float = 1.0) -> None:
    """One update: backward, clip the gradient norm to `clip`, step the optimizer and the schedule."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, clip)
    optimizer.step()
    scheduler.step()
