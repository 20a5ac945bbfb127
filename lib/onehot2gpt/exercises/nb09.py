"""Checks for notebook 09 (GPT and decoding)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, describe, rand_int


def _distinct_logits(gen: torch.Generator, max_vocab: int = 12):
    """Logits (V,) or (B, V) with no two equal in a row, so "the k largest" has one answer."""
    v = rand_int(gen, 3, max_vocab + 1)
    shape = (v,) if rand_int(gen, 0, 2) else (rand_int(gen, 1, 4), v)
    rows = torch.stack([torch.randperm(v, generator=gen) for _ in range(shape[0] if len(shape) == 2 else 1)])
    logits = (rows + 0.9 * torch.rand(rows.shape, generator=gen)) * (0.3 + 1.2 * torch.rand(1, generator=gen))
    return logits.reshape(shape)


def _filter_outcome(fn: Callable, name: str) -> Callable:
    """Wrap a filter so that checks compare which tokens it keeps (by id), then the kept logits.

    Comparing the -inf tensors directly would report "nan" differences; a list of kept ids says
    what went wrong. A result that is not a tensor shaped like the logits is reported as such.
    """
    def outcome(logits, arg):
        out = fn(logits, arg)
        if not isinstance(out, torch.Tensor) or out.shape != logits.shape:
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise TypeError(f"{name} returned {got}; return the filtered logits: a tensor shaped like "
                            f"`logits` {tuple(logits.shape)}")
        kept = out > float("-inf")  # NaN counts as removed
        rows = kept.reshape(-1, kept.shape[-1]).tolist()
        ids = [[i for i, k in enumerate(row) if k] for row in rows]
        listed = (f"keeps token ids {ids[0]}" if logits.dim() == 1 else
                  "keeps " + "; ".join(f"row {b}: token ids {r}" for b, r in enumerate(ids)))
        return {"kept tokens": listed, "kept logits": out.detach().double().masked_fill(~kept, 0.0)}
    return outcome


def check_top_k_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), k) → logits with all but the k largest per row set to -inf."""
    from ..sampling import filter_top_k

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {describe(fn)}")

    def make(gen):
        logits = _distinct_logits(gen)
        return logits, rand_int(gen, 1, logits.shape[-1] + 1)

    check_function(_filter_outcome(fn, "top_k_filter"), _filter_outcome(filter_top_k, "filter_top_k"),
                   make, name="top_k_filter", trials=12,
                   hint="keep exactly the k largest logits of each row (the last dimension) and set every "
                        "other entry to float('-inf'), leaving the kept logits unchanged: "
                        "torch.topk(logits, k, dim=-1).values[..., -1:] is each row's k-th largest, and "
                        "logits < that threshold marks the rest. Return a new tensor shaped like logits")


def check_top_p_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), p) → logits with -inf outside the smallest most-likely set
    of probability mass ≥ p (the nucleus)."""
    from ..sampling import filter_top_p

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {describe(fn)}")
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

    check_function(_filter_outcome(fn, "top_p_filter"), _filter_outcome(filter_top_p, "filter_top_p"),
                   make, name="top_p_filter", trials=12,
                   hint="turn the logits into probabilities (softmax over the last dimension), sort them "
                        "from most to least likely and take the running sum; keep a token while the tokens "
                        "MORE likely than it add up to less than p. So the token whose probability takes the "
                        "sum to p or beyond is kept too, and the most likely token always is. Set the others "
                        "to float('-inf') in the original order (scatter back through the sort indices), "
                        "leaving the kept logits unchanged")


def check_kv_cache_step(fn: Callable) -> None:
    """Exercise: (q_new, k_new, v_new (B, H, 1, hs), k_cache, v_cache (B, H, T, hs)) →
    (out (B, H, 1, hs), k_all, v_all (B, H, T + 1, hs)): one attention step with a key/value cache."""
    from ..attention import scaled_dot_product_attention

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {describe(fn)}")
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
            raise TypeError(f"kv_cache_step returned {describe(got)}; return three tensors: "
                            f"(out, k_all, v_all)")
        return dict(zip(("out", "k_all", "v_all"), got))

    check_function(student, reference, make, name="kv_cache_step", trials=8,
                   hint="append the new key and value after the cached ones along the time axis: "
                        "k_all = torch.cat([k_cache, k_new], dim=2), the same for v (this works for an "
                        "empty cache, T = 0, too); then scores = q_new @ k_all.transpose(-2, -1) / "
                        "sqrt(hs), shape (B, H, 1, T + 1); out = softmax(scores, dim=-1) @ v_all. No mask: "
                        "the newest token may see every earlier one. Return (out, k_all, v_all)")
