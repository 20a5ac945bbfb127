"""Training loops and pre-training objectives shared by the notebooks that train Transformers.

BERT's two pre-training tasks (notebook 07; Devlin et al., 2018, §3.1): :func:`mask_tokens` for
the masked language model and :func:`nsp_pairs` for next-sentence prediction. Notebook 06 trains a small encoder–decoder (:class:`onehot2gpt.transformer.Seq2SeqTransformer`)
to rewrite dates; the loop is the paper's recipe in miniature: Adam with β₂ = 0.98, a linear
warm-up then inverse-square-root decay (§5.3), label smoothing (§5.4), gradient clipping.
Notebook 09 trains a character-level GPT (:class:`onehot2gpt.gpt.GPT`) on Tiny Shakespeare with
nanoGPT's recipe: random windows of one stream of ids (:func:`lm_batch`), AdamW, warm-up then
cosine decay (:func:`cosine_lr`), and a validation loss on fixed batches (:func:`estimate_loss`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .optim import adamw, optimizer_step
from .utils import IGNORE_INDEX, as_ids, check_finite_loss
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
        for step in range(steps):
            idx = torch.randint(0, src.size(0), (batch_size,), generator=g)
            s, t = src[idx], tgt[idx]
            logits, _ = model(s, t[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), t[:, 1:].reshape(-1),
                                   ignore_index=pad, label_smoothing=label_smoothing)
            optimizer_step(loss, opt, sched, model.parameters(), clip)
            losses.append(check_finite_loss(loss, step, lr=lr, what=desc))
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
    input_ids = as_ids(input_ids, vocab_size, dims=2, name="input_ids", allow_empty=True)
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
    action = torch.rand(input_ids.shape, generator=generator)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[specials[specials < vocab_size]] = False
    pool = allowed.nonzero().squeeze(1)                                  # non-special ids
    draws = pool[torch.randint(len(pool), input_ids.shape, generator=generator)]
    return apply_masking(input_ids, chosen, action, draws, mask_id)


def apply_masking(input_ids, chosen, action, random_ids, mask_id: int):
    """The 80/10/10 rule, given the draws: (B, T) ids, chosen (bool), action (uniform in [0, 1)),
    random_ids → (inputs, labels). At chosen positions action < 0.8 → `mask_id`, < 0.9 → the
    random id, else unchanged; labels hold the original id there and -100 elsewhere."""
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    inputs = input_ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[to_random] = random_ids[to_random]
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


def pretraining_pairs(articles: Sequence[Sequence[Sequence[int]]], batch_size: int, max_len: int,
                      tokenizer, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """`batch_size` next-sentence-prediction pairs [CLS] A [SEP] B [SEP], not yet masked: half
    IsNext (label 0), half NotNext (1), drawn from articles of tokenised sentences with
    `generator`. Returns (B, T) input_ids, token_type_ids, attention_mask and (B,) nsp_labels."""
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
    return {"input_ids": input_ids, "token_type_ids": pad_batch(segs, 0),
            "attention_mask": (input_ids != tokenizer.pad_id).long(), "nsp_labels": torch.tensor(nsp)}


def pretraining_batch(articles: Sequence[Sequence[Sequence[int]]], batch_size: int, max_len: int,
                      tokenizer, generator: torch.Generator, whole_word: bool = False):
    """One BERT pre-training batch from articles of tokenised sentences (lists of ids): the pairs
    of :func:`pretraining_pairs`, masked by :func:`mask_tokens` (same `generator`). Returns a dict
    of (B, T) tensors input_ids, token_type_ids, attention_mask, mlm_labels and (B,) nsp_labels."""
    batch = pretraining_pairs(articles, batch_size, max_len, tokenizer, generator)
    input_ids = batch["input_ids"]
    specials = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
    word_ids = None
    if whole_word:  # a piece starting with "##" continues the word before it
        starts = torch.tensor([[not tokenizer.convert_ids_to_tokens(int(i)).startswith("##") for i in row]
                               for row in input_ids.tolist()])
        word_ids = starts.long().cumsum(1) - 1
    inputs, labels = mask_tokens(input_ids, mask_id=tokenizer.mask_id, vocab_size=len(tokenizer),
                                 special_ids=specials, word_ids=word_ids, generator=generator)
    return {**batch, "input_ids": inputs, "mlm_labels": labels}


def masked_lm_loss(hidden, labels, dense, norm, embedding, bias):
    """The masked-LM loss at the chosen positions only: hidden (B, T, D), labels (B, T) with -100
    where nothing is predicted → mean cross-entropy. At each chosen position the MLM head's
    transform (`dense`, GELU, LayerNorm `norm`) is scored against every token's input embedding
    (`embedding` (V, D), the tied output layer) plus `bias` (V,), as :class:`~onehot2gpt.bert.BertMLMHead`."""
    chosen = labels != IGNORE_INDEX
    h = norm(F.gelu(dense(hidden[chosen])))                              # (N, D)
    return F.cross_entropy(F.linear(h, embedding, bias), labels[chosen])


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
    opt = adamw(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    history = {"loss": [], "mlm_loss": [], "nsp_loss": []}
    model.train()
    with tqdm(total=steps, desc=desc, disable=not progress, mininterval=2.0) as bar:
        for step in range(steps):
            batch = pretraining_batch(articles, batch_size, max_len, tokenizer, g)
            loss, mlm_loss, nsp_loss, _, _ = pretraining_loss(model, batch)
            optimizer_step(loss, opt, sched, model.parameters(), 1.0)
            check_finite_loss(loss, step, lr=lr, what=desc)
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


# ---------------------------------------------------------------------------------------------
# GPT: next-character prediction on one stream of text (notebook 09)

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
        raise ValueError(f"{len(unknown)} characters are not in the vocabulary, e.g. {unknown[:10]}; "
                         f"build the vocabulary from this text (char_dataset(text)) or one that covers it")
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
        raise ValueError(f"val_fraction is the share of the stream kept for validation, between 0 and 1; "
                         f"got {val_fraction}")
    n = int(len(ids) * (1 - val_fraction))
    return ids[:n], ids[n:]


def lm_batch(data: torch.Tensor, batch_size: int, block_size: int,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
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
        raise ValueError(f"the stream has {len(data)} tokens; a window of block_size={block_size} plus "
                         f"its next token needs at least {block_size + 1}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)   # (B,)
    window = data[starts[:, None] + torch.arange(block_size + 1)]                        # (B, T + 1)
    return window[:, :-1], window[:, 1:]


def _next_token_loss(model, x, y):
    """Mean cross-entropy of the model's predictions on x (B, T) against the next tokens y (B, T)."""
    logits = model(x).logits                                                              # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


