"""GPT: a decoder-only Transformer language model with tied embeddings and a key/value cache.

Taught in notebook 09 (and used for prompting in notebook 10). Follows Radford et al.,
"Improving Language Understanding by Generative Pre-Training" (GPT-1, 2018) and "Language
Models are Unsupervised Multitask Learners" (GPT-2, 2019):

    h_0 = U W_e + W_p                  token embedding + learned position embedding
    h_l = block(h_{l-1})               pre-norm: x + Attn(LN(x)), then x + MLP(LN(x)), causal
    P(u) = softmax(LN(h_n) W_eᵀ)       the output layer *is* the token embedding (tied)

The file reads in the order notebook 09 builds the model: the config, the block, the model; then
the losses, Hugging Face's GPT-2 (:data:`HF_GPT2_KEYS` maps our readable weight names to theirs for
:func:`load_hf_gpt2`, which :mod:`onehot2gpt.pretrained` calls after downloading), our checkpoints
and the input checks. Sampling and generation live in :mod:`onehot2gpt.sampling`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, causal_mask, merge_heads, scaled_dot_product_attention
from .checkpoints import config_from_record, fill_module, save_checkpoint
from .utils import InvalidIds, as_ids, check_int, check_number, copy_weights

# ------------------------------------------------------------------------------------ Configuration


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a GPT. Teaching-sized defaults (= :meth:`char`); GPT-2's sizes as presets."""

    vocab_size: int = 65  # Tiny Shakespeare has 65 distinct characters
    max_len: int = 64  # context window: learned positions exist for 0 … max_len − 1 only
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4  # d_model / n_heads = 32 features per head
    d_ff: int | None = None  # None → 4 · d_model, as in GPT-1 and GPT-2
    dropout: float = 0.0  # on embeddings, attention weights and every residual branch
    bias: bool = True  # biases in Linear and LayerNorm (GPT-2 has them)
    eps: float = 1e-5  # LayerNorm epsilon of GPT-2

    def __post_init__(self):
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)  # frozen: fill the default once
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads", "d_ff"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, 1))  # a NumPy int becomes an int
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        check_number(self.dropout, "dropout", 0, 1, high_open=True, fix="a probability")
        check_number(self.eps, "eps", 0, low_open=True, fix="LayerNorm's epsilon")

    @classmethod
    def tiny(cls, vocab_size: int = 50, **overrides) -> GPTConfig:
        """Tests: 2 layers, 32 wide, 4 heads, 16 positions."""
        return cls(vocab_size=vocab_size, **{**dict(max_len=16, d_model=32, n_layers=2, n_heads=4), **overrides})

    @classmethod
    def char(cls, vocab_size: int = 65, **overrides) -> GPTConfig:
        """nanoGPT's CPU recipe for Tiny Shakespeare: 4 layers, 4 heads, 128 wide, 64 characters of
        context, no dropout (≈0.8M parameters): the class's defaults."""
        return cls(vocab_size=vocab_size, **overrides)

    @classmethod
    def small(cls, vocab_size: int, **overrides) -> GPTConfig:
        """A subword model for a CPU, the size of the course BERT: 4 layers, 4 heads, 128 wide,
        64 tokens of context, dropout 0.1 (≈1.8M parameters with 8,000 pieces, most of them in
        the tied embedding): the class's defaults with dropout."""
        return cls(vocab_size=vocab_size, **{"dropout": 0.1, **overrides})

    @classmethod
    def gpt2_small(cls, **overrides) -> GPTConfig:
        """GPT-2 small (124M parameters): 12 layers, 768 wide, 12 heads."""
        return cls._gpt2(overrides, n_layers=12, d_model=768, n_heads=12)

    @classmethod
    def gpt2_medium(cls, **overrides) -> GPTConfig:
        """GPT-2 medium (355M parameters): 24 layers, 1024 wide, 16 heads."""
        return cls._gpt2(overrides, n_layers=24, d_model=1024, n_heads=16)

    @classmethod
    def gpt2_large(cls, **overrides) -> GPTConfig:
        """GPT-2 large (774M parameters): 36 layers, 1280 wide, 20 heads."""
        return cls._gpt2(overrides, n_layers=36, d_model=1280, n_heads=20)

    @classmethod
    def gpt2_xl(cls, **overrides) -> GPTConfig:
        """GPT-2 XL (1.5B parameters): 48 layers, 1600 wide, 25 heads."""
        return cls._gpt2(overrides, n_layers=48, d_model=1600, n_heads=25)

    @classmethod
    def _gpt2(cls, overrides: dict, **sizes) -> GPTConfig:
        # 50,257 byte-level BPE tokens, 1,024 positions, dropout 0.1 everywhere.
        return cls(**{**dict(vocab_size=50257, max_len=1024, dropout=0.1), **sizes, **overrides})

    @classmethod
    def from_hf(cls, hf_config) -> GPTConfig:
        """Convert a `transformers.GPT2Config` (see :func:`gpt_config_from_hf`)."""
        return gpt_config_from_hf(hf_config)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------- The block


