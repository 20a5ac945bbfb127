"""Checks for notebook 09 (GPT and decoding): a GPT block's forward from its weights, top-k and
top-p filters, one key/value-cache step."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .checking import (
    block_variant,
    check_function,
    close,
    describe,
    rand_int,
    require_callable,
    same_shape,
    without_grad,
)

# Exercise 1: a GPT block's forward, from the block's weights


# The GPT-2 block in block_variant's terms; each slip below changes one of its steps.
_GPT2_BLOCK = dict(pre_norm=True, act=lambda z: F.gelu(z, approximate="tanh"))
_BLOCK_SLIPS = [
    (
        dict(use_mask=False),
        "every position also attends to the positions after it: the causal mask is missing, so the block would read "
        "the characters it has to predict",
    ),
    (
        dict(pre_norm=False),
        "LayerNorm is applied after each residual sum (post-norm, the original Transformer); GPT-2 normalises the "
        "input of each sub-layer and adds the sub-layer's output to the un-normalised x",
    ),
    (
        dict(residual=False),
        "the residual connections are missing: each sub-layer's output is added to its input x, it does not replace it",
    ),
    (
        dict(scale="D"),
        "the scores are divided by √D; each head compares vectors of hs = D / H features, so the scale is 1/√hs",
    ),
    (dict(scale=1.0), "the scores are not scaled by 1/√hs"),
    (dict(act=F.gelu), "the MLP uses the exact (erf) GELU; GPT-2 was trained with its tanh approximation"),
    (
        dict(heads="round-robin"),
        "right shape, but the heads' features are scrambled: head h owns the consecutive features h·hs … (h+1)·hs − 1 "
        "of Q, K and V",
    ),
]


def _block_diagnose(got, expected, x, w, n_heads):
    if not same_shape(got, expected):
        return None
    mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril()
    for slip, words in _BLOCK_SLIPS:
        if slip.get("use_mask") is False and x.size(1) == 1:
            continue
        if close(got, block_variant(x, w, n_heads, mask, **{**_GPT2_BLOCK, **slip})):
            return words
    return None


def random_gpt_block(gen: torch.Generator, d_model: int, n_heads: int):
    """A library GPTBlock (eval mode, no dropout) with every weight drawn from `gen`, LayerNorm
    gains and biases included, so a forgotten weight changes the output."""
    from onehot2gpt.gpt import GPTBlock

    block = GPTBlock(d_model, n_heads, 4 * d_model).eval()
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
    return block


def check_gpt_block(fn: Callable) -> None:
    """Exercise: (x (B, T, D), w: dict of the block's weights by name, n_heads) → (B, T, D), one
    pre-norm GPT block: x + Attn(LN₁(x)) with a causal mask, then + MLP(LN₂(·)). Compared with
    the library's GPTBlock holding the same weights."""
    from onehot2gpt.attention import causal_mask

    trial = iter(range(10**6))

    def make(gen):
        n_heads, hs = rand_int(gen, 1, 5), rand_int(gen, 2, 9)
        B, T = rand_int(gen, 1, 4), 1 if next(trial) == 3 else rand_int(gen, 2, 9)  # one test with T = 1
        block = random_gpt_block(gen, n_heads * hs, n_heads)
        w = {k: v.detach().clone() for k, v in block.state_dict().items()}
        return torch.randn(B, T, n_heads * hs, generator=gen), w, n_heads

    @torch.no_grad()
    def reference(x, w, n_heads):
        block = random_gpt_block(torch.Generator(), x.size(-1), n_heads)
        block.load_state_dict(w)
        return block(x, causal_mask(x.size(1)))[0]

    check_function(
        without_grad(fn),
        reference,
        make,
        name="gpt_block",
        trials=6,
        diagnose=_block_diagnose,
        concept="a GPT-2 block is pre-norm: x + attention(LayerNorm₁(x)), then that plus MLP(LayerNorm₂(of it)). The "
        "attention splits Q, K and V (one packed projection, in that order) into H heads of hs = D / H consecutive "
        "features, scores each query against the keys at or before its own position, scaled by 1/√hs, and merges the "
        "heads back before the output projection; the MLP is Linear, GELU (tanh approximation), Linear",
        hint="h = F.layer_norm(x, (D,), w['norm1.weight'], w['norm1.bias']); q, k, v = F.linear(h, "
        "w['attn.in_proj.weight'], w['attn.in_proj.bias']).split(D, dim=-1); each .view(B, T, H, hs).transpose(1, 2); "
        "scores = q @ k.transpose(-2, -1) / hs**0.5, masked_fill where the key is after the query (~torch.ones(T, T, "
        "dtype=torch.bool).tril()) with -inf; (softmax @ v).transpose(1, 2).reshape(B, T, D); x = x + F.linear(that, "
        "out_proj); then x = x + F.linear(F.gelu(F.linear(LN₂(x), linear1), approximate='tanh'), linear2)",
    )


# Exercises 2 and 3: top-k and top-p filters


def _distinct_logits(gen: torch.Generator, max_vocab: int = 12):
    """Logits (V,) or (B, V) with no two equal in a row, so "the k largest" has one answer."""
    v = rand_int(gen, 3, max_vocab + 1)
    shape = (v,) if rand_int(gen, 0, 2) else (rand_int(gen, 1, 4), v)
    rows = torch.stack([torch.randperm(v, generator=gen) for _ in range(shape[0] if len(shape) == 2 else 1)])
    logits = (rows + 0.9 * torch.rand(rows.shape, generator=gen)) * (0.3 + 1.2 * torch.rand(1, generator=gen))
    return logits.reshape(shape)


def _tied_logits(gen: torch.Generator, max_vocab: int = 10):
    """Logits (V,) or (B, V) holding few distinct values, so ties at the k-th place are common."""
    v = rand_int(gen, 3, max_vocab + 1)
    shape = (v,) if rand_int(gen, 0, 2) else (rand_int(gen, 1, 4), v)
    return torch.randint(0, 3, shape, generator=gen).float() - 1.5


def _filter_outcome(fn: Callable, name: str) -> Callable:
    """Wrap a filter so that checks compare which tokens it keeps (by id), then the kept logits
    (in the dtype of the result, so a filter must return logits of the input's dtype).

    Comparing the -inf tensors directly would report "nan" differences; a list of kept ids says
    what went wrong. A result that is not a tensor shaped like the logits is reported as such.
    """

    def outcome(logits, arg):
        out = fn(logits, arg)
        if not isinstance(out, torch.Tensor) or out.shape != logits.shape:
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise TypeError(
                f"{name} returned {got}; return the filtered logits: a tensor shaped like "
                f"`logits` {tuple(logits.shape)}"
            )
        kept = out > float("-inf")  # NaN counts as removed
        rows = kept.reshape(-1, kept.shape[-1]).tolist()
        ids = [[i for i, k in enumerate(row) if k] for row in rows]
        listed = (
            f"keeps token ids {ids[0]}"
            if logits.dim() == 1
            else "keeps " + "; ".join(f"row {b}: token ids {r}" for b, r in enumerate(ids))
        )
        return {"kept tokens": listed, "kept logits": out.detach().masked_fill(~kept, 0.0)}

    return outcome


def _top_k_diagnose(fn: Callable) -> Callable:
    """Recognise the usual top-k slips by running `fn` again and comparing the tokens it keeps."""

    def diagnose(got, expected, logits, k):
        out = fn(logits.clone(), k)
        if not isinstance(out, torch.Tensor) or out.shape != logits.shape:
            return None
        rows = logits.reshape(-1, logits.shape[-1])
        kept = (out > float("-inf")).reshape(rows.shape)
        n = min(k, rows.size(-1))
        kth = rows.sort(-1, descending=True).values[:, n - 1 : n]  # (rows, 1)
        at_or_above = rows >= kth
        if torch.equal(kept, at_or_above) and bool((at_or_above.sum(-1) > n).any()):
            return (
                "on a tie at the k-th place you kept every tied token, so more than k stay; exactly k must stay, the "
                "lower token ids first"
            )
        if bool((kept.sum(-1) == n).all()) and bool((kept <= at_or_above).all()):
            return (
                "the right number of tokens and only the largest logits, but a tie at the k-th place went to the "
                "higher token ids; among equal logits the lower ids stay"
            )
        return None

    return diagnose


def check_top_k_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), k) → logits with all but the k largest per row set to -inf;
    exactly min(k, V) stay, a tie at the k-th place going to the lower token ids."""
    from onehot2gpt.sampling import filter_top_k

    require_callable(fn)
    trial = iter(range(10**6))

    def make(gen):
        kind = next(trial) % 4  # distinct logits, ties, k = V, k > V
        logits = _tied_logits(gen) if kind == 1 else _distinct_logits(gen)
        V = logits.shape[-1]
        k = {0: rand_int(gen, 1, V), 1: rand_int(gen, 1, V), 2: V, 3: V + rand_int(gen, 1, 4)}[kind]
        return logits, k

    check_function(
        _filter_outcome(fn, "top_k_filter"),
        _filter_outcome(filter_top_k, "filter_top_k"),
        make,
        name="top_k_filter",
        trials=16,
        diagnose=_top_k_diagnose(fn),
        concept="top-k keeps, in each row (the last dimension), exactly the k tokens with the largest logits and "
        "gives every other token the logit -inf, so the softmax afterwards gives it probability 0; the kept logits "
        "stay as they were, in the input's dtype. When several logits tie at the k-th place the lower token ids are "
        "kept first, so exactly k stay; when k ≥ V every token stays",
        hint="a stable sort, torch.sort(logits, dim=-1, descending=True, stable=True), lists equal logits in id "
        "order; its first min(k, V) indices are the tokens to keep: scatter True into a bool mask at those indices "
        "and logits.masked_fill(~keep, float('-inf'))",
    )


def check_top_p_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), p) → logits with -inf outside the smallest most-likely set
    of probability mass ≥ p (the nucleus)."""
    from onehot2gpt.sampling import filter_top_p

    require_callable(fn)
    trial = iter(range(10**6))

    def make(gen):
        kind = next(trial) % 3  # p below the top token's probability, p near 1, p in between
        while True:
            logits = _distinct_logits(gen)
            mass = torch.softmax(logits.double(), -1).sort(-1, descending=True).values.cumsum(-1)
            if kind == 0:
                p = float(mass[..., 0].min()) * (0.2 + 0.6 * float(torch.rand(1, generator=gen)))
            else:
                low, high = (0.95, 0.999) if kind == 1 else (0.2, 0.9)
                p = low + (high - low) * float(torch.rand(1, generator=gen))
            if float((mass - p).abs().min()) > 1e-3:  # no row reaches p so narrowly that rounding decides
                return logits, p

    check_function(
        _filter_outcome(fn, "top_p_filter"),
        _filter_outcome(filter_top_p, "filter_top_p"),
        make,
        name="top_p_filter",
        trials=12,
        concept="the nucleus is the smallest set of most likely tokens whose probabilities add up to at least p: go "
        "down the tokens from most to least likely and keep each one while the tokens before it hold less than p. The "
        "token that takes the sum to p or past it is kept, and the most likely token always is; every other token's "
        "logit becomes -inf, in its original place, and the kept logits stay as they were",
        hint="turn the logits into probabilities (softmax over the last dimension), sort them from most to least "
        "likely and take the running sum; keep a token while the tokens MORE likely than it add up to less than p. "
        "Set the others to float('-inf') in the original order (scatter back through the sort indices), leaving the "
        "kept logits unchanged",
    )


