"""ULMFiT's schedules and the classifier on the course biLM's forward LM."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt.elmo import BiLM, BiLMConfig
from onehot2gpt.ulmfit import (
    ABLATION_SETTINGS,
    LMClassifier,
    discriminative_lrs,
    load_ablation,
    slanted_triangular_lr,
    trainable_groups,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _ulmfit import classifier_accuracy, finetune_classifier  # noqa: E402  (the recipe's loop)


def test_slanted_triangular_lr_rises_then_falls_as_in_the_paper():
    T, lr = 1000, 0.01  # cut = 100: the paper's formula with whole numbers
    rates = [slanted_triangular_lr(t, T, lr) for t in range(T)]
    cut = 100
    assert rates[0] == pytest.approx(lr / 32)
    assert rates[cut] == pytest.approx(lr) and max(rates) == rates[cut]
    assert all(a < b for a, b in zip(rates[:cut], rates[1 : cut + 1]))  # rises for cut steps
    assert all(a > b for a, b in zip(rates[cut:], rates[cut + 1 :]))  # then only falls
    for t in (0, 37, 100, 450, 999):  # Howard & Ruder's equation (3), written out
        p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / 0.1 - 1))
        assert rates[t] == pytest.approx(lr * (1 + p * 31) / 32)
    assert min(rates) > lr / 32 * 0.999  # never below lr / ratio, whatever the length
    short = [slanted_triangular_lr(t, 7, lr) for t in range(7)]  # cut = ⌊0.7⌋ → 1
    assert short[0] == pytest.approx(lr / 32) and short[1] == pytest.approx(lr)
    assert all(r > 0 for r in short)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: slanted_triangular_lr(10, 10, 0.1), ValueError, r"step=10 must be in \[0, 9\]"),
        (lambda: slanted_triangular_lr(-1, 10, 0.1), ValueError, r"step=-1 must be in \[0, 9\]"),
        (lambda: slanted_triangular_lr(1.0, 10, 0.1), TypeError, "step must be an int"),
        (lambda: slanted_triangular_lr(1, 0, 0.1), ValueError, "total_steps=0 must be at least 1"),
        (lambda: slanted_triangular_lr(1, 10, float("nan")), ValueError, "lr_max=nan must be a finite number above 0"),
        (lambda: slanted_triangular_lr(1, 10, 0.1, cut_frac=1.5), ValueError, r"cut_frac=1.5 must be .*in \(0, 1\)"),
        (lambda: slanted_triangular_lr(1, 10, 0.1, ratio=0.5), ValueError, "ratio=0.5 must be .*at least 1"),
        (lambda: discriminative_lrs(0.1, 0), ValueError, "n_groups=0 must be at least 1"),
        (lambda: discriminative_lrs("0.1", 3), TypeError, "lr_top must be a number"),
        (lambda: trainable_groups(-1, 3), ValueError, "epoch=-1 must be at least 0"),
    ],
)
def test_schedules_refuse_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_discriminative_lrs_and_gradual_unfreezing():
    assert discriminative_lrs(0.01, 4) == pytest.approx([0.01 / 2.6**3, 0.01 / 2.6**2, 0.01 / 2.6, 0.01])
    assert discriminative_lrs(0.01, 3, factor=1) == [0.01] * 3
    assert [trainable_groups(e, 4) for e in range(6)] == [1, 2, 3, 4, 4, 4]
    assert [trainable_groups(e, 4, gradual=False) for e in range(3)] == [4, 4, 4]


def tiny_bilm():
    torch.manual_seed(0)
    return BiLM(BiLMConfig.tiny(vocab_size=30))


def test_classifier_runs_the_forward_lm_as_the_bilm_and_pools_only_real_tokens():
    bilm = tiny_bilm().eval()
    model = LMClassifier(bilm, 3).eval()
    ids = torch.randint(4, 30, (3, 7))
    mask = torch.arange(7)[None, :] < torch.tensor([7, 4, 1])[:, None]
    ids = ids.masked_fill(~mask, 0)
    with torch.no_grad():
        top = model.top_states(ids, mask)
        fwd_top = bilm._run(ids, mask)[1][-1]  # the biLM's own forward stack
        torch.testing.assert_close(top, fwd_top)
        features = model.features(ids, mask)
        H = bilm.config.hidden
        for b, n in enumerate([7, 4, 1]):
            real = top[b, :n]
            expected = torch.cat([real[-1], real.max(0).values, real.mean(0)])
            torch.testing.assert_close(features[b], expected)
        # padding changes nothing: the same rows with other padding ids and more of it
        longer = torch.cat([ids, torch.full((3, 3), 5)], 1)
        longer_mask = torch.cat([mask, torch.zeros(3, 3, dtype=torch.bool)], 1)
        torch.testing.assert_close(model(longer, longer_mask), model(ids, mask))
    assert features.shape == (3, 3 * H)
    groups = model.groups()
    assert len(groups) == bilm.config.n_layers + 2
    assert sum(p.numel() for g in groups for p in g) == sum(p.numel() for p in model.parameters())
    assert bilm.fwd_layers[0].weight_ih_l0 is not model.lstms[0].weight_ih_l0  # a copy


def test_classifier_learns_a_task_and_refuses_bad_input():
    model = LMClassifier(tiny_bilm(), 2, dropout=0.0)
    torch.manual_seed(1)
    ids = torch.randint(4, 30, (64, 6))
    labels = (ids == 7).any(1).long()  # "does token 7 occur?"
    mask = torch.ones_like(ids, dtype=torch.bool)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(ids, mask), labels)
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.5 * first
    with pytest.raises(TypeError, match="torch.long"):
        model(ids.float(), mask)
    with pytest.raises(ValueError, match="token ids must be in"):
        model(ids + 100, mask)
    with pytest.raises(ValueError, match="at least one real token"):
        model(ids, torch.zeros_like(mask))
    with pytest.raises(TypeError, match="BiLM"):
        LMClassifier(torch.nn.Linear(2, 2), 2)
    with pytest.raises(ValueError, match="at least 2 classes"):
        LMClassifier(tiny_bilm(), 1)
    assert math.isfinite(loss.item())


def _task(n=64, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 30, (n, 6), generator=g)
    return ids, torch.ones_like(ids, dtype=torch.bool), (ids[:, -1] < 17).long()  # about half and half


def _lm_weights(model):
    return [p.detach().clone() for g in model.groups()[:-1] for p in g]


def test_finetune_classifier_learns_repeats_and_each_switch_does_what_it_says():
    bilm = tiny_bilm()
    ids, mask, y = _task()
    before = LMClassifier(bilm, 2)
    full = finetune_classifier(bilm, ids, mask, y, seed=0, epochs=8, batch_size=8)
    assert classifier_accuracy(full, ids, mask, y) > 0.85
    assert all(p.requires_grad for p in full.parameters()) and not full.training
    again = finetune_classifier(bilm, ids, mask, y, seed=0, epochs=8, batch_size=8)
    for a, b in zip(full.parameters(), again.parameters()):  # seeded: the same run twice
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    untouched = _lm_weights(before)  # the LM's weights as copied from the biLM
    frozen = finetune_classifier(bilm, ids, mask, y, seed=0, epochs=3, frozen=True)
    one_epoch = finetune_classifier(bilm, ids, mask, y, seed=0, epochs=1)  # gradual: the head alone first
    for model in (frozen, one_epoch):
        for a, b in zip(_lm_weights(model), untouched):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    at_once = finetune_classifier(bilm, ids, mask, y, seed=0, epochs=1, gradual=False)
    assert any(not torch.equal(a, b) for a, b in zip(_lm_weights(at_once), untouched))
    random_lm = finetune_classifier(bilm, ids, mask, y, seed=3, epochs=1, pretrained=False)  # tiny_bilm is seed 0
    assert not torch.equal(random_lm.tok_emb.weight, before.tok_emb.weight)


def test_finetune_classifier_refuses_bad_input():
    bilm = tiny_bilm()
    ids, mask, y = _task(8)
    with pytest.raises(TypeError, match="BiLM"):
        finetune_classifier(torch.nn.Linear(2, 2), ids, mask, y)
    with pytest.raises(TypeError, match="torch.long"):
        finetune_classifier(bilm, ids.float(), mask, y)
    with pytest.raises(TypeError, match="labels must be a torch.long"):
        finetune_classifier(bilm, ids, mask, y.float())
    with pytest.raises(TypeError, match="labels must be a torch.long"):
        finetune_classifier(bilm, ids, mask, y[:3])
    with pytest.raises(ValueError, match="labels must be in 0 … 1"):
        finetune_classifier(bilm, ids, mask, y + 2)
    with pytest.raises(ValueError, match="no training rows"):
        finetune_classifier(bilm, ids[:0], mask[:0], y[:0])
    with pytest.raises(ValueError, match="lr_top"):
        finetune_classifier(bilm, ids, mask, y, lr_top=0)
    with pytest.raises(FloatingPointError, match=r"lr_top=1e\+38 diverged at step \d+.*Lower the learning rate"):
        finetune_classifier(bilm, ids, mask, y, lr_top=1e38, gradual=False)


def _record(**changes):
    record = {"seeds": [0, 1], "accuracy": {name: [0.6, 0.61] for name in ABLATION_SETTINGS}}
    record.update(changes)
    return record


def test_load_ablation_reads_the_committed_run_and_refuses_a_broken_one(tmp_path):
    committed = load_ablation()  # onehot2gpt/assets/results/ulmfit-ablation.json, shipped with the package
    assert set(ABLATION_SETTINGS) <= set(committed["accuracy"]) and len(committed["seeds"]) >= 3
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_record()), encoding="utf-8")
    assert load_ablation(good)["accuracy"]["none of the three"] == [0.6, 0.61]
    with pytest.raises(FileNotFoundError, match="python recipes/ulmfit-ablation.py"):
        load_ablation(tmp_path / "missing.json")
    cases = {
        "not JSON": ("{ no", "not valid JSON"),
        "no seeds": (json.dumps(_record(seeds=[])), "'seeds' list"),
        "a setting missing": (json.dumps(_record(accuracy={"none of the three": [0.6, 0.6]})), "no results for"),
        "a seed missing": (json.dumps(_record(accuracy={n: [0.6] for n in ABLATION_SETTINGS})), "one accuracy"),
        "out of range": (json.dumps(_record(accuracy={n: [0.6, 61.0] for n in ABLATION_SETTINGS})), "one accuracy"),
    }
    for name, (text, match) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            load_ablation(path)


def test_the_recipe_runs_every_setting_and_writes_what_the_notebook_reads(tmp_path, capsys, monkeypatch):
    import runpy
    import sys

    script = Path(__file__).resolve().parents[1] / "recipes" / "ulmfit-ablation.py"
    monkeypatch.syspath_prepend(str(script.parent))

    def run(*argv):
        monkeypatch.setattr(sys, "argv", [str(script), *argv])
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:
            return e.code
        return 0

    tiny = ["--set", "TRAIN_SENTENCES=64", "--set", "EPOCHS=1", "--set", "TEST_SENTENCES=64", "--set", "SEEDS=[0, 1]"]
    assert run("--out", str(tmp_path / "run"), *tiny) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert load_ablation(tmp_path / "run" / "ulmfit-ablation.json") == record
    assert set(record["accuracy"]) == set(ABLATION_SETTINGS) and record["arguments"]["SEEDS"] == [0, 1]
    assert all(len(a) == 2 and all(0 <= v <= 1 for v in a) for a in record["accuracy"].values())
    assert record["command"].startswith("python recipes/ulmfit-ablation.py --out ")
    assert "repeats" in str(run("--out", str(tmp_path / "x"), "--set", "SEEDS=[1, 1]"))
    assert not (tmp_path / "x").exists()