@torch.no_grad()
def estimate_loss(model, data: torch.Tensor, *, batches: int = 200, batch_size: int = 12,
                  block_size: int = 64, seed: int = 1234) -> float:
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


def cosine_lr(step: int, *, lr: float, min_lr: float, warmup: int, iters: int) -> float:
    """Learning rate of update `step` (0, 1, …): nanoGPT's linear warm-up to `lr` over `warmup`
    updates, then half a cosine down to `min_lr`, which the last of the `iters` updates uses.

    Example:
        >>> [cosine_lr(s, lr=1.0, min_lr=0.0, warmup=1, iters=4) for s in range(4)]
        [0.5, 1.0, 0.5, 0.0]
    """
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step >= iters - 1:
        return min_lr
    progress = (step - warmup) / (iters - 1 - warmup)                 # 0 → 1 over the decay
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def train_gpt(model, train_data: torch.Tensor, val_data: torch.Tensor | None = None, *, iters: int,
              batch_size: int = 12, block_size: int = 64, lr: float = 1e-3, min_lr: float = 1e-4,
              warmup: int = 100, weight_decay: float = 0.1, betas: tuple[float, float] = (0.9, 0.99),
              clip: float = 1.0, eval_every: int = 100, eval_batches: int = 200,
              eval_batch_size: int | None = None, stop_at_val: float | None = None, seed: int = 0,
              progress: bool = True, desc: str = "GPT") -> dict:
    """Train a language model on random windows of `train_data` (N,) (nanoGPT's loop).

    AdamW (weight decay on matrices and embeddings only, not on biases and LayerNorms), the
    :func:`cosine_lr` schedule, gradient norm clipped to `clip`. With `val_data`, the validation
    loss (:func:`estimate_loss` on `eval_batches` fixed windows of `eval_batch_size`, default
    `batch_size`) is taken before training, every `eval_every` updates and after the last; with
    `stop_at_val`, training stops at the first evaluation ≤ that value.

    Returns a dict: per update "loss" and "lr"; "evals", a list of (updates done, training
    seconds so far, validation loss); "iters" (updates done), "train_seconds" (time in the
    updates alone, evaluations excluded), "eval_seconds", "ms_per_iter", "val_loss" (the last
    evaluation, or None). The model is left in eval mode.
    """
    if block_size > model.config.max_len:
        raise ValueError(f"block_size={block_size} is longer than the model's context "
                         f"max_len={model.config.max_len}")
    if iters < 1 or lr <= 0 or eval_every < 1:
        raise ValueError(f"need iters ≥ 1, lr > 0 and eval_every ≥ 1; got iters={iters}, lr={lr}, "
                         f"eval_every={eval_every}")
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = adamw(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas)
    # LambdaLR scales the base lr; cosine_lr gives absolute values, hence the division.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_lr(s, lr=lr, min_lr=min_lr, warmup=warmup, iters=iters) / lr)
    history = {"loss": [], "lr": [], "evals": []}
    train_seconds = eval_seconds = 0.0

    def evaluate(done: int) -> bool:
        """Score val_data; True when training should stop."""
        nonlocal eval_seconds
        start = time.perf_counter()
        val = estimate_loss(model, val_data, batches=eval_batches,
                            batch_size=eval_batch_size or batch_size, block_size=block_size)
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
            loss = _next_token_loss(model, x.to(device), y.to(device))
            optimizer_step(loss, opt, sched, model.parameters(), clip)
            # .item() (in the check) waits for the device: honest timing
            history["loss"].append(check_finite_loss(loss, step, lr=lr, what=desc))
            train_seconds += time.perf_counter() - start
            bar.update()
            done = step + 1
            if val_data is not None and (done % eval_every == 0 or done == iters):
                stop = evaluate(done)
                bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", val=f"{history['evals'][-1][2]:.3f}",
                                refresh=False)
            elif done % 50 == 0:
                bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
    model.eval()
    done = len(history["loss"])
    history.update(iters=done, train_seconds=train_seconds, eval_seconds=eval_seconds,
                   ms_per_iter=1000 * train_seconds / done if done else None,
                   val_loss=history["evals"][-1][2] if history["evals"] else None)
    return history


