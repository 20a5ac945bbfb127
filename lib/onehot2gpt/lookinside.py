"""Look inside a GPT: every tensor of its forward pass, the logit lens, and switching parts off.

:func:`trace_gpt` runs a :class:`~onehot2gpt.gpt.GPT`'s forward pass one operation at a time and
keeps every tensor; :func:`check_trace` proves it equal to the library's forward. :func:`intervene`
switches heads, MLPs or tokens off, :func:`logit_lens` reads the residual stream after every layer,
and :func:`induction_scores` finds induction heads (Olsson et al. 2022).

Shapes: one sequence at a time, B = 1 is dropped: T tokens, D model width, H heads of hs = D / H
features, V vocabulary entries, d_ff the MLP's hidden width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .utils import as_ids, check_finite_weights, check_int, check_number, check_tensor, evaluating


@dataclass
class Trace:
    """Every tensor of one forward pass (see :func:`trace_gpt`). ``layers[l]`` maps a stage key
    (``"ln1"``, ``"q"``, ``"scores"``, …) to its tensor; the rest are the stages outside the blocks."""

    ids: torch.Tensor  # (T,)
    tok_emb: torch.Tensor  # (T, D)
    pos_emb: torch.Tensor  # (T, D)
    x0: torch.Tensor  # (T, D) the residual stream entering layer 0
    layers: list[dict[str, torch.Tensor]]
    final_ln: torch.Tensor  # (T, D)
    logits: torch.Tensor  # (T, V)
    temperature: float
    scaled_logits: torch.Tensor  # (T, V) logits / temperature
    probs: torch.Tensor  # (T, V)
    switched_off: dict = field(default_factory=dict)

    @property
    def residuals(self) -> list[torch.Tensor]:
        """The residual stream after the embedding and after each layer: n_layers + 1 × (T, D)."""
        return [self.x0] + [layer["resid_post"] for layer in self.layers]

    @property
    def attentions(self) -> list[torch.Tensor]:
        """Each layer's attention weights, n_layers × (H, T, T)."""
        return [layer["weights"] for layer in self.layers]


def check_gpt(model) -> None:
    """TypeError saying what to pass unless `model` is a course GPT (what the lens and interventions read)."""
    missing = [n for n in ("tok_emb", "pos_emb", "blocks", "final_norm", "lm_head", "config") if not hasattr(model, n)]
    if missing:
        raise TypeError(
            f"expected a course GPT (onehot2gpt.gpt.GPT); {type(model).__name__} has no "
            f"{', '.join(missing)}. Load one with onehot2gpt.checkpoints.load or build GPT(config)"
        )


def _check_positions(name: str, values, limit: int, what: str) -> set[int]:
    return {check_int(v, f"{name}[{i}]", 0, limit - 1, fix=f"{name} lists {what}") for i, v in enumerate(values)}


def _check_heads(heads, n_layers: int, n_heads: int) -> set[tuple[int, int]]:
    out = set()
    for i, pair in enumerate(heads):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"heads_off holds (layer, head) pairs, e.g. [(0, 1)]; got {pair!r}")
        layer = check_int(pair[0], f"heads_off[{i}][0]", 0, n_layers - 1, fix=f"a layer: the model has {n_layers}")
        head = check_int(pair[1], f"heads_off[{i}][1]", 0, n_heads - 1, fix=f"a head: a layer has {n_heads}")
        out.add((layer, head))
    return out


def one_sequence(ids, config, what: str = "the model") -> torch.Tensor:
    """Token ids of one sequence, (T,) or (1, T), as a (T,) long tensor; a clear error otherwise."""
    ids = as_ids(ids, config.vocab_size, dims=(1, 2))
    if ids.dim() == 2:
        if ids.size(0) != 1:
            raise ValueError(f"trace one sequence at a time: ids has batch size {ids.size(0)}; pass ids[0]")
        ids = ids[0]
    if ids.numel() > config.max_len:
        raise ValueError(
            f"the sequence has {ids.numel()} tokens but {what} knows positions 0…{config.max_len - 1} "
            f"only; keep its last {config.max_len} tokens (ids[-{config.max_len}:])"
        )
    return ids


