"""The training run of ``bilm-wikitext2.py``: the biLM's sentences as id lists, batches of similar
length, the training loop and the perplexity of both directions. Only the recipe trains a biLM; the
notebooks load the committed one (``onehot2gpt.checkpoints.load("bilm-wikitext2")``)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence

import torch
from onehot2gpt.elmo import BiLM
from onehot2gpt.utils import check_finite_loss, evaluating
from onehot2gpt.vocab import BOS, EOS, Vocab
from torch import nn
from tqdm.auto import tqdm

__all__ = ["sentence_ids", "bilm_perplexity", "train_bilm"]


def sentence_ids(sentences: Sequence[Sequence[str]], vocab: Vocab, max_len: int) -> list[list[int]]:
    """Sentences → id lists [<bos>, …, <eos>] of at most max_len (longer ones cut into pieces)."""
    bos, eos, step = vocab[BOS], vocab[EOS], max_len - 2
    return [
        [bos] + ids[i : i + step] + [eos]
        for ids in (vocab.encode_tokens(s) for s in sentences if s)
        for i in range(0, len(ids), step)
    ]


def _pad(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(map(len, seqs))
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s)
    return ids, torch.arange(T) < torch.tensor([len(s) for s in seqs])[:, None]


def _batches(seqs: list[list[int]], batch_size: int, rng: random.Random | None = None) -> list[list[list[int]]]:
    """Group sequences of similar length: shuffle (if rng), sort within pools of 50 batches, cut."""
    order = list(range(len(seqs)))
    if rng is not None:
        rng.shuffle(order)
    pool = 50 * batch_size
    batches = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: len(seqs[i]))
        batches += [[seqs[i] for i in chunk[j : j + batch_size]] for j in range(0, len(chunk), batch_size)]
    if rng is not None:
        rng.shuffle(batches)
    return batches


def bilm_perplexity(bilm: BiLM, seqs: list[list[int]], batch_size: int = 64) -> tuple[float, float]:
    """(forward, backward) perplexity over id sequences that each start <bos> and end <eos>."""
    fwd = bwd = 0.0
    n = 0
    with evaluating(bilm):
        for batch in _batches(seqs, batch_size):
            f, b, k = bilm.nll(*_pad(batch))
            fwd, bwd, n = fwd + f.item(), bwd + b.item(), n + k
    return math.exp(fwd / n), math.exp(bwd / n)


def train_bilm(
    bilm: BiLM,
    seqs: list[list[int]],
    *,
    epochs: int = 2,
    batch_size: int = 64,
    lr: float = 3e-3,
    warmup: int = 200,
    clip: float = 1.0,
    minutes: float | None = None,
    seed: int = 0,
    progress: bool = True,
) -> list[float]:
    """Adam with warm-up and cosine decay (to 10 % of lr) on lm_loss; returns each step's loss.

    Stops early once `minutes` of wall time have passed.
    """
    rng = random.Random(seed)
    opt = torch.optim.Adam(bilm.parameters(), lr=lr)
    total = epochs * len(_batches(seqs, batch_size))

    def schedule(step: int) -> float:
        progress_ = min(step / max(total, 1), 1.0)
        return min(1.0, (step + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * progress_)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    history: list[float] = []
    start = time.perf_counter()
    bilm.train()
    with tqdm(total=total, desc="biLM", disable=not progress, mininterval=2.0) as bar:
        for _ in range(epochs):
            for batch in _batches(seqs, batch_size, rng):
                loss = bilm.lm_loss(*_pad(batch))
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(bilm.parameters(), clip)
                opt.step()
                sched.step()
                history.append(check_finite_loss(loss, len(history), lr=lr, what="biLM training"))
                bar.update()
                if len(history) % 20 == 0:
                    bar.set_postfix(ppl=f"{math.exp(sum(history[-20:]) / 20):.0f}")
                if minutes is not None and time.perf_counter() - start > 60 * minutes:
                    return history
    return history