# The two recipes for GPTConfig.char on Tiny Shakespeare that bench/gpt_char.py compares.
# nanoGPT's CPU run (its README, config/train_shakespeare_char.py with --batch_size=12
# --block_size=64 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --dropout=0.0).
NANOGPT_CHAR_RECIPE = dict(iters=2000, batch_size=12, block_size=64, lr=1e-3, min_lr=1e-4, warmup=100,
                           weight_decay=0.1, betas=(0.9, 0.99), clip=1.0)
# The course's recipe, chosen by bench/gpt_char.py runs on 2 cores: a shallower, wider model (2
# layers × 192 instead of 4 × 128, about the same parameters) costs fewer kernel launches per
# update, so more updates fit in a second; with 3× nanoGPT's learning rate (and floor), half the
# warm-up and the cosine over 1,000 updates it reached validation 1.89 in 39 s of training, where
# the 4 × 128 model with lr 4e-3 over 1,000 updates ended at 1.91 in 50 s. Batch stays 12: on a CPU
# a larger batch costs about proportionally more per update, and in equal time batch 24 learned less.
COURSE_CHAR_MODEL = dict(n_layers=2, n_heads=4, d_model=192)
COURSE_CHAR_RECIPE = dict(NANOGPT_CHAR_RECIPE, iters=1000, lr=3e-3, min_lr=3e-4, warmup=50)


