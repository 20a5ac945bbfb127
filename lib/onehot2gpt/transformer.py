"""The Transformer: positional encodings, blocks, encoder, decoder, and the encoder–decoder model.

Taught in notebook 06; BERT (07–08) and GPT (09–10) reuse the blocks. Follows Vaswani et al.,
"Attention Is All You Need" (2017): sinusoidal positions (§3.5), sub-layers wrapped as
LayerNorm(x + Sublayer(x)) — *post-norm* — and the *pre-norm* variant x + Sublayer(LayerNorm(x))
that GPT-2 uses, which keeps the gradient evenly spread through deep stacks. Every model returns
attention maps on request as one (B, H, T_q, T_k) tensor per layer, as Hugging Face does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .attention import TORCH_MHA_KEYS, MultiHeadAttention, causal_mask, padding_mask
from .utils import as_ids, check_choice, check_int, copy_weights, evaluating


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of a small Transformer: teaching-sized defaults; :meth:`tiny` for tests."""

    vocab_size: int = 64  # source vocabulary (and target, unless tgt_vocab_size is set)
    tgt_vocab_size: int | None = None
    d_model: int = 64
    n_heads: int = 4  # d_model / n_heads = 16 features per head
    n_layers: int = 2
    d_ff: int = 256  # the paper's 4 × d_model
    max_len: int = 64
    dropout: float = 0.1
    norm_first: bool = False  # post-norm as in the paper; True = pre-norm as in GPT-2
    positions: str = "sinusoidal"  # or "learned"
    activation: str = "relu"
    pad_id: int = 0  # the course's Vocab puts <pad> at 0

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        check_choice(self.positions, "positions", POSITIONS)

    @classmethod
    def tiny(cls, **overrides) -> TransformerConfig:
        """Tests and toy tasks: 2 layers, 32 wide, 2 heads."""
        return cls(**{**dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=32), **overrides})


# --------------------------------------------------------------------------------------- Positions


def sinusoidal_positions(max_len: int, d_model: int):
    """(max_len, d_model) table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(…).

    Example:
        >>> sinusoidal_positions(4, 6)[0]
        tensor([0., 1., 0., 1., 0., 1.])
    """
    check_int(max_len, "max_len", 1, fix="the number of positions in the table")
    if d_model % 2:
        raise ValueError(f"sinusoidal positions pair sin and cos: d_model must be even, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)  # (D/2,) = 1/10000^(2i/d)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


def _check_length(T: int, max_len: int):
    if T > max_len:
        raise ValueError(
            f"the sequence has {T} positions but the model was built for at most "
            f"max_len={max_len}; shorten the input or build the model with a larger max_len"
        )


class SinusoidalPositions(nn.Module):
    """Adds the fixed sinusoidal table: (B, T, D) → (B, T, D). Nothing to learn."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, x, start: int = 0):
        _check_length(start + x.size(1), self.max_len)
        return x + self.table[start : start + x.size(1)]


class LearnedPositions(nn.Module):
    """Adds one learned vector per position (BERT, GPT-2): (B, T, D) → (B, T, D)."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x, start: int = 0):
        _check_length(start + x.size(1), self.max_len)
        return x + self.embedding.weight[start : start + x.size(1)]


POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions}


# ------------------------------------------------------------------------------------------ Blocks

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class FeedForward(nn.Module):
    """Position-wise feed-forward: Linear(D → d_ff), activation, dropout, Linear(d_ff → D)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[check_choice(activation, "activation", ACTIVATIONS)]()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class EncoderBlock(nn.Module):
    """Self-attention and feed-forward, each with a residual and LayerNorm.

    norm_first=False (post-norm, the paper): x = LN(x + Attn(x)); x = LN(x + FF(x)).
    norm_first=True (pre-norm, GPT-2):        x = x + Attn(LN(x)); x = x + FF(LN(x)).
    forward(x (B, T, D), mask=None, need_weights=False) → (x, weights (B, H, T, T) or None).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model, eps=eps), nn.LayerNorm(d_model, eps=eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None, need_weights: bool = False):
        if self.norm_first:
            a, weights = self.self_attn(self.norm1(x), mask=mask, need_weights=need_weights)
            x = x + self.dropout1(a)
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:
            a, weights = self.self_attn(x, mask=mask, need_weights=need_weights)
            x = self.norm1(x + self.dropout1(a))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return x, weights


