"""Training loops and pre-training objectives shared by the notebooks that train Transformers.

BERT's two pre-training tasks (notebook 07; Devlin et al., 2018, §3.1): :func:`mask_tokens` for
the masked language model and :func:`nsp_pairs` for next-sentence prediction. Notebook 06 trains a small encoder–decoder (:class:`onehot2gpt.transformer.Seq2SeqTransformer`)
to rewrite dates; the loop is the paper's recipe in miniature: Adam with β₂ = 0.98, a linear
warm-up then inverse-square-root decay (§5.3), label smoothing (§5.4), gradient clipping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .vocab import BOS, EOS, Vocab, tokenize_chars


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int = 0) -> torch.Tensor:
    """List of id lists → (N, longest) LongTensor, right-padded with `pad_id`."""
    if not rows:
        raise ValueError("nothing to pad: give at least one sequence")
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


def encode_pairs(pairs: Sequence[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab,
                 tokenize: Callable[[str], list[str]] = tokenize_chars):
    """(source, target) strings → src (N, S) ids, tgt (N, T) ids as <bos> target <eos>, padded."""
    if not pairs:
        raise ValueError("no pairs to encode")
    src = [src_vocab.encode(tokenize(s)) for s, _ in pairs]
    tgt = [[tgt_vocab[BOS]] + tgt_vocab.encode(tokenize(t)) + [tgt_vocab[EOS]] for _, t in pairs]
    if not all(src) or any(len(t) == 2 for t in tgt):
        raise ValueError("a source or target is empty; every pair needs text on both sides")
    return pad_batch(src, src_vocab.pad_id), pad_batch(tgt, tgt_vocab.pad_id)


def inverse_sqrt_schedule(warmup: int):
    """lr factor of the paper, scaled to 1 at the end of warm-up: min(s/w, √(w/s))."""
    return lambda step: min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5)


def train_seq2seq(model, src, tgt, *, steps: int = 1000, batch_size: int = 64, lr: float = 2e-3,
                  warmup: int = 100, label_smoothing: float = 0.1, clip: float = 1.0,
                  seed: int = 0, progress: bool = True, desc: str = "train") -> list[float]:
    """Teacher forcing on (src (N, S), tgt (N, T)) batches drawn at random; returns the loss per
    step. `tgt` rows are <bos> … <eos> <pad>…; padding is ignored by the loss."""
    if src.size(0) != tgt.size(0):
        raise ValueError(f"src has {src.size(0)} rows but tgt has {tgt.size(0)}; they must pair up")
    pad = model.config.pad_id
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, inverse_sqrt_schedule(warmup))
    model.train()
    losses = []
    with tqdm(total=steps, desc=desc, disable=not progress, mininterval=1.0) as bar:
        for _ in range(steps):
            idx = torch.randint(0, src.size(0), (batch_size,), generator=g)
            s, t = src[idx], tgt[idx]
            logits, _ = model(s, t[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), t[:, 1:].reshape(-1),
                                   ignore_index=pad, label_smoothing=label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            sched.step()
            losses.append(loss.item())
            bar.update()
            if bar.n % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    model.eval()
    return losses


def translate(model, texts: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab,
              tokenize: Callable[[str], list[str]] = tokenize_chars, max_new: int | None = None
              ) -> list[str]:
    """Greedy-decode each source text; returns the output strings (tokens joined, no specials)."""
    if isinstance(texts, str):
        raise TypeError("translate takes a list of strings; wrap one text as [text]")
    if not texts or any(not t.strip() for t in texts):
        raise ValueError("give at least one non-empty text to translate")
    unknown = sorted({c for t in texts for c in tokenize(t) if c not in src_vocab})
    if unknown:
        raise ValueError(f"characters the model never saw: {unknown}; use only "
                         f"{''.join(t for t in src_vocab.itos if len(t) == 1)!r}")
    src = pad_batch([src_vocab.encode(tokenize(t)) for t in texts], src_vocab.pad_id)
    out = model.greedy_decode(src, tgt_vocab[BOS], tgt_vocab[EOS], max_new)
    results = []
    for row in out.tolist():
        tokens = tgt_vocab.decode(row)
        results.append("".join(tokens[:tokens.index(EOS)] if EOS in tokens else tokens))
    return results


def exact_match(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of predictions equal to their target string."""
    if len(predictions) != len(targets) or not targets:
        raise ValueError("need as many predictions as targets, and at least one")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


