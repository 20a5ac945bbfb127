"""The Transformer's task in notebook 06: an encoder–decoder (:class:`onehot2gpt.transformer.Seq2SeqTransformer`)
learns to rewrite dates, character by character.

:func:`encode_pairs` turns (source, target) strings into padded id tensors; :func:`train_seq2seq`
is the paper's recipe in miniature (Vaswani et al., 2017): Adam with β₂ = 0.98, a linear warm-up
then inverse-square-root decay (§5.3, :func:`onehot2gpt.training.inverse_sqrt_schedule`), label
smoothing (§5.4), gradient clipping; :func:`translate` decodes greedily and :func:`exact_match`
scores whole outputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .progress import progress_bar
from .training import inverse_sqrt_schedule, optimizer_step, pad_batch
from .utils import check_finite_loss
from .vocab import BOS, EOS, Vocab, tokenize_chars


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    tokenize: Callable[[str], list[str]] = tokenize_chars,
):
    """(source, target) strings → src (N, S) ids, tgt (N, T) ids as <bos> target <eos>, padded."""
    if not pairs:
        raise ValueError("no pairs to encode")
    src = [src_vocab.encode_tokens(tokenize(s)) for s, _ in pairs]
    tgt = [[tgt_vocab[BOS]] + tgt_vocab.encode_tokens(tokenize(t)) + [tgt_vocab[EOS]] for _, t in pairs]
    if not all(src) or any(len(t) == 2 for t in tgt):
        raise ValueError("a source or target is empty; every pair needs text on both sides")
    return pad_batch(src, src_vocab.pad_id), pad_batch(tgt, tgt_vocab.pad_id)


def train_seq2seq(
    model,
    src,
    tgt,
    *,
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 2e-3,
    warmup: int = 100,
    label_smoothing: float = 0.1,
    clip: float = 1.0,
    seed: int = 0,
    progress: bool = True,
    desc: str = "train",
) -> list[float]:
    """Teacher forcing on (src (N, S), tgt (N, T)) batches drawn at random; returns the loss per
    step. `tgt` rows are <bos> … <eos> <pad>…; padding is ignored by the loss."""
    if src.size(0) != tgt.size(0):
        raise ValueError(f"src has {src.size(0)} rows but tgt has {tgt.size(0)}; they must pair up")
    pad = model.config.pad_id
    device = next(model.parameters()).device  # batches follow the model
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, inverse_sqrt_schedule(warmup))
    model.train()
    losses = []
    with progress_bar(total=steps, desc=desc, disable=not progress, mininterval=1.0) as bar:
        for step in range(steps):
            idx = torch.randint(0, src.size(0), (batch_size,), generator=g)
            s, t = src[idx].to(device), tgt[idx].to(device)
            logits, _ = model(s, t[:, :-1])
            loss = F.cross_entropy(
                logits.flatten(0, 1), t[:, 1:].flatten(), ignore_index=pad, label_smoothing=label_smoothing
            )
            optimizer_step(loss, opt, sched, model.parameters(), clip)
            # an untrained model starts near ln V (V target tokens): 1000× that is a run exploding
            losses.append(check_finite_loss(loss, step, lr=lr, what=desc, start=math.log(logits.size(-1))))
            bar.update()
            if bar.n % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    model.eval()
    return losses


def translate(
    model,
    texts: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    tokenize: Callable[[str], list[str]] = tokenize_chars,
    max_new: int | None = None,
) -> list[str]:
    """Greedy-decode each source text; returns the output strings (tokens joined, no specials)."""
    if isinstance(texts, str):
        raise TypeError("translate takes a list of strings; wrap one text as [text]")
    if not texts or any(not t.strip() for t in texts):
        raise ValueError("give at least one non-empty text to translate")
    unknown = sorted({c for t in texts for c in tokenize(t) if c not in src_vocab})
    if unknown:
        raise ValueError(
            f"characters the model never saw: {unknown}; use only {''.join(t for t in src_vocab.itos if len(t) == 1)!r}"
        )
    src = pad_batch([src_vocab.encode_tokens(tokenize(t)) for t in texts], src_vocab.pad_id)
    out = model.greedy_decode(src, tgt_vocab[BOS], tgt_vocab[EOS], max_new)
    results = []
    for row in out.tolist():
        tokens = tgt_vocab.decode_tokens(row)
        results.append("".join(tokens[: tokens.index(EOS)] if EOS in tokens else tokens))
    return results


def exact_match(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of predictions equal to their target string."""
    if len(predictions) != len(targets) or not targets:
        raise ValueError("need as many predictions as targets, and at least one")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)