class DecoderBlock(nn.Module):
    """Masked self-attention, encoder–decoder (cross) attention, feed-forward; post- or pre-norm.

    forward(x (B, T, D), memory (B, S, D), self_mask, memory_mask, need_weights) →
    (x, self-attention weights (B, H, T, T), cross-attention weights (B, H, T, S)).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model, eps=eps) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def forward(self, x, memory, self_mask=None, memory_mask=None, need_weights: bool = False):
        if self.norm_first:
            a, w_self = self.self_attn(self.norm1(x), mask=self_mask, need_weights=need_weights)
            x = x + self.dropout1(a)
            c, w_cross = self.cross_attn(self.norm2(x), memory, memory, mask=memory_mask, need_weights=need_weights)
            x = x + self.dropout2(c)
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:
            a, w_self = self.self_attn(x, mask=self_mask, need_weights=need_weights)
            x = self.norm1(x + self.dropout1(a))
            c, w_cross = self.cross_attn(x, memory, memory, mask=memory_mask, need_weights=need_weights)
            x = self.norm2(x + self.dropout2(c))
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return x, w_self, w_cross


class _Stack(nn.Module):
    """n_layers blocks of the class `block` (+ a final LayerNorm when pre-norm, whose last residual is raw)."""

    block: type[nn.Module]

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        eps: float = 1e-5,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            self.block(d_model, n_heads, d_ff, dropout, norm_first, activation, eps) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model, eps=eps) if norm_first else nn.Identity()


class Encoder(_Stack):
    """n_layers EncoderBlocks. forward(x, mask, need_weights) → (x, tuple of (B, H, T, T) per layer, or None)."""

    block = EncoderBlock

    def forward(self, x, mask=None, need_weights: bool = False):
        maps = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights)
            maps.append(w)
        return self.norm(x), (tuple(maps) if need_weights else None)


class Decoder(_Stack):
    """n_layers DecoderBlocks. forward(x, memory, self_mask, memory_mask, need_weights) →
    (x, self-attention maps, cross-attention maps) — each a tuple per layer, or None."""

    block = DecoderBlock

    def forward(self, x, memory, self_mask=None, memory_mask=None, need_weights: bool = False):
        self_maps, cross_maps = [], []
        for layer in self.layers:
            x, ws, wc = layer(x, memory, self_mask, memory_mask, need_weights)
            self_maps.append(ws)
            cross_maps.append(wc)
        return (self.norm(x), tuple(self_maps), tuple(cross_maps)) if need_weights else (self.norm(x), None, None)


# ------------------------------------------------------------------------------------------ Models


def _embedding(vocab_size: int, d_model: int, pad_id: int) -> nn.Embedding:
    """Token embedding initialised with std 1/√D, so that after the paper's × √D scaling tokens
    and positions both have unit size (with PyTorch's default std 1 the scaled tokens would be √D
    times larger and drown the position signal)."""
    emb = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
    nn.init.normal_(emb.weight, std=d_model**-0.5)
    with torch.no_grad():
        emb.weight[pad_id].zero_()
    return emb


class Seq2SeqTransformer(nn.Module):
    """The paper's encoder–decoder, for transduction (e.g. rewriting dates).

    forward(src (B, S), tgt_in (B, T), output_attentions=False) → (logits (B, T, V_tgt),
    attentions: {"encoder", "decoder", "cross"} each a tuple per layer, or None). `tgt_in` starts
    with <bos>; position t predicts target token t + 1 and sees only tokens ≤ t (causal mask).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.tgt_vocab_size = c.tgt_vocab_size or c.vocab_size
        self.src_emb = _embedding(c.vocab_size, c.d_model, c.pad_id)
        self.tgt_emb = _embedding(self.tgt_vocab_size, c.d_model, c.pad_id)
        self.pos = POSITIONS[c.positions](c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c.n_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first, c.activation)
        self.decoder = Decoder(c.n_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first, c.activation)
        self.lm_head = nn.Linear(c.d_model, self.tgt_vocab_size)

    def encode(self, src, output_attentions: bool = False):
        """src (B, S) → memory (B, S, D), memory mask (B, 1, 1, S), encoder maps."""
        src = as_ids(src, self.config.vocab_size, dims=2, name="src")
        mask = padding_mask(src, self.config.pad_id)
        x = self.dropout(self.pos(self.src_emb(src) * math.sqrt(self.config.d_model)))
        memory, maps = self.encoder(x, mask, output_attentions)
        return memory, mask, maps

    def decode(self, tgt_in, memory, memory_mask, output_attentions: bool = False):
        """tgt_in (B, T) → logits (B, T, V_tgt), self-attention maps, cross-attention maps."""
        tgt_in = as_ids(tgt_in, self.tgt_vocab_size, dims=2, name="tgt_in")
        T = tgt_in.size(1)
        if tgt_in.size(0) != memory.size(0):
            raise ValueError(f"tgt_in has {tgt_in.size(0)} rows but src {memory.size(0)}: one target per source")
        self_mask = causal_mask(T, device=tgt_in.device) & padding_mask(tgt_in, self.config.pad_id)
        y = self.dropout(self.pos(self.tgt_emb(tgt_in) * math.sqrt(self.config.d_model)))
        y, self_maps, cross_maps = self.decoder(y, memory, self_mask, memory_mask, output_attentions)
        return self.lm_head(y), self_maps, cross_maps

    def forward(self, src, tgt_in, output_attentions: bool = False):
        memory, memory_mask, enc_maps = self.encode(src, output_attentions)
        logits, self_maps, cross_maps = self.decode(tgt_in, memory, memory_mask, output_attentions)
        maps = {"encoder": enc_maps, "decoder": self_maps, "cross": cross_maps} if output_attentions else None
        return logits, maps

    def greedy_decode(self, src, bos_id: int, eos_id: int, max_new: int | None = None):
        """src (B, S) → generated ids (B, ≤ max_new), without <bos>; stops when every row has
        produced <eos> (tokens after a row's <eos> are <pad>)."""
        max_new = self.config.max_len - 1 if max_new is None else check_int(max_new, "max_new", 1)
        check_int(bos_id, "bos_id", 0, self.tgt_vocab_size - 1, fix="the id of <bos> in the target vocabulary")
        with evaluating(self):
            memory, memory_mask, _ = self.encode(src)
            out = torch.full((memory.size(0), 1), bos_id, dtype=torch.long, device=memory.device)
            done = torch.zeros(memory.size(0), dtype=torch.bool, device=memory.device)
            for _ in range(max_new):
                logits, _, _ = self.decode(out, memory, memory_mask)
                nxt = logits[:, -1].argmax(-1).masked_fill(done, self.config.pad_id)
                out = torch.cat([out, nxt[:, None]], dim=1)
                done |= nxt == eos_id
                if bool(done.all()):
                    break
        return out[:, 1:]


