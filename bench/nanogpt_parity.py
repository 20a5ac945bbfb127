"""Benchmark: time per training iteration, nanoGPT's own train.py against the course's train_gpt,
at nanoGPT's CPU settings, in one run on the same machine.

nanoGPT's README gives its CPU run on Tiny Shakespeare characters:

    python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
        --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
        --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0

This script runs exactly that (with ``--max_iters`` from ``--iters``) in a copy of a nanoGPT
checkout, on the Tiny Shakespeare file of the course's data registry (nanoGPT's prepare.py would
download the same file from the same URL), and then the course's loop (:func:`train_gpt`) on the
same settings: 4 layers × 4 heads × 128, no biases (nanoGPT's ``bias = False``), no dropout,
batch 12 × 64, AdamW lr 1e-3 → 1e-4 over the iterations with 100 warm-up, β2 0.99, weight decay
0.1, clip 1.0, a loss read every iteration (nanoGPT's log_interval=1 does the same). Both on
``--threads`` threads.

Per-iteration time: nanoGPT prints each iteration's time; the iterations that also ran an
evaluation (every 250) are left out, the rest averaged. The course's loop times the updates alone
(evaluations excluded) and reports their mean.

Get nanoGPT with ``git clone https://github.com/karpathy/nanoGPT`` (pass its folder with
``--nanogpt``); the results in the README were taken at nanoGPT commit 3adf61e.

    python bench/nanogpt_parity.py --nanogpt ../nanoGPT [--iters 2000] [--threads 2]

Last line: one JSON object with ``nanogpt_ms_per_iter``, ``course_ms_per_iter``, ``ratio``
(course / nanoGPT; the target is ≤ 1.0), the iterations, threads, torch version and nanoGPT's commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from onehot2gpt.data import fetch, read_tinyshakespeare
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.gpt_training import NANOGPT_CHAR_RECIPE, char_dataset, train_gpt, train_val_split
from onehot2gpt.utils import set_seed, set_threads


def run_nanogpt(checkout: Path, iters: int, threads: int) -> tuple[float, list[float], str]:
    """nanoGPT's CPU run in a temporary copy → (mean ms per iteration, all times, commit)."""
    if not (checkout / "train.py").exists() or not (checkout / "data" / "shakespeare_char" / "prepare.py").exists():
        raise SystemExit(
            f"--nanogpt {checkout} is not a nanoGPT checkout (no train.py or "
            f"data/shakespeare_char/prepare.py): git clone https://github.com/karpathy/nanoGPT"
        )
    commit = ""
    if (checkout / ".git").exists():
        commit = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "nanoGPT"
        shutil.copytree(checkout, work, ignore=shutil.ignore_patterns(".git", "out-*"))
        data_dir = work / "data" / "shakespeare_char"
        shutil.copyfile(fetch("tinyshakespeare", "input.txt"), data_dir / "input.txt")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        subprocess.run([sys.executable, "prepare.py"], cwd=data_dir, check=True, capture_output=True, env=env)
        cmd = [
            sys.executable,
            "train.py",
            "config/train_shakespeare_char.py",
            "--device=cpu",
            "--compile=False",
            "--eval_iters=20",
            "--log_interval=1",
            "--block_size=64",
            "--batch_size=12",
            "--n_layer=4",
            "--n_head=4",
            "--n_embd=128",
            f"--max_iters={iters}",
            f"--lr_decay_iters={iters}",
            "--dropout=0.0",
            f"--out_dir={Path(tmp) / 'out'}",
        ]
        print("nanoGPT:", " ".join(cmd[1:]), flush=True)
        out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"nanoGPT's train.py failed ({out.returncode}):\n{out.stderr[-2000:]}")
    times = {int(m[1]): float(m[2]) for m in re.finditer(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", out.stdout)}
    eval_interval = 250
    kept = [t for i, t in times.items() if i % eval_interval != 0]  # evaluations are inside those
    if not kept:
        raise SystemExit(f"no iteration times in nanoGPT's output:\n{out.stdout[-2000:]}")
    vals = re.findall(r"step (\d+): train loss ([\d.]+), val loss ([\d.]+)", out.stdout)
    print(
        f"nanoGPT: {len(times)} iterations, mean {statistics.mean(kept):.1f} ms, median "
        f"{statistics.median(kept):.1f} ms; last evaluation {vals[-1] if vals else None}",
        flush=True,
    )
    return statistics.mean(kept), kept, commit


def run_course(iters: int) -> tuple[float, float | None]:
    """The course's loop at nanoGPT's settings → (mean ms per iteration, validation loss at the end)."""
    text_ids, vocab = char_dataset(read_tinyshakespeare())
    train_ids, val_ids = train_val_split(text_ids, 0.1)
    set_seed(1337)
    model = GPT(GPTConfig.char(vocab_size=len(vocab), bias=False))
    result = train_gpt(
        model,
        train_ids,
        val_ids,
        **dict(NANOGPT_CHAR_RECIPE, iters=iters),
        eval_every=250,
        eval_batches=20,
        progress=False,
    )
    ms = 1000 * result["train_seconds"] / result["iters"]  # the updates alone, evaluations excluded
    print(f"course: {result['iters']} iterations, mean {ms:.1f} ms; val loss {result['val_loss']:.3f}", flush=True)
    return ms, result["val_loss"]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", type=Path, required=True, help="a nanoGPT checkout (git clone)")
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    start = time.time()
    theirs, _, commit = run_nanogpt(args.nanogpt, args.iters, args.threads)
    ours, val = run_course(args.iters)
    result = {
        "nanogpt_ms_per_iter": round(theirs, 2),
        "course_ms_per_iter": round(ours, 2),
        "ratio": round(ours / theirs, 3),
        "course_val_loss": round(val, 3) if val is not None else None,
        "iters": args.iters,
        "threads": args.threads,
        "torch": torch.__version__,
        "nanogpt_commit": commit,
        "seconds": round(time.time() - start, 1),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