def _check_position(position, T: int) -> int:
    """A position in −T … T − 1 (−1 = the last token) → its index 0 … T − 1."""
    return check_int(position, "position", -T, T - 1, fix="−1 is the last token") % T


def check_temperature(temperature) -> None:
    check_number(temperature, "temperature", 0, low_open=True, fix="1 leaves the logits as they are")


def attend(s: dict, x, attn, allowed, n_heads: int, heads_off=()) -> None:
    """One multi-head self-attention on x (T, D), its stages written into `s`: q, k, v, scores,
    scaled, masked, weights, heads (the heads in `heads_off` zeroed) and attn_out."""
    T, D = x.shape
    hs = D // n_heads
    qkv = F.linear(x, attn.in_proj.weight, attn.in_proj.bias)  # (T, 3D)
    q, k, v = (t.view(T, n_heads, hs).transpose(0, 1) for t in qkv.split(D, dim=-1))  # 3 × (H, T, hs)
    s["q"], s["k"], s["v"] = q, k, v
    s["scores"] = q @ k.transpose(-2, -1)  # (H, T, T)
    s["scaled"] = s["scores"] / math.sqrt(hs)
    s["masked"] = s["scaled"].masked_fill(~allowed, float("-inf"))
    s["weights"] = torch.softmax(s["masked"], dim=-1)
    heads = s["weights"] @ v  # (H, T, hs)
    for h in heads_off:
        heads[h] = 0.0
    s["heads"] = heads
    merged = heads.transpose(0, 1).reshape(T, D)  # heads side by side
    s["attn_out"] = F.linear(merged, attn.out_proj.weight, attn.out_proj.bias)


