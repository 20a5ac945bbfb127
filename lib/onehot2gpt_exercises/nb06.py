"""Checks for notebook 06 (the Transformer)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .checking import block_variant, check_function, rand_int, same_shape

# Exercise 1: the sinusoidal table


def _positional_encoding_diagnose(got, expected, max_len, d_model):
    if not same_shape(got, expected) or d_model < 2:
        return None
    g = got.double()
    e = expected.double()
    if torch.allclose(g[:, 0::2], e[:, 1::2], atol=1e-4) and torch.allclose(g[:, 1::2], e[:, 0::2], atol=1e-4):
        return "sine and cosine are swapped: even columns hold the sine, odd columns the cosine"
    if (
        max_len > 1
        and d_model > 2
        and torch.allclose(g[:, 0], e[:, 0], atol=1e-4)
        and not torch.allclose(g[:, 2], e[:, 2], atol=1e-4)
    ):
        return (
            "the first pair is right, the later ones are not: the frequency of pair i is 1 / 10000^(2i / d_model), "
            "and both columns of a pair share it"
        )
    return None


def check_positional_encoding(fn: Callable) -> None:
    """Exercise: (max_len, d_model) → the sinusoidal table of Vaswani et al. (2017)."""
    from onehot2gpt.transformer import sinusoidal_positions

    def make(gen):
        return rand_int(gen, 1, 30), 2 * rand_int(gen, 1, 9)

    check_function(
        fn,
        sinusoidal_positions,
        make,
        name="positional_encoding",
        concept="the columns come in pairs (2i, 2i+1) that share one frequency, 1 / 10000^(2i / d_model), from fast "
        "(i = 0) to slow; the even column of a pair is the sine of position × frequency, the odd one its cosine",
        diagnose=_positional_encoding_diagnose,
        hint="PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)), for i = "
        "0 … d_model/2 − 1: one table of max_len rows and d_model columns",
    )


# Exercise 2: layer normalisation


def _layer_norm_diagnose(got, expected, x, gain, bias, eps):
    if not same_shape(got, expected):
        return None
    mean = x.mean(-1, keepdim=True)
    if x.size(-1) > 1:
        unbiased = gain * (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias
        if torch.allclose(got, unbiased, atol=1e-5):
            return "the variance divides by D − 1 (unbiased); LayerNorm divides by D"
    if x.dim() > 1:
        over_all = gain * (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) + bias
        if torch.allclose(got, over_all, atol=1e-5):
            return "the mean and variance are taken over the whole tensor, not over each position's features"
    return None


def check_layer_norm(fn: Callable) -> None:
    """Exercise: x (…, D), gain (D,), bias (D,), eps → LayerNorm over the last dimension."""

    def make(gen):
        shape = tuple(rand_int(gen, 1, 5) for _ in range(rand_int(gen, 1, 4)))
        d = rand_int(gen, 2, 8)
        return (
            3 * torch.randn(*shape, d, generator=gen) + 1,
            torch.randn(d, generator=gen),
            torch.randn(d, generator=gen),
            1e-5,
        )

    def reference(x, gain, bias, eps):
        return F.layer_norm(x, x.shape[-1:], gain, bias, eps)

    check_function(
        fn,
        reference,
        make,
        name="layer_norm",
        concept="each position's vector is normalised on its own, over its D features: subtract their mean, divide by "
        "their standard deviation (the average squared deviation, eps added before the square root), then scale by "
        "the gain and shift by the bias, feature by feature",
        diagnose=_layer_norm_diagnose,
        hint="over the last axis only: μ = the mean of the D features, σ² = the mean of (x − μ)² (divide by D, not D "
        "− 1), y = gain ⊙ (x − μ) / √(σ² + ε) + bias; keep that axis (size 1) in μ and σ² so they broadcast",
    )


# Exercise 3: an encoder block's forward


def library_encoder_block(x, params: dict, n_heads: int, mask=None, activation=torch.relu, eps: float = 1e-5):
    """The library's post-norm `EncoderBlock` with the weights `params` (its state_dict or its
    named parameters), the feed-forward's `activation` (torch.relu or F.gelu) and the LayerNorms'
    `eps`: x (B, T, D) → (B, T, D). Gradients flow to `params` (07's MyBert trains through it)."""
    from onehot2gpt.transformer import EncoderBlock
    from torch.func import functional_call

    # (No module-level table of activation functions: a dict keyed by F.gelu would lead from the
    # student's input, F.gelu, to this module's globals and so to this reference.)
    if activation is F.gelu:
        kind = "gelu"
    elif activation is torch.relu or activation is F.relu:
        kind = "relu"
    else:
        raise ValueError(f"library_encoder_block: activation={activation!r}; pass torch.relu or F.gelu")
    D, d_ff = x.size(-1), params["ff.linear1.weight"].size(0)
    with torch.random.fork_rng():  # its random initialisation is overwritten: leave the seed alone
        block = EncoderBlock(D, n_heads, d_ff, activation=kind, eps=eps).eval()
    return functional_call(block, dict(params), (x, mask))[0]


def _encoder_block_diagnose(got, expected, x, params, n_heads, mask=None, activation=torch.relu, eps=1e-5):
    if not same_shape(got, expected):
        return None
    if activation is not torch.relu and torch.allclose(got, library_encoder_block(x, params, n_heads, mask), atol=1e-4):
        return (
            "the feed-forward used ReLU, but this call passed activation=F.gelu: apply the `activation` argument "
            "between the two linear layers"
        )
    variants = [
        (
            dict(pre_norm=True),
            "this is the pre-norm order (LayerNorm on each sub-layer's input); this block is post-norm as in the "
            "paper: add the residual first, then normalise the sum",
        ),
        (
            dict(residual=False),
            "the residual connections are missing: each sub-layer's output is added to its input before the LayerNorm",
        ),
        (dict(use_mask=False), "the mask is ignored: padded keys must get zero weight"),
        (
            dict(scale="D"),
            "the attention scores are divided by √D; each head works on D/H features, so divide by √(D/H)",
        ),
    ]
    if mask is None:
        variants = [v for v in variants if "use_mask" not in v[0]]
    for change, words in variants:
        variant = block_variant(x, params, n_heads, mask, attn="self_attn", act=activation, eps=eps, **change)
        if torch.allclose(got, variant, atol=1e-4) and not torch.allclose(variant, expected, atol=1e-4):
            return words
    return None


def check_encoder_block(fn: Callable) -> None:
    """Exercise: x (B, T, D), params (an EncoderBlock's state_dict), n_heads, mask=None (bool,
    e.g. a (B, 1, 1, T) padding mask), activation (torch.relu or F.gelu), eps (the LayerNorms') →
    (B, T, D), equal to the library's post-norm EncoderBlock with the same weights. One trial in
    three passes GELU (BERT's block in notebook 07)."""
    from onehot2gpt.transformer import EncoderBlock

    def make(gen):
        b, t, h, hs = rand_int(gen, 1, 4), rand_int(gen, 1, 7), rand_int(gen, 1, 4), rand_int(gen, 1, 5)
        d, d_ff = h * hs, rand_int(gen, 2, 17)
        seed = rand_int(gen, 0, 10_000)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            block = EncoderBlock(d, h, d_ff)
            with torch.no_grad():  # LayerNorms away from (1, 0), so gain and bias matter
                for norm in (block.norm1, block.norm2):
                    norm.weight.normal_(1.0, 0.3)
                    norm.bias.normal_(0.0, 0.3)
        params = {k: v.detach().clone() for k, v in block.state_dict().items()}
        x = torch.randn(b, t, d, generator=gen)
        if rand_int(gen, 0, 3):  # two trials in three have padding
            lengths = torch.randint(1, t + 1, (b,), generator=gen)
            lengths[0] = max(1, t - 1)  # at least one padded key when T > 1
            mask = (torch.arange(t)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
        else:
            mask = None
        if rand_int(gen, 0, 3):
            return x, params, h, mask
        return x, params, h, mask, F.gelu, 1e-12  # BERT's block (notebook 07)

    check_function(
        fn,
        library_encoder_block,
        make,
        name="encoder_block",
        atol=1e-4,
        concept="a post-norm block has two sub-layers, each wrapped the same way: x ← LayerNorm(x + Sublayer(x)). The "
        "first sub-layer is multi-head self-attention (queries, keys and values all from x, masked keys removed); the "
        "second is the position-wise feed-forward network (linear, activation, linear), applied to the first one's result",
        diagnose=_encoder_block_diagnose,
        hint="x ← LayerNorm₁(x + SelfAttention(x)), then x ← LayerNorm₂(x + FFN(x)) with FFN = linear₂ ∘ activation "
        "∘ linear₁ and eps inside both LayerNorms; attention goes (B, T, D) → 3 × (B, H, T, hs) → attend → (B, T, D) → output projection, and params "
        "holds every weight under the block's parameter names (print its keys)",
    )


# Exercise 4: a decoder block's forward (masked self-attention, cross-attention, feed-forward)


def library_decoder_block(y, memory, params: dict, n_heads: int, self_mask=None, memory_mask=None):
    """The library's post-norm `DecoderBlock` with the weights `params` (its state_dict):
    y (B, T, D), memory (B, S, D) → (B, T, D)."""
    from onehot2gpt.transformer import DecoderBlock

    D, d_ff = y.size(-1), params["ff.linear1.weight"].size(0)
    with torch.random.fork_rng():  # its random initialisation is overwritten: leave the seed alone
        block = DecoderBlock(D, n_heads, d_ff).eval()
    block.load_state_dict(params)
    with torch.no_grad():
        return block(y, memory, self_mask, memory_mask)[0]


def _attend(queries, keys_values, p: dict, name: str, n_heads: int, mask):
    """Multi-head attention of `queries` over `keys_values` with the weights ``{name}.in_proj`` and
    ``{name}.out_proj`` of `p`."""
    from onehot2gpt.attention import merge_heads, scaled_dot_product_attention, split_heads

    D = queries.size(-1)
    w, b = p[f"{name}.in_proj.weight"].split(D), p[f"{name}.in_proj.bias"].split(D)
    q = split_heads(F.linear(queries, w[0], b[0]), n_heads)
    k, v = (split_heads(F.linear(keys_values, w[i], b[i]), n_heads) for i in (1, 2))
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    return F.linear(merge_heads(out), p[f"{name}.out_proj.weight"], p[f"{name}.out_proj.bias"])


def _decoder_variant(
    y,
    memory,
    p,
    n_heads,
    self_mask=None,
    memory_mask=None,
    *,
    cross="memory",
    causal=True,
    pre_norm=False,
    residual=True,
):
    """A decoder block from its weights with one step switchable to a typical mistake."""
    D, keep = y.size(-1), 1.0 if residual else 0.0

    def norm(h, i):
        return F.layer_norm(h, (D,), p[f"norm{i}.weight"], p[f"norm{i}.bias"], 1e-5)

    def ff(h):
        hidden = torch.relu(F.linear(h, p["ff.linear1.weight"], p["ff.linear1.bias"]))
        return F.linear(hidden, p["ff.linear2.weight"], p["ff.linear2.bias"])

    def self_attention(h):
        return _attend(h, h, p, "self_attn", n_heads, self_mask if causal else None)

    def cross_attention(h):
        source, mask = (memory, memory_mask) if cross == "memory" else (h, self_mask)
        return _attend(h, source, p, "cross_attn", n_heads, mask)

    if pre_norm:
        y = keep * y + self_attention(norm(y, 1))
        y = keep * y + cross_attention(norm(y, 2))
        return keep * y + ff(norm(y, 3))
    y = norm(keep * y + self_attention(y), 1)
    y = norm(keep * y + cross_attention(y), 2)
    return norm(keep * y + ff(y), 3)


_DECODER_SLIPS = [
    (
        dict(cross="self"),
        "the second attention reads the decoder's own states: in cross-attention the queries come from the decoder, "
        "the keys and values from the encoder's output (memory), masked by the memory's padding",
    ),
    (
        dict(causal=False),
        "the self-attention is not masked: target position t may read only positions ≤ t (self_mask), or training "
        "would let it copy the token it has to predict",
    ),
    (
        dict(pre_norm=True),
        "this is the pre-norm order; this block is post-norm as in the paper: add each sub-layer's output to its "
        "input, then normalise the sum",
    ),
    (dict(residual=False), "the residual connections are missing: each sub-layer's output is added to its input"),
]


def _decoder_block_diagnose(got, expected, y, memory, params, n_heads, self_mask=None, memory_mask=None):
    if not same_shape(got, expected):
        return None
    for change, words in _DECODER_SLIPS:
        if change.get("causal") is False and y.size(1) == 1:
            continue
        variant = _decoder_variant(y, memory, params, n_heads, self_mask, memory_mask, **change)
        if torch.allclose(got, variant, atol=1e-4) and not torch.allclose(variant, expected, atol=1e-4):
            return words
    return None


def check_decoder_block(fn: Callable) -> None:
    """Exercise: y (B, T, D), memory (B, S, D), params (a DecoderBlock's state_dict), n_heads,
    self_mask (T, T) causal, memory_mask (B, 1, 1, S) padding or None → (B, T, D), equal to the
    library's post-norm DecoderBlock with the same weights."""
    from onehot2gpt.transformer import DecoderBlock

    def make(gen):
        b, t, s = rand_int(gen, 1, 4), rand_int(gen, 1, 7), rand_int(gen, 1, 8)
        h, hs, d_ff = rand_int(gen, 1, 4), rand_int(gen, 1, 5), rand_int(gen, 2, 17)
        d = h * hs
        with torch.random.fork_rng():
            torch.manual_seed(rand_int(gen, 0, 10_000))
            block = DecoderBlock(d, h, d_ff)
            with torch.no_grad():  # LayerNorms away from (1, 0), so gain and bias matter
                for norm in (block.norm1, block.norm2, block.norm3):
                    norm.weight.normal_(1.0, 0.3)
                    norm.bias.normal_(0.0, 0.3)
        params = {k: v.detach().clone() for k, v in block.state_dict().items()}
        y, memory = torch.randn(b, t, d, generator=gen), torch.randn(b, s, d, generator=gen)
        self_mask = torch.ones(t, t, dtype=torch.bool).tril()
        memory_mask = None
        if rand_int(gen, 0, 3):  # two trials in three have padding in the source
            lengths = torch.randint(1, s + 1, (b,), generator=gen)
            lengths[0] = max(1, s - 1)
            memory_mask = (torch.arange(s)[None, :] < lengths[:, None])[:, None, None, :]
        return y, memory, params, h, self_mask, memory_mask

    check_function(
        fn,
        library_decoder_block,
        make,
        name="decoder_block",
        atol=1e-4,
        concept="a post-norm decoder block has three sub-layers, each wrapped as y ← LayerNorm(y + Sublayer(y)): masked "
        "self-attention over the target so far, cross-attention (the decoder asks, the encoder's output answers), "
        "and the feed-forward network",
        diagnose=_decoder_block_diagnose,
        hint="which tensor gives the cross-attention its queries, and which its keys and values; which mask goes "
        "with each attention (self_mask for the target, memory_mask for the source)?",
    )


# Exercise 5: greedy decoding


def _greedy_decode_diagnose(got, expected, model, src, bos_id, eos_id, max_new):
    if not isinstance(got, torch.Tensor) or got.dim() != 1:
        return None
    if got.numel() and int(got[0]) == bos_id and torch.equal(got[1:], expected[: got.numel() - 1]):
        return "the output starts with <bos>: return only the new tokens"
    if (
        got.numel() > expected.numel()
        and torch.equal(got[: expected.numel()], expected)
        and int(expected[-1]) == eos_id
    ):
        return "decoding went on after <eos>: stop as soon as the model writes it (keep the <eos>)"
    if got.numel() + 1 == expected.numel() and torch.equal(got, expected[:-1]) and int(expected[-1]) == eos_id:
        return "the <eos> the model wrote is dropped: keep it as the last token"
    return None


def check_greedy_decode(fn: Callable) -> None:
    """Exercise: (model, src (1, S), bos_id, eos_id, max_new) → generated ids (≤ max_new,), no <bos>."""
    from onehot2gpt.transformer import Seq2SeqTransformer, TransformerConfig

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=12, tgt_vocab_size=6, dropout=0.0)).eval()
    with torch.no_grad():  # favour <eos> a little, so some trials stop early and some run to max_new
        model.lm_head.bias[3] += 0.6

    def make(gen):
        return model, torch.randint(4, 12, (1, rand_int(gen, 2, 9)), generator=gen), 2, 3, 8

    def reference(model, src, bos_id, eos_id, max_new):
        return model.greedy_decode(src, bos_id, eos_id, max_new)[0]

    check_function(
        fn,
        reference,
        make,
        name="greedy_decode",
        trials=8,
        concept="the input is encoded once; the output grows one token at a time: the decoder reads everything "
        "written so far (starting from <bos>) and the most probable next token is appended, until the model writes "
        "<eos> or the length limit is reached. The answer is the new tokens only",
        diagnose=_greedy_decode_diagnose,
        hint="encode the source once (the model's encode gives the memory and its mask); the target starts as <bos>, "
        "and each step decodes it against the memory, appends the most likely token at the last position and stops "
        "after <eos> or max_new steps; the answer is the new ids only, a 1-D tensor",
    )
