"""The BERT recipe's speed tricks for 2 CPU cores (``bert-wikitext2.py --laptop``), kept out of the
library so that :func:`onehot2gpt.bert_pretraining.pretrain_bert`, the loop notebook 07 reads,
stays plain. :func:`pretrain_bert_fast` is that loop with switches, each measured in ``LOG.md``:

* `bf16`: the forward pass under bfloat16 autocast where the CPU or GPU has it natively (:func:`native_bf16`);
* `explicit_attention`: attention as notebook 05 writes it instead of PyTorch's fused kernel;
* `chunked_loss`: the masked-LM loss and its gradients without a float32 (pieces × vocabulary)
  tensor (:func:`chunked_mlm_loss`);
* `sparse_top`: the encoder's top layer run only at the rows the losses read (:func:`encode_for_losses`);
* `length_buckets`, `short_len`/`short_steps`, `stack_steps`, `sample`, `mask_prob`, `nsp_weight`:
  studied and not used by the recipe (``LOG.md`` says what each measured).

Every switch computes the same losses and gradients as the plain loop (to bfloat16's rounding
under autocast); ``tests/test_recipes_bert.py`` checks it. :func:`evaluate_nsp` scores
next-sentence prediction on every pair of held-out text.
"""

from __future__ import annotations

import bisect
import inspect
import itertools
import math
from collections.abc import Sequence
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from onehot2gpt.bert_pretraining import (
    _special_ids,
    heads_loss,
    mask_pairs,
    mask_tokens,
    pair_batch,
    pretrain_bert,
    pretraining_pairs,
    pretraining_steps,
)
from onehot2gpt.utils import IGNORE_INDEX, evaluating

LENGTH_STEP = 16  # length_sorted_batches pads to a multiple of this: few distinct shapes


