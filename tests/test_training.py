"""The training pieces every trainer shares: AdamW's parameter groups, the fine-tuning recipe and
one epoch's batches (padding and the schedules are tested with their first users, in test_transformer_tasks.py and
test_gpt_training.py)."""

import pytest
import torch
from onehot2gpt.training import adamw, epoch_batches, fine_tuning_optimizer
from torch import nn


def test_adamw_decays_matrices_and_embeddings_only():
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 3), nn.LayerNorm(3))
    opt = adamw(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.98))
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert [tuple(p.shape) for p in decayed["params"]] == [(5, 4), (3, 4)]
    assert [tuple(p.shape) for p in plain["params"]] == [(3,), (3,), (3,)]  # bias, LayerNorm
    assert decayed["betas"] == (0.9, 0.98) and decayed["lr"] == 1e-3


def test_adamw_runs_the_multi_tensor_update_and_gets_the_per_tensor_loops_numbers():
    def train(make_optimizer):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 50))
        opt = make_optimizer(model)
        ids = torch.randint(0, 50, (20, 8), generator=torch.Generator().manual_seed(1))
        for step in range(20):
            for group in opt.param_groups:  # a schedule, as the trainers set it
                group["lr"] = 1e-2 * (step + 1) / 20
            loss = nn.functional.cross_entropy(model(ids[step]), ids[(step + 1) % 20])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
        return opt, [p.detach() for p in model.parameters()]

    ours, trained = train(lambda m: adamw(m.parameters(), lr=1e-2, weight_decay=0.1))
    assert all(group["foreach"] for group in ours.param_groups)

    def per_tensor_loop(m):
        params = list(m.parameters())
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=1e-2, foreach=False)

    _, expected = train(per_tensor_loop)
    assert all(torch.equal(a, b) for a, b in zip(trained, expected))
    assert not torch.equal(trained[1], train(lambda m: torch.optim.SGD(m.parameters(), lr=1e-2))[1][1])


def test_fine_tuning_optimizer_trains_only_what_is_not_frozen_and_warms_up():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    model[0].requires_grad_(False)
    opt, sched, steps = fine_tuning_optimizer(
        model, 100, epochs=2, batch_size=32, max_steps=None, lr=1.0, warmup=0.25, weight_decay=0.01
    )
    assert steps == 8
    assert sum(len(g["params"]) for g in opt.param_groups) == 2  # the second layer only
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.5, 1.0, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    with pytest.raises(ValueError, match="nothing to train"):
        fine_tuning_optimizer(model, 0, epochs=1, batch_size=8, max_steps=None, lr=1.0, warmup=0.1, weight_decay=0.0)


def test_gpt_fine_tuning_does_not_borrow_from_berts_task_module():
    import ast
    import inspect

    import onehot2gpt.gpt_tasks

    tree = ast.parse(inspect.getsource(onehot2gpt.gpt_tasks))
    sources = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "bert_tasks" not in sources and "training" in sources


# -- one epoch's batches, grouped by length or not (fine-tuning loops of 08 and 09) -------------


def _padded_tokens(batches, lengths) -> int:
    return sum(int(lengths[b].max()) * len(b) for b in batches)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 3300])
def test_epoch_batches_cover_every_row_once_in_as_many_batches_grouped_or_not(n):
    lengths = torch.randint(1, 65, (n,), generator=torch.Generator().manual_seed(n))
    for grouped in (False, True):
        batches = epoch_batches(lengths, 32, torch.Generator().manual_seed(0), grouped)
        assert len(batches) == -(-n // 32)
        assert sorted(torch.cat(batches).tolist()) == list(range(n))
        assert all(1 <= len(b) <= 32 for b in batches)


def test_epoch_batches_ungrouped_are_the_permutation_cut_in_order():
    # The default draws exactly what finetune drew before the option existed: runs repeat.
    lengths = torch.randint(1, 65, (100,), generator=torch.Generator().manual_seed(1))
    batches = epoch_batches(lengths, 32, torch.Generator().manual_seed(3))
    assert torch.equal(torch.cat(batches), torch.randperm(100, generator=torch.Generator().manual_seed(3)))


def test_epoch_batches_grouped_by_length_hold_similar_lengths_in_shuffled_order():
    n, size = 1000, 32  # one chunk: each batch a run of the sorted lengths
    lengths = torch.randint(1, 65, (n,), generator=torch.Generator().manual_seed(2))
    grouped = epoch_batches(lengths, size, torch.Generator().manual_seed(0), True)
    spans = sorted((int(lengths[b].min()), int(lengths[b].max())) for b in grouped)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:])), "batches overlap in length"
    randomly = epoch_batches(lengths, size, torch.Generator().manual_seed(0), False)
    assert _padded_tokens(grouped, lengths) < 0.7 * _padded_tokens(randomly, lengths)
    # Not longest first: the batches come shuffled, and another seed gives another order.
    maxima = [int(lengths[b].max()) for b in grouped]
    assert maxima != sorted(maxima, reverse=True) and maxima != sorted(maxima)
    again = epoch_batches(lengths, size, torch.Generator().manual_seed(0), True)
    other = epoch_batches(lengths, size, torch.Generator().manual_seed(1), True)
    assert all(torch.equal(a, b) for a, b in zip(grouped, again))
    assert [b.tolist() for b in other] != [b.tolist() for b in grouped]


def test_epoch_batches_refuse_bad_lengths_and_sizes():
    with pytest.raises(TypeError, match="integer"):
        epoch_batches(torch.tensor([1.5, 2.0]), 2, torch.Generator(), True)
    with pytest.raises(TypeError, match="1-d"):
        epoch_batches(torch.ones(2, 3, dtype=torch.long), 2, torch.Generator(), True)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="batch_size"):
            epoch_batches(torch.tensor([1, 2]), bad, torch.Generator())
