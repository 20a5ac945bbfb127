"""Benchmark: greedy generation with and without the key/value cache (``sampling.generate``).

The model is the course's character GPT, ``GPTConfig.char`` (4 layers, 4 heads, 128 wide,
65-character vocabulary, ≈0.8M parameters), randomly initialised (seed 0: the speed does not
depend on the weights), but with ``max_len=320`` instead of 64 positions, so that the prompt
(8 characters) and all 256 new ones fit in the context. That makes the comparison the textbook
one: without the cache step t runs the model on all 8 + t tokens so far, with it on the newest
token alone, reading the cached keys and values of the others. (With max_len 64 the uncached
path would crop to a 64-token window, so every step would cost the same fixed 64-token forward,
and the cache, rebuilt on each cropped window, would help far less.) ``--preset small`` uses
``GPTConfig.small`` (256 wide, no dropout, the same 320 positions) instead.

Batch 1, ``torch.no_grad`` (``generate`` is decorated), 2 threads. Each timing is one whole
``generate`` call; the two modes alternate, after one warm-up call each, and the median of
``--repeats`` is reported. Both modes must produce the same token sequence (asserted).

Run from the repository root::

    python bench/generate.py [--threads 2] [--repeats 5] [--new-tokens 256] [--preset char|small] [--smoke]

The last line is one JSON object with ``cached_tok_s``, ``uncached_tok_s`` (new tokens per
second), ``speedup`` (cached / uncached), ``cached_ms``, ``uncached_ms``, ``config`` and
``new_tokens``. ``--smoke`` uses ``GPTConfig.tiny`` and 16 new tokens, to check the script, not
the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.sampling import generate
from onehot2gpt.utils import set_threads

PROMPT_LEN = 8


def timed(model, prompt, new_tokens, use_cache):
    start = time.perf_counter()
    out = generate(model, prompt, new_tokens, greedy=True, use_cache=use_cache, on_crop="error")
    return time.perf_counter() - start, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--preset", choices=["char", "small"], default="char")
    p.add_argument("--smoke", action="store_true", help="a tiny model and 16 tokens: checks the script")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    new_tokens, repeats = (16, 1) if args.smoke else (args.new_tokens, args.repeats)
    max_len = max(320, PROMPT_LEN + new_tokens)  # room for the prompt and every new token
    if args.smoke:
        config = GPTConfig.tiny(vocab_size=65, max_len=max_len)
    elif args.preset == "small":
        config = GPTConfig.small(vocab_size=65, max_len=max_len, dropout=0.0)
    else:
        config = GPTConfig.char(vocab_size=65, max_len=max_len)

    torch.manual_seed(0)
    model = GPT(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT_LEN))
    _, cached = timed(model, prompt, new_tokens, True)  # warm-up, and the two outputs
    _, uncached = timed(model, prompt, new_tokens, False)
    if not torch.equal(cached, uncached):
        first = int((cached != uncached).nonzero()[0, 1]) - PROMPT_LEN
        raise AssertionError(f"cached and uncached greedy decoding differ from new token {first} on")
    times = {True: [], False: []}
    for _ in range(repeats):
        for use_cache in (True, False):
            seconds, out = timed(model, prompt, new_tokens, use_cache)
            assert torch.equal(out, cached)
            times[use_cache].append(seconds)
    c, u = statistics.median(times[True]), statistics.median(times[False])
    print(
        f"{new_tokens} new tokens: cached {1000 * c:.1f} ms ({new_tokens / c:.0f} tok/s), "
        f"uncached {1000 * u:.1f} ms ({new_tokens / u:.0f} tok/s), speedup {u / c:.2f}x",
        flush=True,
    )
    result = {
        "cached_tok_s": round(new_tokens / c, 1),
        "uncached_tok_s": round(new_tokens / u, 1),
        "speedup": round(u / c, 2),
        "cached_ms": round(1000 * c, 1),
        "uncached_ms": round(1000 * u, 1),
        "config": config.to_dict(),
        "preset": "tiny" if args.smoke else args.preset,
        "params": sum(p.numel() for p in model.parameters()),
        "prompt_tokens": PROMPT_LEN,
        "new_tokens": new_tokens,
        "batch": 1,
        "greedy": True,
        "identical": True,
        "repeats": repeats,
        "threads": threads,
        "torch": torch.__version__,
        "smoke": args.smoke,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
