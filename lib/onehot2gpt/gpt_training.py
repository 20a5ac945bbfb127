"""Training a GPT as a language model (notebook 09): nanoGPT's recipe on one stream of ids.

:func:`char_dataset` and :func:`train_val_split` make Tiny Shakespeare a stream of character ids,
:func:`wikitext_stream` makes WikiText-2 one of WordPiece ids; :func:`lm_batch` draws random windows
and their next tokens; :func:`train_gpt` is nanoGPT's loop (AdamW, warm-up then cosine decay,
:func:`onehot2gpt.training.cosine_lr`, gradient clipping) and :func:`estimate_loss` the validation
loss on fixed windows. The course checkpoints are built by ``recipes/gpt-*.py``. Fine-tuning a GPT
on a labelled task is :mod:`onehot2gpt.gpt_tasks`.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from .progress import progress_bar
from .training import adamw, cosine_lr, optimizer_step
from .utils import check_finite_loss, check_int, check_number, check_tensor, evaluating
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
    fix = "the share of the stream kept for validation"
    check_number(val_fraction, "val_fraction", 0, 1, low_open=True, high_open=True, fix=fix)
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
    check_tensor(data, "data", dims=1, fix="the whole text as one stream of token ids")
    check_int(batch_size, "batch_size", 1)
    check_int(block_size, "block_size", 1)
    fix = f"a window of block_size={block_size} and the token after it must fit in the stream"
    check_int(len(data), "len(data)", block_size + 1, fix=fix)
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
    check_int(batches, "batches", 1)
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    with evaluating(model):
        for _ in range(batches):
            x, y = lm_batch(data, batch_size, block_size, g)
            total += _next_token_loss(model, x.to(device), y.to(device)).item()
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
    forward pass runs under bfloat16 autocast (weights, gradients and AdamW stay float32; the
    validation loss is always taken in float32).

    Returns a dict: per update "loss" and "lr"; "evals", a list of (updates done, training
    seconds so far, validation loss); "iters" (updates done), "train_seconds" (time in the
    updates alone, evaluations excluded), "eval_seconds", "ms_per_iter", "val_loss" (the last
    evaluation, or None). The model is left in eval mode.
    """
    check_int(block_size, "block_size", 1, model.config.max_len, fix="a window fits the model's max_len")
    check_int(iters, "iters", 1)
    check_int(eval_every, "eval_every", 1)
    check_number(lr, "lr", 0, low_open=True)
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = adamw(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas)
    # LambdaLR scales the base lr; cosine_lr gives absolute values, hence the division.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_lr(s, lr=lr, min_lr=min_lr, warmup=warmup, iters=iters) / lr
    )
    history = {"loss": [], "lr": [], "evals": []}
    train_seconds = eval_seconds = 0.0
    vocab_size = getattr(model.config, "vocab_size", None)
    # an untrained model starts near ln V; a loss 1000× above it is a run exploding, not a spike
    uniform = math.log(vocab_size) if vocab_size else None

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
    with progress_bar(total=iters, desc=desc, disable=not progress, mininterval=1.0) as bar:
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
            history["loss"].append(check_finite_loss(loss, step, lr=lr, what=desc, start=uniform))
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