@torch.no_grad()
def trace_gpt(model, ids, *, temperature: float = 1.0, heads_off=(), mlps_off=(), tokens_off=()) -> Trace:
    """Run `model`'s forward pass on one sequence `ids` ((T,) or (1, T) token ids) step by step.

    Per layer: ln1 → q, k, v (H, T, hs) → scores = q kᵀ (H, T, T) → scaled = scores / √hs →
    masked (−inf above the diagonal) → weights = softmax → heads = weights v (H, T, hs) →
    attn_out = out_proj(concat heads) (T, D) → resid_mid = x + attn_out → ln2 → mlp_hidden =
    GELU(linear1) (T, d_ff) → mlp_out = linear2 (T, D) → resid_post = resid_mid + mlp_out.
    Then final_ln → logits → scaled_logits = logits / temperature → probs = softmax.

    Interventions, each off where the list names it:
      heads_off  [(layer, head)]: that head's output (its rows of `heads`) is set to zero before the
                 output projection: the head writes nothing into the residual stream;
      mlps_off   [layer]: that layer's MLP adds nothing (mlp_out = 0);
      tokens_off [position]: no other position may attend to it, in every layer (a token still
                 attends to itself, so its own row is never empty). Its own prediction still counts.
    Dropout is never applied (the model is read in eval mode, whatever its mode).
    """
    check_gpt(model)
    check_finite_weights(model, "trace_gpt")  # NaN weights: blame them, not the stepper
    c = model.config
    ids = one_sequence(ids, c)
    T = ids.numel()
    check_temperature(temperature)
    heads_off = _check_heads(heads_off, c.n_layers, c.n_heads)
    mlps_off = _check_positions("mlps_off", mlps_off, c.n_layers, "layer numbers")
    tokens_off = _check_positions("tokens_off", tokens_off, T, "positions of the sequence")

    device = model.tok_emb.weight.device
    ids = ids.to(device)
    H, D = c.n_heads, c.d_model
    tok = model.tok_emb.weight[ids]  # (T, D): row ids[t] of the table
    pos = model.pos_emb.weight[:T]  # (T, D): row t
    x0 = x = tok + pos
    allowed = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # query i sees keys 0…i
    for t in tokens_off:
        allowed[:, t] = False
        allowed[t, t] = True
    layers = []
    for l, block in enumerate(model.blocks):
        s = {"resid_pre": x}
        s["ln1"] = F.layer_norm(x, (D,), block.norm1.weight, block.norm1.bias, block.norm1.eps)
        attend(s, s["ln1"], block.attn, allowed, H, [h for (ll, h) in heads_off if ll == l])
        s["resid_mid"] = x + s["attn_out"]
        s["ln2"] = F.layer_norm(s["resid_mid"], (D,), block.norm2.weight, block.norm2.bias, block.norm2.eps)
        s["mlp_hidden"] = F.gelu(F.linear(s["ln2"], block.ff.linear1.weight, block.ff.linear1.bias), approximate="tanh")
        s["mlp_out"] = F.linear(s["mlp_hidden"], block.ff.linear2.weight, block.ff.linear2.bias)
        if l in mlps_off:
            s["mlp_out"] = torch.zeros_like(s["mlp_out"])
        s["resid_post"] = s["resid_mid"] + s["mlp_out"]
        x = s["resid_post"]
        layers.append(s)
    n = model.final_norm
    final = F.layer_norm(x, (D,), n.weight, n.bias, n.eps)
    logits = final @ model.lm_head.weight.T  # (T, V): tied to tok_emb
    if model.lm_head.bias is not None:
        logits = logits + model.lm_head.bias
    scaled = logits / temperature
    probs = torch.softmax(scaled, dim=-1)
    switched = {"heads": sorted(heads_off), "mlps": sorted(mlps_off), "tokens": sorted(tokens_off)}
    return Trace(ids.cpu(), tok, pos, x0, layers, final, logits, float(temperature), scaled, probs, switched)


@torch.no_grad()
def check_trace(model, trace: Trace, atol: float = 1e-4) -> dict[str, float]:
    """Prove a trace (with nothing switched off) equal to the library's forward: the embedding,
    every block's output and attention weights (the library's :class:`~onehot2gpt.gpt.GPTBlock`
    run on the trace's input), and the logits of ``model(ids)``. Returns the largest absolute
    difference per part; raises AssertionError naming the first part that differs by more than atol.
    """
    from .attention import causal_mask
    from .lookinside_bert import BertTrace, check_bert_trace

    check_finite_weights(model, "check_trace")  # a NaN difference is the weights' fault, not the trace's
    if isinstance(trace, BertTrace):
        return _require_close(check_bert_trace(model, trace), atol)
    if any(trace.switched_off.values()):
        raise ValueError(
            f"a trace with parts switched off ({trace.switched_off}) is not the model's own "
            f"forward; check the trace made without heads_off, mlps_off or tokens_off"
        )
    with evaluating(model):
        ids = trace.ids.to(model.tok_emb.weight.device)[None]
        T = ids.size(1)
        x = model.tok_emb(ids) + model.pos_emb(torch.arange(T, device=ids.device))
        diffs = {"embedding": (x[0] - trace.x0).abs().max().item()}
        mask = causal_mask(T, device=ids.device)
        for l, block in enumerate(model.blocks):
            x, w, _ = block(trace.layers[l]["resid_pre"][None], mask, need_weights=True)
            diffs[f"layer {l} output"] = (x[0] - trace.layers[l]["resid_post"]).abs().max().item()
            diffs[f"layer {l} attention"] = (w[0] - trace.layers[l]["weights"]).abs().max().item()
        diffs["logits"] = (model(ids).logits[0] - trace.logits).abs().max().item()
    return _require_close(diffs, atol)


