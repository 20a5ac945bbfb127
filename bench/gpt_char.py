"""Benchmark: a character GPT on Tiny Shakespeare, nanoGPT's CPU recipe against the course's.

Both runs train :class:`onehot2gpt.gpt.GPT` on the first 90% of Tiny Shakespeare (65 characters,
``char_dataset`` + ``train_val_split``) and score the same thing: the mean loss on a fixed set of
200 windows of 12 × 64 characters of the last 10% (``estimate_loss``, seed 1234), taken before
training and every ``eval_every`` updates. Times are training seconds only (``train_gpt`` stops the
clock while it evaluates), on ``--threads`` CPU threads.

(a) ``nanogpt_settings``: nanoGPT's CPU run from its README (``NANOGPT_CHAR_RECIPE``):
    ``GPTConfig.char`` (4 layers, 4 heads, 128 wide, 64 characters of context, no dropout),
    batch 12, AdamW lr 1e-3, β = (0.9, 0.99), weight decay 0.1, clip 1.0, 100 warm-up updates,
    cosine decay to 1e-4 over 2,000 updates; evaluated every 100.
(b) ``course_recipe``: the course's own recipe (``COURSE_CHAR_MODEL`` and ``COURSE_CHAR_RECIPE``,
    in :mod:`onehot2gpt.gpt_training`): 2 layers × 192 wide
    (4 heads, ≈0.9M parameters, about nanoGPT's count) instead of 4 × 128, batch 12, lr 3e-3
    (floor 3e-4), 50 warm-up updates and the cosine over 1,000 updates. How it was chosen (each
    a full run of this script with --only course, 2 threads): 4 × 128 with lr 3e-3 over 1,500
    updates first reached 1.90 after 66.7 s; 4 × 128 with lr 4e-3 over 1,000 updates ended at
    1.908 after 50.1 s; 2 × 192 with lr 3e-3 over 1,000 updates reached 1.886 after 39.3 s at
    43 ms per update. The shallower model does the same arithmetic in fewer, larger kernels,
    so more updates fit in a second; the higher learning rate and shorter schedule buy the rest.
    Every part can be changed by a flag; evaluated every 100 updates, as (a).

Run from the repository root (a few minutes of training per run on 2 cores, plus one
evaluation of about 5 s per 100 updates)::

    python bench/gpt_char.py [--threads 2] [--only nanogpt|course] [--iters N] [--smoke]
                             [--lr 3e-3 --batch-size 12 --warmup 50 --course-iters 1500 ...]

Prints the validation loss at each evaluation and, as the last line, one JSON object:
``{"nanogpt_settings": {...}, "course_recipe": {...}, "threads": ...}``, each run with
``ms_per_iter``, ``val_loss_at_2000`` (null when the run is shorter), ``seconds_to_val_1_90``
(training seconds until the first evaluation ≤ 1.90; null if none), ``iters_to_val_1_90``,
``iters``, ``val_loss_final``, the recipe and the model's sizes. ``--smoke`` trains a few updates
with 2 evaluation batches, to check the script, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from onehot2gpt.data import read_tinyshakespeare
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.gpt_training import (
    COURSE_CHAR_MODEL,
    COURSE_CHAR_RECIPE,
    NANOGPT_CHAR_RECIPE,
    char_dataset,
    train_gpt,
    train_val_split,
)
from onehot2gpt.utils import set_threads

TARGET = 1.90
EVAL = dict(eval_batches=200, eval_batch_size=12)  # the same 200 windows of 12 × 64 for both runs


def run(name, config, recipe, train, val, *, eval_every, eval_batches, seed=0):
    torch.manual_seed(seed)
    model = GPT(config)
    history = train_gpt(
        model,
        train,
        val,
        **recipe,
        eval_every=eval_every,
        eval_batches=eval_batches,
        eval_batch_size=EVAL["eval_batch_size"],
        seed=seed,
        progress=False,
    )
    for done, seconds, loss in history["evals"]:
        print(f"{name}: {done:5d} updates  {seconds:7.1f} s  val {loss:.4f}", flush=True)
    reached = next(((i, s) for i, s, v in history["evals"] if v <= TARGET), (None, None))
    at_2000 = next((v for i, _, v in history["evals"] if i == 2000), None)
    return {
        "ms_per_iter": round(history["ms_per_iter"], 2),
        "val_loss_at_2000": None if at_2000 is None else round(at_2000, 4),
        "seconds_to_val_1_90": None if reached[1] is None else round(reached[1], 1),
        "iters_to_val_1_90": reached[0],
        "iters": history["iters"],
        "train_seconds": round(history["train_seconds"], 1),
        "val_loss_final": round(history["val_loss"], 4),
        "eval_every": eval_every,
        "recipe": {**recipe, "betas": list(recipe["betas"])},
        "model": {k: getattr(config, k) for k in ("n_layers", "n_heads", "d_model", "max_len", "dropout")},
        "params": sum(p.numel() for p in model.parameters()),
        "evals": [[i, round(s, 1), round(v, 4)] for i, s, v in history["evals"]],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", choices=["nanogpt", "course"], help="run one of the two recipes")
    p.add_argument(
        "--iters",
        type=int,
        help="updates for both runs (each schedule decays over them); "
        "default: each recipe's own (2,000 and --course-iters)",
    )
    p.add_argument("--smoke", action="store_true", help="a few updates: checks the script, not the numbers")
    c, r = GPTConfig.char(**COURSE_CHAR_MODEL), COURSE_CHAR_RECIPE
    course = p.add_argument_group("the course recipe")
    course.add_argument("--course-iters", type=int, default=r["iters"])
    course.add_argument("--batch-size", type=int, default=r["batch_size"])
    course.add_argument("--lr", type=float, default=r["lr"])
    course.add_argument("--min-lr", type=float, default=r["min_lr"])
    course.add_argument("--warmup", type=int, default=r["warmup"])
    course.add_argument("--weight-decay", type=float, default=r["weight_decay"])
    course.add_argument("--d-model", type=int, default=c.d_model)
    course.add_argument("--n-layers", type=int, default=c.n_layers)
    course.add_argument("--n-heads", type=int, default=c.n_heads)
    course.add_argument(
        "--eval-every", type=int, default=100, help="updates between evaluations of the course run (nanoGPT's: 100)"
    )
    args = p.parse_args(argv)
    threads = set_threads(args.threads)

    ids, vocab = char_dataset(read_tinyshakespeare())
    train, val = train_val_split(ids, 0.1)
    runs = {
        "nanogpt_settings": (GPTConfig.char(len(vocab)), dict(NANOGPT_CHAR_RECIPE), 100),
        "course_recipe": (
            GPTConfig.char(len(vocab), d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads),
            dict(
                r,
                iters=args.course_iters,
                batch_size=args.batch_size,
                lr=args.lr,
                min_lr=args.min_lr,
                warmup=args.warmup,
                weight_decay=args.weight_decay,
            ),
            args.eval_every,
        ),
    }
    if args.only:
        runs = {k: v for k, v in runs.items() if k.startswith(args.only)}
    eval_batches = EVAL["eval_batches"]
    result = {}
    for name, (config, recipe, eval_every) in runs.items():
        if args.iters is not None:
            recipe["iters"] = args.iters
        if args.smoke:
            recipe.update(iters=4, warmup=2)
            eval_every, eval_batches = 2, 2
        start = time.time()
        result[name] = run(name, config, recipe, train, val, eval_every=eval_every, eval_batches=eval_batches)
        result[name]["wall_seconds"] = round(time.time() - start, 1)
    result.update(
        threads=threads,
        target_val_loss=TARGET,
        eval_batches=eval_batches,
        eval_windows="12 x 64 characters of the last 10%, seed 1234",
        torch=torch.__version__,
        smoke=args.smoke,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
