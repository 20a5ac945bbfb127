"""Rebuild ``ulmfit-ablation.json``: ULMFiT's three techniques, each switched off, on the course biLM
(notebook 04, section 8, reads the table).

    python recipes/ulmfit-ablation.py --out DIR      # writes DIR/ulmfit-ablation.json

The seven settings of ``onehot2gpt.ulmfit.ABLATION_SETTINGS`` (the full recipe; without
discriminative rates; without STLR; without gradual unfreezing; none of the three; the LM frozen,
head only; the full recipe on a random-init biLM of the same size), each fine-tuned with
``finetune_classifier`` on the forward LM of the committed ``bilm-wikitext2`` checkpoint, once per
seed: on the first TRAIN_SENTENCES SST-2 training sentences of at least MIN_WORDS words (SST-2 train
shuffled with ``random.Random(0)``), EPOCHS epochs in batches of BATCH_SIZE, top learning rate
LR_TOP; tested on SST-2's GLUE dev set (the course's SST-2 test split; TEST_SENTENCES None: all 872).

Prints one line per run and, as the last line, the record it writes: the mean test accuracy per
setting (``ulmfit_full``, ``without_discriminative``, ``without_stlr``, ``without_gradual``,
``none_of_three``, ``frozen_head_only``, ``random_init``), then ``seeds``, ``accuracy`` (per seed),
``largest_seed_gap`` and the run's facts.
"""

import _recipe

SEEDS = [0, 1, 2, 3, 4]
TRAIN_SENTENCES = 800
MIN_WORDS = 5
EPOCHS = 4
BATCH_SIZE = 32
LR_TOP = 1e-2
TEST_SENTENCES = None
THREADS = 1

_SETTING_KEYS = {
    "ULMFiT (all three)": "ulmfit_full",
    "without discriminative rates": "without_discriminative",
    "without STLR (constant rate)": "without_stlr",
    "without gradual unfreezing": "without_gradual",
    "none of the three": "none_of_three",
    "LM frozen, head only": "frozen_head_only",
    "ULMFiT on a random-init LM": "random_init",
}


def sst2_rows(n_train: int, min_words: int, n_test: int | None):
    import random

    from onehot2gpt import data

    rows = data.read_sst2("train")
    random.Random(0).shuffle(rows)
    train = [r for r in rows if len(r[0].split()) >= min_words][:n_train]
    test = data.read_sst2("test")
    return train, test[:n_test] if n_test else test


def main() -> dict:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    if len(set(s["SEEDS"])) != len(s["SEEDS"]):
        raise SystemExit(f"SEEDS has repeats: {s['SEEDS']}")
    import json
    import os
    import platform
    import time

    import torch
    from _ulmfit import classifier_accuracy, finetune_classifier
    from onehot2gpt.checkpoints import load
    from onehot2gpt.elmo import ElmoFeatures
    from onehot2gpt.ulmfit import ABLATION_SETTINGS, load_ablation
    from onehot2gpt.utils import set_threads

    set_threads(s["THREADS"])
    recipe = {
        "train_sentences": s["TRAIN_SENTENCES"],
        "min_words": s["MIN_WORDS"],
        "epochs": s["EPOCHS"],
        "batch_size": s["BATCH_SIZE"],
        "lr_top": s["LR_TOP"],
    }
    bilm, vocab, _, _ = load("bilm-wikitext2", kind="bilm")
    elmo = ElmoFeatures(bilm, vocab)
    train, test = sst2_rows(s["TRAIN_SENTENCES"], s["MIN_WORDS"], s["TEST_SENTENCES"])
    train_ids, train_mask = elmo.ids([x.split() for x, _ in train])
    train_y = torch.tensor([y for _, y in train])
    test_ids, test_mask = elmo.ids([x.split() for x, _ in test])
    test_y = torch.tensor([y for _, y in test])

    start = time.perf_counter()
    accuracy: dict[str, list[float]] = {}
    for name, switches in ABLATION_SETTINGS.items():
        accuracy[name] = []
        for seed in s["SEEDS"]:
            model = finetune_classifier(
                bilm,
                train_ids,
                train_mask,
                train_y,
                seed=seed,
                lr_top=s["LR_TOP"],
                epochs=s["EPOCHS"],
                batch_size=s["BATCH_SIZE"],
                **switches,
            )
            accuracy[name].append(round(classifier_accuracy(model, test_ids, test_mask, test_y), 6))
            print(f"{name:30} seed {seed}: test accuracy {accuracy[name][-1]:.3f}", flush=True)
    seconds = time.perf_counter() - start
    record = {_SETTING_KEYS[name]: round(sum(a) / len(a), 4) for name, a in accuracy.items()}
    record.update(
        {
            "seeds": s["SEEDS"],
            "accuracy": accuracy,
            "largest_seed_gap": round(max(max(a) - min(a) for a in accuracy.values()), 4),
            "recipe": recipe,
            "train_sentences": len(train_y),
            "test_sentences": len(test_y),
            "seconds": round(seconds, 1),
            "threads": s["THREADS"],
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "torch": torch.__version__,
            "command": _recipe.command_line(),
            "arguments": s,
        }
    )
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        path = tmp / "ulmfit-ablation.json"
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        load_ablation(path)  # what the notebook will read must be readable
    _recipe.print_json(record)
    return record


if __name__ == "__main__":
    main()
