"""BERT's pre-training (notebook 07; Devlin et al., 2018, §3.1): the data, the two objectives, the loop.

:func:`mask_tokens` (the masked LM's 15 %, 80/10/10), :func:`nsp_pairs` and :func:`pretraining_pairs`
(next-sentence pairs), :func:`pretraining_loss` (the two losses added), :func:`pretrain_bert` (the
loop ``recipes/bert-wikitext2.py`` trains the course checkpoint with), :func:`evaluate_pretraining`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .progress import progress_bar
from .training import adamw, optimizer_step, pad_batch
from .utils import IGNORE_INDEX, as_ids, check_finite_loss, check_int, evaluating


def mask_tokens(
    input_ids, *, mask_id: int, vocab_size: int, special_ids, prob: float = 0.15, word_ids=None, generator=None
):
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
    candidates = ~torch.isin(input_ids, specials)  # (B, T) real tokens
    if word_ids is None:
        chosen = (torch.rand(input_ids.shape, generator=generator) < prob) & candidates
    else:
        if word_ids.shape != input_ids.shape:
            raise ValueError(
                f"word_ids must have the shape of input_ids {tuple(input_ids.shape)}; got {tuple(word_ids.shape)}"
            )
        n_words = int(word_ids.max()) + 1 if word_ids.numel() else 0
        pick = torch.rand(input_ids.size(0), max(n_words, 1), generator=generator) < prob  # (B, W)
        chosen = pick.gather(1, word_ids.clamp(min=0)) & (word_ids >= 0) & candidates
    action = torch.rand(input_ids.shape, generator=generator)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[specials[specials < vocab_size]] = False
    pool = allowed.nonzero().squeeze(1)  # non-special ids
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


def nsp_pairs(articles: Sequence[Sequence[str]], n: int, seed: int = 0) -> list[tuple[str, str, int]]:
    """`n` next-sentence-prediction examples (sentence A, sentence B, label) from articles (lists
    of sentences). Label 0 (IsNext, half the pairs): B follows A in the same article. Label 1
    (NotNext): B is a random sentence from a different article. Hugging Face uses the same labels.
    """
    import random

    usable = [i for i, a in enumerate(articles) if len(a) >= 2]  # can give an IsNext pair
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


def pretraining_pairs(
    articles: Sequence[Sequence[Sequence[int]]], batch_size: int, max_len: int, tokenizer, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """`batch_size` next-sentence-prediction pairs [CLS] A [SEP] B [SEP], not yet masked, drawn
    from articles of tokenised sentences with `generator`: an article, then a sentence A in it;
    half the pairs IsNext (label 0: B follows A), half NotNext (1: B is a sentence of another
    article). Returns (B, T) input_ids, token_type_ids, attention_mask and (B,) nsp_labels. (A
    sentence of a 2-sentence article comes up far more often than one of a 300-sentence article.)"""
    usable = [i for i, a in enumerate(articles) if len(a) >= 2]
    if len(usable) < 2:
        raise ValueError("need at least two articles with two or more sentences each")

    def draw(n):
        return int(torch.randint(n, (1,), generator=generator))

    pairs = []
    for _ in range(batch_size):
        art = usable[draw(len(usable))]
        i = draw(len(articles[art]) - 1)
        if draw(2) == 0:
            pairs.append((articles[art][i], articles[art][i + 1], 0))
            continue
        other = usable[draw(len(usable))]
        while other == art:
            other = usable[draw(len(usable))]
        pairs.append((articles[art][i], articles[other][draw(len(articles[other]))], 1))
    return pair_batch(pairs, max_len, tokenizer)


def pair_batch(pairs, max_len: int, tokenizer) -> dict[str, torch.Tensor]:
    """(sentence A ids, sentence B ids, NSP label) triples → the batch of :func:`pretraining_pairs`:
    each [CLS] A [SEP] B [SEP] cut to `max_len` (the longer part first), padded to the longest."""
    examples = [_nsp_example(a, b, tokenizer.cls_id, tokenizer.sep_id, max_len) for a, b, _ in pairs]
    input_ids = pad_batch([ids for ids, _ in examples], tokenizer.pad_id)
    return {
        "input_ids": input_ids,
        "token_type_ids": pad_batch([seg for _, seg in examples], 0),
        "attention_mask": (input_ids != tokenizer.pad_id).long(),
        "nsp_labels": torch.tensor([label for *_, label in pairs]),
    }


def pretraining_batch(
    articles: Sequence[Sequence[Sequence[int]]],
    batch_size: int,
    max_len: int,
    tokenizer,
    generator: torch.Generator,
    mask_prob: float = 0.15,
):
    """One BERT pre-training batch from articles of tokenised sentences (lists of ids): the pairs
    of :func:`pretraining_pairs`, masked by :func:`mask_tokens` (same `generator`, `mask_prob`).
    Returns a dict of (B, T) tensors input_ids, token_type_ids, attention_mask, mlm_labels and
    (B,) nsp_labels."""
    batch = pretraining_pairs(articles, batch_size, max_len, tokenizer, generator)
    return mask_pairs(batch, tokenizer, generator, mask_prob=mask_prob)


def _special_ids(tokenizer) -> list[int]:
    """[PAD] [UNK] [CLS] [SEP] [MASK]: the ids masking never picks."""
    return [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]


def mask_pairs(
    batch: dict[str, torch.Tensor], tokenizer, generator: torch.Generator, mask_prob: float = 0.15
) -> dict[str, torch.Tensor]:
    """Pairs of :func:`pretraining_pairs` masked by :func:`mask_tokens` (`generator`, `mask_prob`)
    → the batch with masked input_ids and mlm_labels."""
    inputs, labels = mask_tokens(
        batch["input_ids"],
        mask_id=tokenizer.mask_id,
        vocab_size=len(tokenizer),
        special_ids=_special_ids(tokenizer),
        generator=generator,
        prob=mask_prob,
    )
    return {**batch, "input_ids": inputs, "mlm_labels": labels}


def masked_lm_loss(hidden, labels, dense, norm, embedding, bias):
    """The masked-LM loss at the chosen positions only: hidden (B, T, D), labels (B, T) with -100
    where nothing is predicted → mean cross-entropy. At each chosen position the MLM head's
    transform (`dense`, GELU, LayerNorm `norm`) is scored against every token's input embedding
    (`embedding` (V, D), the tied output layer) plus `bias` (V,), as :class:`~onehot2gpt.bert.BertMLMHead`."""
    chosen = labels != IGNORE_INDEX
    h = norm(F.gelu(dense(hidden[chosen])))  # (N, D)
    return F.cross_entropy(F.linear(h, embedding, bias), labels[chosen])


def pretraining_loss(model, batch, count_correct: bool = True):
    """(loss, mlm_loss, nsp_loss, masked predictions correct, masked predictions) for a
    BertForPreTraining; the MLM head runs only at the labelled positions (≈15%), which saves
    most of the (T × vocab) output layer's cost. The batch moves to the model's device. With
    `count_correct` False the count of correct predictions is None (training needs no arg-max)."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    out = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    return heads_loss(model, out.last_hidden_state[chosen], out.pooled, batch, count_correct)


