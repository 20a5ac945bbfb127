"""Scaled dot-product attention, its masks, and multi-head attention.

Taught in notebook 05 (and used by every Transformer after it: notebooks 06–10). Follows
Vaswani et al., "Attention Is All You Need" (2017), section 3.2:

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Masks are boolean and mean what PyTorch's ``F.scaled_dot_product_attention`` means by them:
``True`` = "this query may attend to this key". They broadcast against the scores
``(B, H, T_q, T_k)``, so a padding mask is ``(B, 1, 1, T_k)`` and a causal mask ``(T_q, T_k)``.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from .utils import as_ids, check_int, check_tensor, copy_weights


def scaled_dot_product_attention(q, k, v, mask=None, dropout: float = 0.0, training: bool = False):
    """(…, T_q, d_k), (…, T_k, d_k), (…, T_k, d_v) → output (…, T_q, d_v), weights (…, T_q, T_k).

    `mask` (bool, broadcastable to the weights) keeps the True positions. A query whose keys are
    all masked gets zero weights and a zero output instead of NaNs.

    Example:
        >>> q = k = v = torch.eye(2)
        >>> out, w = scaled_dot_product_attention(q, k, v)
        >>> w.sum(-1)
        tensor([1., 1.])
    """
    q, k, v = (check_tensor(x, n, floating=True, fix="(…, T, d) tensors") for x, n in zip((q, k, v), "qkv"))
    if q.size(-1) != k.size(-1):
        raise ValueError(f"queries and keys need the same last dimension d_k; got {q.size(-1)} and {k.size(-1)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"keys and values need the same length T_k; got {k.size(-2)} and {v.size(-2)}")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (…, T_q, T_k)
    if mask is not None:
        mask = _as_bool_mask(mask)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a query whose keys are all masked: zero weights, not softmax(all −∞) = NaN
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    if dropout > 0.0 and training:
        weights = F.dropout(weights, p=dropout)
    return weights @ v, weights


def _as_bool_mask(mask):
    if mask.dtype != torch.bool:
        raise TypeError(
            f"masks are boolean (True = may attend); got dtype {mask.dtype}. "
            "Build one with causal_mask() or padding_mask(), or compare: mask = ids != pad_id"
        )
    return mask


def causal_mask(t_q: int, t_k: int | None = None, device=None):
    """(T_q, T_k) bool, True on and below the diagonal: query i sees keys 0…i (the look-ahead mask).

    With T_k > T_q (queries are the last T_q of T_k positions, as with a cache), query i sees keys
    0 … i + T_k − T_q.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    t_k = t_q if t_k is None else t_k
    for name, t in (("t_q", t_q), ("t_k", t_k)):  # a SymInt is an int under torch.compile
        if isinstance(t, bool) or not isinstance(t, (numbers.Integral, torch.SymInt)):
            raise TypeError(f"causal_mask: {name} must be an int (a number of positions), got {type(t).__name__} {t!r}")
    if t_q < 1 or t_k < t_q:
        raise ValueError(f"causal_mask needs 1 ≤ T_q ≤ T_k; got T_q={t_q}, T_k={t_k}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def _check_order(order) -> torch.Tensor:
    """A factorization order as a 1-D long tensor, or an error naming what is wrong with it: whole
    numbers only (1.9 is never truncated into 1), each position 0 … T−1 once."""
    fix = "an order lists the positions 0 … T−1, each once, as whole numbers (e.g. [2, 0, 1])"
    if isinstance(order, torch.Tensor):
        if order.is_floating_point() or order.is_complex() or order.dtype == torch.bool:
            raise TypeError(f"permutation_mask: order has dtype {order.dtype}; {fix}")
    elif isinstance(order, (list, tuple, range)):
        for i, v in enumerate(order):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                rounding = " (a float is never rounded)" if isinstance(v, float) else ""
                raise TypeError(f"permutation_mask: order[{i}] is {type(v).__name__} {v!r}{rounding}; {fix}")
        order = torch.tensor([int(v) for v in order], dtype=torch.long)
    else:
        raise TypeError(f"permutation_mask: order must be a list or a 1-D tensor, got {type(order).__name__}; {fix}")
    order = order.long()
    if order.dim() != 1 or not torch.equal(order.sort().values, torch.arange(order.numel())):
        raise ValueError(
            f"permutation_mask: order must be a permutation of 0 … T−1 (each position once), got {order.tolist()}; {fix}"
        )
    if order.numel() == 0:
        raise ValueError(f"permutation_mask: order is empty; {fix}")
    return order


def permutation_mask(order, include_self: bool = False):
    """XLNet's attention mask for one factorization order → (T, T) bool, True where position i may
    read position j: j comes before i in `order` (a permutation of 0 … T−1, the order in which
    tokens are predicted). The tokens stay where they are; only who may see whom changes.

    `include_self=False` is the *query stream* (predicting x_i must not see x_i itself);
    `include_self=True` the *content stream*, which also sees itself. The identity order gives the
    causal mask (with self) or its strictly lower part (without).

    Example:
        >>> permutation_mask([2, 1, 3, 0]).int()     # x2 first, then x1, x3, x0
        tensor([[0, 1, 1, 1],
                [0, 0, 1, 0],
                [0, 0, 0, 0],
                [0, 1, 1, 0]], dtype=torch.int32)
    """
    order = _check_order(order)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel())  # rank[i]: when position i is predicted
    before = rank[None, :] < rank[:, None]  # [i, j]: j is predicted before i
    return before | torch.eye(order.numel(), dtype=torch.bool) if include_self else before


