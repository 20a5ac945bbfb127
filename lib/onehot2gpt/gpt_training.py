"""Training a GPT as a language model (notebook 09): nanoGPT's recipe on one stream of ids.

:func:`char_dataset` and :func:`train_val_split` make Tiny Shakespeare a stream of character ids,
:func:`wikitext_stream` makes WikiText-2 one of WordPiece ids; :func:`lm_batch` draws random windows
and their next tokens; :func:`train_gpt` is nanoGPT's loop (AdamW, warm-up then cosine decay,
:func:`onehot2gpt.training.cosine_lr`, gradient clipping) and :func:`estimate_loss` the validation
loss on fixed windows. ``python -m onehot2gpt.gpt_training char|wikitext --out DIR`` builds the
course checkpoints. Fine-tuning a GPT on a labelled task is :mod:`onehot2gpt.gpt_tasks`.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .training import adamw, cosine_lr, optimizer_step
from .utils import check_finite_loss
from .vocab import Vocab, tokenize_chars


def char_dataset(text: str, vocab: Vocab | None = None) -> tuple[torch.Tensor, Vocab]:
    """Text → (ids (N,) LongTensor, vocab): one id per character. Without `vocab`, the distinct
    characters sorted by code point and no special tokens, as nanoGPT builds it (65 for Tiny
    Shakespeare). A character outside a given `vocab` raises ValueError, unless it has <unk>.

    Example:
        >>> ids, vocab = char_dataset("abba!")
        >>> ids.tolist(), vocab.itos
        ([1, 2, 2, 1, 0], ['!', 'a', 'b'])
    """
    chars = tokenize_chars(text)
    if not chars:
        raise ValueError("the text is empty: a character dataset needs at least one character")
    if vocab is None:
        vocab = Vocab(sorted(set(chars)), specials=())
    unknown = sorted(set(chars) - set(vocab.stoi))
    if unknown and vocab.unk_id is None:
        raise ValueError(
            f"{len(unknown)} characters are not in the vocabulary, e.g. {unknown[:10]}; "
            f"build the vocabulary from this text (char_dataset(text)) or one that covers it"
        )
    unk, stoi = vocab.unk_id, vocab.stoi
    return torch.tensor([stoi.get(c, unk) for c in chars], dtype=torch.long), vocab


def train_val_split(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (N,) → (train, val): the first 1 − val_fraction of the stream and the rest, unshuffled
    (nanoGPT's 90/10 split of Tiny Shakespeare, so the validation text is a play the model never read).

    Example:
        >>> [t.tolist() for t in train_val_split(torch.arange(10), 0.2)]
        [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9]]
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(
            f"val_fraction is the share of the stream kept for validation, between 0 and 1; got {val_fraction}"
        )
    n = int(len(ids) * (1 - val_fraction))
    return ids[:n], ids[n:]


def lm_batch(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a stream: data (N,) → x (B, T), y (B, T) with T = block_size and
    y[b, t] = the token after x[b, t], i.e. the same window shifted by one (nanoGPT's get_batch).

    Example:
        >>> x, y = lm_batch(torch.arange(100), 2, 4, torch.Generator().manual_seed(0))
        >>> bool((y == x + 1).all())
        True
    """
    if not isinstance(data, torch.Tensor) or data.dim() != 1:
        raise ValueError("data must be one 1-D tensor of token ids, the whole text as one stream")
    if len(data) <= block_size:
        raise ValueError(
            f"the stream has {len(data)} tokens; a window of block_size={block_size} plus "
            f"its next token needs at least {block_size + 1}"
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    window = data[starts[:, None] + torch.arange(block_size + 1)]  # (B, T + 1)
    return window[:, :-1], window[:, 1:]


def _next_token_loss(model, x, y):
    """Mean cross-entropy of the model's predictions on x (B, T) against the next tokens y (B, T)."""
    logits = model(x).logits  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


@torch.no_grad()
def estimate_loss(
    model, data: torch.Tensor, *, batches: int = 200, batch_size: int = 12, block_size: int = 64, seed: int = 1234
) -> float:
    """Mean next-token loss (nats) of `model` on `batches` random windows of `data` (N,), in eval
    mode. The windows depend only on `seed`, so every call scores the same text, and losses taken
    at different moments of training differ only because the model changed."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    try:
        for _ in range(batches):
            x, y = lm_batch(data, batch_size, block_size, g)
            total += _next_token_loss(model, x.to(device), y.to(device)).item()
    finally:
        model.train(was_training)
    return total / batches


def train_gpt(
    model,
    train_data: torch.Tensor,
    val_data: torch.Tensor | None = None,
    *,
    iters: int,
    batch_size: int = 12,
    block_size: int = 64,
    lr: float = 1e-3,
    min_lr: float = 1e-4,
    warmup: int = 100,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.99),
    clip: float = 1.0,
    eval_every: int = 100,
    eval_batches: int = 200,
    eval_batch_size: int | None = None,
    stop_at_val: float | None = None,
    seed: int = 0,
    bf16: bool = False,
    progress: bool = True,
    desc: str = "GPT",
) -> dict:
    """Train a language model on random windows of `train_data` (N,) (nanoGPT's loop).

    AdamW (weight decay on matrices and embeddings only, not on biases and LayerNorms), the
    :func:`cosine_lr` schedule, gradient norm clipped to `clip`. With `val_data`, the validation
    loss (:func:`estimate_loss` on `eval_batches` fixed windows of `eval_batch_size`, default
    `batch_size`) is taken before training, every `eval_every` updates and after the last; with
    `stop_at_val`, training stops at the first evaluation ≤ that value. With `bf16` each update's
    forward pass runs under bfloat16 autocast (matrix products in bfloat16; weights, gradients and
    AdamW in float32): faster on a CPU with native bfloat16 (AVX512-BF16 or AMX), slower on one without (:func:`onehot2gpt.bert_pretraining.native_bf16` tells). The
    validation loss is always taken in float32.

    Returns a dict: per update "loss" and "lr"; "evals", a list of (updates done, training
    seconds so far, validation loss); "iters" (updates done), "train_seconds" (time in the
    updates alone, evaluations excluded), "eval_seconds", "ms_per_iter", "val_loss" (the last
    evaluation, or None). The model is left in eval mode.
    """
    if block_size > model.config.max_len:
        raise ValueError(f"block_size={block_size} is longer than the model's context max_len={model.config.max_len}")
    if iters < 1 or lr <= 0 or eval_every < 1:
        raise ValueError(
            f"need iters ≥ 1, lr > 0 and eval_every ≥ 1; got iters={iters}, lr={lr}, eval_every={eval_every}"
        )
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = adamw(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas)
    # LambdaLR scales the base lr; cosine_lr gives absolute values, hence the division.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_lr(s, lr=lr, min_lr=min_lr, warmup=warmup, iters=iters) / lr
    )
    history = {"loss": [], "lr": [], "evals": []}
    train_seconds = eval_seconds = 0.0

    def evaluate(done: int) -> bool:
        """Score val_data; True when training should stop."""
        nonlocal eval_seconds
        start = time.perf_counter()
        val = estimate_loss(
            model, val_data, batches=eval_batches, batch_size=eval_batch_size or batch_size, block_size=block_size
        )
        eval_seconds += time.perf_counter() - start
        history["evals"].append((done, train_seconds, val))
        return stop_at_val is not None and val <= stop_at_val

    stop = val_data is not None and evaluate(0)
    model.train()
    with tqdm(total=iters, desc=desc, disable=not progress, mininterval=1.0) as bar:
        for step in range(iters):
            if stop:
                break
            start = time.perf_counter()
            history["lr"].append(opt.param_groups[0]["lr"])
            x, y = lm_batch(train_data, batch_size, block_size, g)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = _next_token_loss(model, x.to(device), y.to(device))
            optimizer_step(loss, opt, sched, model.parameters(), clip)
            # .item() (in the check) waits for the device: honest timing
            history["loss"].append(check_finite_loss(loss, step, lr=lr, what=desc))
            train_seconds += time.perf_counter() - start
            bar.update()
            done = step + 1
            if val_data is not None and (done % eval_every == 0 or done == iters):
                stop = evaluate(done)
                bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", val=f"{history['evals'][-1][2]:.3f}", refresh=False)
            elif done % 50 == 0:
                bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
    model.eval()
    done = len(history["loss"])
    history.update(
        iters=done,
        train_seconds=train_seconds,
        eval_seconds=eval_seconds,
        ms_per_iter=1000 * train_seconds / done if done else None,
        val_loss=history["evals"][-1][2] if history["evals"] else None,
    )
    return history


# The two recipes for GPTConfig.char on Tiny Shakespeare that bench/gpt_char.py compares.
# nanoGPT's CPU run (its README, config/train_shakespeare_char.py with --batch_size=12
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
# The course's recipe, chosen by bench/gpt_char.py runs on 2 cores: a shallower, wider model (2
# layers × 192 instead of 4 × 128, about the same parameters) costs fewer kernel launches per
# update, so more updates fit in a second; with 3× nanoGPT's learning rate (and floor), half the
# warm-up and the cosine over 1,000 updates it reached validation 1.89 in 39 s of training, where
# the 4 × 128 model with lr 4e-3 over 1,000 updates ended at 1.91 in 50 s. Batch stays 12: on a CPU
# a larger batch costs about proportionally more per update, and in equal time batch 24 learned less.
COURSE_CHAR_MODEL = dict(n_layers=2, n_heads=4, d_model=192)
COURSE_CHAR_RECIPE = dict(NANOGPT_CHAR_RECIPE, iters=1000, lr=3e-3, min_lr=3e-4, warmup=50)
# The committed checkpoint gpt-char-shakespeare: nanoGPT's model (GPTConfig.char, 4 layers × 128)
# with the course's learning rates over 1,500 updates; the defaults of ``gpt_training char``.
CHECKPOINT_CHAR_RECIPE = dict(COURSE_CHAR_RECIPE, iters=1500)
# The committed checkpoint gpt-char-shakespeare-large, the character GPT notebook 09 writes with:
# 4 layers × 256, 128 characters of context, batch 16, 3,000 updates under bfloat16 autocast on one
# thread. The arguments of ``gpt_training char`` that built it (``onehot2gpt.recipes`` runs them;
# bench/gpt_char_writes.py scores the result and can retrain it).
LARGE_CHAR_ARGS = [
    "--n-layers",
    "4",
    "--d-model",
    "256",
    "--n-heads",
    "4",
    "--block-size",
    "128",
    "--batch-size",
    "16",
    "--iters",
    "3000",
    "--lr",
    "2e-3",
    "--min-lr",
    "2e-4",
    "--warmup",
    "100",
    "--eval-every",
    "500",
    "--eval-batches",
    "100",
    "--threads",
    "1",
    "--precision",
    "bf16",
]


def wikitext_stream(tokenizer, split: str = "train") -> torch.Tensor:
    """WikiText-2 as one stream of WordPiece ids (N,): each article's sentences in order, articles
    separated by [SEP] (the model's "end of document"), for next-token training with :func:`lm_batch`."""
    from .data import wikitext_articles

    ids: list[int] = []
    for article in wikitext_articles(split):
        for sentence in article:
            ids += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence))
        ids.append(tokenizer.sep_id)
    return torch.tensor(ids, dtype=torch.long)


def _train_gpt_char_command(args, argv):
    """``gpt-char``: train a character GPT on Tiny Shakespeare; save it with its vocabulary."""
    import json
    import sys

    from .data import read_tinyshakespeare
    from .gpt import GPT, GPTConfig, save_gpt
    from .utils import set_threads

    set_threads(args.threads)
    bf16 = args.precision == "bf16"
    if bf16:
        from .bert_pretraining import native_bf16

        if not native_bf16(args.device):
            raise SystemExit(
                f"--precision bf16: this {args.device} has no native bfloat16 (on a CPU: AVX512-BF16 "
                f"or AMX), where autocast makes each update slower; use --precision float32"
            )
    start, cpu_start = time.time(), time.process_time()
    ids, vocab = char_dataset(read_tinyshakespeare())
    train, val = train_val_split(ids, 0.1)
    recipe = dict(
        iters=args.iters,
        batch_size=args.batch_size,
        block_size=args.block_size,
        lr=args.lr,
        min_lr=args.min_lr,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        betas=(0.9, 0.99),
        clip=1.0,
    )
    torch.manual_seed(args.seed)
    config = GPTConfig.char(
        vocab_size=len(vocab),
        max_len=args.block_size,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
    )
    model = GPT(config).to(args.device)
    history = train_gpt(
        model,
        train,
        val,
        **recipe,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        eval_batch_size=12,
        seed=args.seed,
        bf16=bf16,
        desc="GPT char",
    )
    info = {
        "data": "Tiny Shakespeare, first 90% (read_tinyshakespeare, train_val_split)",
        "command": "python -m onehot2gpt.gpt_training " + " ".join(sys.argv[1:] if argv is None else argv),
        "recipe": {**recipe, "betas": list(recipe["betas"])},
        "iters": history["iters"],
        "seconds": round(history["train_seconds"], 1),
        "ms_per_iter": round(history["ms_per_iter"], 1),
        "total_seconds": round(time.time() - start, 1),
        "process_cpu_seconds": round(time.process_time() - cpu_start, 1),
        "val_loss": round(history["val_loss"], 4),
        "val_loss_is": f"mean of {args.eval_batches} fixed windows (12 x {args.block_size} characters) "
        f"of the last 10% (estimate_loss, seed 1234)",
        "evals": [[i, round(s, 1), round(v, 4)] for i, s, v in history["evals"]],
        "threads": args.threads,
        "device": args.device,
        "seed": args.seed,
        "precision": args.precision,
    }
    save_gpt(model.cpu(), args.out, info=info, tokenizer=vocab)
    print(json.dumps({k: v for k, v in info.items() if k != "evals"}))


def _train_gpt_wikitext_command(args, argv):
    """``gpt-wikitext``: a subword GPT on WikiText-2 with the course BERT's WordPiece vocabulary."""
    import json
    import sys

    from .checkpoints import checkpoint_path
    from .gpt import GPT, GPTConfig, save_gpt
    from .subword import WordPieceTokenizer
    from .utils import set_threads

    set_threads(args.threads)
    start = time.time()
    vocab_file = checkpoint_path("bert-wikitext2") / "vocab.txt"
    tokenizer = WordPieceTokenizer.load(vocab_file)
    train, val = wikitext_stream(tokenizer, "train"), wikitext_stream(tokenizer, "valid")
    recipe = dict(
        iters=args.iters,
        batch_size=args.batch_size,
        block_size=args.block_size,
        lr=args.lr,
        min_lr=args.lr / 10,
        warmup=args.warmup,
        weight_decay=0.1,
        betas=(0.9, 0.99),
        clip=1.0,
    )
    torch.manual_seed(args.seed)
    config = GPTConfig.small(vocab_size=len(tokenizer), max_len=args.block_size, dropout=args.dropout)
    model = GPT(config).to(args.device)
    history = train_gpt(
        model,
        train,
        val,
        **recipe,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        eval_batch_size=32,
        seed=args.seed,
        desc="GPT WikiText-2",
    )
    info = {
        "data": "WikiText-2 train as one WordPiece stream (wikitext_stream), the course BERT's vocabulary",
        "command": "python -m onehot2gpt.gpt_training " + " ".join(sys.argv[1:] if argv is None else argv),
        "recipe": {**recipe, "betas": list(recipe["betas"])},
        "iters": history["iters"],
        "seconds": round(history["train_seconds"], 1),
        "ms_per_iter": round(history["ms_per_iter"], 1),
        "total_seconds": round(time.time() - start, 1),
        "val_loss": round(history["val_loss"], 4),
        "val_perplexity": round(math.exp(history["val_loss"]), 1),
        "val_loss_is": f"mean of {args.eval_batches} fixed windows (32 x {args.block_size} pieces) of WikiText-2 valid",
        "dropout": args.dropout,
        "threads": args.threads,
        "device": args.device,
        "seed": args.seed,
    }
    save_gpt(model.cpu(), args.out, info=info, tokenizer=tokenizer)
    print(json.dumps(info))


def build_parser():
    """The parser of ``python -m onehot2gpt.gpt_training char --out DIR`` (the character GPT of Tiny
    Shakespeare) and ``... wikitext --out DIR`` (the subword GPT of WikiText-2). Its defaults are the
    arguments that built the committed ``gpt-char-shakespeare`` and ``gpt-wikitext2`` (which
    ``python -m onehot2gpt.recipes`` rebuilds)."""
    import argparse
    from pathlib import Path

    from .gpt import GPTConfig

    p = argparse.ArgumentParser(
        prog="python -m onehot2gpt.gpt_training", description="Train a course GPT and save it with its vocabulary."
    )
    sub = p.add_subparsers(dest="what", required=True)
    r, c = CHECKPOINT_CHAR_RECIPE, GPTConfig.char()
    gpt = sub.add_parser(
        "char",
        help="train a character GPT on Tiny Shakespeare",
        description="Train a character GPT on the first 90%% of Tiny Shakespeare; by "
        "default the committed checkpoint's recipe (GPTConfig.char, "
        "CHECKPOINT_CHAR_RECIPE). The validation loss is taken on the last 10%%.",
    )
    gpt.add_argument("--out", required=True, type=Path)
    gpt.add_argument("--iters", type=int, default=r["iters"], help="updates; the cosine decay ends at the last")
    gpt.add_argument("--batch-size", type=int, default=r["batch_size"])
    gpt.add_argument("--block-size", type=int, default=r["block_size"], help="context (= the model's max_len)")
    gpt.add_argument("--lr", type=float, default=r["lr"])
    gpt.add_argument("--min-lr", type=float, default=r["min_lr"])
    gpt.add_argument("--warmup", type=int, default=r["warmup"])
    gpt.add_argument("--weight-decay", type=float, default=r["weight_decay"])
    gpt.add_argument("--d-model", type=int, default=c.d_model)
    gpt.add_argument("--n-layers", type=int, default=c.n_layers)
    gpt.add_argument("--n-heads", type=int, default=c.n_heads)
    gpt.add_argument("--eval-every", type=int, default=100)
    gpt.add_argument("--eval-batches", type=int, default=200)
    gpt.add_argument("--threads", type=int, default=2)
    gpt.add_argument("--seed", type=int, default=0)
    gpt.add_argument(
        "--precision",
        choices=["float32", "bf16"],
        default="float32",
        help="bf16: forward passes under bfloat16 autocast, faster on a CPU with native "
        "bfloat16 (AVX512-BF16 or AMX); refused on one without",
    )
    gpt.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    wiki = sub.add_parser(
        "wikitext",
        help="train the course subword GPT on WikiText-2",
        description="GPTConfig.small on WikiText-2 with the course BERT's vocabulary.",
    )
    wiki.add_argument("--out", required=True, type=Path)
    # 3,500 updates without dropout: the laptop recipe (issue 20), about 14 minutes on 2 cores, which
    # beat the earlier 4,000 with dropout 0.1 (validation loss 4.780 against 4.816)
    wiki.add_argument("--iters", type=int, default=3500)
    wiki.add_argument("--batch-size", type=int, default=32)
    wiki.add_argument("--block-size", type=int, default=64)
    wiki.add_argument("--lr", type=float, default=2e-3)
    wiki.add_argument("--warmup", type=int, default=100)
    wiki.add_argument("--dropout", type=float, default=0.0)
    wiki.add_argument("--eval-every", type=int, default=500)
    wiki.add_argument(
        "--eval-batches",
        type=int,
        default=50,
        help="fixed validation windows of 32 x block size scored at each evaluation",
    )
    wiki.add_argument("--threads", type=int, default=2)
    wiki.add_argument("--seed", type=int, default=0)
    wiki.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    return p


def main(argv=None):
    """Run the command line (see :func:`build_parser`)."""
    args = build_parser().parse_args(argv)
    if args.what == "char":
        _train_gpt_char_command(args, argv)
    else:
        _train_gpt_wikitext_command(args, argv)


if __name__ == "__main__":
    main()
