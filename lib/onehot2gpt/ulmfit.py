"""ULMFiT's fine-tuning techniques, for a classifier on the course's LSTM language model.

Taught in notebook 04, following Howard & Ruder (2018), "Universal Language Model Fine-tuning for
Text Classification". ULMFiT fine-tunes the whole language model for the task (ELMo freezes it),
and three techniques keep that from wiping out what pre-training taught:

* **discriminative fine-tuning**: each layer group gets its own learning rate, 2.6 times lower
  per group further down (:func:`discriminative_lrs`);
* **slanted triangular learning rates** (STLR): a short linear rise to η_max, then a long linear
  fall to η_max / ``ratio`` (:func:`slanted_triangular_lr`);
* **gradual unfreezing**: only the top group trains in the first epoch; each epoch one more group
  below joins (:func:`trainable_groups`).

:class:`LMClassifier` puts ULMFiT's head (concat pooling, two linear layers) on the forward LM of a
course :class:`~onehot2gpt.elmo.BiLM`; its :meth:`LMClassifier.groups` are the layer groups the
three techniques act on. ULMFiT's middle step, fine-tuning the LM on the task's text, is left out.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
from torch import nn

from .data import ASSETS
from .elmo import BiLM
from .utils import check_int, check_number

# The settings of notebook 04's ablation: the switches of finetune_classifier (recipes/_ulmfit.py).
ABLATION_SETTINGS: dict[str, dict[str, bool]] = {
    "ULMFiT (all three)": {},
    "without discriminative rates": {"discriminative": False},
    "without STLR (constant rate)": {"slanted": False},
    "without gradual unfreezing": {"gradual": False},
    "none of the three": {"discriminative": False, "slanted": False, "gradual": False},
    "LM frozen, head only": {"frozen": True},
    "ULMFiT on a random-init LM": {"pretrained": False},
}
# Where the last full run of recipes/ulmfit-ablation.py is kept, which notebook 04 reads (load_ablation).
ABLATION_FILE = ASSETS / "results" / "ulmfit-ablation.json"


def slanted_triangular_lr(
    step: int, total_steps: int, lr_max: float, cut_frac: float = 0.1, ratio: float = 32
) -> float:
    """The STLR learning rate at `step` (0 … total_steps − 1) of a run of `total_steps` updates.

    With cut = ⌊total_steps · cut_frac⌋ (at least 1) and
    p = step / cut while step < cut, else 1 − (step − cut) / (total_steps − cut),
    the rate is lr_max · (1 + p · (ratio − 1)) / ratio: it climbs from lr_max / ratio to lr_max
    over the first `cut` steps and falls back towards lr_max / ratio, which it would reach one step
    after the last. (The paper writes the fall's length as cut · (1/cut_frac − 1), the same number
    when total_steps · cut_frac is whole.) The paper's values: cut_frac 0.1, ratio 32.
    """
    total_steps = check_int(total_steps, "total_steps", 1)
    step = check_int(step, "step", 0, total_steps - 1, fix=f"a run of total_steps={total_steps} counts from 0")
    lr_max = check_number(lr_max, "lr_max", 0, low_open=True)
    cut_frac = check_number(cut_frac, "cut_frac", 0, 1, low_open=True, high_open=True, fix="the share of steps rising")
    ratio = check_number(ratio, "ratio", 1, fix="how many times smaller the lowest rate is")
    cut = max(1, math.floor(total_steps * cut_frac))
    p = step / cut if step < cut else 1 - (step - cut) / (total_steps - cut)  # step < cut when total_steps <= cut
    return lr_max * (1 + p * (ratio - 1)) / ratio


def discriminative_lrs(lr_top: float, n_groups: int, factor: float = 2.6) -> list[float]:
    """One learning rate per layer group, bottom to top: the top group gets `lr_top`, each group
    below it `factor` times less (ULMFiT: 2.6). ``factor=1`` gives every group the same rate."""
    lr_top = check_number(lr_top, "lr_top", 0, low_open=True)
    n_groups = check_int(n_groups, "n_groups", 1)
    factor = check_number(factor, "factor", 0, low_open=True)
    return [lr_top / factor ** (n_groups - 1 - g) for g in range(n_groups)]


def trainable_groups(epoch: int, n_groups: int, gradual: bool = True) -> int:
    """How many layer groups, counted from the top, train in `epoch` (0-based): with gradual
    unfreezing the top one in epoch 0 and one more each epoch; without it all of them."""
    check_int(epoch, "epoch", 0)
    n_groups = check_int(n_groups, "n_groups", 1)
    return min(epoch + 1, n_groups) if gradual else n_groups


class LMClassifier(nn.Module):
    """A text classifier on the forward language model of a course biLM, with ULMFiT's head.

    The token layer and the forward LSTM layers are copies of `bilm`'s, run as in the biLM. The head
    reads the top layer's states h (B, T, H) with concat pooling over each row's real tokens,
    [h at the last real token ; elementwise max ; mean] (B, 3H), then ULMFiT's two blocks,
    batch norm → dropout → Linear(3H, hidden) → ReLU, batch norm → dropout → Linear(hidden, n_classes).
    """

    def __init__(self, bilm: BiLM, n_classes: int, hidden: int = 50, dropout: float = 0.1):
        super().__init__()
        _check_bilm(bilm)
        n_classes = check_int(n_classes, "n_classes", 2, fix="a classifier needs at least 2 classes")
        hidden = check_int(hidden, "hidden", 1)
        check_number(dropout, "dropout", 0, 1, high_open=True)
        self.vocab_size = bilm.config.vocab_size
        self.tok_emb = copy.deepcopy(bilm.tok_emb)
        self.tok_proj = copy.deepcopy(bilm.tok_proj)
        self.lstms = copy.deepcopy(bilm.fwd_layers)
        H = bilm.config.hidden
        self.head = nn.Sequential(
            nn.BatchNorm1d(3 * H),
            nn.Dropout(dropout),
            nn.Linear(3 * H, hidden),
            nn.ReLU(),
            nn.BatchNorm1d(hidden),
            nn.Dropout(dropout),
            nn.Linear(hidden, n_classes),
        )
        self.float()  # a biLM loaded from float16 may be half precision

    def groups(self) -> list[list[nn.Parameter]]:
        """The layer groups, bottom to top: token layer, each LSTM layer, the head."""
        return (
            [[*self.tok_emb.parameters(), *self.tok_proj.parameters()]]
            + [list(lstm.parameters()) for lstm in self.lstms]
            + [list(self.head.parameters())]
        )

    def top_states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ids (B, T), mask (B, T) bool (right padding) → the top LSTM layer's states (B, T, H)."""
        _check_ids_mask(ids, mask)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            raise ValueError(f"token ids must be in 0 … {self.vocab_size - 1}: encode with the biLM's vocabulary")
        mask = mask.bool()
        if not bool(mask[:, 0].all()):
            raise ValueError("every row needs at least one real token, and padding only on the right")
        h = self.tok_proj(self.tok_emb(ids))
        for j, lstm in enumerate(self.lstms):
            out, _ = lstm(h)
            h = out + h if j > 0 else out
        return h

    def features(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Concat pooling of the top layer over the real tokens → (B, 3H)."""
        h = self.top_states(ids, mask)
        mask = mask.bool()
        lengths = mask.sum(1)
        last = h[torch.arange(h.size(0)), lengths - 1]  # (B, H)
        biggest = h.masked_fill(~mask[:, :, None], float("-inf")).amax(1)  # (B, H)
        mean = (h * mask[:, :, None]).sum(1) / lengths[:, None]  # (B, H)
        return torch.cat([last, biggest, mean], dim=-1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ids (B, T), mask (B, T) → class scores (B, n_classes)."""
        return self.head(self.features(ids, mask))


def _check_bilm(bilm) -> None:
    if not isinstance(bilm, BiLM):
        raise TypeError(
            f"bilm must be a onehot2gpt.elmo.BiLM (load('bilm-wikitext2') gives one), got {type(bilm).__name__}"
        )


def _check_ids_mask(ids, mask, what: str = "") -> None:
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
        raise TypeError(
            f"{what}ids must be a (B, T) torch.long tensor (ElmoFeatures.ids gives one), got "
            f"{getattr(ids, 'dtype', type(ids).__name__)} of shape {tuple(getattr(ids, 'shape', ()))}"
        )
    if not isinstance(mask, torch.Tensor) or mask.shape != ids.shape:
        raise ValueError(f"{what}mask must be a tensor of the ids' shape {tuple(ids.shape)}")


def load_ablation(path: str | Path | None = None) -> dict:
    """The last full run of recipes/ulmfit-ablation.py (``onehot2gpt/assets/results/ulmfit-ablation.json`` by default) → its record:
    {"accuracy": {setting: [test accuracy per seed]}, "seeds", "recipe", "command", ...}, checked to
    hold every setting of :data:`ABLATION_SETTINGS` with one accuracy in [0, 1] per seed."""
    path = Path(ABLATION_FILE if path is None else path)
    again = "run `python recipes/ulmfit-ablation.py --out DIR` again"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: run `python recipes/ulmfit-ablation.py --out DIR` from the repository root "
            "and copy DIR/ulmfit-ablation.json there (docs/recipes.md)"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); {again}") from err
    seeds = record.get("seeds") if isinstance(record, dict) else None
    accuracy = record.get("accuracy") if isinstance(record, dict) else None
    if not isinstance(seeds, list) or not seeds or not isinstance(accuracy, dict):
        raise ValueError(f"{path} lacks its 'seeds' list or its 'accuracy' table; {again}")
    missing = [name for name in ABLATION_SETTINGS if name not in accuracy]
    if missing:
        raise ValueError(f"{path} has no results for {', '.join(missing)}; {again}")
    for name, values in accuracy.items():
        if (
            not isinstance(values, list)
            or len(values) != len(seeds)
            or not all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in values)
        ):
            raise ValueError(f"{path}: {name!r} needs one accuracy in [0, 1] per seed ({len(seeds)}), got {values!r}")
    return record
