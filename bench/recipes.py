"""Benchmark: the laptop recipes, each course checkpoint retrained on 2 CPU cores within a budget.

For BERT (30 minutes), the subword GPT (15) and the biLM (10), this runs
``python -m onehot2gpt.recipes NAME --laptop --out DIR`` in a fresh process, times it with the
wall clock (data, vocabulary, training and the final evaluation included), reads the scores the
command records in ``DIR/config.json`` and puts them beside the committed checkpoint's. The quality
targets (:data:`TARGETS`) are the scores of the checkpoints committed before issue 20, fixed here:
the subword GPT and the biLM have since been replaced by what their laptop recipes built, so the
committed scores are no longer the bar:

* BERT: masked-piece accuracy and NSP accuracy on 50 fixed batches of WikiText-2 valid
  (``evaluate_pretraining``, the same evaluation as the committed checkpoint's 38.7% / 83.3%);
* subword GPT: validation loss, the mean of 50 fixed windows of WikiText-2 valid (target 4.816);
* biLM: forward and backward perplexity on WikiText-2 valid (target 145.67 / 141.66).

Then ``sst2_pretraining_gain``: SST-2 accuracy (872 test sentences) of the new BERT fine-tuned on
8,000 fixed random training rows, minus that of a randomly initialised BERT of the same size with
the same recipe (``bert_tasks.finetune``, 2 epochs, lr 3e-4, batch 32, dropout 0.1 in both, since the
laptop BERT pre-trains without it), in accuracy points; the committed BERT's gain is measured the
same way beside it. ``sst2-adapted`` (after ``sst2``) repeats it after task-adaptive pre-training
(``bert_pretraining.adapt_mlm``: masked LM on SST-2's 60,614 unlabelled training sentences, :data:`ADAPT`),
of the new BERT and, as a control, of a random-init one. ``sst2-tuned`` repeats it with each model's
learning rate and dropout chosen on SST-2's dev split (:func:`sst2_tuned_gain`).

``notebook08`` repeats notebook 08's live fine-tuning runs (:func:`notebook08_scores`: SST-2 from
800 rows, POS from 600 sentences with the whole BERT and with it frozen; the mean of three seeds)
from the new BERT, the committed one and a random-init one: the payoffs the course shows. A BERT
with better pre-training scores can still fine-tune worse there (every laptop BERT of 2026-11-27
did on POS, by 1.3 to 3.3 points).

``nsp-all`` scores the new and the committed BERT's next-sentence prediction on every pair of
WikiText-2 valid and test (``bert_pretraining.evaluate_nsp``), compared pair by pair: the recipe's
own 3,200 random pairs have a standard error of about 0.7 points, too coarse to tell a recipe
1 point behind from one level with the committed BERT.

Run from the repository root, on 2 quiet cores (about 90 minutes)::

    python bench/recipes.py [--only bert gpt bilm nsp-all sst2 sst2-adapted sst2-tuned notebook08] [--keep DIR]

``--only`` runs some parts (``nsp-all``, the ``sst2`` parts and ``notebook08`` need the BERT of the
same run, or ``--keep`` of an earlier one); ``--keep DIR`` writes the checkpoints to DIR (default: a temporary folder, deleted). The
results are merged into ``bench/results/recipes.json`` (each part with its date and commit) and
the last line is one JSON object with ``bert_minutes``, ``bert_mlm_accuracy``,
``bert_nsp_accuracy``, ``gpt_wikitext_minutes``, ``gpt_wikitext_val_loss``, ``bilm_minutes``,
``bilm_valid_ppl_forward``, ``bilm_valid_ppl_backward``, ``sst2_pretraining_gain`` (and
``sst2_adapted_pretraining_gain`` once measured), the targets and which are met.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "recipes.json"
PARTS = ("bert", "gpt", "bilm", "nsp-all", "sst2", "sst2-adapted", "sst2-tuned", "notebook08")
THREADS = 2  # the recipes' budget is for 2 cores; every command defaults to 2
CHECKPOINT = {"bert": "bert-wikitext2", "gpt": "gpt-wikitext2", "bilm": "bilm-wikitext2"}
# key → (comparison, target): the budgets, and the scores of the checkpoints committed before issue 20
# (BERT 20,000 steps on a GPU; the subword GPT 4,000 updates with dropout 0.1; the biLM with dropout 0.1)
TARGETS = {
    "bert_minutes": ("<=", 30),
    "gpt_wikitext_minutes": ("<=", 15),
    "bilm_minutes": ("<=", 10),
    "bert_mlm_accuracy": (">=", 0.3867),
    "bert_nsp_accuracy": (">=", 0.83),
    "gpt_wikitext_val_loss": ("<=", 4.816),
    "bilm_valid_ppl_forward": ("<=", 145.67),
    "bilm_valid_ppl_backward": ("<=", 141.66),
    "sst2_pretraining_gain": (">=", 3.0),
}


def read_info(directory: Path) -> dict:
    """The ``info`` a checkpoint's config.json records (older checkpoints stored it as a string)."""
    import ast

    info = json.loads((directory / "config.json").read_text())["info"]
    return ast.literal_eval(info) if isinstance(info, str) else info