def _train_bert_command(args):
    """``bert``: pre-train the course BERT on WikiText-2 train and save it with its vocabulary."""
    import json

    from .bert import BertConfig, BertForPreTraining, save_bert
    from .data import wikitext_articles
    from .subword import WordPieceTokenizer
    from .utils import set_threads

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
    save_bert(model.cpu(), args.out, info=info, tokenizer=tokenizer)
    print(json.dumps(info))


def _train_gpt_char_command(args, argv):
    """``gpt-char``: train a character GPT on Tiny Shakespeare; save it with its vocabulary."""
    import json
    import sys

    from .data import read_tinyshakespeare
    from .gpt import GPT, GPTConfig, save_gpt
    from .utils import set_threads

    set_threads(args.threads)
    start = time.time()
    ids, vocab = char_dataset(read_tinyshakespeare())
    train, val = train_val_split(ids, 0.1)
    recipe = dict(iters=args.iters, batch_size=args.batch_size, block_size=args.block_size, lr=args.lr,
                  min_lr=args.min_lr, warmup=args.warmup, weight_decay=args.weight_decay,
                  betas=(0.9, 0.99), clip=1.0)
    torch.manual_seed(args.seed)
    config = GPTConfig.char(vocab_size=len(vocab), max_len=args.block_size, d_model=args.d_model,
                            n_layers=args.n_layers, n_heads=args.n_heads)
    model = GPT(config).to(args.device)
    history = train_gpt(model, train, val, **recipe, eval_every=args.eval_every,
                        eval_batches=args.eval_batches, eval_batch_size=12, seed=args.seed,
                        desc="GPT char")
    info = {"data": "Tiny Shakespeare, first 90% (read_tinyshakespeare, train_val_split)",
            "command": "python -m onehot2gpt.training " + " ".join(sys.argv[1:] if argv is None else argv),
            "recipe": {**recipe, "betas": list(recipe["betas"])}, "iters": history["iters"],
            "seconds": round(history["train_seconds"], 1), "ms_per_iter": round(history["ms_per_iter"], 1),
            "total_seconds": round(time.time() - start, 1),
            "val_loss": round(history["val_loss"], 4),
            "val_loss_is": f"mean of {args.eval_batches} fixed windows (12 x {args.block_size} characters) "
                           f"of the last 10% (estimate_loss, seed 1234)",
            "evals": [[i, round(s, 1), round(v, 4)] for i, s, v in history["evals"]],
            "threads": args.threads, "device": args.device, "seed": args.seed}
    save_gpt(model.cpu(), args.out, info=info, tokenizer=vocab)
    print(json.dumps({k: v for k, v in info.items() if k != "evals"}))


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
    recipe = dict(iters=args.iters, batch_size=args.batch_size, block_size=args.block_size, lr=args.lr,
                  min_lr=args.lr / 10, warmup=args.warmup, weight_decay=0.1, betas=(0.9, 0.99), clip=1.0)
    torch.manual_seed(args.seed)
    config = GPTConfig.small(vocab_size=len(tokenizer), max_len=args.block_size)
    model = GPT(config).to(args.device)
    history = train_gpt(model, train, val, **recipe, eval_every=args.eval_every, eval_batches=50,
                        eval_batch_size=32, seed=args.seed, desc="GPT WikiText-2")
    info = {"data": "WikiText-2 train as one WordPiece stream (wikitext_stream), the course BERT's vocabulary",
            "command": "python -m onehot2gpt.training " + " ".join(sys.argv[1:] if argv is None else argv),
            "recipe": {**recipe, "betas": list(recipe["betas"])}, "iters": history["iters"],
            "seconds": round(history["train_seconds"], 1), "ms_per_iter": round(history["ms_per_iter"], 1),
            "total_seconds": round(time.time() - start, 1), "val_loss": round(history["val_loss"], 4),
            "val_perplexity": round(math.exp(history["val_loss"]), 1),
            "val_loss_is": f"mean of 50 fixed windows (32 x {args.block_size} pieces) of WikiText-2 valid",
            "threads": args.threads, "device": args.device, "seed": args.seed}
    save_gpt(model.cpu(), args.out, info=info, tokenizer=tokenizer)
    print(json.dumps(info))