def heads_loss(model, hidden, pooled, batch, count_correct: bool = True):
    """The two heads of :func:`pretraining_loss` on the encoder's states: `hidden` (N, D) at the
    masked positions (in the order of ``batch["mlm_labels"] != -100``), `pooled` (B, D) → the same
    tuple (loss, mlm_loss, nsp_loss, correct, masked predictions)."""
    targets = batch["mlm_labels"][batch["mlm_labels"] != IGNORE_INDEX]
    logits = model.mlm(hidden)  # (N masked, V)
    mlm_loss = F.cross_entropy(logits, targets)
    correct = int((logits.argmax(-1) == targets).sum()) if count_correct else None
    nsp_loss = F.cross_entropy(model.nsp(pooled), batch["nsp_labels"])
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss, correct, int(targets.numel())


def pretrain_bert(
    model,
    tokenizer,
    articles,
    *,
    steps: int = 1000,
    batch_size: int = 64,
    max_len: int = 64,
    lr: float = 1e-3,
    warmup: int = 100,
    seed: int = 0,
    progress: bool = True,
    desc: str = "BERT",
) -> dict[str, list[float]]:
    """Masked LM + next-sentence prediction on `articles` (lists of tokenised sentences) → per-step
    "loss", "mlm_loss", "nsp_loss". Each step draws `batch_size` sentence pairs of at most
    `max_len` pieces and masks them (:func:`pretraining_batch`, seeded by `seed`), adds the two
    losses (:func:`pretraining_loss`) and updates (:func:`pretraining_steps`: AdamW, linear
    warm-up over `warmup` steps, linear decay to 0, the gradient norm clipped to 1)."""
    g = torch.Generator().manual_seed(seed)

    def losses(step, optimizer):  # one step's batch → (loss, mlm_loss, nsp_loss)
        batch = pretraining_batch(articles, batch_size, max_len, tokenizer, g)
        return pretraining_loss(model, batch, count_correct=False)[:3]

    # an untrained model starts near ln V (which of V tokens) + ln 2 (next sentence or not)
    start = math.log(len(tokenizer)) + math.log(2)
    return pretraining_steps(
        model, losses, steps=steps, lr=lr, warmup=warmup, progress=progress, desc=desc, start=start
    )


