"""Benchmark: ULMFiT's three techniques, each switched off, on the course biLM (notebook 04, section 8).

The study that notebook 04 shows, with more seeds than a notebook can afford: the seven settings of
``onehot2gpt.ulmfit.ABLATION_SETTINGS`` (the full recipe; without discriminative rates; without
STLR; without gradual unfreezing; none of the three; the LM frozen, head only; the full recipe on a
random-init biLM of the same size), each fine-tuned with ``finetune_classifier`` on the forward LM
of the committed ``bilm-wikitext2`` checkpoint, once per seed:

* training: 800 SST-2 training sentences of at least five words (SST-2 train shuffled with
  ``random.Random(0)``, then the first 800 such rows), four epochs in batches of 32, Adam
  β = (0.7, 0.99), top learning rate 1e-2;
* test: the 872 sentences of SST-2's GLUE dev set (the course's SST-2 test split).

Notebook 04 runs two of these fine-tunings live with its own loop (seed 0) and reads the table from
``data/results/ulmfit-ablation.json``, which ``--out`` writes (the last full run is kept there).

Run from the repository root (about 7 minutes on one thread, 35 fine-tunings)::

    python bench/ulmfit.py [--seeds 0 1 2 3 4] [--threads 1] [--out data/results/ulmfit-ablation.json] [--smoke]

Prints one line per run and, as the last line, one JSON object that starts with the mean test
accuracy per setting (``ulmfit_full``, ``without_discriminative``, ``without_stlr``,
``without_gradual``, ``none_of_three``, ``frozen_head_only``, ``random_init``), then ``seeds``,
``accuracy`` (per seed), ``largest_seed_gap`` and the run's facts. ``--smoke`` fine-tunes on 64
sentences for one epoch and tests on 64 (checks the script, not the numbers; never written).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
from onehot2gpt import data
from onehot2gpt.checkpoints import checkpoint_path
from onehot2gpt.elmo import ElmoFeatures, load_bilm
from onehot2gpt.ulmfit import ABLATION_SETTINGS, classifier_accuracy, finetune_classifier, load_ablation
from onehot2gpt.utils import set_threads

KEYS = {
    "ULMFiT (all three)": "ulmfit_full",
    "without discriminative rates": "without_discriminative",
    "without STLR (constant rate)": "without_stlr",
    "without gradual unfreezing": "without_gradual",
    "none of the three": "none_of_three",
    "LM frozen, head only": "frozen_head_only",
    "ULMFiT on a random-init LM": "random_init",
}
RECIPE = {"train_sentences": 800, "min_words": 5, "epochs": 4, "batch_size": 32, "lr_top": 1e-2}


def sst2_rows(n_train: int, min_words: int, n_test: int | None):
    rows = data.read_sst2("train")
    random.Random(0).shuffle(rows)
    train = [r for r in rows if len(r[0].split()) >= min_words][:n_train]
    test = data.read_sst2("test")
    return train, test[:n_test] if n_test else test


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the record here (JSON), atomically")
    parser.add_argument("--smoke", action="store_true", help="tiny subsets: checks the script, not the numbers")
    args = parser.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds has repeats: {args.seeds}")
    if args.smoke and args.out is not None:
        parser.error("--smoke numbers are not results: leave out --out")
    set_threads(args.threads)
    recipe = dict(RECIPE, **({"train_sentences": 64, "epochs": 1} if args.smoke else {}))
    bilm, vocab = load_bilm(checkpoint_path("bilm-wikitext2"))
    elmo = ElmoFeatures(bilm, vocab)
    train, test = sst2_rows(recipe["train_sentences"], recipe["min_words"], 64 if args.smoke else None)
    train_ids, train_mask = elmo.ids([s.split() for s, _ in train])
    train_y = torch.tensor([y for _, y in train])
    test_ids, test_mask = elmo.ids([s.split() for s, _ in test])
    test_y = torch.tensor([y for _, y in test])

    start = time.perf_counter()
    accuracy: dict[str, list[float]] = {}
    for name, switches in ABLATION_SETTINGS.items():
        accuracy[name] = []
        for seed in args.seeds:
            model = finetune_classifier(
                bilm,
                train_ids,
                train_mask,
                train_y,
                seed=seed,
                lr_top=recipe["lr_top"],
                epochs=recipe["epochs"],
                batch_size=recipe["batch_size"],
                **switches,
            )
            accuracy[name].append(round(classifier_accuracy(model, test_ids, test_mask, test_y), 6))
            print(f"{name:30} seed {seed}: test accuracy {accuracy[name][-1]:.3f}", flush=True)
    seconds = time.perf_counter() - start
    record = {KEYS[name]: round(sum(a) / len(a), 4) for name, a in accuracy.items()}
    record.update(
        {
            "seeds": args.seeds,
            "accuracy": accuracy,
            "largest_seed_gap": round(max(max(a) - min(a) for a in accuracy.values()), 4),
            "recipe": recipe,
            "train_sentences": len(train_y),
            "test_sentences": len(test_y),
            "seconds": round(seconds, 1),
            "threads": args.threads,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "torch": torch.__version__,
            "command": "python " + " ".join(["bench/ulmfit.py", *(argv if argv is not None else sys.argv[1:])]),
            "smoke": args.smoke,
        }
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=args.out.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        try:
            load_ablation(tmp)  # what the notebook will read must be readable
        except ValueError:
            os.unlink(tmp)
            raise
        os.replace(tmp, args.out)
    print(json.dumps(record, ensure_ascii=False))
    return record


if __name__ == "__main__":
    main()