def padding_mask(ids, pad_id: int = 0):
    """(B, T) token ids → (B, 1, 1, T) bool, False at padding keys, ready to broadcast over heads
    and queries."""
    ids = as_ids(ids, dims=2, allow_empty=True)
    return (ids != pad_id)[:, None, None, :]


def split_heads(x, n_heads: int):
    """(B, T, D) → (B, H, T, D/H): each head gets its own slice of the features."""
    B, T, D = x.shape
    check_int(n_heads, "n_heads", 1, fix="the number of attention heads")
    if D % n_heads:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, hs)


def merge_heads(x):
    """(B, H, T, hs) → (B, T, H·hs): the inverse of split_heads (concatenate the heads)."""
    check_tensor(x, "x", dims=4, fix="merge_heads takes split_heads' output (B, H, T, hs)")
    B, H, T, hs = x.shape
    return x.transpose(1, 2).reshape(B, T, H * hs)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with the Q, K, V projections packed in one (3D, D) matrix.

    The packing is `torch.nn.MultiheadAttention`'s (``in_proj_weight`` = [W^Q; W^K; W^V]), so
    self-attention costs one matmul for all three, and weights copy over one to one
    (``TORCH_MHA_KEYS``). forward(query (B, T_q, D), key=None, value=None, mask=None,
    need_weights=False) → (output (B, T_q, D), weights (B, H, T_q, T_k) or None). Without
    weights it takes PyTorch's fused ``F.scaled_dot_product_attention``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_int(n_heads, "n_heads", 1, fix="the number of attention heads")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O

    def project(self, query, key=None, value=None):
        """Q, K, V, each (B, H, T, hs). Self-attention when key and value are None."""
        D = self.d_model
        if key is None and value is None:
            q, k, v = self.in_proj(query).split(D, dim=-1)
        else:
            key = query if key is None else key
            value = key if value is None else value
            w, b = self.in_proj.weight, self.in_proj.bias
            bq, bk, bv = (None, None, None) if b is None else b.split(D)
            q = F.linear(query, w[:D], bq)
            if key is value:  # encoder–decoder attention: K and V from the same memory
                k, v = F.linear(key, w[D:], None if b is None else b[D:]).split(D, dim=-1)
            else:
                k, v = F.linear(key, w[D : 2 * D], bk), F.linear(value, w[2 * D :], bv)
        return split_heads(q, self.n_heads), split_heads(k, self.n_heads), split_heads(v, self.n_heads)

    def forward(self, query, key=None, value=None, mask=None, need_weights: bool = False):
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(f"query must be (B, T, {self.d_model}); got {tuple(query.shape)}")
        q, k, v = self.project(query, key, value)
        p = self.dropout if self.training else 0.0
        if mask is not None:
            mask = _as_bool_mask(mask)
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, p, self.training)
        else:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        return self.out_proj(merge_heads(out)), weights


# Our parameter name → torch.nn.MultiheadAttention's. One map, used by load_torch_mha and its tests.
TORCH_MHA_KEYS = {
    "in_proj.weight": "in_proj_weight",
    "in_proj.bias": "in_proj_bias",
    "out_proj.weight": "out_proj.weight",
    "out_proj.bias": "out_proj.bias",
}


def load_torch_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy a `torch.nn.MultiheadAttention`'s weights into ours (same d_model and heads)."""
    if (theirs.embed_dim, theirs.num_heads) != (ours.d_model, ours.n_heads):
        raise ValueError(
            f"shape mismatch: d_model, heads = {theirs.embed_dim}, {theirs.num_heads} (torch's), ours {ours.d_model}, {ours.n_heads}"
        )
    if not theirs._qkv_same_embed_dim:
        raise ValueError("only MultiheadAttention with kdim = vdim = embed_dim can be copied")
    source = theirs.state_dict()
    return copy_weights(ours, {k: source[v] for k, v in TORCH_MHA_KEYS.items()}, what="torch's weights")