def _require_close(diffs: dict[str, float], atol: float) -> dict[str, float]:
    for part, d in diffs.items():
        if not d <= atol:
            raise AssertionError(
                f"the step-by-step forward differs from the library's at {part}: max |difference| {d:.3g} > {atol:g}"
            )
    return diffs


# -- the stages, for the stepper ----------------------------------------------------------------


@dataclass
class Stage:
    """One step of the forward pass at one position: what it computes and the numbers it gives."""

    key: str  # e.g. "layer 0 · scores"
    formula: str
    value: torch.Tensor  # what the position sees at this stage: (D,), (H, T), (V,), …
    shape: str  # the full tensor's shape, e.g. "(H=4, T=9, T=9)"
    layer: int | None = None


def attention_rows(s: dict, p: int, T: int, D: int, mask_note: str) -> list[tuple[str, str, torch.Tensor, str]]:
    H, _, hs = s["q"].shape
    hth, htt = f"(H={H}, T={T}, hs={hs})", f"(H={H}, T={T}, T={T})"
    return [
        ("query Q", "x W_Q, split into heads", s["q"][:, p], hth),
        ("key K", "x W_K, split into heads", s["k"][:, p], hth),
        ("value V", "x W_V, split into heads", s["v"][:, p], hth),
        ("scores", "Q Kᵀ: this query against every key", s["scores"][:, p], htt),
        ("scaled", f"Q Kᵀ / √hs = / {math.sqrt(hs):.3g}", s["scaled"][:, p], htt),
        ("masked", mask_note, s["masked"][:, p], htt),
        ("softmax", "weights = softmax over keys (each row sums to 1)", s["weights"][:, p], htt),
        ("weighted sum", "weights V: one vector per head", s["heads"][:, p], hth),
        ("output projection", "concat(heads) W_O", s["attn_out"][p], f"(T={T}, D={D})"),
    ]


def stages(trace, position: int = -1) -> list[Stage]:
    """The forward pass as a list of stages, each cut to what `position` (a query / a prediction)
    computes: its row of every (T, ·) tensor, and for attention its row of every head's map.
    Takes a :class:`Trace` (GPT) or a :class:`~onehot2gpt.lookinside_bert.BertTrace`."""
    if not hasattr(trace, "layers") or not hasattr(trace, "ids"):
        raise TypeError(f"stages: trace must be a Trace, got {type(trace).__name__}: pass trace_gpt(model, ids)")
    T = trace.ids.numel()
    p = _check_position(position, T)
    from .lookinside_bert import BertTrace, bert_stages

    if isinstance(trace, BertTrace):
        return bert_stages(trace, p)
    D, V = trace.x0.size(-1), trace.logits.size(-1)
    td, tv = f"(T={T}, D={D})", f"(T={T}, V={V})"
    out = [
        Stage("token embedding", "E[id]: the token's row of the embedding table", trace.tok_emb[p], td),
        Stage("position embedding", "P[t]: the position's row", trace.pos_emb[p], td),
        Stage("input x", "x = E[id] + P[t]", trace.x0[p], td),
    ]
    for l, s in enumerate(trace.layers):
        rows = [("LayerNorm 1", "(x − mean) / std · γ + β", s["ln1"][p], td)]
        rows += attention_rows(s, p, T, D, "−inf for keys after the query (and switched-off tokens)")
        rows += [
            ("residual 1", "x + attention", s["resid_mid"][p], td),
            ("LayerNorm 2", "(x − mean) / std · γ + β", s["ln2"][p], td),
            ("MLP hidden", "GELU(LN(x) W_1 + b_1)", s["mlp_hidden"][p], f"(T={T}, d_ff={s['mlp_hidden'].size(-1)})"),
            ("MLP out", "hidden W_2 + b_2", s["mlp_out"][p], td),
            ("residual 2", "x + MLP", s["resid_post"][p], td),
        ]
        out += [Stage(f"layer {l} · {name}", formula, value, shape, l) for name, formula, value, shape in rows]
    return out + [
        Stage("final LayerNorm", "LN_f(x)", trace.final_ln[p], td),
        Stage("logits", "LN_f(x) Eᵀ: a score per vocabulary entry (tied embedding)", trace.logits[p], tv),
        Stage("temperature", f"logits / {trace.temperature:g}", trace.scaled_logits[p], tv),
        Stage("probabilities", "softmax: the next-token distribution", trace.probs[p], tv),
    ]


