"""The training pieces every trainer shares: AdamW's parameter groups and the fine-tuning recipe
(padding and the schedules are tested with their first users, in test_transformer_tasks.py and
test_gpt_training.py)."""

import pytest
import torch
from torch import nn

from onehot2gpt.training import adamw, fine_tuning_optimizer


def test_adamw_decays_matrices_and_embeddings_only():
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 3), nn.LayerNorm(3))
    opt = adamw(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.98))
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert [tuple(p.shape) for p in decayed["params"]] == [(5, 4), (3, 4)]
    assert [tuple(p.shape) for p in plain["params"]] == [(3,), (3,), (3,)]   # bias, LayerNorm
    assert decayed["betas"] == (0.9, 0.98) and decayed["lr"] == 1e-3


def test_fine_tuning_optimizer_trains_only_what_is_not_frozen_and_warms_up():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    model[0].requires_grad_(False)
    opt, sched, steps = fine_tuning_optimizer(model, 100, epochs=2, batch_size=32, max_steps=None,
                                              lr=1.0, warmup=0.25, weight_decay=0.01)
    assert steps == 8
    assert sum(len(g["params"]) for g in opt.param_groups) == 2             # the second layer only
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.5, 1.0, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    with pytest.raises(ValueError, match="nothing to train"):
        fine_tuning_optimizer(model, 0, epochs=1, batch_size=8, max_steps=None, lr=1.0, warmup=0.1,
                              weight_decay=0.0)


def test_gpt_fine_tuning_does_not_borrow_from_berts_task_module():
    import ast
    import inspect

    import onehot2gpt.gpt_tasks
    tree = ast.parse(inspect.getsource(onehot2gpt.gpt_tasks))
    sources = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "bert_tasks" not in sources and "training" in sources
