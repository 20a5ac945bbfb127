"""Benchmark: the zero-shot experiment's accuracy table (``onehot2gpt.zero_shot``).

Four GPTs (4 layers, 4 heads, 128 wide, 128 tokens of context, 1.0M parameters) were pre-trained
on corpora about an invented world that differ only in the share of documents in Q/A form
(0%, 0.5%, 2%, 10%; TL;DR 10% and Tatoeba English–French pairs 20% in all four). Each is scored by
greedy exact match on 120 held-out items per task, zero-shot (the bare prompt) and few-shot
(1 solved example for questions and TL;DR, 3 sentence pairs for translation):

* ``qa``: a fresh paragraph about a held-out person (never asked about, never summarised in
  pre-training), then ``q : <question>`` / ``a :``;
* ``tldr``: a fresh paragraph about a held-out person, then ``tl;dr :``;
* ``translation``: a held-out English sentence (never in pre-training), then ``=``; any of its
  Tatoeba translations counts.

By default the course checkpoints (``data/checkpoints/zero-shot-qa000``, ``-qa005``, ``-qa020``,
``-qa100``)
are evaluated (seconds). ``--train`` trains the four models anew first, exactly as
``python -m onehot2gpt.zero_shot`` does (about 3½ minutes each on 2 cores), and reports their
training time too; ``--smoke`` trains tiny models for a few updates, to check the script.

Run from the repository root::

    python bench/zero_shot.py [--train] [--threads 2] [--smoke]

The last line is one JSON object: ``{"accuracy": {"0%": {"qa": {"zero": …, "few": …},
"translation": {…}, "tldr": {…}}, "0.5%": …, "2%": …, "10%": …}, "items_per_task": 120, "source":
"checkpoints" | "trained", …}``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from onehot2gpt import zero_shot as zs
from onehot2gpt.utils import set_threads


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", action="store_true", help="train the four models anew (≈ 14 minutes)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="tiny models, a few updates: checks the script")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    s = zs.setup()
    accuracy, extra = {}, {}
    start = time.time()
    for share in zs.SHARES:
        if args.train or args.smoke:
            overrides = dict(n_layers=1, d_model=32, n_heads=2) if args.smoke else None
            recipe = dict(iters=5, warmup=1) if args.smoke else None
            model, history = zs.train_variant(s, share, config_overrides=overrides, recipe=recipe,
                                              progress=False)
            extra[zs.share_text(share)] = {"train_seconds": round(history["train_seconds"], 1),
                                     "ms_per_iter": round(history["ms_per_iter"], 1)}
            tokenizer = s.tokenizer
        else:
            model, tokenizer = zs.load_course_models([share])[share]
        accuracy[zs.share_text(share)] = {task: {mode: round(v, 4) for mode, v in row.items()}
                                    for task, row in zs.evaluate(model, tokenizer, s.tests).items()}
        print(f"Q/A share {zs.share_text(share):>4}: " + ", ".join(f"{t} {r['zero']:.0%} / {r['few']:.0%}"
                                                                 for t, r in accuracy[zs.share_text(share)].items())
              + "  (zero-shot / few-shot)", flush=True)
    result = {"accuracy": accuracy, "items_per_task": {t: len(v) for t, v in s.tests.items()},
              "source": "smoke" if args.smoke else "trained" if args.train else "checkpoints",
              "training": extra or None, "seconds": round(time.time() - start, 1), "threads": threads,
              "torch": torch.__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