# -- the logit lens ---------------------------------------------------------------------------------


def read_out(x, gain, bias, embedding, eps: float = 1e-5) -> torch.Tensor:
    """Read residual vectors the way the course GPT reads its last one: the final LayerNorm (its
    `gain` and `bias`), scores against every row of the tied token `embedding`, a softmax.
    x (…, D), gain and bias (D,), embedding (V, D) → probabilities (…, V)."""
    h = F.layer_norm(x, (x.size(-1),), gain, bias, eps)
    return torch.softmax(h @ embedding.T, dim=-1)


@dataclass
class LensRow:
    """What the residual stream after one layer predicts, read through the final LN and output layer."""

    layer: str  # "embedding", "layer 0", …
    top: list[tuple[int, float]]  # [(token id, probability)], most likely first
    target_prob: float | None  # the probability of the given next token, if any
    target_rank: int | None  # its rank (0 = top)


@torch.no_grad()
def logit_lens(
    model, ids, position: int = -1, k: int = 5, target: int | None = None, trace: Trace | None = None
) -> list[LensRow]:
    """nostalgebraist's logit lens: apply the final LayerNorm and the output layer to the residual
    stream after the embedding and after every layer, at `position`, and keep the top `k` next
    tokens (and the probability and rank of `target`, e.g. the token that really comes next). The
    last row is the model's own prediction."""
    check_int(k, "k", 1, fix="how many candidates per layer")
    check_gpt(model)
    check_finite_weights(model, "logit_lens")
    trace = trace_gpt(model, ids) if trace is None else trace
    position = _check_position(position, trace.ids.numel())
    V = model.config.vocab_size
    if target is not None:
        check_int(target, "target", 0, V - 1, fix="a token id, or None")
    n = model.final_norm
    if model.lm_head.bias is not None:
        raise ValueError("the lens reads through a tied output layer without bias (the course GPT's)")
    rows = []
    for i, x in enumerate(trace.residuals):
        probs = read_out(x[position], n.weight, n.bias, model.lm_head.weight, n.eps).float().cpu()
        values, order = probs.topk(min(k, V))
        t_prob = None if target is None else float(probs[target])
        t_rank = None if target is None else int((probs > probs[target]).sum())  # tokens more likely than it
        top = list(zip(order.tolist(), values.tolist()))
        rows.append(LensRow("embedding" if i == 0 else f"layer {i - 1}", top, t_prob, t_rank))
    return rows


# -- interventions ------------------------------------------------------------------------------------


@dataclass
class Intervention:
    """The model with and without parts switched off: the mean next-token loss over the sequence
    and the top predictions at one position."""

    loss_before: float
    loss_after: float
    top_before: list[tuple[int, float]]
    top_after: list[tuple[int, float]]
    switched_off: dict
    position: int

    @property
    def loss_change(self) -> float:
        return self.loss_after - self.loss_before


def next_token_loss(trace: Trace) -> float:
    """The mean next-token cross-entropy (nats) over a traced sequence: position t predicts ids[t + 1]."""
    if trace.ids.numel() < 2:
        raise ValueError("the loss needs at least two tokens (a prediction and the token that follows)")
    return F.cross_entropy(trace.logits[:-1].float(), trace.ids[1:].to(trace.logits.device)).item()