class GPTFeedForward(nn.Module):
    """GPT-2's MLP: Linear(D → d_ff), tanh-approximated GELU, Linear(d_ff → D): (B, T, D) → (B, T, D).

    Not :class:`~onehot2gpt.transformer.FeedForward`: GPT-2 was trained with the tanh GELU, and
    drops the block's output (:class:`GPTBlock`), not the hidden layer.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = True):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff, bias=bias), nn.Linear(d_ff, d_model, bias=bias)
        self.activation = nn.GELU(approximate="tanh")  # = Hugging Face's "gelu_new"

    def forward(self, x):
        return self.linear2(self.activation(self.linear1(x)))


class GPTBlock(nn.Module):
    """Pre-norm decoder block: x = x + Attn(LN(x)); x = x + MLP(LN(x)), attention masked causally.

    forward(x (B, T, D), mask (T, T_past + T), past=None (k, v) each (B, H, T_past, hs),
    need_weights=False) → (x, weights (B, H, T, T_past + T) or None, present (k, v) with T_past + T).
    It runs the steps of the shared :class:`~onehot2gpt.attention.MultiHeadAttention` itself, to put
    the cached keys and values of earlier positions in front of the new ones.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, bias: bool = True, eps: float = 1e-5
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=eps, bias=bias)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=eps, bias=bias)
        self.ff = GPTFeedForward(d_model, d_ff, bias)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def attend(self, x, mask, past=None, need_weights: bool = False):
        """Causal self-attention with a cache → (output (B, T, D), weights or None, present (k, v))."""
        q, k, v = self.attn.project(x)  # 3 × (B, H, T, hs)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)  # (B, H, T_past + T, hs)
        p = self.attn.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, p, self.training)
        else:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        return self.attn.out_proj(merge_heads(out)), weights, (k, v)  # (B, T, D)

    def forward(self, x, mask, past=None, need_weights: bool = False):
        a, weights, present = self.attend(self.norm1(x), mask, past, need_weights)
        x = x + self.dropout1(a)
        x = x + self.dropout2(self.ff(self.norm2(x)))
        return x, weights, present


# ---------------------------------------------------------------------------------------- The model


class GPTOutput(NamedTuple):
    """What :class:`GPT` returns (the field names are Hugging Face's)."""

    logits: torch.Tensor  # (B, T, V)
    attentions: tuple[torch.Tensor, ...] | None  # n_layers × (B, H, T, T_past + T)
    past_key_values: tuple | None  # n_layers × (k, v), each (B, H, T_past + T, hs)


