"""BERT's pre-training (notebook 07; Devlin et al., 2018, §3.1): the data, the two objectives, the loop.

:func:`mask_tokens` corrupts 15 % of the pieces for the masked language model (80 % [MASK], 10 % a
random piece, 10 % unchanged); :func:`nsp_pairs` and :func:`pretraining_pairs` draw next-sentence
pairs (half the second sentences follow the first, half come from another article);
:func:`pretraining_loss` adds the two losses; :func:`pretrain_bert` trains
(:class:`onehot2gpt.bert.BertForPreTraining`), :func:`adapt_mlm` continues the masked LM on a
task's own unlabelled text; :func:`evaluate_pretraining` scores held-out text on fixed random
batches and :func:`evaluate_nsp` scores next-sentence prediction on every pair of it.
``python -m onehot2gpt.bert_pretraining train --out DIR`` builds the course checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .training import adamw, optimizer_step, pad_batch
from .utils import IGNORE_INDEX, as_ids, check_finite_loss


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


SAMPLES = ("article", "sentence")


def pretraining_pairs(
    articles: Sequence[Sequence[Sequence[int]]],
    batch_size: int,
    max_len: int,
    tokenizer,
    generator: torch.Generator,
    sample: str = "article",
) -> dict[str, torch.Tensor]:
    """`batch_size` next-sentence-prediction pairs [CLS] A [SEP] B [SEP], not yet masked: half
    IsNext (label 0), half NotNext (1), drawn from articles of tokenised sentences with
    `generator`. Returns (B, T) input_ids, token_type_ids, attention_mask and (B,) nsp_labels.

    `sample` "article" (the course checkpoint's) draws an article, then a sentence in it, so a
    sentence of a 2-sentence article comes up hundreds of times more often than one of a
    300-sentence article; "sentence" draws sentence A (and a NotNext partner B) uniformly from all
    sentences, as BERT's own data preparation walks through every sentence of every document."""
    if sample not in SAMPLES:
        raise ValueError(f"sample is one of {SAMPLES}; got {sample!r}")
    usable = [i for i, a in enumerate(articles) if len(a) >= 2]
    if len(usable) < 2:
        raise ValueError("need at least two articles with two or more sentences each")

    def draw(n):
        return int(torch.randint(n, (1,), generator=generator))

    if sample == "sentence":
        import bisect
        import itertools

        starts = list(itertools.accumulate(len(articles[a]) - 1 for a in usable))  # sentences with a next one
        sizes = list(itertools.accumulate(len(articles[a]) for a in usable))  # every sentence

        def pick(cumulative):  # → (article, sentence index), uniform over sentences
            r = draw(cumulative[-1])
            k = bisect.bisect_right(cumulative, r)
            return usable[k], r - (cumulative[k - 1] if k else 0)

    rows, segs, nsp = [], [], []
    for _ in range(batch_size):
        if sample == "sentence":
            art, i = pick(starts)
        else:
            art = usable[draw(len(usable))]
            i = draw(len(articles[art]) - 1)
        is_next = draw(2) == 0
        if is_next:
            b = articles[art][i + 1]
        elif sample == "sentence":
            other, j = pick(sizes)
            while other == art:
                other, j = pick(sizes)
            b = articles[other][j]
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
    return {
        "input_ids": input_ids,
        "token_type_ids": pad_batch(segs, 0),
        "attention_mask": (input_ids != tokenizer.pad_id).long(),
        "nsp_labels": torch.tensor(nsp),
    }


def pretraining_batch(
    articles: Sequence[Sequence[Sequence[int]]],
    batch_size: int,
    max_len: int,
    tokenizer,
    generator: torch.Generator,
    whole_word: bool = False,
    mask_prob: float = 0.15,
    sample: str = "article",
):
    """One BERT pre-training batch from articles of tokenised sentences (lists of ids): the pairs
    of :func:`pretraining_pairs` (drawn by article or by sentence, `sample`), masked by
    :func:`mask_tokens` (same `generator`, `mask_prob`). Returns a dict
    of (B, T) tensors input_ids, token_type_ids, attention_mask, mlm_labels and (B,) nsp_labels."""
    batch = pretraining_pairs(articles, batch_size, max_len, tokenizer, generator, sample=sample)
    return mask_pairs(batch, tokenizer, generator, mask_prob=mask_prob, whole_word=whole_word)


def _special_ids(tokenizer) -> list[int]:
    """[PAD] [UNK] [CLS] [SEP] [MASK]: the ids masking never picks."""
    return [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]


def mask_pairs(
    batch: dict[str, torch.Tensor],
    tokenizer,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    whole_word: bool = False,
) -> dict[str, torch.Tensor]:
    """Pairs of :func:`pretraining_pairs` masked by :func:`mask_tokens` (`generator`, `mask_prob`;
    with `whole_word` all pieces of a chosen word) → the batch with masked input_ids and mlm_labels."""
    input_ids = batch["input_ids"]
    word_ids = None
    if whole_word:  # a piece starting with "##" continues the word before it
        starts = torch.tensor(
            [[not tokenizer.convert_ids_to_tokens(int(i)).startswith("##") for i in row] for row in input_ids.tolist()]
        )
        word_ids = starts.long().cumsum(1) - 1
    inputs, labels = mask_tokens(
        input_ids,
        mask_id=tokenizer.mask_id,
        vocab_size=len(tokenizer),
        special_ids=_special_ids(tokenizer),
        word_ids=word_ids,
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


LENGTH_STEP = 16  # length_sorted_batches pads to a multiple of this: few distinct shapes


def length_sorted_batches(
    articles: Sequence[Sequence[Sequence[int]]],
    batch_size: int,
    max_len: int,
    tokenizer,
    generator: torch.Generator,
    pool: int,
    mask_prob: float = 0.15,
    sample: str = "article",
) -> list[dict[str, torch.Tensor]]:
    """`pool` pre-training batches whose pairs are grouped by length, so each is padded only to its
    own longest pair. Draws `pool` × `batch_size` pairs as :func:`pretraining_pairs` does (the same
    pairs as `pool` calls of `batch_size`), sorts them by length, cuts the sorted list into `pool`
    batches, masks each with :func:`mask_pairs` and returns them in a random order (`generator`).

    On WikiText-2 at 64 pieces about 14 % of a randomly drawn batch is padding, yet half its pairs
    fill all 64 pieces, so nearly every batch is padded to the full length; grouped by length, the
    shorter half of the pairs train in shorter, cheaper batches. A batch then holds pairs of
    similar length rather than a random mix, which is why the option is measured, not assumed
    (bench/RECIPES_LOG.md)."""
    from .utils import check_positive_int

    pool = check_positive_int(pool, "pool")
    # Each batch is padded to its longest pair rounded up to a multiple of LENGTH_STEP: on a CPU
    # every new sequence length costs new matrix-product kernels (oneDNN builds one per shape),
    # and with a length per batch that cost outweighed the padding saved.
    pairs = pretraining_pairs(articles, pool * batch_size, max_len, tokenizer, generator, sample=sample)
    order = pairs["attention_mask"].sum(1).argsort(stable=True)
    batches = []
    for rows in order.split(batch_size):
        longest = int(pairs["attention_mask"][rows].sum(1).max())
        length = min(-(-longest // LENGTH_STEP) * LENGTH_STEP, pairs["input_ids"].shape[1])
        batch = {k: v[rows][:, :length] if v.dim() == 2 else v[rows] for k, v in pairs.items()}
        batches.append(mask_pairs(batch, tokenizer, generator, mask_prob=mask_prob))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``h @ weight.T + bias`` against `targets`. In float32, scored `chunk`
    rows at a time, the log-softmax in float32 (what ``F.linear`` then ``F.cross_entropy`` do); in
    a lower `dtype` (bfloat16 under autocast) the matrix products and the softmax in `dtype`, all
    rows at once. The gradients are computed in the forward pass and only scaled in the backward,
    so no float32 (rows × vocabulary) tensor outlives a chunk."""

    @staticmethod
    def forward(ctx, h, weight, bias, targets, chunk, dtype, valid):
        # rows from `valid` on are padding (a fixed number of rows keeps a CPU's matrix-product
        # kernels from being rebuilt for every new row count): no loss, zero gradient
        n, d = h.shape
        needs = ctx.needs_input_grad[:3]
        with torch.autocast(h.device.type, enabled=False):
            # the bias as one more column: logits = [h, 1] @ [weight, bias]^T, and one product
            # gives the gradients of both
            x = torch.cat([h, h.new_ones(n, 1)], 1).to(dtype)  # (N, D + 1)
            w = torch.cat([weight, bias[:, None]], 1).to(dtype)  # (V, D + 1)
            total = torch.zeros((), dtype=torch.float32, device=h.device)
            g = None  # d(summed loss)/d(logits) = softmax − one-hot
            if dtype != torch.float32:
                # low precision (bfloat16 under autocast): the softmax of all rows at once, in
                # `dtype` (PyTorch's CPU softmax computes in float32 and rounds its output once);
                # it is the gradient's first term and, at the targets, gives the loss. No float32
                # (rows × vocabulary) tensor is made: on 2 CPU cores the float32 log-softmax of
                # bfloat16 logits, 128 rows at a time, took 24 ms at 880 × 8,000 rows; this 5 ms.
                p = torch.softmax(torch.mm(x, w.t()), 1)
                # −log p at the targets, p rounded to `dtype` (relative error ≤ 2⁻⁸: ≤ 0.004 per row
                # in the loss); a p that underflowed to 0 counts as the smallest float32 instead of
                # making the reported loss infinite (its gradient, p − 1 = −1, is right either way)
                rows, t = torch.arange(valid, device=h.device), targets[:valid]
                total -= torch.log(p[rows, t].float().clamp_min(torch.finfo(torch.float32).tiny)).sum()
                if any(needs):
                    p[rows, t] -= 1
                    p[valid:] = 0
                    g = p
            else:
                g = torch.empty(n, w.shape[0], dtype=dtype, device=h.device) if any(needs) else None
                for s in range(0, n, chunk):
                    t = targets[s : min(s + chunk, valid)]  # the chunk's real rows
                    log_p = torch.log_softmax(torch.mm(x[s : s + chunk], w.t()), 1)
                    total -= log_p[: len(t)].gather(1, t[:, None]).sum()
                    if g is not None:
                        p = log_p.exp_()
                        p[torch.arange(len(t), device=h.device), t] -= 1
                        p[len(t) :] = 0
                        g[s : s + chunk] = p
            saved = [torch.empty(0)] * 3
            if g is not None:
                if needs[0]:
                    saved[0] = (torch.mm(g, w[:, :d]).float() / valid).to(h.dtype)
                if needs[1] or needs[2]:
                    gwb = torch.mm(x.t(), g).t().float() / valid  # (V, D + 1)
                    saved[1] = gwb[:, :d].contiguous().to(weight.dtype)
                    saved[2] = gwb[:, d].contiguous().to(bias.dtype)
        ctx.save_for_backward(*saved)
        ctx.needs = needs
        return total / valid

    @staticmethod
    def backward(ctx, grad):
        grads = [g * grad if need else None for g, need in zip(ctx.saved_tensors, ctx.needs)]
        return (*grads, None, None, None, None)


def chunked_mlm_loss(model, hidden, targets, chunk: int = 128, pad_to: int = 64):
    """The masked-LM loss of a BertForPreTraining at the chosen positions, faster on a CPU:
    `hidden` (N, D) encoder states → the MLM head's transform → mean cross-entropy against the
    tied embedding plus the decoder's bias, `chunk` rows at a time. Equal to
    ``F.cross_entropy(model.mlm(hidden), targets)`` (in float32 to rounding; under bfloat16
    autocast to bfloat16's rounding), with its gradients, but the (N × vocabulary) logits, their
    log-softmax and its gradient are never held in float32 for all rows at once: at 64 × 64 pieces
    and 25 % masking those are 26 MB tensors, a quarter of a step's time on 2 cores. Under bfloat16
    autocast the softmax is taken in bfloat16 for all rows at once (`chunk` applies in float32).

    The rows are padded with zeros to a multiple of `pad_to` (padding has no loss and no gradient):
    the number of masked pieces changes every batch, and on a CPU each new row count rebuilds the
    head's matrix-product kernels (at about 850 rows × 8,000, 47 against 25 ms for the head's
    forward and backward on 2 cores)."""
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden is (N, D) and targets (N,); got {tuple(hidden.shape)} and {tuple(targets.shape)}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk is a number of rows, a whole number of at least 1; got {chunk!r}")
    if isinstance(pad_to, bool) or not isinstance(pad_to, int) or pad_to < 1:
        raise ValueError(f"pad_to is a number of rows, a whole number of at least 1 (1: no padding); got {pad_to!r}")
    if targets.numel() == 0:
        raise ValueError("no masked pieces to score: the batch has no position chosen for prediction")
    head, device = model.mlm, hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    valid = hidden.shape[0]
    extra = -valid % pad_to
    if extra:
        hidden = torch.cat([hidden, hidden.new_zeros(extra, hidden.shape[1])])
        targets = torch.cat([targets, targets.new_zeros(extra)])
    h = head.norm(head.activation(head.dense(hidden)))
    return _ChunkedLinearCrossEntropy.apply(h, head.decoder.weight, head.decoder.bias, targets, chunk, dtype, valid)


def encode_for_losses(bert, batch, chosen, explicit_attention: bool = False):
    """The encoder states the two pre-training losses read, with the top layer run only where they
    read it: (states at the `chosen` positions (N, D), in row-major order as ``x[chosen]``; pooled
    [CLS] (B, D)). Below the top layer every position is needed (the top layer's keys and values
    come from all of them), but the top layer's queries, attention output, feed-forward and
    LayerNorms are needed only at [CLS] and the masked pieces: at 64 pieces and 25 % masking about
    a third of the rows. The numbers are those of running the whole top layer and picking the rows
    afterwards (``tests/test_bert_pretraining.py``); only post-norm encoders (BERT's) are handled.

    `batch` holds "input_ids", "token_type_ids" and "attention_mask" (B, T); `chosen` is a (B, T)
    bool tensor that is False at position 0 ([CLS])."""
    *lower, top = bert.encoder.layers
    if top.norm_first:
        raise ValueError("encode_for_losses handles post-norm encoders (BERT's); this one is pre-norm")
    if chosen.dtype != torch.bool or chosen.shape != batch["input_ids"].shape:
        raise ValueError(
            f"chosen must be a bool tensor of the batch's shape {tuple(batch['input_ids'].shape)}; "
            f"got {chosen.dtype} {tuple(chosen.shape)}"
        )
    if bool(chosen[:, 0].any()):
        raise ValueError("chosen marks position 0 ([CLS]), which is never a masked piece")
    mask = (batch["attention_mask"] != 0)[:, None, None, :]  # (B, 1, 1, T)
    x = bert.embeddings(batch["input_ids"], batch["token_type_ids"])
    for layer in lower:
        x, _ = layer(x, mask, need_weights=explicit_attention)
    # the rows the losses read, per pair: [CLS], then the chosen positions in order; pairs with
    # fewer chosen positions are filled with other positions, computed and never read
    keep = chosen.clone()
    keep[:, 0] = True
    counts = keep.sum(1)
    # rounded up to a multiple of 8, so few distinct shapes reach the matrix products (on a CPU
    # each new shape costs new oneDNN kernels)
    width = min(-(-int(counts.max()) // 8) * 8, keep.shape[1])
    rows = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :width]  # (B, M)
    xq = x.gather(1, rows[..., None].expand(-1, -1, x.shape[-1]))  # (B, M, D)
    # the top block as EncoderBlock.forward (post-norm), queries at those rows, keys at all
    a, _ = top.self_attn(xq, x, x, mask=mask, need_weights=explicit_attention)
    h = top.norm1(xq + top.dropout1(a))
    h = top.norm2(h + top.dropout2(top.ff(h)))
    read = torch.arange(width, device=h.device) < counts[:, None]  # (B, M)
    read[:, 0] = False
    pooled = torch.tanh(bert.pooler(h[:, 0])) if bert.pooler is not None else None
    return h[read], pooled


def pretraining_loss(
    model,
    batch,
    count_correct: bool = True,
    explicit_attention: bool = False,
    chunked_loss: bool = False,
    sparse_top: bool = False,
):
    """(loss, mlm_loss, nsp_loss, masked predictions correct, masked predictions) for a
    BertForPreTraining; the MLM head runs only at the labelled positions (≈15%), which saves
    most of the (T × vocab) output layer's cost. The batch moves to the model's device.

    With `count_correct` False the count of correct predictions is None: the training loop skips
    the arg-max over (masked pieces × vocabulary), 3 % (float32) to 9 % (bfloat16) of a step on 2 CPU cores. With
    `explicit_attention` the encoder computes attention as written in notebook 05 (softmax of
    Q Kᵀ / √d_k, then × V; :func:`onehot2gpt.attention.scaled_dot_product_attention`) instead of
    PyTorch's fused kernel: the same numbers, and under bfloat16 autocast on a CPU about twice as
    fast per step, because the fused kernel's bfloat16 backward is slow there for short sequences
    (and since the padding mask is added as a bias rather than filled in, about 0.73 × that again).
    With `chunked_loss` (and `count_correct` False, as in training) the masked-LM loss is
    :func:`chunked_mlm_loss`: the same loss and gradients (to bfloat16's rounding under autocast)
    in less time per step. With `sparse_top` the encoder's top layer runs only at [CLS] and the
    masked pieces (:func:`encode_for_losses`): the same losses and gradients, less time per step."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    targets = batch["mlm_labels"][chosen]
    if sparse_top:
        hidden, pooled = encode_for_losses(model.bert, batch, chosen, explicit_attention)
    else:
        out = model.bert(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], output_attentions=explicit_attention
        )
        hidden, pooled = out.last_hidden_state[chosen], out.pooled
    if chunked_loss and not count_correct:
        mlm_loss = chunked_mlm_loss(model, hidden, targets)
        correct = None
    else:
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
    short_len: int | None = None,
    short_steps: int = 0,
    mask_prob: float = 0.15,
    bf16: bool = False,
    nsp_weight: float = 1.0,
    explicit_attention: bool = False,
    sample: str = "article",
    chunked_loss: bool = False,
    length_buckets: int = 0,
    sparse_top: bool = False,
    stack_steps: int = 0,
    progress: bool = True,
    desc: str = "BERT",
) -> dict[str, list[float]]:
    """Masked LM + next-sentence prediction on `articles` (lists of tokenised sentences) with
    AdamW, linear warm-up and linear decay; returns per-step "loss", "mlm_loss", "nsp_loss".

    A sequence-length schedule, as the BERT paper's (90% of its steps at 128 tokens, the rest at
    512): with `short_len`, the first `short_steps` of the `steps` train on pairs cut to
    `short_len` tokens, which cost about half as much per step at half the length; the rest at
    `max_len`. The learning-rate schedule runs over all `steps`.

    `mask_prob` is the share of pieces chosen for prediction in training (BERT's 15 %; evaluation
    always uses 15 %). With `bf16` the forward pass runs under bfloat16 autocast (matrix products
    in bfloat16, weights, gradients and the optimiser in float32): about 30 % less time per step
    on a CPU with native bfloat16 (AVX512-BF16 or AMX), slower on one without
    (:func:`native_bf16`). The loss minimised is MLM + `nsp_weight` × NSP (BERT's is 1).
    `explicit_attention` computes attention without the fused kernel (:func:`pretraining_loss`):
    with `bf16` on a CPU, about half the time per step. `sample` "sentence" draws the pairs
    uniformly over sentences instead of over articles (:func:`pretraining_pairs`).
    `chunked_loss` computes the masked-LM loss with :func:`chunked_mlm_loss` (the same loss, less
    time). With `length_buckets` k > 0 the pairs of every k batches are drawn together and grouped
    by length (:func:`length_sorted_batches`), so short pairs train in short batches. With
    `sparse_top` the encoder's top layer runs only at the rows the losses read
    (:func:`encode_for_losses`): the same losses and gradients, less time per step.

    Progressive stacking (Gong et al., 2019, "Efficient Training of BERT by Progressively Stacking"):
    with `stack_steps` s > 0 the first s steps train only the bottom half of the encoder's layers
    (the other half is left out of the forward pass and gets no gradient), which costs about 0.6-0.8
    of a full step; then every trained layer is copied, with its optimiser state, onto the layer
    half the depth above it (layers 0, 1 of 4 into 2, 3), and the rest of the `steps` train the whole
    encoder. The learning-rate schedule runs over all `steps`."""
    if short_len is not None and not 8 <= short_len <= max_len:
        raise ValueError(f"short_len must be between 8 and max_len={max_len}; got {short_len}")
    if not 0 <= short_steps <= steps or (short_steps and short_len is None):
        raise ValueError(
            f"short_steps must be between 0 and steps={steps}, and needs short_len; "
            f"got short_steps={short_steps}, short_len={short_len}"
        )
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob is the share of pieces to predict, between 0 and 1; got {mask_prob}")
    if not nsp_weight >= 0:
        raise ValueError(f"nsp_weight scales the next-sentence loss, a number >= 0; got {nsp_weight}")
    if sample not in SAMPLES:
        raise ValueError(f"sample is one of {SAMPLES}; got {sample!r}")
    if isinstance(length_buckets, bool) or not isinstance(length_buckets, int) or length_buckets < 0:
        raise ValueError(
            f"length_buckets is how many batches to draw together and group by length, "
            f"a whole number (0: each batch on its own); got {length_buckets!r}"
        )
    layers = model.bert.encoder.layers
    if isinstance(stack_steps, bool) or not isinstance(stack_steps, int) or not 0 <= stack_steps < steps:
        raise ValueError(
            f"stack_steps is how many of the {steps} steps train the bottom half of the layers "
            f"before they are stacked, a whole number from 0 up to steps - 1; got {stack_steps!r}"
        )
    if stack_steps and (len(layers) < 2 or len(layers) % 2):
        raise ValueError(
            f"stack_steps needs an even number of encoder layers to copy the bottom half onto "
            f"the top half; this encoder has {len(layers)}"
        )
    g = torch.Generator().manual_seed(seed)
    opt = adamw(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    history = {"loss": [], "mlm_loss": [], "nsp_loss": []}
    model.train()
    device = next(model.parameters()).device
    queue, queue_len = [], None  # length-grouped batches drawn but not yet trained on
    if stack_steps:
        model.bert.encoder.layers = torch.nn.ModuleList(layers[: len(layers) // 2])
    try:
        with tqdm(total=steps, desc=desc, disable=not progress, mininterval=2.0) as bar:
            for step in range(steps):
                if stack_steps and step == stack_steps:
                    stack_layers(layers, opt)
                    model.bert.encoder.layers = layers
                length = short_len if step < short_steps else max_len
                if length_buckets:
                    if not queue or queue_len != length:  # a new pool (or the schedule's length changed)
                        queue = length_sorted_batches(
                            articles,
                            batch_size,
                            length,
                            tokenizer,
                            g,
                            length_buckets,
                            mask_prob=mask_prob,
                            sample=sample,
                        )
                        queue_len = length
                    batch = queue.pop()
                else:
                    batch = pretraining_batch(
                        articles, batch_size, length, tokenizer, g, mask_prob=mask_prob, sample=sample
                    )
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss, mlm_loss, nsp_loss, _, _ = pretraining_loss(
                        model,
                        batch,
                        count_correct=False,
                        explicit_attention=explicit_attention,
                        chunked_loss=chunked_loss,
                        sparse_top=sparse_top,
                    )
                    if nsp_weight != 1.0:
                        loss = mlm_loss + nsp_weight * nsp_loss
                optimizer_step(loss, opt, sched, model.parameters(), 1.0)
                check_finite_loss(loss, step, lr=lr, what=desc)
                for key, value in (("loss", loss), ("mlm_loss", mlm_loss), ("nsp_loss", nsp_loss)):
                    history[key].append(value.item())
                bar.update()
                if bar.n % 50 == 0:
                    bar.set_postfix(mlm=f"{mlm_loss.item():.2f}", nsp=f"{nsp_loss.item():.2f}", refresh=False)
    finally:
        model.bert.encoder.layers = layers  # whole again, even if training stopped in the first phase
    model.eval()
    return history


def stack_layers(layers, optimizer) -> None:
    """Progressive stacking's step: copy each layer of the bottom half of `layers` (an encoder's
    ModuleList) onto the layer half the depth above it, weights and `optimizer` state (AdamW's
    moments and step count) alike, so training goes on as if the copy had always been there."""
    half = len(layers) // 2
    with torch.no_grad():
        for low, high in zip(layers[:half], layers[half:]):
            for p_low, p_high in zip(low.parameters(), high.parameters()):
                p_high.copy_(p_low)
                if p_low in optimizer.state:
                    optimizer.state[p_high] = {
                        k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[p_low].items()
                    }


def adapt_mlm(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    steps: int = 3000,
    batch_size: int = 64,
    max_len: int = 64,
    lr: float = 5e-4,
    warmup: float = 0.1,
    mask_prob: float = 0.15,
    seed: int = 0,
    bf16: bool = False,
    explicit_attention: bool = False,
    progress: bool = True,
    desc: str = "adapt",
) -> list[float]:
    """Task-adaptive pre-training (Gururangan et al., 2020; ULMFiT's second stage for BERT): more
    masked-LM steps on the task's own unlabelled `texts` before fine-tuning → the MLM loss per step.

    Each step masks a random batch of single sentences ``[CLS] text [SEP]`` (cut to `max_len`
    pieces) with BERT's 80/10/10 rule; only the masked LM trains (the sentences have no order to
    predict). AdamW, `lr` warmed up over the first `warmup` share of `steps`, then decayed linearly
    to 0; `bf16` and `explicit_attention` as in :func:`pretrain_bert`."""
    from .utils import check_positive_int

    if not (hasattr(model, "bert") and hasattr(model, "mlm")):
        raise TypeError(
            f"adapt_mlm trains a BertForPreTraining (an encoder with its masked-LM head); got "
            f"{type(model).__name__}. Load the pre-training checkpoint with load_bert(directory)"
        )
    steps, batch_size = check_positive_int(steps, "steps"), check_positive_int(batch_size, "batch_size")
    if not 3 <= check_positive_int(max_len, "max_len") <= model.bert.config.max_len:
        raise ValueError(
            f"max_len counts [CLS] and [SEP] too: between 3 and this BERT's {model.bert.config.max_len}; got {max_len}"
        )
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts is a list of sentences (str), e.g. [text for text, label in rows]")
    ids = [row for row in (tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))[: max_len - 2] for t in texts) if row]
    if not ids:
        raise ValueError("texts holds no sentence with a piece in it: give the task's unlabelled sentences")
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob is the share of pieces to predict, between 0 and 1; got {mask_prob}")
    device = next(model.parameters()).device
    specials = _special_ids(tokenizer)
    g = torch.Generator().manual_seed(seed)
    warm = max(1, int(warmup * steps))
    opt = adamw(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    losses = []
    model.train()
    for step in tqdm(range(steps), desc=desc, disable=not progress, mininterval=2.0):
        rows = [
            [tokenizer.cls_id, *ids[int(i)], tokenizer.sep_id]
            for i in torch.randint(len(ids), (batch_size,), generator=g)
        ]
        input_ids = pad_batch(rows, tokenizer.pad_id)
        inputs, labels = mask_tokens(
            input_ids,
            mask_id=tokenizer.mask_id,
            vocab_size=len(tokenizer),
            special_ids=specials,
            prob=mask_prob,
            generator=g,
        )
        if not (labels != IGNORE_INDEX).any():
            continue  # nothing chosen in a tiny batch
        inputs, labels = inputs.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model.bert(
                inputs,
                torch.zeros_like(inputs),
                (input_ids != tokenizer.pad_id).long().to(device),
                output_attentions=explicit_attention,
            )
            chosen = labels != IGNORE_INDEX
            loss = F.cross_entropy(model.mlm(out.last_hidden_state[chosen]), labels[chosen])
        losses.append(check_finite_loss(loss, step, lr=lr, what=desc))  # before the update uses it
        optimizer_step(loss, opt, sched, model.parameters(), 1.0)
    model.eval()
    return losses


@torch.no_grad()
def evaluate_pretraining(
    model, tokenizer, articles, *, batches: int = 50, batch_size: int = 64, max_len: int = 64, seed: int = 1234
) -> dict[str, float]:
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
    return {"mlm_accuracy": correct / count, "mlm_loss": mlm_total / count, "nsp_accuracy": nsp_correct / nsp_count}


def all_nsp_pairs(articles: Sequence[Sequence], seed: int = 0) -> list[tuple]:
    """Every next-sentence pair of `articles` (lists of sentences, as strings or id lists), once:
    for each sentence with a successor, (sentence, its successor, 0) and (sentence, a random
    sentence of another article, 1), so the labels are exactly half and half. Unlike
    :func:`nsp_pairs`, which draws pairs at random, no pair repeats: an evaluation of held-out
    text by :func:`evaluate_nsp` scores all of it."""
    import random

    non_empty = [i for i, a in enumerate(articles) if len(a) >= 1]
    if not any(len(a) >= 2 for a in articles) or len(non_empty) < 2:
        raise ValueError("need an article with two or more sentences and at least two articles")
    rng = random.Random(seed)
    pairs = []
    for k, article in enumerate(articles):
        for i in range(len(article) - 1):
            other = rng.choice(non_empty)
            while other == k:
                other = rng.choice(non_empty)
            pairs += [(article[i], article[i + 1], 0), (article[i], rng.choice(articles[other]), 1)]
    return pairs


@torch.no_grad()
def evaluate_nsp(
    model, tokenizer, articles, *, max_len: int = 64, batch_size: int = 64, mask_prob: float = 0.15, seed: int = 1234
) -> dict:
    """Next-sentence accuracy on every pair of held-out `articles` (:func:`all_nsp_pairs`, lists
    of tokenised sentences) → {"nsp_accuracy", "pairs", "correct" (a bool tensor, one per pair,
    for comparing two models on the same pairs)}.

    :func:`evaluate_pretraining` scores 50 batches of random pairs (3,200, with repeats: a standard
    error of about 0.7 accuracy points); WikiText-2 valid holds about 16,000 pairs, each scored
    once here. As in pre-training, the input is masked first (`mask_prob` of the pieces, BERT's
    80/10/10; 0 leaves it whole) and each part cut to fit `max_len`."""
    from .utils import check_positive_int

    if not (hasattr(model, "bert") and hasattr(model, "nsp")):
        raise TypeError(
            f"evaluate_nsp scores a BertForPreTraining (an encoder with its next-sentence "
            f"head); got {type(model).__name__}. Load the checkpoint with load_bert(directory)"
        )
    batch_size = check_positive_int(batch_size, "batch_size")
    if not 5 <= check_positive_int(max_len, "max_len") <= model.bert.config.max_len:
        raise ValueError(
            f"max_len counts [CLS] and two [SEP] too: between 5 and this BERT's "
            f"{model.bert.config.max_len}; got {max_len}"
        )
    if isinstance(mask_prob, bool) or not isinstance(mask_prob, (int, float)) or not 0.0 <= mask_prob < 1.0:
        raise ValueError(
            f"mask_prob is the share of pieces masked, a number from 0 (none) to below 1; got {mask_prob!r}"
        )
    pairs = all_nsp_pairs(articles, seed=seed)
    specials = _special_ids(tokenizer)
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    predictions = []
    for start in range(0, len(pairs), batch_size):
        examples = [
            _nsp_example(a, b, tokenizer.cls_id, tokenizer.sep_id, max_len)
            for a, b, _ in pairs[start : start + batch_size]
        ]
        ids = pad_batch([ids for ids, _ in examples], tokenizer.pad_id)
        inputs = (
            ids
            if mask_prob == 0
            else mask_tokens(
                ids,
                mask_id=tokenizer.mask_id,
                vocab_size=len(tokenizer),
                special_ids=specials,
                prob=mask_prob,
                generator=g,
            )[0]
        )
        out = model.bert(
            inputs.to(device),
            pad_batch([seg for _, seg in examples], 0).to(device),
            (ids != tokenizer.pad_id).long().to(device),
        )
        predictions.append(model.nsp(out.pooled).argmax(-1).cpu())
    model.train(was_training)
    correct = torch.cat(predictions) == torch.tensor([label for *_, label in pairs])
    return {"nsp_accuracy": correct.float().mean().item(), "pairs": len(pairs), "correct": correct}


def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Whether bfloat16 autocast speeds training up on `device`: a CUDA GPU that supports it, or a
    CPU with native bfloat16 instructions (AVX512-BF16 or AMX, as oneDNN reports). Elsewhere
    PyTorch emulates bfloat16 and autocast makes each step slower than float32."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def tokenize_articles(tokenizer, articles: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Articles of sentence strings → articles of id lists (no special tokens)."""
    return [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in art] for art in articles]


def _train_bert_command(args, argv=None):
    """``train``: pre-train the course BERT on WikiText-2 train and save it with its vocabulary."""
    import json
    import sys

    from .bert import BertConfig, BertForPreTraining, save_bert
    from .data import wikitext_articles
    from .subword import WordPieceTokenizer
    from .utils import set_threads

    set_threads(args.threads)
    if args.length_buckets < 0:
        raise SystemExit(
            f"--length-buckets is how many batches to group by length, 0 or more; got {args.length_buckets}"
        )
    if args.bf16 and not native_bf16(args.device):
        raise SystemExit(
            f"--bf16: this {args.device} has no native bfloat16 (on a CPU: AVX512-BF16 or "
            "AMX), so autocast would make every step slower than float32. Leave out --bf16 "
            "(the same recipe in float32 takes about 1.4 times as long)."
        )
    start = time.time()
    train = wikitext_articles("train")
    # score="frequency": the most frequent pair first, as Hugging Face's WordPiece trainer does
    # (1.1 pieces per word on WikiText-2 valid, against 2.9 with the textbook likelihood score)
    tokenizer = WordPieceTokenizer.train((s for a in train for s in a), vocab_size=args.vocab_size, score="frequency")
    t_vocab = time.time() - start
    train_ids = tokenize_articles(tokenizer, train)
    valid_ids = tokenize_articles(tokenizer, wikitext_articles("valid"))
    torch.manual_seed(args.seed)
    config = BertConfig.tiny(vocab_size=len(tokenizer), max_len=max(args.max_len, 128), dropout=args.dropout)
    model = BertForPreTraining(config).to(args.device)
    history = pretrain_bert(
        model,
        tokenizer,
        train_ids,
        steps=args.steps,
        batch_size=args.batch_size,
        max_len=args.max_len,
        lr=args.lr,
        warmup=args.warmup,
        seed=args.seed,
        short_len=args.short_len,
        short_steps=args.short_steps,
        mask_prob=args.mask_prob,
        bf16=args.bf16,
        nsp_weight=args.nsp_weight,
        explicit_attention=args.explicit_attention,
        sample=args.sample,
        chunked_loss=args.chunked_loss,
        length_buckets=args.length_buckets,
        sparse_top=args.sparse_top,
        stack_steps=args.stack_steps,
    )
    t_train = time.time() - start
    scores = evaluate_pretraining(model, tokenizer, valid_ids, max_len=args.max_len)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {
        "data": "WikiText-2 train (wikitext_articles)",
        "command": "python -m onehot2gpt.bert_pretraining " + " ".join(sys.argv[1:] if argv is None else argv),
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_len": args.max_len,
        "lr": args.lr,
        "warmup": args.warmup,
        "dropout": args.dropout,
        "short_len": args.short_len,
        "short_steps": args.short_steps,
        "mask_prob": args.mask_prob,
        "bf16": args.bf16,
        "nsp_weight": args.nsp_weight,
        "explicit_attention": args.explicit_attention,
        "sample": args.sample,
        "chunked_loss": args.chunked_loss,
        "length_buckets": args.length_buckets,
        "sparse_top": args.sparse_top,
        "stack_steps": args.stack_steps,
        "threads": args.threads,
        "device": args.device,
        "seed": args.seed,
        "vocab_seconds": round(t_vocab, 1),
        "total_seconds": round(t_train, 1),
        "valid": {k: round(v, 4) for k, v in scores.items()},
        "final_train_mlm_loss": round(sum(history["mlm_loss"][-100:]) / len(history["mlm_loss"][-100:]), 4),
    }
    save_bert(model.cpu(), args.out, info=info, tokenizer=tokenizer)
    print(json.dumps(info))


def build_parser():
    """The parser of ``python -m onehot2gpt.bert_pretraining train --out DIR``, which pre-trains the
    course BERT; its defaults are the arguments that built the committed ``bert-wikitext2`` (which
    ``python -m onehot2gpt.recipes bert-wikitext2`` rebuilds)."""
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(
        prog="python -m onehot2gpt.bert_pretraining",
        description="Pre-train the course BERT and save it with its vocabulary.",
    )
    sub = p.add_subparsers(dest="what", required=True)
    bert = sub.add_parser(
        "train",
        help="pre-train the course BERT on WikiText-2 train",
        description="Pre-train the course BERT on WikiText-2 train.",
    )
    bert.add_argument("--out", required=True, type=Path)
    bert.add_argument("--vocab-size", type=int, default=8000)
    bert.add_argument("--steps", type=int, default=20000)
    bert.add_argument("--batch-size", type=int, default=64)
    bert.add_argument("--max-len", type=int, default=64)
    bert.add_argument("--lr", type=float, default=1e-3)
    bert.add_argument("--warmup", type=int, default=100, help="steps of linear warm-up")
    bert.add_argument("--dropout", type=float, default=0.1)
    bert.add_argument(
        "--short-len", type=int, default=None, help="train the first --short-steps steps on pairs cut to this length"
    )
    bert.add_argument("--short-steps", type=int, default=0)
    bert.add_argument(
        "--mask-prob",
        type=float,
        default=0.15,
        help="share of pieces predicted in training (evaluation always uses 0.15)",
    )
    bert.add_argument("--nsp-weight", type=float, default=1.0, help="the loss is MLM + this × NSP (BERT's: 1)")
    bert.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast: about 30%% faster per step where the CPU (AVX512-BF16, AMX) "
        "or GPU has native bfloat16; refused elsewhere",
    )
    bert.add_argument(
        "--explicit-attention",
        action="store_true",
        help="attention as notebook 05 writes it instead of PyTorch's fused kernel: the same "
        "numbers, about half the time per step with --bf16 on a CPU",
    )
    bert.add_argument(
        "--sample",
        choices=SAMPLES,
        default="article",
        help="draw sentence pairs by article, then sentence (the committed checkpoint's), or "
        "uniformly over all sentences",
    )
    bert.add_argument(
        "--chunked-loss",
        action="store_true",
        help="the masked-LM loss and its gradients computed 128 rows at a time: the same "
        "loss, less time per step on a CPU",
    )
    bert.add_argument(
        "--length-buckets",
        type=int,
        default=0,
        metavar="K",
        help="draw the pairs of K batches at once and group them by length, so each batch "
        "is padded only to its own longest pair (0, the default: no grouping)",
    )
    bert.add_argument(
        "--sparse-top",
        action="store_true",
        help="run the encoder's top layer only at [CLS] and the masked pieces, the rows the "
        "losses read: the same losses and gradients, less time per step",
    )
    bert.add_argument(
        "--stack-steps",
        type=int,
        default=0,
        metavar="S",
        help="progressive stacking: the first S steps train the bottom half of the layers, "
        "which are then copied onto the top half (0: every step trains all layers)",
    )
    bert.add_argument("--threads", type=int, default=2)
    bert.add_argument("--seed", type=int, default=0)
    bert.add_argument("--device", default="cpu", help="cpu (the documented run) or cuda")
    return p


def main(argv=None):
    """Run the command line (see :func:`build_parser`)."""
    _train_bert_command(build_parser().parse_args(argv), argv)


if __name__ == "__main__":
    main()
