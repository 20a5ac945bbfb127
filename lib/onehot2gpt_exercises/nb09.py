"""Checks for notebook 09 (GPT and decoding): the GPT the notebook builds (causal self-attention,
MLP, block, model), each proven on the course checkpoint; top-k and top-p filters; one
key/value-cache step; the logit lens's read-out."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from onehot2gpt.gpt import GPT

from .checking import (
    attention_variant,
    block_variant,
    check_function,
    close,
    describe,
    filled_module,
    keeps_rng,
    rand_int,
    require_callable,
    same_shape,
)

# Exercises 1–4: the GPT built in the notebook (attention, MLP, block, model), each proven on the
# course checkpoint's weights. The student's class is built and filled by the recording's own call
# (:func:`_filled`), so the frames above the student's code hold the class and the weights only.


_LOADED = (
    "onehot2gpt.checkpoints.load",
    "onehot2gpt.gpt.GPT",
    "onehot2gpt.gpt.GPTBlock",
    "onehot2gpt.gpt.gpt_from_checkpoint",
)
# What each build check's reference stands for (their reference is the checkpoint's model, loaded at
# run time): an answer that uses one of these scores 0 in the grader (onehot2gpt_teach.reference_use).
LIBRARY_REFERENCES = {
    "check_causal_self_attention": ("onehot2gpt.attention.MultiHeadAttention", *_LOADED),
    "check_gpt_mlp": ("onehot2gpt.gpt.GPTFeedForward", *_LOADED),
    "check_gpt_block": _LOADED,
    "check_gpt_model": _LOADED,
}


def course_gpt():
    """The course checkpoint ``gpt-char-shakespeare``'s library GPT, in eval mode."""
    from onehot2gpt.checkpoints import load

    return load("gpt-char-shakespeare").model.eval()