class GPT(nn.Module):
    """Decoder-only Transformer LM. forward(ids (B, T), output_attentions=False,
    past_key_values=None, use_cache=False) → :class:`GPTOutput`.

    `past_key_values` (from an earlier call with use_cache=True) holds one (k, v) per layer, each
    (B, H, T_past, hs): the new tokens then take positions T_past … T_past + T − 1 and attend to
    all T_past earlier ones, so feeding a sequence in pieces gives the logits of feeding it whole.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            GPTBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, c.bias, c.eps) for _ in range(c.n_layers)
        )
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.eps, bias=c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._init_weights()
        self.lm_head.weight = self.tok_emb.weight  # tied: one (V, D) matrix reads tokens in and out

    def _init_weights(self, std: float = 0.02):
        """GPT-2's initialisation: N(0, 0.02²) weights, zero biases, LayerNorm at identity; the two
        projections that write into the residual stream get std 0.02 / √(2 n_layers), so the sum of
        2 n_layers branches starts with the size of one."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.ff.linear2):
                nn.init.normal_(proj.weight, std=std / math.sqrt(2 * self.config.n_layers))

    def forward(self, ids, output_attentions: bool = False, past_key_values=None, use_cache: bool = False) -> GPTOutput:
        # 1. Check the input; a cache moves the new tokens' positions to T_past, T_past + 1, …
        c = self.config
        _check_ids(ids, c.vocab_size)
        B, T = ids.shape
        T_past = 0 if past_key_values is None else _check_past(past_key_values, c, B)
        if T_past + T > c.max_len:
            raise ValueError(
                f"the sequence has {T_past + T} positions but the model has learned "
                f"positions for max_len={c.max_len} only; crop the prompt to its last "
                f"{c.max_len} tokens (ids[:, -{c.max_len}:]) or let "
                f"onehot2gpt.sampling.generate crop it for you"
            )
        positions = torch.arange(T_past, T_past + T, device=ids.device)  # (T,)
        x = self.dropout(self.tok_emb(ids) + self.pos_emb(positions))  # (B, T, D)
        # 2. Query t (absolute position T_past + t) sees keys 0 … T_past + t: the past and itself.
        mask = causal_mask(T, T_past + T, device=ids.device)  # (T, T_past + T)
        maps, presents = [], []
        for i, block in enumerate(self.blocks):
            past = None if past_key_values is None else past_key_values[i]
            x, w, present = block(x, mask, past, need_weights=output_attentions)
            maps.append(w)
            presents.append(present)
        # 3. Final LayerNorm, then scores against every token embedding (tied output layer).
        logits = self.lm_head(self.final_norm(x))  # (B, T, V)
        return GPTOutput(logits, tuple(maps) if output_attentions else None, tuple(presents) if use_cache else None)


def sequence_log_prob(model: GPT, ids) -> torch.Tensor:
    """The chain rule: log P(ids[1:] | ids[0]) = Σ_t log P(ids[t] | ids[:t]) for a (T,) or (B, T)
    sequence → () or (B,) natural-log probabilities. Exact, because an autoregressive model
    factorises the probability of a sequence; a masked LM cannot give this number."""
    ids = as_ids(ids, model.config.vocab_size, dims=(1, 2))
    single = ids.dim() == 1
    ids = ids[None] if single else ids
    max_len = model.config.max_len
    fix = f"score a first token and what follows, within the model's context of {max_len}"
    check_int(ids.size(1), "the number of tokens T", 2, max_len, fix=fix)
    logp = torch.log_softmax(model(ids[:, :-1]).logits.float(), dim=-1)  # (B, T − 1, V)
    out = logp.gather(-1, ids[:, 1:, None])[..., 0].sum(-1)  # (B,)
    return out[0] if single else out


def lm_loss(model: GPT, ids):
    """ids (B, T) → mean next-token cross-entropy of ids[:, 1:] given ids[:, :-1] (a scalar)."""
    ids = as_ids(ids, model.config.vocab_size, dims=2)
    check_int(ids.size(1), "the number of tokens T", 2, fix="lm_loss needs an input and its next token")
    logits = model(ids[:, :-1]).logits  # (B, T − 1, V)
    return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())


# --------------------------------------------------- Hugging Face GPT-2: its config and one key map


