"""Experiment: the BERT laptop recipe with dropout switched on only for its last steps.

Notebook 08's POS payoff needs dropout during pre-training (``bench/bert_budget_sweep.py``, the
``pretraining_dropout`` sweep), and dropout about doubles a CPU step. This runs
``python -m onehot2gpt.bert_pretraining train`` with the given arguments unchanged, except that at
step SWITCH every ``nn.Dropout`` layer of the model (embeddings, residual branches, feed-forward; not
the attention weights) is set to 0.1. Run with ``--dropout 0`` the steps before SWITCH are those of
the recipe without dropout, so the two runs differ only in the last steps.

    python bench/bert_late_dropout.py 5400 train --out DIR/bert-wikitext2 --steps 7400 \\
        --mask-prob 0.25 --dropout 0 --warmup 200 --bf16 --explicit-attention
    python bench/recipes.py --only nsp-all notebook08 --keep DIR

Result (2026-11-28): ``bench/RECIPES_LOG.md``, "Dropout only at the end of pre-training".
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

import onehot2gpt.bert_pretraining as bp  # noqa: E402
import torch  # noqa: E402


def main(argv: list[str]) -> None:
    if not argv or not argv[0].isdigit():
        raise SystemExit(
            "usage: python bench/bert_late_dropout.py SWITCH train --out DIR/bert-wikitext2 ... "
            "(SWITCH: the step from which dropout 0.1 is on, a whole number below --steps)"
        )
    switch, calls = int(argv[0]), {"n": 0}
    original = bp.pretraining_loss

    def loss_with_late_dropout(model, batch, *args, **kwargs):
        if model.training:  # evaluation calls leave the count alone
            calls["n"] += 1
            if calls["n"] == switch + 1:
                layers = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
                for m in layers:
                    m.p = 0.1
                print(
                    f"\n[late dropout] step {switch}: dropout 0.1 on {len(layers)} layers", file=sys.stderr, flush=True
                )
        return original(model, batch, *args, **kwargs)

    bp.pretraining_loss = loss_with_late_dropout
    bp.main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
