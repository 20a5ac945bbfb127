"""Look inside a course BERT: the walk of :mod:`onehot2gpt.lookinside` through a post-norm encoder
and its MLM head, every tensor kept, for notebook 07's :class:`~onehot2gpt.widgets.ForwardStepper`.
Shapes as in :mod:`onehot2gpt.lookinside`: one sequence, T tokens, D model width, V vocabulary entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .lookinside import Stage, attend, attention_rows, check_temperature, is_course_bert, one_sequence
from .utils import as_ids, check_finite_weights, check_int, evaluating


@dataclass
class BertTrace:
    """Every tensor of one forward pass of a :class:`~onehot2gpt.bert.BertForPreTraining` (see
    :func:`trace_bert`)."""

    ids: torch.Tensor  # (T,)
    token_type_ids: torch.Tensor  # (T,)
    tok_emb: torch.Tensor  # (T, D)
    seg_emb: torch.Tensor  # (T, D)
    pos_emb: torch.Tensor  # (T, D)
    summed: torch.Tensor  # (T, D)
    x0: torch.Tensor  # (T, D) LayerNorm of the sum: the input to layer 0
    layers: list[dict[str, torch.Tensor]]
    mlm_dense: torch.Tensor  # (T, D)
    mlm_act: torch.Tensor  # (T, D)
    mlm_norm: torch.Tensor  # (T, D)
    logits: torch.Tensor  # (T, V)
    temperature: float
    scaled_logits: torch.Tensor
    probs: torch.Tensor
    switched_off: dict = field(default_factory=dict)

    @property
    def attentions(self) -> list[torch.Tensor]:
        return [layer["weights"] for layer in self.layers]


def _holds_nan(value) -> bool:
    """Whether a trace field (a tensor, or a layer's dict of them) holds NaN (−inf is fine: masked scores)."""
    if isinstance(value, dict):
        return any(_holds_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_nan(v) for v in value)
    return isinstance(value, torch.Tensor) and value.is_floating_point() and bool(value.isnan().any())


def _check_bert(model, what: str) -> None:
    """TypeError unless `model` is a course BERT with its MLM head; ValueError naming its first
    non-finite weight (so that the tool `what` never blames itself for NaN weights)."""
    if not is_course_bert(model):
        raise TypeError(
            f"{what}: expected a course BERT with its MLM head (onehot2gpt.bert.BertForPreTraining); got "
            f"{type(model).__name__}. Load one with onehot2gpt.checkpoints.load('bert-wikitext2')"
        )
    check_finite_weights(model, what)


@torch.no_grad()
def trace_bert(model, ids, token_type_ids=None, *, temperature: float = 1.0) -> BertTrace:
    """Run a course BERT with its MLM head (:class:`~onehot2gpt.bert.BertForPreTraining`) on one
    sequence step by step: token + segment + position embeddings → LayerNorm → per layer Q, K, V →
    scores → scaled → masked (padding keys only: every token sees both sides) → softmax → weighted
    sum → output projection → residual → LayerNorm → MLP (exact GELU) → residual → LayerNorm (post-norm,
    as in the paper) → MLM head: dense → GELU → LayerNorm → logits (tied embedding + bias) →
    temperature → probabilities."""
    _check_bert(model, "trace_bert")
    c = model.config
    ids = one_sequence(ids, c, "this BERT")
    T = ids.numel()
    check_temperature(temperature)
    types = torch.zeros_like(ids)  # one segment: all "A"
    if token_type_ids is not None:
        types = as_ids(token_type_ids, c.type_vocab_size, dims=1, name="token_type_ids")
    if types.shape != ids.shape:
        raise ValueError(f"token_type_ids must have the shape of ids {tuple(ids.shape)}; got {tuple(types.shape)}")
    emb = model.bert.embeddings
    device = emb.tok_emb.weight.device
    ids, types = ids.to(device), types.to(device)
    D, H = c.d_model, c.n_heads
    tok, seg, pos = emb.tok_emb.weight[ids], emb.seg_emb.weight[types], emb.pos_emb.weight[:T]
    summed = tok + seg + pos
    x = x0 = F.layer_norm(summed, (D,), emb.norm.weight, emb.norm.bias, emb.norm.eps)
    allowed = (ids != c.pad_id)[None, :].expand(T, T)  # every real key, both sides
    layers = []
    for layer in model.bert.encoder.layers:
        if layer.norm_first:
            raise ValueError("trace_bert follows BERT's post-norm blocks; this encoder is pre-norm")
        s = {"resid_pre": x}
        attend(s, x, layer.self_attn, allowed, H)
        s["resid_mid"] = x + s["attn_out"]
        s["ln1"] = F.layer_norm(s["resid_mid"], (D,), layer.norm1.weight, layer.norm1.bias, layer.norm1.eps)
        s["mlp_hidden"] = F.gelu(F.linear(s["ln1"], layer.ff.linear1.weight, layer.ff.linear1.bias))
        s["mlp_out"] = F.linear(s["mlp_hidden"], layer.ff.linear2.weight, layer.ff.linear2.bias)
        s["resid_post"] = s["ln1"] + s["mlp_out"]
        s["ln2"] = F.layer_norm(s["resid_post"], (D,), layer.norm2.weight, layer.norm2.bias, layer.norm2.eps)
        x = s["ln2"]
        layers.append(s)
    head = model.mlm
    dense = F.linear(x, head.dense.weight, head.dense.bias)
    act = F.gelu(dense)
    norm = F.layer_norm(act, (D,), head.norm.weight, head.norm.bias, head.norm.eps)
    logits = F.linear(norm, head.decoder.weight, head.decoder.bias)
    temperature = float(temperature)
    scaled = logits / temperature
    probs = torch.softmax(scaled, -1)
    return BertTrace(
        ids.cpu(), types.cpu(), tok, seg, pos, summed, x0, layers, dense, act, norm, logits, temperature, scaled, probs
    )


@torch.no_grad()
def check_bert_trace(model, trace: BertTrace) -> dict[str, float]:
    from .attention import padding_mask

    _check_bert(model, "check_bert_trace")  # a NaN difference is the weights' fault, not the trace's
    if not isinstance(trace, BertTrace):
        raise TypeError(
            f"check_bert_trace: trace must be a BertTrace (trace_bert gives one), got {type(trace).__name__}"
        )
    with evaluating(model):
        device = model.bert.embeddings.tok_emb.weight.device
        ids, types = trace.ids.to(device)[None], trace.token_type_ids.to(device)[None]
        diffs = {"embedding": (model.bert.embeddings(ids, types)[0] - trace.x0).abs().max().item()}
        mask = padding_mask(ids, model.config.pad_id)
        for l, layer in enumerate(model.bert.encoder.layers):
            x, w = layer(trace.layers[l]["resid_pre"][None], mask, need_weights=True)
            diffs[f"layer {l} output"] = (x[0] - trace.layers[l]["ln2"]).abs().max().item()
            diffs[f"layer {l} attention"] = (w[0] - trace.layers[l]["weights"]).abs().max().item()
        diffs["logits"] = (model(ids, types).mlm_logits[0] - trace.logits).abs().max().item()
    return diffs


def bert_stages(trace: BertTrace, p: int) -> list[Stage]:
    """The stages of :func:`trace_bert`'s forward pass cut to position `p` (−1 = the last token)."""
    if isinstance(trace, torch.nn.Module):
        check_finite_weights(trace, "bert_stages")  # NaN weights: say so first
    if not isinstance(trace, BertTrace):
        raise TypeError(
            f"bert_stages: trace must be a BertTrace, got {type(trace).__name__}: pass "
            f"trace_bert(model, ids), not the model"
        )
    broken = [name for name, value in vars(trace).items() if _holds_nan(value)]
    if broken:
        raise ValueError(
            f"bert_stages: the trace holds NaN values (first in {broken[0]}): it was made from a "
            f"model whose weights are broken. Load a checkpoint (onehot2gpt.checkpoints.load) and trace it again"
        )
    T, D = trace.ids.numel(), trace.x0.size(-1)
    p = check_int(p, "position", -T, T - 1, fix="−1 is the last token") % T
    td, tv = f"(T={T}, D={D})", f"(T={T}, V={trace.logits.size(-1)})"
    out = [
        Stage("token embedding", "E[id]: the token's row", trace.tok_emb[p], td, None),
        Stage("segment embedding", "S[segment]: sentence A or B", trace.seg_emb[p], td, None),
        Stage("position embedding", "P[t]: the position's row", trace.pos_emb[p], td, None),
        Stage("sum", "E[id] + S[segment] + P[t]", trace.summed[p], td, None),
        Stage("input x", "LayerNorm(sum)", trace.x0[p], td, None),
    ]
    for l, s in enumerate(trace.layers):
        d_ff = s["mlp_hidden"].size(-1)
        rows = attention_rows(s, p, T, D, "−inf for padding keys only: BERT sees both sides")
        rows += [
            ("residual 1", "x + attention", s["resid_mid"][p], td),
            ("LayerNorm 1", "LN(x + attention): post-norm", s["ln1"][p], td),
            ("MLP hidden", "GELU(x W_1 + b_1)", s["mlp_hidden"][p], f"(T={T}, d_ff={d_ff})"),
            ("MLP out", "hidden W_2 + b_2", s["mlp_out"][p], td),
            ("residual 2", "x + MLP", s["resid_post"][p], td),
            ("LayerNorm 2", "LN(x + MLP): the layer's output", s["ln2"][p], td),
        ]
        out += [Stage(f"layer {l} · {name}", formula, value, shape, l) for name, formula, value, shape in rows]
    out += [
        Stage("MLM dense", "x W + b", trace.mlm_dense[p], td, None),
        Stage("MLM GELU", "GELU", trace.mlm_act[p], td, None),
        Stage("MLM LayerNorm", "LN", trace.mlm_norm[p], td, None),
        Stage("logits", "LN(…) Eᵀ + b: a score per vocabulary entry (tied embedding)", trace.logits[p], tv, None),
        Stage("temperature", f"logits / {trace.temperature:g}", trace.scaled_logits[p], tv, None),
        Stage("probabilities", "softmax: what the MLM head fills in here", trace.probs[p], tv, None),
    ]
    return out
