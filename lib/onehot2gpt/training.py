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


def optimizer_step(loss, optimizer, scheduler, parameters, clip: float = 1.0) -> None:
    """One update: backward, clip the gradient norm to `clip`, step the optimizer and the schedule."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, clip)
    optimizer.step()
    scheduler.step()


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
            optimizer_step(loss, opt, sched, model.parameters(), clip)
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


def _nsp_example(a: list[int], b: list[int], cls_id: int, sep_id: int, max_len: int):
    """[CLS] a [SEP] b [SEP] with segment ids, both parts cut longest-first to fit max_len."""
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_len:
        (a if len(a) >= len(b) else b).pop()
    ids = [cls_id] + a + [sep_id] + b + [sep_id]
    return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1)


def pretraining_batch(articles: Sequence[Sequence[Sequence[int]]], batch_size: int, max_len: int,
                      tokenizer, generator: torch.Generator, whole_word: bool = False):
    """One BERT pre-training batch from articles of tokenised sentences (lists of ids): half
    IsNext pairs, half NotNext, masked by :func:`mask_tokens`. Returns a dict of (B, T) tensors
    input_ids, token_type_ids, attention_mask, mlm_labels and (B,) nsp_labels."""
    usable = [i for i, a in enumerate(articles) if len(a) >= 2]
    if len(usable) < 2:
        raise ValueError("need at least two articles with two or more sentences each")

    def draw(n):
        return int(torch.randint(n, (1,), generator=generator))

    rows, segs, nsp = [], [], []
    for _ in range(batch_size):
        art = usable[draw(len(usable))]
        i = draw(len(articles[art]) - 1)
        is_next = draw(2) == 0
        if is_next:
            b = articles[art][i + 1]
        else:
            other = usable[draw(len(usable))]
            while other == art:
                other = usable[draw(len(usable))]
            b = articles[other][draw(len(articles[other]))]
        ids, seg = _nsp_example(articles[art][i], b, tokenizer.cls_id, tokenizer.sep_id, max_len)
        rows.append(ids)
        segs.append(seg)
        nsp.append(0 if is_next else 1)
    input_ids = pad_batch(rows, tokenizer.pad_id)
    specials = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
    word_ids = None
    if whole_word:  # a piece starting with "##" continues the word before it
        starts = torch.tensor([[not tokenizer.convert_ids_to_tokens(int(i)).startswith("##") for i in row]
                               for row in input_ids.tolist()])
        word_ids = starts.long().cumsum(1) - 1
    inputs, labels = mask_tokens(input_ids, mask_id=tokenizer.mask_id, vocab_size=len(tokenizer),
                                 special_ids=specials, word_ids=word_ids, generator=generator)
    return {"input_ids": inputs, "token_type_ids": pad_batch(segs, 0),
            "attention_mask": (input_ids != tokenizer.pad_id).long(), "mlm_labels": labels,
            "nsp_labels": torch.tensor(nsp)}


def pretraining_loss(model, batch):
    """(loss, mlm_loss, nsp_loss, masked predictions correct, masked predictions) for a
    BertForPreTraining; the MLM head runs only at the labelled positions (≈15%), which saves
    most of the (T × vocab) output layer's cost. The batch moves to the model's device."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    out = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    logits = model.mlm(out.last_hidden_state[chosen])                  # (N masked, V)
    targets = batch["mlm_labels"][chosen]
    mlm_loss = F.cross_entropy(logits, targets)
    nsp_loss = F.cross_entropy(model.nsp(out.pooled), batch["nsp_labels"])
    correct = int((logits.argmax(-1) == targets).sum())
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss, correct, int(targets.numel())