# Exercise 4: one step with a key/value cache


def check_kv_cache_step(fn: Callable) -> None:
    """Exercise: (q_new, k_new, v_new (B, H, 1, hs), k_cache, v_cache (B, H, T, hs)) →
    (out (B, H, 1, hs), k_all, v_all (B, H, T + 1, hs)): one attention step with a key/value cache."""
    from onehot2gpt.attention import scaled_dot_product_attention

    require_callable(fn)
    trial = iter(range(10**6))

    def make(gen):
        b, h, hs = rand_int(gen, 1, 4), rand_int(gen, 1, 4), rand_int(gen, 2, 9)
        t = 0 if next(trial) % 4 == 0 else rand_int(gen, 1, 7)  # every 4th test starts with an empty cache
        new = [torch.randn(b, h, 1, hs, generator=gen) for _ in range(3)]
        return (*new, torch.randn(b, h, t, hs, generator=gen), torch.randn(b, h, t, hs, generator=gen))

    def reference(q_new, k_new, v_new, k_cache, v_cache):
        k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
        return {"out": scaled_dot_product_attention(q_new, k_all, v_all)[0], "k_all": k_all, "v_all": v_all}

    def student(*args):
        got = fn(*args)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise TypeError(f"kv_cache_step returned {describe(got)}; return three tensors: (out, k_all, v_all)")
        return dict(zip(("out", "k_all", "v_all"), got))

    check_function(
        student,
        reference,
        make,
        name="kv_cache_step",
        trials=8,
        concept="the cache holds the keys and values of every earlier position in time order; the new token's key and "
        "value go after them (the cache may start empty), and the new query attends to all of them, itself included, "
        "with the usual scaled dot-product softmax; no mask is needed, since nothing in the cache lies in the future",
        hint="k_all = torch.cat([k_cache, k_new], dim=2), the same for v (this works for an empty cache, T = 0, too); "
        "then scores = q_new @ k_all.transpose(-2, -1) / sqrt(hs), shape (B, H, 1, T + 1); out = softmax(scores, "
        "dim=-1) @ v_all. Return (out, k_all, v_all)",
    )