def pretraining_steps(
    model,
    losses,
    *,
    steps: int,
    lr: float,
    warmup: int,
    progress: bool = True,
    desc: str = "BERT",
    start: float | None = None,
):
    """The update loop of :func:`pretrain_bert`. BERT's optimiser: AdamW with weight decay 0.01 on
    the matrices only and β = (0.9, 0.98), the rate warmed up linearly over `warmup` steps to `lr`,
    then decayed linearly to 0 at `steps`. Each step: ``losses(step, optimizer)`` → (loss, mlm_loss,
    nsp_loss), backward, the gradient norm clipped to 1, an update; a loss that is not finite, or more
    than 1000× `start` (the loss an untrained model starts from), stops it. Returns the per-step "loss", "mlm_loss", "nsp_loss" (the bar shows the last two)."""
    steps, warmup = check_int(steps, "steps", 1), check_int(warmup, "warmup", 1)
    opt = adamw(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    history = {"loss": [], "mlm_loss": [], "nsp_loss": []}
    model.train()
    with progress_bar(total=steps, desc=desc, disable=not progress, mininterval=2.0) as bar:
        for step in range(steps):
            loss, mlm_loss, nsp_loss = losses(step, opt)
            optimizer_step(loss, opt, sched, model.parameters(), 1.0)
            check_finite_loss(loss, step, lr=lr, what=desc, start=start)
            for key, value in zip(history, (loss, mlm_loss, nsp_loss)):
                history[key].append(value.item())
            bar.update()
            if bar.n % 50 == 0:
                bar.set_postfix(mlm=f"{mlm_loss.item():.2f}", nsp=f"{nsp_loss.item():.2f}", refresh=False)
    model.eval()
    return history


@torch.no_grad()
def evaluate_pretraining(
    model, tokenizer, articles, *, batches: int = 50, batch_size: int = 64, max_len: int = 64, seed: int = 1234
) -> dict[str, float]:
    """Masked-token accuracy, MLM loss and NSP accuracy on fixed random batches of `articles`."""
    g = torch.Generator().manual_seed(seed)
    correct = count = nsp_correct = nsp_count = 0
    mlm_total = 0.0
    device = next(model.parameters()).device
    with evaluating(model):
        for _ in range(batches):
            batch = pretraining_batch(articles, batch_size, max_len, tokenizer, g)
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
            hidden = out.last_hidden_state[batch["mlm_labels"] != IGNORE_INDEX]
            _, mlm_loss, _, c, n = heads_loss(model, hidden, out.pooled, batch)
            nsp_correct += int((model.nsp(out.pooled).argmax(-1) == batch["nsp_labels"]).sum())
            nsp_count += batch_size
            correct, count, mlm_total = correct + c, count + n, mlm_total + mlm_loss.item() * n
    return {"mlm_accuracy": correct / count, "mlm_loss": mlm_total / count, "nsp_accuracy": nsp_correct / nsp_count}


def tokenize_articles(tokenizer, articles: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Articles of sentence strings → articles of id lists (no special tokens)."""
    return [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in art] for art in articles]