def _state(module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _hidden_states(gen: torch.Generator, d_model: int, max_len: int):
    """x (B, T, D) like a block's input: about unit scale, T from 1 to `max_len` (one trial in five T = 1)."""
    B, T = rand_int(gen, 1, 4), rand_int(gen, 1, max_len + 1)
    return (torch.randn(B, T, d_model, generator=gen),)


def _attention_diagnose(state: dict, n_heads: int):
    weights = [state[f"{n}_proj.{w}"] for n in ("in", "out") for w in ("weight", "bias")]

    def diagnose(got, expected, x):
        if not same_shape(got, expected):
            return None
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril()
        for change, words in _ATTENTION_SLIPS:
            variant = attention_variant(x, *weights, n_heads, mask, **change)[0]
            if close(got, variant) and not close(variant, expected):
                return words
        return None

    return diagnose


_ATTENTION_SLIPS = [
    (
        dict(heads="view"),
        "the heads were cut with one view straight to (B, H, T, hs), without moving an axis: each head then holds a "
        "run of positions, not its block of features. Split the feature axis into (H, hs) first, then bring the head "
        "axis in front of the positions",
    ),
    (dict(heads="round-robin"), "each head got every H-th feature: head h owns one contiguous block of hs features"),
    (
        dict(use_mask=False),
        "every position also reads the positions after it: the causal mask is missing, so the model would see the "
        "characters it has to predict",
    ),
    (
        dict(mask_after=True),
        "the mask is applied after the softmax: later positions get weight 0, but the others no longer sum to 1. "
        "Remove the later keys from the scores, before the softmax",
    ),
    (dict(scale=1.0), "the scores are not scaled: each head's dot products are divided by √hs"),
    (dict(scale="D"), "the scores are divided by √D; each head compares vectors of hs = D / H features: √hs"),
    (dict(out_proj=False), "the heads are put side by side but never mixed: the output projection W^O is missing"),
]


@keeps_rng
def check_causal_self_attention(cls) -> None:
    """Exercise: ``MyCausalSelfAttention(d_model, n_heads)`` (its ``__init__`` given) whose forward
    maps x (B, T, D) → (B, T, D), proven equal to the library's attention holding the weights of
    the course checkpoint's first block."""
    from onehot2gpt.attention import MultiHeadAttention

    require_callable(cls)
    gpt = course_gpt()
    c = gpt.config
    reference_attention = MultiHeadAttention(c.d_model, c.n_heads).eval()
    reference_attention.load_state_dict(gpt.blocks[0].attn.state_dict())

    @torch.no_grad()
    def reference(x):
        T = x.size(1)
        return reference_attention(x, mask=torch.ones(T, T, dtype=torch.bool).tril())[0]

    state = _state(gpt.blocks[0].attn)
    check_function(
        filled_module(cls, (c.d_model, c.n_heads), state, "MyCausalSelfAttention"),
        reference,
        lambda gen: _hidden_states(gen, c.d_model, c.max_len),
        name="causal_self_attention",
        diagnose=_attention_diagnose(state, c.n_heads),
        concept="masked multi-head self-attention: one projection gives Q, K and V; each is cut into H heads of "
        "hs = D / H consecutive features; a head scores every query against the keys at or before its position, "
        "scaled by 1/√hs, takes the softmax over the keys and averages the values; the heads go side by side again "
        "and the output projection mixes them",
        hint="what shape must q have for q @ kᵀ to give one (T, T) score matrix per head: (B, H, T, hs). Which "
        "entries of that matrix must be −∞ before the softmax, and which axis does the softmax run over?",
    )


@keeps_rng
def check_gpt_mlp(cls) -> None:
    """Exercise: ``MyMLP(d_model, d_ff)`` whose forward maps x (B, T, D) → (B, T, D), proven equal
    to the library's GPT-2 MLP holding the course checkpoint's first-block weights."""
    require_callable(cls)
    gpt = course_gpt()
    c, ff = gpt.config, gpt.blocks[0].ff
    state = _state(ff)

    def diagnose(got, expected, x):
        if not same_shape(got, expected):
            return None
        hidden = F.linear(x, state["linear1.weight"], state["linear1.bias"])
        for act, words in (
            (F.gelu, "the exact (erf) GELU is used; GPT-2 was trained with its tanh approximation"),
            (torch.relu, "ReLU is used; GPT-2's MLP uses GELU, in its tanh approximation"),
            (lambda z: z, "there is no non-linearity between the two linear layers"),
        ):
            if close(got, F.linear(act(hidden), state["linear2.weight"], state["linear2.bias"])):
                return words
        return None

    check_function(
        filled_module(cls, (c.d_model, c.d_ff), state, "MyMLP"),
        torch.no_grad()(ff.forward),
        lambda gen: _hidden_states(gen, c.d_model, 8),
        name="gpt_mlp",
        diagnose=diagnose,
        concept="the MLP works on each position alone: widen from D to d_ff features, a GELU, narrow back to D",
        hint="two linear layers with a GELU between them; which form of GELU did GPT-2 use (look at F.gelu's "
        "`approximate` argument)?",
    )


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


@keeps_rng
def check_gpt_block(cls) -> None:
    """Exercise: ``MyBlock(d_model, n_heads, d_ff)`` (its ``__init__`` given, built on the
    student's attention and MLP) whose forward maps x (B, T, D) → (B, T, D), proven equal to the
    library's GPTBlock holding the course checkpoint's first-block weights."""
    require_callable(cls)
    gpt = course_gpt()
    c, block = gpt.config, gpt.blocks[0]
    state = _state(block)

    @torch.no_grad()
    def reference(x):
        T = x.size(1)
        return block(x, torch.ones(T, T, dtype=torch.bool).tril())[0]

    def diagnose(got, expected, x):
        if not same_shape(got, expected):
            return None
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril()
        for slip, words in _BLOCK_SLIPS:
            if slip.get("use_mask") is False and x.size(1) == 1:
                continue
            if close(got, block_variant(x, state, c.n_heads, mask, **{**_GPT2_BLOCK, **slip})):
                return words
        return None

    check_function(
        filled_module(cls, (c.d_model, c.n_heads, c.d_ff), state, "MyBlock"),
        reference,
        lambda gen: _hidden_states(gen, c.d_model, c.max_len),
        name="gpt_block",
        diagnose=diagnose,
        concept="a GPT-2 block is pre-norm: LayerNorm₁ feeds the attention and its output is added to the block's "
        "input x; LayerNorm₂ of that sum feeds the MLP, whose output is added again",
        hint="write the two formulas x ← x + Attn(LN₁(x)) and x ← x + MLP(LN₂(x)) as two lines: which tensor does "
        "each LayerNorm see, and what is each sub-layer's output added to?",
    )


@keeps_rng
def check_gpt_model(cls) -> None:
    """Exercise: ``MyGPT(config)`` (its ``__init__`` given: embeddings, blocks, final LayerNorm and
    the output layer tied to the token embedding) whose forward maps ids (B, T) → logits (B, T, V),
    proven equal to the library's GPT holding the course checkpoint ``gpt-char-shakespeare``."""
    require_callable(cls)
    gpt = course_gpt()
    c = gpt.config

    def make(gen):
        B, T = rand_int(gen, 1, 4), rand_int(gen, 1, c.max_len + 1)
        return (torch.randint(c.vocab_size, (B, T), generator=gen),)

    def variant(ids, *, positions=True, final_norm=True, softmax=False):
        T = ids.size(1)
        h = gpt.tok_emb(ids) + (gpt.pos_emb(torch.arange(T)) if positions else 0)
        for block in gpt.blocks:
            h = block(h, torch.ones(T, T, dtype=torch.bool).tril())[0]
        logits = gpt.lm_head(gpt.final_norm(h) if final_norm else h)
        return logits.softmax(-1) if softmax else logits

    @torch.no_grad()
    def diagnose(got, expected, ids):
        if not same_shape(got, expected):
            return None
        for change, words in (
            (dict(positions=False), "the position embedding is missing: h₀ = token embedding + position embedding"),
            (dict(final_norm=False), "the final LayerNorm (LN_f) before the output layer is missing"),
            (dict(softmax=True), "these are probabilities: forward returns the logits, before any softmax"),
        ):
            if close(got, variant(ids, **change)):
                return words
        return None

    check_function(
        filled_module(cls, (c,), _state(gpt), "MyGPT"),
        torch.no_grad()(lambda ids: gpt(ids).logits),
        make,
        name="gpt_model",
        trials=4,
        diagnose=diagnose,
        concept="GPT in three formulas: h₀ = U W_e + W_p (token plus position embedding), h_l = block(h_{l−1}) for "
        "every block, logits = LN_f(h_n) W_eᵀ; the forward returns logits, the softmax comes later",
        hint="which positions does row t of the position embedding belong to (the ids are (B, T)), and what does the "
        "model apply to h_n before the tied output layer?",
    )


class LibraryGPT(GPT):
    """The library's GPT with MyGPT's interface, for the cells after an unsolved check:
    ``LibraryGPT(config)`` (``block`` accepted and ignored), forward ids (B, T) → logits (B, T, V),
    the same parameter names."""

    def __init__(self, config, block=None):
        super().__init__(config)

    def forward(self, ids):
        return super().forward(ids).logits


# Exercises 5 and 6: top-k and top-p filters


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
        if out.is_floating_point() and bool(out.isnan().any()):
            raise ValueError(
                f"{name} wrote NaN at {int(out.isnan().sum())} place(s); a removed token gets the logit -inf "
                "(float('-inf')), which the softmax turns into probability 0; NaN makes every probability NaN"
            )
        kept = out > float("-inf")
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
        hint="which k tokens of each row stay: those with the k largest logits, a tie going to the lower id (a stable "
        "sort from largest to smallest keeps equal logits in id order); every other entry becomes −∞ in its own "
        "place, and when k ≥ V all stay",
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
        "Set the others to −∞ in the original order (scatter back through the sort indices), leaving the kept logits "
        "unchanged",
    )