def main(argv=None):
    """Reproduce a course checkpoint:
    ``python -m onehot2gpt.training bert --out data/checkpoints/bert-wikitext2`` or
    ``python -m onehot2gpt.training gpt-char --out data/checkpoints/gpt-char-shakespeare``."""
    import argparse
    from pathlib import Path

    from .gpt import GPTConfig

    p = argparse.ArgumentParser(prog="python -m onehot2gpt.training",
                                description="Train a course checkpoint and save it with its vocabulary.")
    sub = p.add_subparsers(dest="what", required=True)
    bert = sub.add_parser("bert", help="pre-train the course BERT on WikiText-2 train",
                          description="Pre-train the course BERT on WikiText-2 train.")
    bert.add_argument("--out", required=True, type=Path)
    bert.add_argument("--vocab-size", type=int, default=8000)
    bert.add_argument("--steps", type=int, default=6000)
    bert.add_argument("--batch-size", type=int, default=64)
    bert.add_argument("--max-len", type=int, default=64)
    bert.add_argument("--lr", type=float, default=1e-3)
    bert.add_argument("--threads", type=int, default=2)
    bert.add_argument("--seed", type=int, default=0)
    bert.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")

    r, c = COURSE_CHAR_RECIPE, GPTConfig.char(**COURSE_CHAR_MODEL)
    gpt = sub.add_parser("gpt-char", help="train a character GPT on Tiny Shakespeare",
                         description="Train a character GPT on the first 90% of Tiny Shakespeare; by "
                                     "default the course recipe (COURSE_CHAR_MODEL, COURSE_CHAR_RECIPE). "
                                     "The validation loss is taken on the last 10%.")
    gpt.add_argument("--out", required=True, type=Path)
    gpt.add_argument("--iters", type=int, default=r["iters"],
                     help="updates; the cosine decay ends at the last")
    gpt.add_argument("--batch-size", type=int, default=r["batch_size"])
    gpt.add_argument("--block-size", type=int, default=r["block_size"],
                     help="context (= the model's max_len)")
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
    gpt.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    wiki = sub.add_parser("gpt-wikitext", help="train the course subword GPT on WikiText-2",
                          description="GPTConfig.small on WikiText-2 with the course BERT's vocabulary.")
    wiki.add_argument("--out", required=True, type=Path)
    wiki.add_argument("--iters", type=int, default=4000)
    wiki.add_argument("--batch-size", type=int, default=32)
    wiki.add_argument("--block-size", type=int, default=64)
    wiki.add_argument("--lr", type=float, default=2e-3)
    wiki.add_argument("--warmup", type=int, default=100)
    wiki.add_argument("--eval-every", type=int, default=500)
    wiki.add_argument("--threads", type=int, default=2)
    wiki.add_argument("--seed", type=int, default=0)
    wiki.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    args = p.parse_args(argv)
    if args.what == "bert":
        _train_bert_command(args)
    elif args.what == "gpt-char":
        _train_gpt_char_command(args, argv)
    else:
        _train_gpt_wikitext_command(args, argv)


if __name__ == "__main__":
    main()