# ---------------------------------------------------------- torch.nn interop: key maps and loaders


# Our EncoderBlock / DecoderBlock parameter names → torch.nn.TransformerEncoderLayer /
# TransformerDecoderLayer's. The loaders below and the parity tests use these maps.
def _prefixed(ours: str, theirs: str) -> dict[str, str]:
    return {f"{ours}.{k}": f"{theirs}.{v}" for k, v in TORCH_MHA_KEYS.items()}


TORCH_ENCODER_LAYER_KEYS = {
    **_prefixed("self_attn", "self_attn"),
    **{f"ff.{n}.{p}": f"{n}.{p}" for n in ("linear1", "linear2") for p in ("weight", "bias")},
    **{f"norm{i}.{p}": f"norm{i}.{p}" for i in (1, 2) for p in ("weight", "bias")},
}
TORCH_DECODER_LAYER_KEYS = {
    **TORCH_ENCODER_LAYER_KEYS,
    **_prefixed("cross_attn", "multihead_attn"),
    "norm3.weight": "norm3.weight",
    "norm3.bias": "norm3.bias",
}


def load_torch_layer(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Copy a torch.nn.TransformerEncoderLayer (or DecoderLayer) into our EncoderBlock (DecoderBlock)."""
    keys = TORCH_DECODER_LAYER_KEYS if isinstance(ours, DecoderBlock) else TORCH_ENCODER_LAYER_KEYS
    source = theirs.state_dict()
    missing = [v for v in keys.values() if v not in source]
    if missing:
        raise ValueError(
            f"{type(theirs).__name__} lacks {missing}; pass the torch layer that matches {type(ours).__name__}"
        )
    return copy_weights(ours, {k: source[v] for k, v in keys.items()}, what="torch's weights")


def attention_source(model, vocab, tokenize):
    """An attention source for the explorer and bertviz views: text → (tokens, attentions), the
    encoder self-attention of `model` (a Seq2SeqTransformer) as one (1, H, T, T) tensor per layer.
    Unknown tokens raise a ValueError that lists them (the model has no <unk> training to fall back on)."""
    if not isinstance(model, Seq2SeqTransformer):
        raise TypeError(
            f"model must be a Seq2SeqTransformer (BERTs: bert.attention_source); got {type(model).__name__}"
        )

    def source(text: str):
        tokens = tokenize(text)
        if not tokens:
            raise ValueError("the text is empty: type a sentence")
        unknown = sorted({t for t in tokens if t not in vocab})
        if unknown:
            raise ValueError(
                f"not in the model's vocabulary: {unknown}; this model knows "
                f"{len(vocab)} tokens, e.g. {vocab.itos[4:14]}"
            )
        ids = torch.tensor([vocab.encode_tokens(tokens)])
        with evaluating(model):
            maps = model.encode(ids, output_attentions=True)[2]
        return list(tokens), maps

    return source