# Exercise 7: one step with a key/value cache


def check_kv_cache_step(fn: Callable) -> None:
    """Exercise: (q_new, k_new, v_new (B, H, 1, hs), k_cache, v_cache (B, H, T, hs)) →
    (out (B, H, 1, hs), k_all, v_all (B, H, T + 1, hs)): one attention step with a key/value cache."""

    require_callable(fn)
    trial = iter(range(10**6))

    def make(gen):
        b, h, hs = rand_int(gen, 1, 4), rand_int(gen, 1, 4), rand_int(gen, 2, 9)
        t = 0 if next(trial) % 4 == 0 else rand_int(gen, 1, 7)  # every 4th test starts with an empty cache
        new = [torch.randn(b, h, 1, hs, generator=gen) for _ in range(3)]
        return (*new, torch.randn(b, h, t, hs, generator=gen), torch.randn(b, h, t, hs, generator=gen))

    def reference(*args):
        return dict(zip(("out", "k_all", "v_all"), library_kv_step(*args)))

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
        hint="the keys and values grow along the time axis: the cache (B, H, T, hs) and the new (B, H, 1, hs) become "
        "(B, H, T + 1, hs), also when T = 0; the new query's scores are (B, H, 1, T + 1), scaled by 1/√hs and "
        "softmaxed over the keys to average the values. The answer is (output, all keys, all values)",
    )


# Exercise 8: the logit lens's read-out of one residual vector


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
        hint="first the final LayerNorm over the last axis (with gain, bias and ε = 1e-5), then one score per "
        "vocabulary entry against the rows of the embedding (V, D), then a softmax over the vocabulary: (…, D) "
        "becomes (…, V)",
    )


def library_kv_step(q_new, k_new, v_new, k_cache, v_cache):
    """The stand-in for an unsolved exercise 7: one cached attention step by the library's attention."""
    from onehot2gpt.attention import scaled_dot_product_attention

    k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
    return scaled_dot_product_attention(q_new, k_all, v_all)[0], k_all, v_all