# Exercise 5: the logit lens's read-out of one residual vector


def _lens_diagnose(got, expected, x, gain, bias, embedding):
    if not same_shape(got, expected):
        return None
    logits = F.layer_norm(x, (x.size(-1),), gain, bias, 1e-5) @ embedding.T
    if torch.allclose(got, logits, atol=1e-4):
        return "these are the logits: the lens reads probabilities, so finish with a softmax over the vocabulary"
    if torch.allclose(got, torch.softmax(x @ embedding.T, -1), atol=1e-4):
        return (
            "the residual vector went straight into the output layer: the model's own read-out first applies the "
            "final LayerNorm (with its gain and bias)"
        )
    plain = F.layer_norm(x, (x.size(-1),), None, None, 1e-5)
    if torch.allclose(got, torch.softmax(plain @ embedding.T, -1), atol=1e-4):
        return "the LayerNorm's gain and bias are missing: normalise, then multiply by gain and add bias"
    return None


def check_lens_readout(fn: Callable) -> None:
    """Exercise: (x (D,) or (N, D) residual vectors, gain (D,), bias (D,), embedding (V, D)) → (…, V)
    probabilities: the final LayerNorm (eps 1e-5), the tied output layer, a softmax."""
    from onehot2gpt.lookinside import read_out

    def make(gen):
        D, V = rand_int(gen, 4, 16), rand_int(gen, 5, 30)
        x = torch.randn(*([rand_int(gen, 1, 4)] if rand_int(gen, 0, 1) else []), D, generator=gen) * 3 + 1
        return (
            x,
            1 + 0.3 * torch.randn(D, generator=gen),
            0.3 * torch.randn(D, generator=gen),
            torch.randn(V, D, generator=gen),
        )

    check_function(
        fn,
        read_out,
        make,
        name="lens_readout",
        trials=10,
        diagnose=_lens_diagnose,
        concept="the logit lens reads any residual vector the way the model reads its last one: the final LayerNorm, "
        "then scores against every row of the (tied) token embedding, then a softmax over the vocabulary, so every "
        "layer's guess is a distribution over next tokens",
        hint="F.layer_norm(x, (x.size(-1),), gain, bias, 1e-5) normalises the last dimension; h @ embedding.T gives "
        "one score per vocabulary entry; torch.softmax(…, dim=-1)",
    )
