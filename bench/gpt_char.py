"""Benchmark: the course's character GPTs on Tiny Shakespeare: how fast they train, and whether they write words.

Two parts (``--only train`` or ``--only writes``; both by default):

``train``: nanoGPT's CPU recipe against the course's, each training :class:`onehot2gpt.gpt.GPT` on
the first 90% of Tiny Shakespeare (65 characters, ``char_dataset`` + ``train_val_split``) and scored
on the same 200 fixed windows of 12 × 64 characters of the last 10% (``estimate_loss``, seed
1234), before training and every ``eval_every`` updates. Times are training seconds only
(``train_gpt`` stops the clock while it evaluates), on ``--threads`` CPU threads.

* ``nanogpt_settings``: nanoGPT's CPU run from its README (``NANOGPT_CHAR_RECIPE``):
  ``GPTConfig.char`` (4 layers, 4 heads, 128 wide, 64 characters of context, no dropout), batch
  12, AdamW lr 1e-3, β = (0.9, 0.99), weight decay 0.1, clip 1.0, 100 warm-up updates, cosine
  decay to 1e-4 over 2,000 updates.
* ``course_recipe``: the course's recipe (``COURSE_CHAR_MODEL``, ``COURSE_CHAR_RECIPE``): 2 layers
  × 192 (4 heads, about nanoGPT's parameter count), batch 12, lr 3e-3 (floor 3e-4), 50 warm-up
  updates, the cosine over 1,000 updates. Its flags below change any part of it.

``writes``: scores committed character GPTs (``gpt-char-shakespeare-large``, the model notebook
09 writes with, and ``gpt-char-shakespeare``, the one it is built against):

* ``val_loss``: the mean next-character loss (nats) on 200 fixed windows of 12 × max_len
  characters of the last 10% (``estimate_loss``, seed 1234), in float32;
* ``train_minutes``, ``total_minutes`` and ``process_cpu_minutes``: what the checkpoint's own
  training run recorded (on a shared machine the wall clock is an upper bound);
* ``real_word_share``: of the words in ``--samples`` samples of ``--chars`` characters each (from
  a newline, temperature 0.8, each sample with its own generator, seeds 0, 1, …), the share that
  are words of the training text (``onehot2gpt.sampling.text_words``: whitespace-split,
  punctuation stripped, lower-cased).

Run from the repository root::

    python bench/gpt_char.py [--only train|writes] [--threads 2] [--smoke]
        [--iters N] [--lr 3e-3 --batch-size 12 --warmup 50 --course-iters 1000 ...]
        [--checkpoints gpt-char-shakespeare-large gpt-char-shakespeare] [--samples 3 --chars 2000]

The last line is one JSON object ``{"train": {"nanogpt_settings": {...}, "course_recipe": {...}},
"writes": {"models": {...}, "met": {...}}, ...}``. ``--smoke`` trains a few updates and writes one
short sample with 2 evaluation batches: it checks the script, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import torch
from onehot2gpt.checkpoints import load
from onehot2gpt.data import read_tinyshakespeare
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.gpt_training import char_dataset, estimate_loss, train_gpt, train_val_split
from onehot2gpt.sampling import generate, real_word_share, text_words
from onehot2gpt.utils import set_threads

# nanoGPT's CPU run (its README: config/train_shakespeare_char.py with --batch_size=12
# --block_size=64 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --dropout=0.0).
NANOGPT_CHAR_RECIPE = dict(
    iters=2000,
    batch_size=12,
    block_size=64,
    lr=1e-3,
    min_lr=1e-4,
    warmup=100,
    weight_decay=0.1,
    betas=(0.9, 0.99),
    clip=1.0,
)
# The course's recipe, chosen by runs of this script: a shallower, wider model (2 layers x 192
# instead of 4 x 128, about the same parameters) costs fewer kernel launches per update, so more
# updates fit in a second; with 3x nanoGPT's learning rate (and floor), half the warm-up and the
# cosine over 1,000 updates. Batch stays 12: on a CPU a larger batch costs about proportionally
# more per update.
COURSE_CHAR_MODEL = dict(n_layers=2, n_heads=4, d_model=192)
COURSE_CHAR_RECIPE = dict(NANOGPT_CHAR_RECIPE, iters=1000, lr=3e-3, min_lr=3e-4, warmup=50)
TRAIN_TARGET = 1.90  # validation loss nanoGPT's CPU run ends near
WRITES_TARGETS = {"val_loss_at_most": 1.65, "train_minutes_at_most": 60, "real_word_share_at_least": 0.85}
EVAL_BATCH_SIZE = 12


def train_run(name, config, recipe, train, val, *, eval_every, eval_batches, seed=0):
    """Train one recipe from seed `seed` and summarise its history."""
    torch.manual_seed(seed)
    model = GPT(config)
    history = train_gpt(
        model,
        train,
        val,
        **recipe,
        eval_every=eval_every,
        eval_batches=eval_batches,
        eval_batch_size=EVAL_BATCH_SIZE,
        seed=seed,
        progress=False,
    )
    for done, seconds, loss in history["evals"]:
        print(f"{name}: {done:5d} updates  {seconds:7.1f} s  val {loss:.4f}", flush=True)
    reached = next(((i, s) for i, s, v in history["evals"] if v <= TRAIN_TARGET), (None, None))
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


def train_part(args, train, val, vocab_size) -> dict:
    c, r = GPTConfig.char(**COURSE_CHAR_MODEL), COURSE_CHAR_RECIPE
    course = dict(
        r,
        iters=args.course_iters if args.course_iters is not None else r["iters"],
        batch_size=args.batch_size if args.batch_size is not None else r["batch_size"],
        lr=args.lr if args.lr is not None else r["lr"],
        min_lr=args.min_lr if args.min_lr is not None else r["min_lr"],
        warmup=args.warmup if args.warmup is not None else r["warmup"],
        weight_decay=args.weight_decay if args.weight_decay is not None else r["weight_decay"],
    )
    sizes = {
        k: getattr(args, k) if getattr(args, k) is not None else getattr(c, k)
        for k in ("d_model", "n_layers", "n_heads")
    }
    runs = {
        "nanogpt_settings": (GPTConfig.char(vocab_size), dict(NANOGPT_CHAR_RECIPE), 100),
        "course_recipe": (GPTConfig.char(vocab_size, **sizes), course, args.eval_every),
    }
    eval_batches = 200
    result = {}
    for name, (config, recipe, eval_every) in runs.items():
        if args.iters is not None:
            recipe["iters"] = args.iters
        if args.smoke:
            recipe.update(iters=4, warmup=2)
            eval_every, eval_batches = 2, 2
        start = time.time()
        result[name] = train_run(name, config, recipe, train, val, eval_every=eval_every, eval_batches=eval_batches)
        result[name]["wall_seconds"] = round(time.time() - start, 1)
    result.update(
        target_val_loss=TRAIN_TARGET,
        eval_batches=eval_batches,
        eval_windows="12 x 64 characters of the last 10%, seed 1234",
    )
    return result


def score(name, train_text, val, *, samples, chars, temperature, eval_batches) -> dict:
    """One committed character GPT → its validation loss, recorded training time and real-word share."""
    model, vocab, _, info = load(name)
    known = set(text_words(train_text))
    start = time.time()
    val_loss = estimate_loss(
        model, val, batches=eval_batches, batch_size=EVAL_BATCH_SIZE, block_size=model.config.max_len
    )
    eval_seconds = time.time() - start
    newline = torch.tensor([vocab.encode_tokens(["\n"], strict=True)])
    texts, shares = [], []
    start = time.time()
    for seed in range(samples):
        out = generate(model, newline, chars, temperature=temperature, generator=torch.Generator().manual_seed(seed))
        text = vocab.decode(out[0, 1:].tolist())
        texts.append(text)
        shares.append(real_word_share(text, known))
    sample_seconds = time.time() - start
    words = [w for t in texts for w in text_words(t)]
    c = model.config
    return {
        "val_loss": round(val_loss, 4),
        "real_word_share": round(sum(w in known for w in words) / len(words), 4),
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


def writes_part(args, train_text, val) -> dict:
    if args.smoke:
        args.samples, args.chars, args.eval_batches = 1, 200, 2
    models = {}
    for name in args.checkpoints:
        m = models[name] = score(
            name,
            train_text,
            val,
            samples=args.samples,
            chars=args.chars,
            temperature=args.temperature,
            eval_batches=args.eval_batches,
        )
        print(
            f"{name}: val loss {m['val_loss']:.3f}, real words {m['real_word_share']:.1%} of "
            f"{m['words_scored']}, trained {m['train_minutes']} min ({m['total_minutes']} min in all)",
            flush=True,
        )
    first = models[args.checkpoints[0]]
    return {
        "models": models,
        "scored_first": args.checkpoints[0],
        "targets": WRITES_TARGETS,
        "met": {
            "val_loss": first["val_loss"] <= WRITES_TARGETS["val_loss_at_most"],
            "minutes": first["total_minutes"] <= WRITES_TARGETS["train_minutes_at_most"],
            "real_word_share": first["real_word_share"] >= WRITES_TARGETS["real_word_share_at_least"],
        },
        "samples": args.samples,
        "chars_per_sample": args.chars,
        "temperature": args.temperature,
        "val_windows": f"{args.eval_batches} x 12 x max_len characters of the last 10%, seed 1234",
        "known_words": "words of the first 90% of Tiny Shakespeare (text_words)",
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["train", "writes"], help="run one part (default: both)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="a few updates, one short sample: checks the script")
    t = p.add_argument_group("train: the course recipe (defaults: COURSE_CHAR_MODEL, COURSE_CHAR_RECIPE)")
    t.add_argument("--iters", type=int, help="updates for both runs (default: each recipe's own)")
    t.add_argument("--course-iters", type=int)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--lr", type=float)
    t.add_argument("--min-lr", type=float)
    t.add_argument("--warmup", type=int)
    t.add_argument("--weight-decay", type=float)
    t.add_argument("--d-model", type=int)
    t.add_argument("--n-layers", type=int)
    t.add_argument("--n-heads", type=int)
    t.add_argument("--eval-every", type=int, default=100, help="updates between evaluations of the course run")
    w = p.add_argument_group("writes")
    w.add_argument("--checkpoints", nargs="+", default=["gpt-char-shakespeare-large", "gpt-char-shakespeare"])
    w.add_argument("--samples", type=int, default=3)
    w.add_argument("--chars", type=int, default=2000)
    w.add_argument("--temperature", type=float, default=0.8)
    w.add_argument("--eval-batches", type=int, default=200)
    args = p.parse_args(argv)
    for name in ("iters", "course_iters", "batch_size", "warmup", "d_model", "n_layers", "n_heads", "samples", "chars"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    threads = set_threads(args.threads)
    warnings.filterwarnings("ignore", message="the prompt .* exceed")  # samples outgrow the context: known

    text = read_tinyshakespeare()
    ids, vocab = char_dataset(text)
    train, val = train_val_split(ids, 0.1)
    result = {}
    if args.only in (None, "train"):
        result["train"] = train_part(args, train, val, len(vocab))
    if args.only in (None, "writes"):
        result["writes"] = writes_part(args, text[: len(train)], val)  # one character per id
    result.update(threads=threads, torch=torch.__version__, smoke=args.smoke)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
