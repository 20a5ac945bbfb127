"""Benchmark: does "Q: … A:" make the zero-shot experiment's models read, or recall?
(``onehot2gpt.zero_shot``, notebook 10).

Four GPTs (4 layers, 4 heads, 128 wide, 128 tokens of context) were pre-trained on corpora about
an invented world that differ only in the share of documents in Q/A form (0%, 0.5%, 2%, 10%;
TL;DR 10% and Tatoeba English–French pairs 20% in all four). Half the world's names are *known
people* (the same facts in every document: memorisable), half are *strangers* (facts drawn anew
in every document: only the passage holds them). Each model answers 120 fresh items per test,
by greedy decoding, zero-shot (the bare prompt) and few-shot (1 solved example for questions and
TL;DR, the same 3 sentence pairs for translation); each answer is labelled "read" (the passage's
fact), "memorised" (the fact pre-training taught) or "other":

* ``qa_new`` / ``tldr_new``: a passage about a stranger: only reading can answer;
* ``qa_changed`` / ``tldr_changed``: a passage about a known person with the asked fact (for
  TL;DR the town or the trade) changed: reading gives the passage's fact, memory the old one;
* ``translation``: a held-out English sentence: "read" is a correct Tatoeba translation,
  "memorised" a French line of pre-training recalled whole.

``format`` is the share of answers whose first word is of the asked kind (a town after "where",
a name after "tl;dr :"), right or wrong.

By default the course checkpoints (``zero-shot-qa000``, ``-qa005``, ``-qa020``,
``-qa100``) are evaluated. ``--train`` trains the four models anew first with the library's
``zero_shot.train_variant``, as their recipe in ``recipes/`` does, and reports their training
time too; ``--smoke`` trains tiny models for a few updates, to check the script.

Run from the repository root::

    python bench/zero_shot.py [--train] [--threads 2] [--smoke] [--out bench/results/zero_shot.json]

The last line printed is the JSON object written to ``--out``: ``{"results": {"0%": {"qa_new":
{"zero": {"read": …, "memorised": …, "other": …, "format": …}, "few": …}, …}, …}, "items_per_test":
…, "source": "checkpoints" | "trained" | "smoke", …}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from onehot2gpt import zero_shot as zs
from onehot2gpt.utils import set_threads


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", action="store_true", help="train the four models anew first")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="tiny models, a few updates: checks the script")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the JSON (default: bench/results/zero_shot.json; "
        "with --smoke, bench/results/zero_shot_smoke.json)",
    )
    args = p.parse_args(argv)
    out = args.out or Path("bench/results") / ("zero_shot_smoke.json" if args.smoke else "zero_shot.json")
    threads = set_threads(args.threads)
    s = zs.setup()
    results, extra = {}, {}
    start = time.time()
    for share in zs.SHARES:
        if args.train or args.smoke:
            overrides = dict(n_layers=1, d_model=32, n_heads=2) if args.smoke else None
            recipe = dict(iters=5, warmup=1) if args.smoke else None
            model, history = zs.train_variant(s, share, config_overrides=overrides, recipe=recipe, progress=False)
            extra[zs.share_text(share)] = {
                "train_seconds": round(history["train_seconds"], 1),
                "ms_per_iter": round(history["ms_per_iter"], 1),
            }
            tokenizer = s.tokenizer
        else:
            model, tokenizer = zs.load_course_models([share])[share]
        table = zs.evaluate(model, tokenizer, s.tests)
        results[zs.share_text(share)] = {
            test: {mode: {k: round(v, 4) for k, v in row.items()} for mode, row in modes.items()}
            for test, modes in table.items()
        }
        print(
            f"Q/A share {zs.share_text(share):>4}: "
            + "; ".join(
                f"{test} read {r['zero']['read']:.0%}/{r['few']['read']:.0%}"
                + (f" memorised {r['zero']['memorised']:.0%}/{r['few']['memorised']:.0%}" if test != "qa_new" else "")
                for test, r in table.items()
            )
            + "  (zero-/few-shot)",
            flush=True,
        )
    result = {
        "results": results,
        "items_per_test": {t: len(v) for t, v in s.tests.items()},
        "source": "smoke" if args.smoke else "trained" if args.train else "checkpoints",
        "training": extra or None,
        "seconds": round(time.time() - start, 1),
        "threads": threads,
        "torch": torch.__version__,
        "command": "python bench/zero_shot.py"
        + (" --train" if args.train else "")
        + (" --smoke" if args.smoke else ""),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