def committed_info(name: str) -> dict:
    return read_info(ROOT / "data" / "checkpoints" / name)


def scores(part: str, info: dict) -> dict:
    """The quality numbers of a checkpoint's recorded info, under the benchmark's keys."""
    if part == "bert":
        return {"bert_mlm_accuracy": info["valid"]["mlm_accuracy"], "bert_nsp_accuracy": info["valid"]["nsp_accuracy"]}
    if part == "gpt":
        return {"gpt_wikitext_val_loss": info["val_loss"]}
    return {"bilm_valid_ppl_forward": info["valid_ppl_fwd"], "bilm_valid_ppl_backward": info["valid_ppl_bwd"]}


def run_recipe(part: str, out: Path) -> dict:
    """Run one laptop recipe in a fresh process → its minutes and scores."""
    from onehot2gpt.recipes import LAPTOP_BUDGET_MINUTES, command

    name = CHECKPOINT[part]
    # The documented command, in a fresh process (it prints the training command it runs); every
    # training command uses 2 torch threads, the budget's "2 cores".
    argv = [sys.executable, "-m", "onehot2gpt.recipes", name, "--laptop", "--out", str(out / name)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, "ONEHOT2GPT_THREADS": str(THREADS)})
    minutes = (time.perf_counter() - start) / 60
    if done.returncode != 0:
        raise SystemExit(f"the {name} recipe failed (exit {done.returncode}); its output is above")
    info = read_info(out / name)
    prefix = {"bert": "bert", "gpt": "gpt_wikitext", "bilm": "bilm"}[part]
    result = {
        f"{prefix}_minutes": round(minutes, 2),
        **scores(part, info),
        "budget_minutes": LAPTOP_BUDGET_MINUTES[name],
        "command": info.get("command"),
        "recipe": " ".join(command(name, laptop=True)),
        "committed": scores(part, committed_info(name)),
    }
    print(json.dumps(result), flush=True)
    return result


def _sst2(bert_dir: Path, n_train: int):
    """The tokenizer, the `n_train` fixed training rows, all 60,614 training sentences (no labels)
    and the encoded training and test sets."""
    from onehot2gpt import bert_tasks, data
    from onehot2gpt.subword import WordPieceTokenizer

    tok = WordPieceTokenizer.load(bert_dir / "vocab.txt")
    rows = data.read_sst2("train")
    texts = [t for t, _ in rows]
    random.Random(0).shuffle(rows)
    train, test = rows[:n_train], data.read_sst2("test")
    train_x = bert_tasks.encode_sentences(tok, [t for t, _ in train], [y for _, y in train], max_len=64)
    test_x = bert_tasks.encode_sentences(tok, [t for t, _ in test], [y for _, y in test], max_len=64)
    return tok, texts, train_x, test_x


