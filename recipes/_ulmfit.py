"""The training run of ``ulmfit-ablation.py``: ULMFiT's last stage, an
:class:`~onehot2gpt.ulmfit.LMClassifier` fine-tuned with the three techniques, each of which can be
switched off (``onehot2gpt.ulmfit.ABLATION_SETTINGS``), and its accuracy. Notebook 04 writes the
same loop out and reads the recipe's results (``onehot2gpt.ulmfit.load_ablation``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from onehot2gpt.elmo import BiLM
from onehot2gpt.ulmfit import (
    LMClassifier,
    _check_bilm,
    _check_ids_mask,
    discriminative_lrs,
    slanted_triangular_lr,
    trainable_groups,
)
from onehot2gpt.utils import check_finite_loss, check_int, check_number, evaluating, set_seed

__all__ = ["finetune_classifier", "classifier_accuracy"]


def _check_labelled(ids, mask, y, what: str) -> None:
    _check_ids_mask(ids, mask, f"{what} ")
    if not isinstance(y, torch.Tensor) or y.dtype != torch.long or y.shape != ids.shape[:1]:
        raise TypeError(
            f"{what} labels must be a torch.long tensor of shape ({ids.size(0)},), got "
            f"{getattr(y, 'dtype', type(y).__name__)} of shape {tuple(getattr(y, 'shape', ()))}"
        )
    if ids.size(0) == 0:
        raise ValueError(f"no {what} rows: pass at least one labelled sentence")


def finetune_classifier(
    bilm: BiLM,
    ids: torch.Tensor,
    mask: torch.Tensor,
    labels: torch.Tensor,
    *,
    seed: int = 0,
    discriminative: bool = True,
    slanted: bool = True,
    gradual: bool = True,
    frozen: bool = False,
    pretrained: bool = True,
    lr_top: float = 1e-2,
    epochs: int = 4,
    batch_size: int = 32,
    n_classes: int = 2,
) -> LMClassifier:
    """ULMFiT's last stage: an :class:`LMClassifier` on `bilm`'s forward LM (``pretrained=False``:
    on a biLM of the same config with random weights), trained on (ids, mask, labels), in eval mode.

    Adam with β = (0.7, 0.99), the top group's rate `lr_top`; each switch turns one technique off:
    ``discriminative`` (÷ 2.6 per group below), ``slanted`` (STLR over all the updates; otherwise a
    constant rate), ``gradual`` (one more group from the top each epoch); ``frozen`` trains only the
    head. Seeded by `seed` (head weights, dropout, batch order).
    """
    _check_bilm(bilm)
    _check_labelled(ids, mask, labels, "training")
    if int(labels.min()) < 0 or int(labels.max()) >= n_classes:
        raise ValueError(f"labels must be in 0 … {n_classes - 1}")
    epochs, batch_size = check_int(epochs, "epochs", 1), check_int(batch_size, "batch_size", 1)
    check_number(lr_top, "lr_top", 0, low_open=True)
    set_seed(seed)
    model = LMClassifier(bilm if pretrained else BiLM(bilm.config), n_classes=n_classes)
    groups = model.groups()
    rates = discriminative_lrs(lr_top, len(groups), factor=2.6 if discriminative else 1.0)
    optimizer = torch.optim.Adam([{"params": g, "lr": r} for g, r in zip(groups, rates)], betas=(0.7, 0.99))
    order = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(len(labels) / batch_size)
    step, total = 0, epochs * per_epoch
    for epoch in range(epochs):
        trained = 1 if frozen else trainable_groups(epoch, len(groups), gradual)
        for g, group in enumerate(groups):
            for p in group:
                p.requires_grad_(g >= len(groups) - trained)
        model.train()
        shuffled = torch.randperm(len(labels), generator=order)
        for b in range(per_epoch):
            batch = shuffled[b * batch_size : (b + 1) * batch_size]
            scale = slanted_triangular_lr(step, total, 1.0) if slanted else 1.0
            for param_group, rate in zip(optimizer.param_groups, rates):
                param_group["lr"] = rate * scale
            width = int(mask[batch].sum(1).max())
            loss = F.cross_entropy(model(ids[batch, :width], mask[batch, :width]), labels[batch])
            # a new head (batch-normed) starts near ln(n_classes): 1000× that is a run exploding
            check_finite_loss(
                loss, step, lr=lr_top, what=f"fine-tuning with lr_top={lr_top:g}", start=math.log(n_classes)
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
    for p in model.parameters():
        p.requires_grad_(True)
    return model.eval()


def classifier_accuracy(model: LMClassifier, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of rows whose top class is their label (the model in eval mode, then as it was)."""
    if not isinstance(model, LMClassifier):
        raise TypeError(f"model must be an LMClassifier, got {type(model).__name__}")
    _check_labelled(ids, mask, labels, "test")
    with evaluating(model):
        return (model(ids, mask).argmax(-1) == labels).float().mean().item()
