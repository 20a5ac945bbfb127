"""Benchmark: our MultiHeadAttention against torch.nn.MultiheadAttention, forward + backward.

Self-attention on a (batch 8, T, d_model 256) input with 8 heads, for T = 64, 256 and 1024, in
training mode (dropout 0) with weights copied from the torch module (``load_torch_mha``), so
both compute the same function; neither returns attention weights (torch gets
``need_weights=False``, ours its default), so both may take PyTorch's fused
``F.scaled_dot_product_attention``. Each timing is the median over repeats of one
forward + backward pass, after warm-up; the two modules alternate so that a busy machine slows
both alike. ``max_abs_diff`` is the largest |ours − torch| over outputs and input gradients.

Run from the repository root::

    python bench/attention.py [--threads 2] [--repeats 15] [--smoke]

Prints one line per T and, as the last line, one JSON object with ``ours_ms_T{T}``,
``torch_ms_T{T}``, ``ratio_T{T}`` (ours / torch; the target is ≤ 1.1) and ``max_abs_diff``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from onehot2gpt.attention import MultiHeadAttention, load_torch_mha
from onehot2gpt.utils import set_threads
from torch import nn


def step(module, x, ours: bool):
    x.grad = None
    out = module(x)[0] if ours else module(x, x, x, need_weights=False)[0]
    out.sum().backward()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, not the numbers")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    lengths, batch, d_model, heads, repeats = (64, 256, 1024), 8, 256, 8, args.repeats
    if args.smoke:
        lengths, batch, repeats = (16, 32), 2, 2

    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, heads, batch_first=True).train()
    ours = load_torch_mha(MultiHeadAttention(d_model, heads), theirs).train()
    result, max_diff = {}, 0.0
    for T in lengths:
        x = torch.randn(batch, T, d_model, requires_grad=True)
        a = step(ours, x, True).detach()
        ga = x.grad.clone()
        b = step(theirs, x, False).detach()
        max_diff = max(max_diff, (a - b).abs().max().item(), (ga - x.grad).abs().max().item())
        times = {"ours": [], "torch": []}
        for _ in range(2):  # warm-up
            step(ours, x, True), step(theirs, x, False)
        for _ in range(repeats):
            for name, module in (("ours", ours), ("torch", theirs)):
                start = time.perf_counter()
                step(module, x, name == "ours")
                times[name].append(1000 * (time.perf_counter() - start))
        o, t = statistics.median(times["ours"]), statistics.median(times["torch"])
        result[f"ours_ms_T{T}"], result[f"torch_ms_T{T}"] = round(o, 2), round(t, 2)
        result[f"ratio_T{T}"] = round(o / t, 3)
        print(f"T={T:5d}: ours {o:8.2f} ms   torch {t:8.2f} ms   ratio {o / t:.3f}", flush=True)
    result["max_abs_diff"] = float(f"{max_diff:.3g}")
    result.update(
        batch=batch, d_model=d_model, n_heads=heads, threads=threads, repeats=repeats, torch=torch.__version__
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