def notebook08_data(tok) -> dict:
    """Notebook 08's live fine-tuning sets, encoded with `tok` (its cells 5 and 16): SST-2's 800
    training rows (shuffled with seed 0, at most 48 pieces) and its 872 test sentences (64), the
    first 600 training and 400 test sentences of UD English EWT with their part-of-speech tags (64)."""
    from onehot2gpt import bert_tasks, data

    rows = data.read_sst2("train")
    random.Random(0).shuffle(rows)
    rows, test = rows[:800], data.read_sst2("test")
    pos_train, pos_test = data.read_ud_pos("train")[:600], data.read_ud_pos("test")[:400]
    tagged = lambda r: bert_tasks.encode_tagged(tok, [w for w, _ in r], [t for _, t in r], max_len=64)
    return {
        "sst2_train": bert_tasks.encode_sentences(tok, [t for t, _ in rows], [y for _, y in rows], max_len=48),
        "sst2_test": bert_tasks.encode_sentences(tok, [t for t, _ in test], [y for _, y in test], max_len=64),
        "pos_train": tagged(pos_train),
        "pos_test": tagged(pos_test),
    }


def notebook08_scores(encoder, sets: dict, device: str = "cpu", seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    """Notebook 08's live fine-tuning runs (``bert_tasks.finetune``, 2 epochs, batches grouped by
    length, dropout 0.1) from fresh copies of `encoder` (a BertModel, left unchanged) on
    :func:`notebook08_data`'s `sets` → mean test accuracy over `seeds` (each seeds the head's
    initialisation, the dropout and the shuffling; one run moves by up to 3 points with the seed),
    and each run's: ``sst2`` (lr 3e-4), ``pos`` (lr 1e-3) and ``pos_frozen`` (the encoder frozen,
    the head alone at lr 3e-3)."""
    import copy

    from onehot2gpt import bert_tasks
    from onehot2gpt.bert import BertForSequenceClassification, BertForTokenClassification, set_dropout
    from onehot2gpt.utils import set_seed

    n_tags = len(bert_tasks.UPOS_TAGS)
    heads = {
        "sst2": (lambda e: BertForSequenceClassification(e, 2), "sequence", "sst2", 3e-4),
        "pos": (lambda e: BertForTokenClassification(e, n_tags), "token", "pos", 1e-3),
        "pos_frozen": (lambda e: BertForTokenClassification(e, n_tags, freeze_bert=True), "token", "pos", 3e-3),
    }
    runs: dict[str, list[float]] = {name: [] for name in heads}
    for seed in seeds:
        for name, (head, task, data, lr) in heads.items():
            set_seed(seed)
            model = head(set_dropout(copy.deepcopy(encoder).cpu(), 0.1)).to(device)
            bert_tasks.finetune(
                model, sets[f"{data}_train"], task=task, epochs=2, lr=lr, group_by_length=True, progress=False
            )
            runs[name].append(round(bert_tasks.evaluate(model, sets[f"{data}_test"], task)["accuracy"], 4))
    return {**{name: round(sum(v) / len(v), 4) for name, v in runs.items()}, "runs": runs, "seeds": list(seeds)}


def notebook08(bert_dir: Path) -> dict:
    """:func:`notebook08_scores` of the BERT in `bert_dir`, the committed one and a random-init one of
    the same size (seed 0), and the new one's differences from the committed one, in points."""
    import torch
    from onehot2gpt.bert import BertModel, load_bert
    from onehot2gpt.subword import WordPieceTokenizer

    sets = notebook08_data(WordPieceTokenizer.load(bert_dir / "vocab.txt"))
    new = load_bert(bert_dir).bert
    torch.manual_seed(0)
    result = {
        "new_bert": notebook08_scores(new, sets),
        "committed_bert": notebook08_scores(load_bert(ROOT / "data" / "checkpoints" / CHECKPOINT["bert"]).bert, sets),
        "random_init": notebook08_scores(BertModel(new.config), sets),
    }
    result["new_minus_committed_points"] = {
        k: round(100 * (result["new_bert"][k] - result["committed_bert"][k]), 1) for k in ("sst2", "pos", "pos_frozen")
    }
    return result


def _finetune_sst2(encoder, train_x, test_x, epochs: int, lr: float) -> float:
    from onehot2gpt import bert_tasks
    from onehot2gpt.bert import BertForSequenceClassification, set_dropout
    from onehot2gpt.utils import set_seed

    set_seed(0)
    model = set_dropout(BertForSequenceClassification(encoder, 2), 0.1)
    bert_tasks.finetune(model, train_x, task="sequence", epochs=epochs, lr=lr, progress=False)
    return bert_tasks.evaluate(model, test_x, "sequence")["accuracy"]


def sst2_gain(bert_dir: Path, n_train: int = 8000, epochs: int = 2, lr: float = 3e-4) -> dict:
    """SST-2 test accuracy, pre-trained minus random init, in points, for the BERT in `bert_dir`."""
    import torch
    from onehot2gpt.bert import BertModel, load_bert

    _, _, train_x, test_x = _sst2(bert_dir, n_train)
    accuracy = {}
    for pretrained in (True, False):
        encoder = load_bert(bert_dir).bert
        if not pretrained:
            torch.manual_seed(0)
            encoder = BertModel(encoder.config)  # same size, random initialisation
        accuracy[pretrained] = _finetune_sst2(encoder, train_x, test_x, epochs, lr)
        print(f"SST-2 {'pre-trained' if pretrained else 'random init'}: {accuracy[pretrained]:.4f}", flush=True)
    return {
        "pretrained": round(accuracy[True], 4),
        "random_init": round(accuracy[False], 4),
        "gain_points": round(100 * (accuracy[True] - accuracy[False]), 2),
    }


ADAPT = {"steps": 1500, "batch_size": 64, "lr": 5e-4, "mask_prob": 0.15}


def sst2_adapted_gain(bert_dir: Path, n_train: int = 8000, epochs: int = 2, lr: float = 3e-4) -> dict:
    """The same SST-2 measure after task-adaptive pre-training (``bert_pretraining.adapt_mlm``,
    :data:`ADAPT`: masked LM on SST-2's 60,614 training sentences, labels unused; the 872 test
    sentences are never read): the Wikipedia BERT adapted, and, to tell the two texts apart, a
    random-init BERT given the same adaptation; both against the random-init BERT with none."""
    import torch
    from onehot2gpt.bert import BertForPreTraining, load_bert
    from onehot2gpt.bert_pretraining import adapt_mlm, native_bf16

    tok, texts, train_x, test_x = _sst2(bert_dir, n_train)
    bf16 = native_bf16()
    accuracy, minutes = {}, {}
    for start in ("wikipedia", "random"):
        model = load_bert(bert_dir)
        if start == "random":
            torch.manual_seed(0)
            model = BertForPreTraining(model.config)
        began = time.perf_counter()
        adapt_mlm(model, tok, texts, seed=0, bf16=bf16, explicit_attention=bf16, progress=False, **ADAPT)
        minutes[start] = round((time.perf_counter() - began) / 60, 2)
        accuracy[start] = _finetune_sst2(model.bert, train_x, test_x, epochs, lr)
        print(f"SST-2 {start} BERT + adaptation: {accuracy[start]:.4f} ({minutes[start]} min adapting)", flush=True)
    return {
        "adapted_pretrained": round(accuracy["wikipedia"], 4),
        "adapted_random_init": round(accuracy["random"], 4),
        "adapt": {**ADAPT, "bf16": bf16, "minutes": minutes},
    }


def nsp_all_pairs(bert_dir: Path) -> dict:
    """NSP accuracy of the new and the committed BERT on every next-sentence pair of WikiText-2
    valid and test (``bert_pretraining.evaluate_nsp``: about 16,000 and 18,500 pairs, against the
    3,200 random ones of the recipe's own evaluation), and the two compared pair by pair: on how
    many pairs only the new one is right, only the committed one, and McNemar's z of the difference."""
    import math

    from onehot2gpt.bert import load_bert
    from onehot2gpt.bert_pretraining import evaluate_nsp, tokenize_articles
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.subword import WordPieceTokenizer

    result = {}
    for split in ("valid", "test"):
        correct = {}
        for which, directory in (
            ("new_bert", bert_dir),
            ("committed_bert", ROOT / "data" / "checkpoints" / CHECKPOINT["bert"]),
        ):
            tok = WordPieceTokenizer.load(directory / "vocab.txt")
            scored = evaluate_nsp(load_bert(directory), tok, tokenize_articles(tok, wikitext_articles(split)))
            correct[which] = scored["correct"]
            result.setdefault(split, {})[which] = round(scored["nsp_accuracy"], 4)
        only_new = int((correct["new_bert"] & ~correct["committed_bert"]).sum())
        only_committed = int((~correct["new_bert"] & correct["committed_bert"]).sum())
        result[split].update(
            pairs=len(correct["new_bert"]),
            only_new_right=only_new,
            only_committed_right=only_committed,
            mcnemar_z=round((only_new - only_committed) / math.sqrt(max(1, only_new + only_committed)), 2),
        )
        print(f"NSP on every pair of WikiText-2 {split}: {json.dumps(result[split])}", flush=True)
    return result


TUNED_GRID = {"lr": (1e-4, 3e-4, 1e-3), "dropout": (0.0, 0.1)}


def sst2_tuned_gain(bert_dir: Path, n_train: int = 8000, epochs: int = 2) -> dict:
    """The SST-2 measure with each model's fine-tuning settings chosen for it, as the BERT paper
    chose a learning rate per task: every learning rate and dropout of :data:`TUNED_GRID`, 2 epochs
    on the same 8,000 rows (batches grouped by length), the setting with the best accuracy on SST-2's
    dev split (6,735 sentences, none of them in the 872 test sentences) reported on the test set;
    for the new BERT, the committed one and a random-init one."""
    import torch
    from onehot2gpt import bert_tasks, data
    from onehot2gpt.bert import BertForSequenceClassification, BertModel, load_bert, set_dropout
    from onehot2gpt.utils import set_seed

    dev = data.read_sst2("dev")
    starts = {
        "new_bert": bert_dir,
        "committed_bert": ROOT / "data" / "checkpoints" / CHECKPOINT["bert"],
        "random_init": bert_dir,
    }
    result = {}
    for which, directory in starts.items():
        tok, _, train_x, test_x = _sst2(directory, n_train)  # each BERT with its own vocabulary
        dev_x = bert_tasks.encode_sentences(tok, [t for t, _ in dev], [y for _, y in dev], max_len=64)
        runs = []
        for lr in TUNED_GRID["lr"]:
            for dropout in TUNED_GRID["dropout"]:
                encoder = load_bert(directory).bert
                if which == "random_init":
                    torch.manual_seed(0)
                    encoder = BertModel(encoder.config)
                set_seed(0)
                model = set_dropout(BertForSequenceClassification(encoder, 2), dropout)
                bert_tasks.finetune(
                    model, train_x, task="sequence", epochs=epochs, lr=lr, progress=False, group_by_length=True
                )
                runs.append(
                    {
                        "lr": lr,
                        "dropout": dropout,
                        "dev": round(bert_tasks.evaluate(model, dev_x, "sequence")["accuracy"], 4),
                        "test": round(bert_tasks.evaluate(model, test_x, "sequence")["accuracy"], 4),
                    }
                )
                print(f"SST-2 {which} lr {lr} dropout {dropout}: {json.dumps(runs[-1])}", flush=True)
        best = max(runs, key=lambda r: r["dev"])
        result[which] = {"chosen": best, "runs": runs}
    for which in ("new_bert", "committed_bert"):
        result[f"{which}_gain_points"] = round(
            100 * (result[which]["chosen"]["test"] - result["random_init"]["chosen"]["test"]), 2
        )
    return result


def new_bert(out: Path) -> Path:
    """The folder of the BERT that this run (or the earlier run kept in `out`) trained."""
    bert_dir = out / CHECKPOINT["bert"]
    if not (bert_dir / "config.json").exists():
        raise SystemExit(
            f"no BERT in {bert_dir}: run the bert part in the same run, or pass "
            f"--keep with the folder of an earlier run"
        )
    return bert_dir


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def summary(results: dict) -> dict:
    """The issue's keys from the merged results, with each target and whether it is met."""
    flat = {}
    for part in ("bert", "gpt", "bilm"):
        flat.update(
            {
                k: v
                for k, v in results.get(part, {}).items()
                if k.endswith(("_minutes", "_accuracy", "_loss", "_forward", "_backward")) and k != "budget_minutes"
            }
        )
    if "sst2" in results:
        flat["sst2_pretraining_gain"] = results["sst2"]["new_bert"]["gain_points"]
        flat["sst2_pretraining_gain_committed_bert"] = results["sst2"]["committed_bert"]["gain_points"]
    if "sst2_adapted" in results:
        flat["sst2_adapted_pretraining_gain"] = results["sst2_adapted"]["gain_points"]
    if "sst2_tuned" in results:
        flat["sst2_tuned_pretraining_gain"] = results["sst2_tuned"]["new_bert_gain_points"]
    if "notebook08" in results:
        flat["notebook08_new_minus_committed_points"] = results["notebook08"]["new_minus_committed_points"]
    if "nsp_all_pairs" in results:
        flat["bert_nsp_accuracy_all_pairs"] = results["nsp_all_pairs"]["valid"]["new_bert"]
        flat["bert_nsp_accuracy_all_pairs_committed"] = results["nsp_all_pairs"]["valid"]["committed_bert"]
    met = {}
    for key, (op, target) in TARGETS.items():
        if key in flat:
            met[key] = flat[key] <= target if op == "<=" else flat[key] >= target
    return {
        **flat,
        "targets": {k: f"{op} {t}" for k, (op, t) in TARGETS.items()},
        "met": met,
        "not_met": sorted(k for k, ok in met.items() if not ok),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--keep", type=Path, default=None, help="write the checkpoints here (default: deleted)")
    args = p.parse_args(argv)
    from onehot2gpt.utils import set_threads

    set_threads(THREADS)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    stamp = {"date": datetime.date.today().isoformat(), "commit": commit(), "threads": THREADS, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for part in ("bert", "gpt", "bilm"):
            if part in args.only:
                results[part] = {**run_recipe(part, out), **stamp}
                RESULTS.parent.mkdir(parents=True, exist_ok=True)
                RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        if "nsp-all" in args.only:
            start = time.perf_counter()
            results["nsp_all_pairs"] = {
                **nsp_all_pairs(new_bert(out)),
                "minutes": round((time.perf_counter() - start) / 60, 2),
                **stamp,
            }
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        if "sst2" in args.only:
            bert_dir = new_bert(out)
            start = time.perf_counter()
            results["sst2"] = {
                "new_bert": sst2_gain(bert_dir),
                "committed_bert": sst2_gain(ROOT / "data" / "checkpoints" / CHECKPOINT["bert"]),
                "minutes": round((time.perf_counter() - start) / 60, 2),
                **stamp,
            }
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        if "sst2-adapted" in args.only:
            bert_dir = new_bert(out)
            if "sst2" not in results:
                raise SystemExit("sst2-adapted is compared with the sst2 part's random-init BERT: run sst2 first")
            start = time.perf_counter()
            adapted = sst2_adapted_gain(bert_dir)
            random_init = results["sst2"]["new_bert"]["random_init"]
            results["sst2_adapted"] = {
                **adapted,
                "random_init": random_init,
                "gain_points": round(100 * (adapted["adapted_pretrained"] - random_init), 2),
                "gain_over_adapted_random_points": round(
                    100 * (adapted["adapted_pretrained"] - adapted["adapted_random_init"]), 2
                ),
                "minutes": round((time.perf_counter() - start) / 60, 2),
                **stamp,
            }
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        if "sst2-tuned" in args.only:
            start = time.perf_counter()
            results["sst2_tuned"] = {
                **sst2_tuned_gain(new_bert(out)),
                "minutes": round((time.perf_counter() - start) / 60, 2),
                **stamp,
            }
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        if "notebook08" in args.only:
            start = time.perf_counter()
            results["notebook08"] = {
                **notebook08(new_bert(out)),
                "minutes": round((time.perf_counter() - start) / 60, 2),
                **stamp,
            }
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(summary(results)))


if __name__ == "__main__":
    main()