def intervene(model, ids, position: int = -1, k: int = 5, *, heads_off=(), mlps_off=(), tokens_off=()) -> Intervention:
    """Switch parts off (see :func:`trace_gpt`) and compare with the model as it is: mean
    next-token cross-entropy over the sequence (nats) and the top-k predictions at `position`."""
    check_int(k, "k", 1, fix="how many top predictions to compare")
    check_gpt(model)
    check_finite_weights(model, "intervene")
    before = trace_gpt(model, ids)
    after = trace_gpt(model, ids, heads_off=heads_off, mlps_off=mlps_off, tokens_off=tokens_off)
    position = _check_position(position, before.ids.numel())

    def top(trace):
        values, order = trace.probs[position].float().cpu().topk(min(k, trace.probs.size(-1)))
        return list(zip(order.tolist(), values.tolist()))

    return Intervention(
        next_token_loss(before), next_token_loss(after), top(before), top(after), after.switched_off, position
    )


# -- induction heads ----------------------------------------------------------------------------------


def repeated_random_tokens(
    n: int, length: int, vocab_size: int, generator: torch.Generator | None = None, prefix: int = 0
) -> torch.Tensor:
    """(n, prefix + 2·length) token ids: `prefix` random tokens, then `length` random tokens twice.

    On the second copy a model that has learned induction (find the earlier occurrence of the
    current token, predict what followed it) predicts every token; nothing can predict the first."""
    for name, v in (("n", n), ("length", length), ("vocab_size", vocab_size)):
        check_int(v, name, 1)
    check_int(prefix, "prefix", 0)
    head = torch.randint(0, vocab_size, (n, prefix), generator=generator)
    seq = torch.randint(0, vocab_size, (n, length), generator=generator)
    return torch.cat([head, seq, seq], dim=1)


def _check_weights(weights) -> torch.Tensor:
    w = check_tensor(weights, "weights", floating=True, fix="one layer's attention maps, (B, H, T, T) or (H, T, T)")
    if w.dim() == 3:
        w = w[None]
    if w.dim() != 4 or w.size(-1) != w.size(-2):
        raise ValueError(f"attention weights must be (B, H, T, T) or (H, T, T); got shape {tuple(w.shape)}")
    if w.is_floating_point() and not bool(torch.isfinite(w).all()):
        raise ValueError(
            f"weights: the attention maps hold {int((~torch.isfinite(w)).sum())} NaN or infinite values; a model "
            f"with NaN weights gives NaN maps: check the model (its parameters must be finite)"
        )
    return w.float()


def induction_scores(weights, length: int, prefix: int = 0) -> torch.Tensor:
    """Per head, the mean attention that a token in the second copy pays to the token right after
    its earlier occurrence (query t → key t − length + 1), over the second copy and the batch.

    weights: one layer's (B, H, T, T) or (H, T, T), T = prefix + 2·length → (H,) scores in [0, 1]
    (an induction head scores near 1; attention spread evenly over t + 1 keys scores ≈ 1 / (t + 1))."""
    w = _check_weights(weights)
    T = w.size(-1)
    if T != prefix + 2 * length:
        raise ValueError(f"the maps cover {T} positions but prefix + 2·length = {prefix + 2 * length}")
    queries = torch.arange(prefix + length, T)  # the second copy
    return w[:, :, queries, queries - length + 1].mean(dim=(0, 2))


def previous_token_scores(weights) -> torch.Tensor:
    """Per head, the mean attention a token pays to the token just before it (query t → key t − 1):
    the first half of an induction circuit. (B, H, T, T) or (H, T, T) → (H,)."""
    w = _check_weights(weights)
    t = torch.arange(1, w.size(-1))
    return w[:, :, t, t - 1].mean(dim=(0, 2))