def sentence_pairs(
    articles: Sequence[Sequence[Sequence[int]]], batch_size: int, max_len: int, tokenizer, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """:func:`~onehot2gpt.bert_pretraining.pretraining_pairs` with sentence A (and a NotNext
    partner B) drawn uniformly from all sentences, as BERT's own data preparation walks through
    every sentence of every document, instead of an article first."""
    usable = [i for i, a in enumerate(articles) if len(a) >= 2]
    if len(usable) < 2:
        raise ValueError("need at least two articles with two or more sentences each")
    starts = list(itertools.accumulate(len(articles[a]) - 1 for a in usable))  # sentences with a next one
    sizes = list(itertools.accumulate(len(articles[a]) for a in usable))  # every sentence

    def pick(cumulative):  # → (article, sentence index), uniform over sentences
        r = int(torch.randint(cumulative[-1], (1,), generator=generator))
        k = bisect.bisect_right(cumulative, r)
        return usable[k], r - (cumulative[k - 1] if k else 0)

    pairs = []
    for _ in range(batch_size):
        art, i = pick(starts)
        if int(torch.randint(2, (1,), generator=generator)) == 0:
            pairs.append((articles[art][i], articles[art][i + 1], 0))
            continue
        other, j = pick(sizes)
        while other == art:
            other, j = pick(sizes)
        pairs.append((articles[art][i], articles[other][j], 1))
    return pair_batch(pairs, max_len, tokenizer)


PAIRS = {"article": pretraining_pairs, "sentence": sentence_pairs}  # the `sample` switch
SAMPLES = tuple(PAIRS)


def pretraining_batch(articles, batch_size, max_len, tokenizer, generator, mask_prob=0.15, sample="article"):
    """:func:`~onehot2gpt.bert_pretraining.pretraining_batch` with the pairs drawn by article
    (`sample` "article", the library's) or by sentence ("sentence": :func:`sentence_pairs`)."""
    if sample not in PAIRS:
        raise ValueError(f"sample is one of {SAMPLES}; got {sample!r}")
    pairs = PAIRS[sample](articles, batch_size, max_len, tokenizer, generator)
    return mask_pairs(pairs, tokenizer, generator, mask_prob=mask_prob)


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

    On WikiText-2 at 64 pieces most pairs fill the whole length, so nearly every randomly drawn
    batch is padded to the full length; grouped by length, the shorter pairs train in shorter,
    cheaper batches. A batch then holds pairs of
    similar length rather than a random mix, which is why the option is measured, not assumed
    (recipes/LOG.md)."""
    from onehot2gpt.utils import check_positive_int

    pool = check_positive_int(pool, "pool")
    # Each batch is padded to its longest pair rounded up to a multiple of LENGTH_STEP: on a CPU
    # every new sequence length costs new matrix-product kernels (oneDNN builds one per shape),
    # and with a length per batch that cost outweighed the padding saved.
    pairs = PAIRS[sample](articles, pool * batch_size, max_len, tokenizer, generator)
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
                # (rows × vocabulary) tensor is made; on a CPU this is much faster than the float32
                # log-softmax of bfloat16 logits chunk by chunk (recipes/LOG.md).
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
    log-softmax and its gradient are never held in float32 for all rows at once: with the recipe's
    batches those are large tensors, a sizeable share of a step on 2 cores. Under bfloat16
    autocast the softmax is taken in bfloat16 for all rows at once (`chunk` applies in float32).

    The rows are padded with zeros to a multiple of `pad_to` (padding has no loss and no gradient):
    the number of masked pieces changes every batch, and on a CPU each new row count rebuilds the
    head's matrix-product kernels."""
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


def fast_pretraining_loss(
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
    the arg-max over (masked pieces × vocabulary), which only the evaluation reports. With
    `explicit_attention` the encoder computes attention as written in notebook 05 (softmax of
    Q Kᵀ / √d_k, then × V; :func:`onehot2gpt.attention.scaled_dot_product_attention`) instead of
    PyTorch's fused kernel: the same numbers, and under bfloat16 autocast on a CPU faster per step,
    because the fused kernel's bfloat16 backward is slow there for short sequences.
    With `chunked_loss` (and `count_correct` False, as in training) the masked-LM loss is
    :func:`chunked_mlm_loss`: the same loss and gradients (to bfloat16's rounding under autocast)
    in less time per step. With `sparse_top` the encoder's top layer runs only at [CLS] and the
    masked pieces (:func:`encode_for_losses`): the same losses and gradients, less time per step."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    if sparse_top:
        hidden, pooled = encode_for_losses(model.bert, batch, chosen, explicit_attention)
    else:
        out = model.bert(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], output_attentions=explicit_attention
        )
        hidden, pooled = out.last_hidden_state[chosen], out.pooled
    if not (chunked_loss and not count_correct):
        return heads_loss(model, hidden, pooled, batch, count_correct)
    targets = batch["mlm_labels"][chosen]
    mlm_loss = chunked_mlm_loss(model, hidden, targets)
    nsp_loss = F.cross_entropy(model.nsp(pooled), batch["nsp_labels"])
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss, None, int(targets.numel())


def pretrain_bert_fast(
    model,
    tokenizer,
    articles,
    *,
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
    **plain,
) -> dict[str, list[float]]:
    """The library's :func:`~onehot2gpt.bert_pretraining.pretrain_bert` with switches: `plain` holds
    its arguments (steps, batch_size, max_len, lr, warmup, seed, progress, desc; its defaults), and
    the update loop is its :func:`~onehot2gpt.bert_pretraining.pretraining_steps`. Returns per-step
    "loss", "mlm_loss", "nsp_loss".

    A sequence-length schedule, as the BERT paper's (90% of its steps at 128 tokens, the rest at
    512): with `short_len`, the first `short_steps` of the `steps` train on pairs cut to
    `short_len` tokens, which cost less per step; the rest at
    `max_len`. The learning-rate schedule runs over all `steps`.

    `mask_prob` is the share of pieces chosen for prediction in training (BERT's 15 %; evaluation
    always uses 15 %). With `bf16` the forward pass runs under bfloat16 autocast (matrix products
    in bfloat16, weights, gradients and the optimiser in float32): less time per step on a CPU
    with native bfloat16 (AVX512-BF16 or AMX), more on one without
    (:func:`native_bf16`). The loss minimised is MLM + `nsp_weight` × NSP (BERT's is 1).
    `explicit_attention` computes attention without the fused kernel (:func:`fast_pretraining_loss`):
    faster with `bf16` on a CPU. `sample` "sentence" draws the pairs
    uniformly over sentences instead of over articles (:func:`pretraining_pairs`).
    `chunked_loss` computes the masked-LM loss with :func:`chunked_mlm_loss` (the same loss, less
    time). With `length_buckets` k > 0 the pairs of every k batches are drawn together and grouped
    by length (:func:`length_sorted_batches`), so short pairs train in short batches. With
    `sparse_top` the encoder's top layer runs only at the rows the losses read
    (:func:`encode_for_losses`): the same losses and gradients, less time per step.

    Progressive stacking (Gong et al., 2019, "Efficient Training of BERT by Progressively Stacking"):
    with `stack_steps` s > 0 the first s steps train only the bottom half of the encoder's layers
    (the other half is left out of the forward pass and gets no gradient), a cheaper step; then every trained layer is copied, with its optimiser state, onto the layer
    half the depth above it (layers 0, 1 of 4 into 2, 3), and the rest of the `steps` train the whole
    encoder. The learning-rate schedule runs over all `steps`."""
    bound = inspect.signature(pretrain_bert).bind(model, tokenizer, articles, **plain)
    bound.apply_defaults()
    a = SimpleNamespace(**bound.arguments)
    steps, max_len = a.steps, a.max_len
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
    g = torch.Generator().manual_seed(a.seed)
    device = next(model.parameters()).device
    queue = {"batches": [], "length": None}  # length-grouped batches drawn but not yet trained on

    def losses(step, optimizer):
        if stack_steps and step == 0:  # the optimiser holds every layer; the forward pass half of them
            model.bert.encoder.layers = torch.nn.ModuleList(layers[: len(layers) // 2])
        if stack_steps and step == stack_steps:
            stack_layers(layers, optimizer)
            model.bert.encoder.layers = layers
        length = short_len if step < short_steps else max_len
        if not length_buckets:
            batch = pretraining_batch(articles, a.batch_size, length, tokenizer, g, mask_prob=mask_prob, sample=sample)
        else:
            if not queue["batches"] or queue["length"] != length:  # a new pool (or the length changed)
                queue["batches"] = length_sorted_batches(
                    articles, a.batch_size, length, tokenizer, g, length_buckets, mask_prob=mask_prob, sample=sample
                )
                queue["length"] = length
            batch = queue["batches"].pop()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss, mlm_loss, nsp_loss, _, _ = fast_pretraining_loss(
                model,
                batch,
                count_correct=False,
                explicit_attention=explicit_attention,
                chunked_loss=chunked_loss,
                sparse_top=sparse_top,
            )
        if nsp_weight != 1.0:
            loss = mlm_loss + nsp_weight * nsp_loss
        return loss, mlm_loss, nsp_loss

    try:
        # the starting level of an untrained model's loss, as pretrain_bert: ln V (the masked token) + ln 2 (NSP);
        # a loss 1000 times above it stops the run as exploding
        start = math.log(len(tokenizer)) + nsp_weight * math.log(2)
        return pretraining_steps(
            model, losses, steps=steps, lr=a.lr, warmup=a.warmup, progress=a.progress, desc=a.desc, start=start
        )
    finally:
        model.bert.encoder.layers = layers  # whole again, even if training stopped in the first phase


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

    :func:`evaluate_pretraining` scores fixed batches of random pairs (with repeats); here every
    pair of the held-out text is scored once. As in pre-training, the input is masked first (`mask_prob` of the pieces, BERT's
    80/10/10; 0 leaves it whole) and each part cut to fit `max_len`."""
    from onehot2gpt.utils import check_positive_int

    if not (hasattr(model, "bert") and hasattr(model, "nsp")):
        raise TypeError(
            f"evaluate_nsp scores a BertForPreTraining (an encoder with its next-sentence "
            f"head); got {type(model).__name__}. Load the checkpoint with load(directory)"
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
    predictions = []
    with evaluating(model):
        for start in range(0, len(pairs), batch_size):
            batch = pair_batch(pairs[start : start + batch_size], max_len, tokenizer)
            ids = batch["input_ids"]
            if mask_prob:
                ids = mask_tokens(
                    ids,
                    mask_id=tokenizer.mask_id,
                    vocab_size=len(tokenizer),
                    special_ids=specials,
                    prob=mask_prob,
                    generator=g,
                )[0]
            out = model.bert(ids.to(device), batch["token_type_ids"].to(device), batch["attention_mask"].to(device))
            predictions.append(model.nsp(out.pooled).argmax(-1).cpu())
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