def pretrain_bert(model, tokenizer, articles, *, steps: int = 1000, batch_size: int = 64,
                  max_len: int = 64, lr: float = 1e-3, warmup: int = 100, seed: int = 0,
                  progress: bool = True, desc: str = "BERT") -> dict[str, list[float]]:
    """Masked LM + next-sentence prediction on `articles` (lists of tokenised sentences) with
    AdamW, linear warm-up and linear decay; returns per-step "loss", "mlm_loss", "nsp_loss"."""
    g = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    history = {"loss": [], "mlm_loss": [], "nsp_loss": []}
    model.train()
    with tqdm(total=steps, desc=desc, disable=not progress, mininterval=2.0) as bar:
        for _ in range(steps):
            batch = pretraining_batch(articles, batch_size, max_len, tokenizer, g)
            loss, mlm_loss, nsp_loss, _, _ = pretraining_loss(model, batch)
            optimizer_step(loss, opt, sched, model.parameters(), 1.0)
            for key, value in (("loss", loss), ("mlm_loss", mlm_loss), ("nsp_loss", nsp_loss)):
                history[key].append(value.item())
            bar.update()
            if bar.n % 50 == 0:
                bar.set_postfix(mlm=f"{mlm_loss.item():.2f}", nsp=f"{nsp_loss.item():.2f}", refresh=False)
    model.eval()
    return history


@torch.no_grad()
def evaluate_pretraining(model, tokenizer, articles, *, batches: int = 50, batch_size: int = 64,
                         max_len: int = 64, seed: int = 1234) -> dict[str, float]:
    """Masked-token accuracy, MLM loss and NSP accuracy on fixed random batches of `articles`."""
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    correct = count = nsp_correct = nsp_count = 0
    mlm_total = 0.0
    for _ in range(batches):
        batch = pretraining_batch(articles, batch_size, max_len, tokenizer, g)
        _, mlm_loss, _, c, n = pretraining_loss(model, batch)
        batch = {k: v.to(next(model.parameters()).device) for k, v in batch.items()}
        out = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        nsp_correct += int((model.nsp(out.pooled).argmax(-1) == batch["nsp_labels"]).sum())
        nsp_count += batch_size
        correct, count, mlm_total = correct + c, count + n, mlm_total + mlm_loss.item() * n
    model.train(was_training)
    return {"mlm_accuracy": correct / count, "mlm_loss": mlm_total / count,
            "nsp_accuracy": nsp_correct / nsp_count}


def tokenize_articles(tokenizer, articles: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Articles of sentence strings → articles of id lists (no special tokens)."""
    return [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in art] for art in articles]


def main(argv=None):
    """Reproduce the course BERT: ``python -m onehot2gpt.training bert --out data/checkpoints/bert-wikitext2``."""
    import argparse
    import json
    import time
    from pathlib import Path

    from .bert import BertConfig, BertForPreTraining, save_bert
    from .data import wikitext_articles
    from .subword import WordPieceTokenizer
    from .utils import set_threads

    p = argparse.ArgumentParser(prog="python -m onehot2gpt.training",
                                description="Pre-train the course BERT on WikiText-2 train.")
    p.add_argument("what", choices=["bert"])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    args = p.parse_args(argv)
    set_threads(args.threads)
    start = time.time()
    train = wikitext_articles("train")
    # score="frequency": the most frequent pair first, as Hugging Face's WordPiece trainer does
    # (1.1 pieces per word on WikiText-2 valid, against 2.9 with the textbook likelihood score)
    tokenizer = WordPieceTokenizer.train((s for a in train for s in a), vocab_size=args.vocab_size,
                                         score="frequency")
    t_vocab = time.time() - start
    train_ids = tokenize_articles(tokenizer, train)
    valid_ids = tokenize_articles(tokenizer, wikitext_articles("valid"))
    torch.manual_seed(args.seed)
    config = BertConfig.tiny(vocab_size=len(tokenizer), max_len=max(args.max_len, 128))
    model = BertForPreTraining(config).to(args.device)
    history = pretrain_bert(model, tokenizer, train_ids, steps=args.steps, batch_size=args.batch_size,
                            max_len=args.max_len, lr=args.lr, seed=args.seed)
    t_train = time.time() - start
    scores = evaluate_pretraining(model, tokenizer, valid_ids, max_len=args.max_len)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"data": "WikiText-2 train (wikitext_articles)", "steps": args.steps,
            "batch_size": args.batch_size, "max_len": args.max_len, "lr": args.lr,
            "threads": args.threads, "device": args.device, "seed": args.seed, "vocab_seconds": round(t_vocab, 1),
            "total_seconds": round(t_train, 1), "valid": {k: round(v, 4) for k, v in scores.items()},
            "final_train_mlm_loss": round(sum(history["mlm_loss"][-100:]) / len(history["mlm_loss"][-100:]), 4)}
    save_bert(model.cpu(), args.out, info=info)
    tokenizer.save(args.out / "vocab.txt")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
