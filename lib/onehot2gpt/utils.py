"""Small helpers every notebook uses: seeding, thread count, showing library source."""

from __future__ import annotations

import inspect
import os
import random

import numpy as np
import torch


def set_seed(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and torch; return a torch.Generator seeded the same way."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def set_threads(n: int | None = None) -> int:
    """Use `n` CPU threads for torch (default: ONEHOT2GPT_THREADS or all cores, at most 2 so that
    notebook outputs match those stored, which were made on 2 cores). Returns the count used."""
    if n is None:
        n = int(os.environ.get("ONEHOT2GPT_THREADS", min(2, os.cpu_count() or 1)))
    if n < 1:
        raise ValueError(f"thread count must be at least 1, got {n}")
    torch.set_num_threads(n)
    return n


def show_source(obj) -> None:
    """Print the source code of a library function or class (a plain-text `obj??`)."""
    try:
        print(inspect.getsource(obj))
    except (TypeError, OSError) as exc:
        raise TypeError(f"cannot show the source of {obj!r}: pass a function or class "
                        f"defined in Python ({exc})") from None