def gpt_config_from_hf(hf_config) -> GPTConfig:
    """Convert a `transformers.GPT2Config`. Raises ValueError for variants we do not build.

    Our one dropout rate is GPT-2's ``resid_pdrop`` (the released models use 0.1 for all three).
    """
    kind = getattr(hf_config, "model_type", "gpt2")
    if kind != "gpt2":
        raise ValueError(
            f"only GPT-2 checkpoints convert (model_type 'gpt2'); this one is {kind!r}, "
            f"whose weights or positions are laid out differently"
        )
    act = getattr(hf_config, "activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):  # both are the tanh approximation of GELU
        raise ValueError(f"activation_function={act!r}: our MLP uses GPT-2's tanh-approximated GELU ('gelu_new') only")
    unsupported = {
        "scale_attn_by_inverse_layer_idx": True,
        "reorder_and_upcast_attn": True,
        "add_cross_attention": True,
        "scale_attn_weights": False,
        "tie_word_embeddings": False,
    }
    for name, bad in unsupported.items():
        if getattr(hf_config, name, not bad) == bad:
            raise ValueError(
                f"{name}={bad}: our GPT builds plain GPT-2 (attention scaled by 1/√hs, "
                f"no cross-attention, output layer tied to the token embedding); "
                f"convert a checkpoint without this option"
            )
    return GPTConfig(
        vocab_size=hf_config.vocab_size,
        max_len=hf_config.n_positions,
        d_model=hf_config.n_embd,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        d_ff=hf_config.n_inner or 4 * hf_config.n_embd,
        dropout=hf_config.resid_pdrop,
        bias=True,
        eps=hf_config.layer_norm_epsilon,
    )


# Our parameter name → Hugging Face's (transformers.GPT2LMHeadModel). "{i}" is the layer number.
# lm_head.weight is absent on purpose: on both sides it is the token embedding itself (tied).
HF_GPT2_KEYS: dict[str, str] = {
    "tok_emb.weight": "transformer.wte.weight",
    "pos_emb.weight": "transformer.wpe.weight",
    "blocks.{i}.norm1.weight": "transformer.h.{i}.ln_1.weight",
    "blocks.{i}.norm1.bias": "transformer.h.{i}.ln_1.bias",
    "blocks.{i}.attn.in_proj.weight": "transformer.h.{i}.attn.c_attn.weight",  # [W^Q; W^K; W^V] both sides
    "blocks.{i}.attn.in_proj.bias": "transformer.h.{i}.attn.c_attn.bias",
    "blocks.{i}.attn.out_proj.weight": "transformer.h.{i}.attn.c_proj.weight",
    "blocks.{i}.attn.out_proj.bias": "transformer.h.{i}.attn.c_proj.bias",
    "blocks.{i}.norm2.weight": "transformer.h.{i}.ln_2.weight",
    "blocks.{i}.norm2.bias": "transformer.h.{i}.ln_2.bias",
    "blocks.{i}.ff.linear1.weight": "transformer.h.{i}.mlp.c_fc.weight",
    "blocks.{i}.ff.linear1.bias": "transformer.h.{i}.mlp.c_fc.bias",
    "blocks.{i}.ff.linear2.weight": "transformer.h.{i}.mlp.c_proj.weight",
    "blocks.{i}.ff.linear2.bias": "transformer.h.{i}.mlp.c_proj.bias",
    "final_norm.weight": "transformer.ln_f.weight",
    "final_norm.bias": "transformer.ln_f.bias",
}

# GPT-2 keeps the four matrices of a block in OpenAI's Conv1D layout, (in, out): our nn.Linear's
# (out, in) transposed. (Conv1D computes x @ W + b, nn.Linear x @ Wᵀ + b.)
HF_GPT2_TRANSPOSED = frozenset(
    f"blocks.{{i}}.{layer}.weight" for layer in ("attn.in_proj", "attn.out_proj", "ff.linear1", "ff.linear2")
)


def hf_gpt2_key_map(n_layers: int) -> dict[str, tuple[str, bool]]:
    """The key map written out for one model: our parameter name → (HF name, transposed?)."""
    out = {}
    for ours, theirs in HF_GPT2_KEYS.items():
        for i in range(n_layers) if "{i}" in ours else [""]:
            out[ours.replace("{i}", str(i))] = (theirs.replace("{i}", str(i)), ours in HF_GPT2_TRANSPOSED)
    return out


def load_hf_gpt2(hf_model, config: GPTConfig | None = None) -> GPT:
    """A transformers GPT2LMHeadModel (or GPT2Model) → our GPT with the same weights, in eval mode.

    Every parameter on both sides is checked against :func:`hf_gpt2_key_map` first: a ValueError
    names each missing, unused or mis-shaped tensor, and nothing is half-loaded.
    """
    config = config or GPTConfig.from_hf(hf_model.config)
    body = getattr(hf_model, "transformer", hf_model)  # GPT2LMHeadModel → its GPT2Model
    head = getattr(hf_model, "lm_head", None)
    if head is not None and not torch.equal(head.weight, body.wte.weight):
        raise ValueError(
            "this checkpoint's lm_head differs from its token embedding (wte); our GPT ties "
            "them, as GPT-2 does, and cannot hold a separate output layer"
        )
    theirs = dict(body.named_parameters(prefix="transformer"))
    key_map = hf_gpt2_key_map(config.n_layers)  # our name → (theirs, transposed?); the tied weight once
    used = {t for t, _ in key_map.values()}
    problems = [f"the checkpoint lacks {t} (for our {k})" for k, (t, _) in key_map.items() if t not in theirs]
    problems += [f"the checkpoint's {t} has no place in our model" for t in theirs if t not in used]
    sources = {
        k: theirs[t].detach().T if transposed else theirs[t].detach()
        for k, (t, transposed) in key_map.items()
        if t in theirs
    }
    hint = "Build it with GPTConfig.from_hf(hf_model.config) (the default) so the sizes agree"
    return copy_weights(GPT(config), sources, problems=problems, what="the Hugging Face weights", hint=hint).eval()


# ------------------- Saving our own checkpoints (the format and its checks: onehot2gpt.checkpoints)


def save_gpt(model: GPT, directory: str | Path, info: dict | None = None, tokenizer=None) -> Path:
    """Write a checkpoint folder (:mod:`onehot2gpt.checkpoints`): ``weights.safetensors`` (float32,
    the tied weight once), the `tokenizer`'s file if given, and ``config.json`` with the config,
    `info` (JSON-serialisable: data, steps, the command that made it) and the files' sha256."""
    if not isinstance(model, GPT):
        raise TypeError(f"save_gpt saves a GPT; got {type(model).__name__}")
    # named_parameters lists the tied tensor once (safetensors refuses shared storage anyway).
    return save_checkpoint(
        directory, "gpt", "GPT", model.config.to_dict(), dict(model.named_parameters()), tokenizer=tokenizer, info=info
    )


def gpt_from_checkpoint(record: dict, weights: dict, tokenizer=None) -> GPT:
    """A GPT built from a checkpoint's config.json `record`, filled with its checked `weights`
    (what :func:`onehot2gpt.checkpoints.load` calls for kind "gpt")."""
    return fill_module(GPT(config_from_record(GPTConfig, record)), weights)


# ----------------------------------------------- Checking the inputs (messages that say what to do)


def _check_ids(ids, vocab_size: int) -> None:
    """GPT.forward's check: :func:`~onehot2gpt.utils.as_ids` ((B, T), whole numbers, in range), and
    a tensor, since forward goes on with `ids` itself (its source, shown in notebook 09, stays as is)."""
    as_ids(ids, vocab_size, dims=2)
    if not isinstance(ids, torch.Tensor):
        raise InvalidIds(
            f"a GPT takes its ids as a tensor, got a {type(ids).__name__}: call "
            f"model(torch.tensor(ids)); lm_loss, sequence_log_prob and generate take lists too"
        )


def _check_past(past_key_values, c: GPTConfig, B: int) -> int:
    """Validate a cache → its length T_past."""
    if len(past_key_values) != c.n_layers:
        raise ValueError(
            f"past_key_values has {len(past_key_values)} layers, the model {c.n_layers}; "
            f"pass the past_key_values of this model's last call"
        )
    T_past = past_key_values[0][0].size(2)
    expected = (B, c.n_heads, T_past, c.d_model // c.n_heads)
    for i, (k, v) in enumerate(past_key_values):
        if tuple(k.shape) != expected or tuple(v.shape) != expected:
            raise ValueError(
                f"past_key_values[{i}] holds k {tuple(k.shape)} and v {tuple(v.shape)}; "
                f"expected (B, H, T_past, hs) = {expected} for this batch"
            )
    return T_past
