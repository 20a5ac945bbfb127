"""Benchmark: does the course's character GPT write words? Validation loss, training minutes, real-word share.

Scores committed character GPTs on Tiny Shakespeare (by default ``gpt-char-shakespeare-large``,
the model notebook 09 writes with, and ``gpt-char-shakespeare``, the small one it is built against):

* ``val_loss``: the mean next-character loss (nats) on 200 fixed windows of 12 × max_len characters
  of the last 10% of Tiny Shakespeare (``estimate_loss``, seed 1234), in float32;
* ``train_minutes`` and ``total_minutes``: what the checkpoint's own training run recorded (the
  updates alone, and the whole command), with ``process_cpu_minutes`` where the run recorded its
  CPU time: on a machine shared with other jobs the wall clock is an upper bound, and a one-thread
  run's CPU time is what it would take on an idle core;
* ``real_word_share``: of the words in its samples (``--samples`` samples of ``--chars`` new
  characters each, from a newline, temperature 0.8, no top-k or top-p; each sample with its own
  generator, seeds 0, 1, …), the share that are words of the training text (the first 90%).
  Words are whitespace-split, punctuation stripped from both ends, lower-cased
  (``onehot2gpt.sampling.text_words``); the pooled share over all samples, and each sample's.

With ``--retrain`` the first checkpoint's recipe (``python -m onehot2gpt.recipes NAME``, the
command that built it) runs first, into ``--out`` (default a temporary folder), and that
model is scored instead, with the wall-clock minutes this script measured.

Run from the repository root (without --retrain: the larger model's 200 evaluation windows and its
samples of 2,000 characters, each step beyond its context a forward pass over the whole window,
take some minutes on one thread; bench/results/gpt_char_writes.json holds the numbers and
timings of ``python bench/gpt_char_writes.py --threads 1``)::

    python bench/gpt_char_writes.py [--checkpoints gpt-char-shakespeare-large gpt-char-shakespeare]
                                    [--samples 3 --chars 2000 --temperature 0.8] [--threads 2]
                                    [--retrain [--out DIR]] [--smoke]

The last line is one JSON object: ``{"models": {name: {...}}, "targets": {...}, "met": {...}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from onehot2gpt.checkpoints import checkpoint_path
from onehot2gpt.data import read_tinyshakespeare
from onehot2gpt.gpt import load_gpt
from onehot2gpt.gpt_training import char_dataset, estimate_loss, train_val_split
from onehot2gpt.recipes import command
from onehot2gpt.sampling import generate, real_word_share, text_words
from onehot2gpt.utils import set_threads
from onehot2gpt.vocab import Vocab

TARGETS = {"val_loss_at_most": 1.65, "train_minutes_at_most": 60, "real_word_share_at_least": 0.85}


def score(
    folder: Path, train_text: str, val: torch.Tensor, *, samples: int, chars: int, temperature: float, eval_batches: int
) -> dict:
    model = load_gpt(folder).eval()
    vocab = Vocab.load(folder / "vocab.json")
    ids, _ = char_dataset(train_text, vocab)
    known = set(text_words(train_text))
    info = json.loads((folder / "config.json").read_text())["info"]
    start = time.time()
    val_loss = estimate_loss(model, val, batches=eval_batches, batch_size=12, block_size=model.config.max_len)
    eval_seconds = time.time() - start
    newline = torch.tensor([vocab.encode(["\n"], strict=True)])
    texts, shares = [], []
    start = time.time()
    for seed in range(samples):
        out = generate(model, newline, chars, temperature=temperature, generator=torch.Generator().manual_seed(seed))
        text = "".join(vocab.decode(out[0, 1:].tolist()))
        texts.append(text)
        shares.append(real_word_share(text, known))
    sample_seconds = time.time() - start
    words = [w for t in texts for w in text_words(t)]
    pooled = sum(w in known for w in words) / len(words)
    c = model.config
    return {
        "val_loss": round(val_loss, 4),
        "real_word_share": round(pooled, 4),
        "real_word_share_per_sample": [round(s, 4) for s in shares],
        "words_scored": len(words),
        "train_minutes": round(info["seconds"] / 60, 1),
        "total_minutes": round(info["total_seconds"] / 60, 1),
        "process_cpu_minutes": (round(info["process_cpu_seconds"] / 60, 1) if "process_cpu_seconds" in info else None),
        "recorded_val_loss": info["val_loss"],
        "iters": info["iters"],
        "ms_per_iter": info["ms_per_iter"],
        "threads_of_the_run": info.get("threads"),
        "precision": info.get("precision", "float32"),
        "command": info["command"],
        "model": {"n_layers": c.n_layers, "d_model": c.d_model, "n_heads": c.n_heads, "max_len": c.max_len},
        "params": sum(p.numel() for p in model.parameters()),
        "sample_start": texts[0][:300],
        "eval_seconds": round(eval_seconds, 1),
        "sample_seconds": round(sample_seconds, 1),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoints", nargs="+", default=["gpt-char-shakespeare-large", "gpt-char-shakespeare"])
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--chars", type=int, default=2000)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--eval-batches", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--retrain", action="store_true", help="rebuild the first checkpoint by its recipe, then score that")
    p.add_argument("--out", type=Path, help="where --retrain writes the model (default: a temporary folder)")
    p.add_argument("--smoke", action="store_true", help="2 evaluation batches, 1 sample of 200 characters")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    warnings.filterwarnings("ignore", message="the prompt .* exceed")  # samples outgrow the context: known
    if args.smoke:
        args.samples, args.chars, args.eval_batches = 1, 200, 2

    text = read_tinyshakespeare()
    ids, _ = char_dataset(text)
    train, val = train_val_split(ids, 0.1)
    train_text = text[: len(train)]  # one character per id: the first 90% as text
    folders = {name: checkpoint_path(name) for name in args.checkpoints}
    retrained = None
    if args.retrain:
        name = args.checkpoints[0]
        out = args.out or Path(tempfile.mkdtemp(prefix="gpt-char-")) / name
        argv_run = [sys.executable, *command(name, out=out)]
        print("$", " ".join(argv_run), flush=True)
        start = time.time()
        subprocess.run(argv_run, check=True)
        retrained = {"checkpoint": name, "out": str(out), "wall_minutes": round((time.time() - start) / 60, 1)}
        folders = {f"{name} (retrained)": out, **folders}

    models = {}
    for name, folder in folders.items():
        models[name] = score(
            folder,
            train_text,
            val,
            samples=args.samples,
            chars=args.chars,
            temperature=args.temperature,
            eval_batches=args.eval_batches,
        )
        m = models[name]
        print(
            f"{name}: val loss {m['val_loss']:.3f}, real words {m['real_word_share']:.1%} of "
            f"{m['words_scored']}, trained {m['train_minutes']} min ({m['total_minutes']} min in all)",
            flush=True,
        )
    first = models[next(iter(models))]
    minutes = retrained["wall_minutes"] if retrained else first["total_minutes"]
    met = {
        "val_loss": first["val_loss"] <= TARGETS["val_loss_at_most"],
        "minutes": minutes <= TARGETS["train_minutes_at_most"],
        "real_word_share": first["real_word_share"] >= TARGETS["real_word_share_at_least"],
    }
    result = {
        "models": models,
        "scored_first": next(iter(models)),
        "targets": TARGETS,
        "met": met,
        "minutes_checked": minutes,
        "retrained": retrained,
        "samples": args.samples,
        "chars_per_sample": args.chars,
        "temperature": args.temperature,
        "val_windows": f"{args.eval_batches} x 12 x max_len characters of the last 10%, seed 1234",
        "known_words": "words of the first 90% of Tiny Shakespeare (text_words)",
        "threads": threads,
        "torch": torch.__version__,
        "smoke": args.smoke,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