# ---------------------------------------------------------------------------------------------
# BERT pre-training data (notebook 07)

IGNORE_INDEX = -100  # label of positions the loss skips (PyTorch's cross_entropy default)


def mask_tokens(input_ids, *, mask_id: int, vocab_size: int, special_ids, prob: float = 0.15,
                word_ids=None, generator=None):
    """BERT's masked-LM corruption: (B, T) ids → (inputs (B, T), labels (B, T)).

    Choose each non-special token with probability `prob`; of the chosen, 80% become [MASK],
    10% a random non-special token, 10% stay unchanged. `labels` hold the original id at chosen
    positions and -100 elsewhere, so the loss is computed only where the model must predict.
    With `word_ids` (B, T: the word each token belongs to, -1 for specials) whole words are
    chosen and all their pieces masked together (whole-word masking, as in ERNIE / BERT-wwm).

    Example:
        >>> ids = torch.tensor([[2, 10, 11, 12, 3]])
        >>> inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=20, special_ids=[0, 1, 2, 3, 4])
    """
    if input_ids.dim() != 2 or input_ids.dtype != torch.long:
        raise ValueError(f"input_ids must be a (B, T) tensor of token ids; got "
                         f"{tuple(input_ids.shape)} {input_ids.dtype}")
    if not 0.0 < prob < 1.0:
        raise ValueError(f"prob is the share of tokens to choose, between 0 and 1; got {prob}")
    specials = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.long)
    if int(mask_id) not in specials.tolist():
        raise ValueError("mask_id must be one of special_ids (it is never a prediction target)")
    candidates = ~torch.isin(input_ids, specials)                         # (B, T) real tokens
    if word_ids is None:
        chosen = (torch.rand(input_ids.shape, generator=generator) < prob) & candidates
    else:
        if word_ids.shape != input_ids.shape:
            raise ValueError(f"word_ids must have the shape of input_ids {tuple(input_ids.shape)}; "
                             f"got {tuple(word_ids.shape)}")
        n_words = int(word_ids.max()) + 1 if word_ids.numel() else 0
        pick = torch.rand(input_ids.size(0), max(n_words, 1), generator=generator) < prob  # (B, W)
        chosen = pick.gather(1, word_ids.clamp(min=0)) & (word_ids >= 0) & candidates
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = torch.rand(input_ids.shape, generator=generator)
    inputs = input_ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[specials[specials < vocab_size]] = False
    pool = allowed.nonzero().squeeze(1)                                  # non-special ids
    draws = pool[torch.randint(len(pool), input_ids.shape, generator=generator)]
    inputs[to_random] = draws[to_random]
    return inputs, labels


def nsp_pairs(articles: Sequence[Sequence[str]], n: int, seed: int = 0
              ) -> list[tuple[str, str, int]]:
    """`n` next-sentence-prediction examples (sentence A, sentence B, label) from articles (lists
    of sentences). Label 0 (IsNext, half the pairs): B follows A in the same article. Label 1
    (NotNext): B is a random sentence from a different article. Hugging Face uses the same labels.
    """
    import random

    usable = [i for i, a in enumerate(articles) if len(a) >= 2]    # can give an IsNext pair
    non_empty = [i for i, a in enumerate(articles) if len(a) >= 1]  # can give a random sentence
    if not usable or len(non_empty) < 2:
        raise ValueError("need an article with two or more sentences and at least two articles")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        art = rng.choice(usable)
        i = rng.randrange(len(articles[art]) - 1)
        if rng.random() < 0.5:
            pairs.append((articles[art][i], articles[art][i + 1], 0))
        else:
            other = rng.choice(non_empty)
            while other == art:
                other = rng.choice(non_empty)
            pairs.append((articles[art][i], rng.choice(articles[other]), 1))
    return pairs