@torch.no_grad()
def per_position_loss(model, ids) -> torch.Tensor:
    """Cross-entropy (nats) of predicting ids[:, t + 1] from ids[:, :t + 1], per position, averaged
    over the batch: (B, T) ids → (T − 1,)."""
    ids = as_ids(ids, model.config.vocab_size, dims=(1, 2))
    ids = ids[None] if ids.dim() == 1 else ids
    if ids.size(1) < 2:
        raise ValueError("need at least two tokens per sequence")
    logits = model(ids[:, :-1]).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), ids[:, 1:].reshape(-1), reduction="none")
    return loss.view(ids.size(0), -1).mean(0)


def random_trigram_table(vocab_size: int, choices: int = 2, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random second-order Markov chain: (V, V, choices) next-token ids, `choices` possible next
    tokens for every pair of previous tokens."""
    check_int(vocab_size, "vocab_size", 1)
    check_int(choices, "choices", 1)
    return torch.randint(0, vocab_size, (vocab_size, vocab_size, choices), generator=generator)


def text_with_repeats(
    n: int,
    length: int,
    table: torch.Tensor,
    generator: torch.Generator | None = None,
    repeat: tuple[int, int] = (6, 12),
    noise: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Toy "text" for growing induction heads: (n, length) sequences drawn from the second-order
    chain `table` (see :func:`random_trigram_table`), a fraction `noise` of tokens replaced at random,
    and in each sequence one stretch of r tokens (r drawn from `repeat`, both ends included) copied
    right after itself at a random place. Returns (ids, copied): copied (n, length) is True where a
    token is a copy of the token r places before. The chain rewards a previous-token head; the
    repeats, of random length and place, reward looking up what followed the current token last
    time: an induction head."""
    if not isinstance(table, torch.Tensor) or table.dim() != 3 or table.size(0) != table.size(1):
        raise ValueError("table must be a (V, V, choices) tensor from random_trigram_table")
    lo, hi = repeat
    if not (isinstance(length, int) and 1 <= lo <= hi and 2 * hi <= length):
        raise ValueError(
            f"a repeated stretch of up to {hi} tokens, twice, must fit in length={length}; "
            f"give repeat=(low, high) with 1 ≤ low ≤ high ≤ length / 2"
        )
    check_int(n, "n", 1)
    check_number(noise, "noise", 0, 1, fix="the fraction of tokens replaced at random")
    V, _, choices = table.shape
    x = torch.zeros(n, length, dtype=torch.long)
    x[:, :2] = torch.randint(0, V, (n, 2), generator=generator)
    for t in range(2, length):
        pick = torch.randint(0, choices, (n,), generator=generator)
        x[:, t] = table[x[:, t - 2], x[:, t - 1], pick]
        swap = torch.rand(n, generator=generator) < noise
        x[:, t] = torch.where(swap, torch.randint(0, V, (n,), generator=generator), x[:, t])
    r = torch.randint(lo, hi + 1, (n, 1), generator=generator)
    start = (torch.rand(n, 1, generator=generator) * (length - 2 * r + 1)).long()  # 0 … length − 2r
    pos = torch.arange(length)[None]
    copied = (pos >= start + r) & (pos < start + 2 * r)
    return x.gather(1, torch.where(copied, pos - r, pos)), copied


# -- BERT: the same walk, in onehot2gpt.lookinside_bert ------------------------------------------------


def is_course_bert(model) -> bool:
    """Whether `model` is a course BERT with its MLM head (BertForPreTraining), which trace_bert reads."""
    return all(hasattr(model, n) for n in ("bert", "mlm", "config")) and hasattr(model.bert, "encoder")


def trace_model(model, ids, *, temperature: float = 1.0):
    """:func:`trace_gpt` for a course GPT, :func:`~onehot2gpt.lookinside_bert.trace_bert` for a course
    BERT with its MLM head."""
    from .lookinside_bert import trace_bert

    if isinstance(model, torch.nn.Module):
        check_finite_weights(model, "trace_model")
    return (
        trace_bert(model, ids, temperature=temperature)
        if is_course_bert(model)
        else trace_gpt(model, ids, temperature=temperature)
    )
