"""Small helpers every notebook uses: seeding, thread count, showing library source, running a
model in eval mode (:func:`evaluating`), copying weights between models (:func:`copy_weights`);
and the checks the whole library shares: token ids (:func:`as_ids`), a finite training loss
(:func:`check_finite_loss`), and finite weights (:func:`check_finite_weights`)."""

from __future__ import annotations

import inspect
import math
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


def set_seed(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and torch; return a torch.Generator seeded the same way."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's global RNG seeded to `seed`, and give the caller's RNG state back
    afterwards: library code that must repeat itself (a probe's initial weights, a model of an
    experiment) never changes the randomness of the caller's next cell.

    Example:
        >>> with seeded(0):
        ...     a = torch.rand(1)
        >>> with seeded(0):
        ...     b = torch.rand(1)
        >>> bool(a == b)
        True
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run a block with `model` in eval mode (dropout off) and without gradients, then give every
    submodule back the train/eval state it had, even when the block raises.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
        >>> with evaluating(net):
        ...     net.training, net[1].training, torch.is_grad_enabled()
        (False, False, False)
        >>> net.training, net[1].training, torch.is_grad_enabled()
        (True, True, True)
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"evaluating takes a torch.nn.Module (a model), got {type(model).__name__}")
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        for module, mode in modes:
            module.training = mode


def copy_weights(
    target: torch.nn.Module,
    source,
    *,
    problems: list[str] | tuple[str, ...] = (),
    what: str = "the weights",
    hint: str = "",
    error: type[Exception] = ValueError,
) -> torch.nn.Module:
    """Copy `source` (a model, or a dict {parameter name: tensor}) into the parameters of `target`
    with the same names → `target`. The one weight-copy check of the library: first the names and
    shapes must agree exactly (a tied weight counts once, as ``named_parameters`` lists it);
    otherwise `error` lists every missing, unexpected and mis-shaped tensor, with the caller's own
    `problems` first and then `hint`, and nothing is copied, so a model is never half-filled.
    Values are converted to each parameter's dtype and device.

    Example:
        >>> a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
        >>> copy_weights(b, a) is b and torch.equal(a.weight, b.weight)
        True
        >>> copy_weights(torch.nn.Linear(4, 2), a)
        Traceback (most recent call last):
        ...
        ValueError: the weights do not fit this Linear: weight: shape (2, 3) in the weights, (2, 4) in the model
    """
    if not isinstance(target, torch.nn.Module):
        raise TypeError(f"target must be a torch.nn.Module to copy weights into, got {type(target).__name__}")
    if isinstance(source, torch.nn.Module):
        weights = dict(source.named_parameters())
    elif isinstance(source, dict):
        weights = dict(source)
    else:
        raise TypeError(
            f"source must be a torch.nn.Module or a dict {{parameter name: tensor}}, got {type(source).__name__}"
        )
    expected = dict(target.named_parameters())
    problems = list(problems)
    problems += [f"missing {k}" for k in expected if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in expected]
    problems += [
        f"{k}: shape {tuple(weights[k].shape)} in {what}, {tuple(v.shape)} in the model"
        for k, v in expected.items()
        if k in weights and tuple(weights[k].shape) != tuple(v.shape)
    ]
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise error(f"{what} do not fit this {type(target).__name__}: {shown}{'. ' + hint if hint else ''}")
    with torch.no_grad():
        for k, p in expected.items():
            p.copy_(weights[k])
    return target


def set_threads(n: int | None = None) -> int:
    """Use `n` CPU threads for torch (default: ONEHOT2GPT_THREADS, else all cores but at most 2).
    Returns the count used. The notebooks' stored outputs were made with ONEHOT2GPT_THREADS=1, as
    the test suite runs them; another count can change the last digits of some trained results."""
    if n is None:
        n = int(os.environ.get("ONEHOT2GPT_THREADS", min(2, os.cpu_count() or 1)))
    torch.set_num_threads(check_int(n, "n", 1, fix="the number of CPU threads (or ONEHOT2GPT_THREADS)"))
    return n


def show_source(obj) -> None:
    """Print the source code of a library function or class (a plain-text `obj??`)."""
    try:
        print(inspect.getsource(obj))
    except (TypeError, OSError) as exc:
        raise TypeError(
            f"cannot show the source of {obj!r}: pass a function or class defined in Python ({exc})"
        ) from None


class InvalidIds(ValueError, TypeError, IndexError):
    """Token ids that cannot be used: not whole numbers, wrong shape, empty, or out of range (a
    ValueError, a TypeError and an IndexError at once: any of the three catches it)."""


def _first_non_integer(values) -> tuple[tuple[int, ...], object] | None:
    """Position and value of the first item of a nested list that is not an int (bools count as
    not), or None."""
    stack = [((), values)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(((*where, i), x) for i, x in reversed(list(enumerate(item))))
        elif isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            return where, item
    return None


def as_ids(
    ids,
    vocab_size: int | None = None,
    *,
    dims: int | tuple[int, ...] | None = None,
    name: str = "ids",
    allow_empty: bool = False,
) -> torch.Tensor:
    """Token ids as a torch.long tensor, or a clear `InvalidIds` error saying what to do.

    Accepts a tensor or NumPy array of integers, or a (nested) list of Python ints. Refuses text
    (encode it first), floats (even 2.0: ids are never rounded or truncated), bools, ragged lists,
    the wrong number of dimensions (`dims`), no tokens at all (unless `allow_empty`) and ids
    outside 0 … vocab_size − 1.

    Example:
        >>> as_ids([[2, 5, 3]], vocab_size=10, dims=2)
        tensor([[2, 5, 3]])
    """
    if isinstance(ids, str):
        raise InvalidIds(
            f"{name} is a string ({ids[:30]!r}); models take token ids: encode the "
            f"text with the model's tokenizer first"
        )
    if isinstance(ids, np.ndarray):
        ids = torch.from_numpy(ids)
    elif isinstance(ids, range):
        ids = list(ids)
    if isinstance(ids, torch.Tensor):
        if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
            raise InvalidIds(
                f"{name} has dtype {ids.dtype}; token ids are whole numbers "
                f"(torch.long). Use the ids the tokenizer gave, not scores or a mask"
            )
        tensor = ids.long()
    elif isinstance(ids, (list, tuple)):
        bad = _first_non_integer(ids)
        if bad is not None:
            where, value = bad
            hint = " (an id in a list must be an int; it is never rounded)" if isinstance(value, float) else ""
            if isinstance(value, str):
                hint = "; encode text with the model's tokenizer first"
            raise InvalidIds(
                f"{name} holds {type(value).__name__} {value!r} at position "
                f"{list(where)}; token ids are whole numbers{hint}"
            )
        try:
            tensor = torch.tensor(ids, dtype=torch.long)
        except (ValueError, TypeError) as exc:
            raise InvalidIds(
                f"{name} is a ragged list: every row must have the same length (pad the shorter ones) ({exc})"
            ) from None
    else:
        raise InvalidIds(f"{name} must be a tensor or a list of token ids, got {type(ids).__name__}")
    if dims is not None:
        allowed = (dims,) if isinstance(dims, int) else tuple(dims)
        if tensor.dim() not in allowed:
            shapes = " or ".join({1: "(T,)", 2: "(B, T)"}.get(d, f"{d}-D") for d in allowed)
            fix = (
                "; add a batch dimension: ids[None] or [ids]"
                if tensor.dim() == 1 and 2 in allowed
                else "; for one sequence use ids[0]"
                if tensor.dim() == 2 and 1 in allowed
                else ""
            )
            raise InvalidIds(f"{name} must have shape {shapes}, got {tuple(tensor.shape)}{fix}")
    if tensor.numel() == 0 and not allow_empty:
        raise InvalidIds(f"{name} is empty (shape {tuple(tensor.shape)}): give at least one token")
    if vocab_size is not None and tensor.numel():
        lo, hi = int(tensor.min()), int(tensor.max())
        if lo < 0 or hi >= vocab_size:
            raise InvalidIds(
                f"{name} holds ids from {lo} to {hi}, outside 0…{vocab_size - 1}; "
                f"encode the text with the tokenizer the model was built for"
            )
    return tensor


IGNORE_INDEX = -100  # a label the loss skips (cross_entropy's default): specials, padding, unmasked tokens


class TrainingDiverged(FloatingPointError):
    """The training loss became NaN or infinite: the weights are no longer usable."""


def check_positive_int(value, name: str) -> int:
    """`value` if it is an int of at least 1 (a bool is not), else an error that names `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int (at least 1), got {value}")
    return value


def _fix(fix: str) -> str:
    return f"; {fix}" if fix else ""


def _bounds(low, high, low_open: bool = False, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'above' if low_open else 'at least'} {low}"
    return f"{'below' if high_open else 'at most'} {high}"


def check_int(value, name: str, low: int | None = None, high: int | None = None, *, fix: str = "") -> int:
    """`value` as an int if it is a whole number (not a bool) in `low` … `high` (either may be None),
    else a TypeError or ValueError that names `name`, the value, the range and `fix`.

    Example:
        >>> check_int(3, "n_heads", 1)
        3
        >>> check_int(0, "n_heads", 1, fix="a model needs at least one head")
        Traceback (most recent call last):
        ...
        ValueError: n_heads=0 must be at least 1; a model needs at least one head
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}{_fix(fix)}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name}={value} must be {_bounds(low, high)}{_fix(fix)}")
    return int(value)


def check_number(
    value, name: str, low=None, high=None, *, low_open: bool = False, high_open: bool = False, fix: str = ""
) -> float:
    """`value` as a float if it is a finite real number (not a bool) in the range `low` … `high`
    (an end that is None is open; `low_open`/`high_open` exclude the end), else an error naming
    `name`, the value, the range and `fix`.

    Example:
        >>> check_number(0.1, "dropout", 0, 1, high_open=True)
        0.1
        >>> check_number(float("nan"), "lr", 0, low_open=True)
        Traceback (most recent call last):
        ...
        ValueError: lr=nan must be a finite number above 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}{_fix(fix)}")
    value = float(value)
    outside = (
        not math.isfinite(value)
        or (low is not None and (value <= low if low_open else value < low))
        or (high is not None and (value >= high if high_open else value > high))
    )
    if outside:
        where = "" if low is None and high is None else " " + _bounds(low, high, low_open, high_open)
        raise ValueError(f"{name}={value:g} must be a finite number{where}{_fix(fix)}")
    return value


def check_choice(value, name: str, choices, *, fix: str = ""):
    """`value` if it is one of `choices`, else a ValueError naming `name`, the value and the choices.

    Example:
        >>> check_choice("mean", "pool", ("mean", "cls"))
        'mean'
    """
    if isinstance(value, (list, dict, set)) or value not in tuple(choices):
        raise ValueError(f"{name}={value!r} must be one of {', '.join(map(repr, choices))}{_fix(fix)}")
    return value


def check_text(value, name: str, *, empty_ok: bool = False, fix: str = "") -> str:
    """`value` if it is a str (and, unless `empty_ok`, not empty or only spaces), else an error
    naming `name` and the value."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}{_fix(fix)}")
    if not empty_ok and not value.strip():
        raise ValueError(f"{name} is empty ({value!r}): give some text{_fix(fix)}")
    return value


def check_tensor(
    value,
    name: str,
    *,
    dims: int | tuple[int, ...] | None = None,
    floating: bool = False,
    finite: bool = False,
    fix: str = "",
) -> torch.Tensor:
    """`value` if it is a tensor with one of `dims` dimensions, of a floating dtype when `floating`,
    and without NaN or ±inf when `finite`; else an error naming `name`, what it got and `fix`.

    Example:
        >>> check_tensor(torch.zeros(2, 3), "scores", dims=2, floating=True, finite=True).shape
        torch.Size([2, 3])
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}{_fix(fix)}")
    allowed = (dims,) if isinstance(dims, int) else dims
    if allowed is not None and value.dim() not in allowed:
        want = " or ".join(map(str, allowed))
        raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(value.shape)}{_fix(fix)}")
    if floating and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}{_fix(fix)}")
    if finite and value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} holds NaN or infinite values{_fix(fix)}")
    return value


def check_finite_loss(
    loss,
    step: int,
    *,
    lr: float | None = None,
    what: str = "training",
    start: float | None = None,
    growth: float = 1000.0,
) -> float:
    """The loss of update `step` (0, 1, …) as a float, or `TrainingDiverged` when it is NaN or ±inf:
    every library training loop calls it, so a diverging run stops at once with the step, the loss
    and the fix. With `start` (the loss a run starts from, e.g. ln V for a next-token loss), a loss
    above `growth` × start stops the run too: it is exploding, long before it reaches inf.

    Example:
        >>> check_finite_loss(torch.tensor(2.5), 0)
        2.5
    """
    value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
    now = f" (now {lr:g})" if lr is not None else ""
    if not math.isfinite(value):
        raise TrainingDiverged(
            f"{what} diverged at step {step}: the loss is {value}. Lower the "
            f"learning rate{now}, or check the data (a batch with nothing to "
            f"predict gives NaN) and that the starting weights are finite"
        )
    if start is not None and start > 0 and value > growth * start:
        raise TrainingDiverged(
            f"{what} diverged at step {step}: the loss is {value:.3g}, more than {growth:g}× its "
            f"starting level ({start:.3g}): the run is exploding. Lower the learning rate{now}; the "
            f"weights of this run are no longer usable"
        )
    return value


def check_finite_weights(model: torch.nn.Module, what: str) -> None:
    """A ValueError naming the first parameter (or buffer) of `model` that holds NaN or ±inf, so that a
    tool reading the model (`what`) blames the weights, not itself.

    Example:
        >>> check_finite_weights(torch.nn.Linear(2, 2), "trace_gpt")
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{what} takes a model (a torch.nn.Module), got {type(model).__name__}")
    tensors = [*model.named_parameters(), *model.named_buffers()]
    for name, tensor in tensors:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            counts = [(int(tensor.isnan().sum()), "NaN"), (int(tensor.isinf().sum()), "infinite")]
            held = " and ".join(f"{n} {kind}" for n, kind in counts if n)
            raise ValueError(
                f"{what}: the model's weights are broken, not the tool: {name} holds {held} value(s) of "
                f"{tensor.numel()}, so its outputs would be NaN (its training diverged, or the tensor was "
                f"overwritten). Load a checkpoint (onehot2gpt.checkpoints.load) or train it again with a lower "
                f"learning rate"
            )


def check_finite_logits(logits) -> None:
    """Raise a clear ValueError when a model's scores (…, V) hold NaN or +inf, or a row is all
    -inf: there is no distribution to sample from (and argmax would pick token 0 forever). -inf
    for single tokens is fine: that is how filters and banned tokens remove them."""
    broken = bool(
        torch.isnan(logits).any() or torch.isposinf(logits).any() or not (logits > float("-inf")).any(-1).all()
    )
    if broken:
        raise ValueError(
            "the model's next-token scores are NaN or infinite: its weights diverged "
            "during training (the loss became NaN) or were overwritten. Train it again "
            "with a lower learning rate, or load a checkpoint"
        )


# -------------------------------------------- where models run: the CPU unless ONEHOT2GPT_DEVICE says otherwise

DEVICE_ENV = "ONEHOT2GPT_DEVICE"


def check_device(device: str | torch.device) -> torch.device:
    """`device` as a torch.device, or a ValueError saying what to use when this torch cannot reach it."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device={device!r} is not a torch device: use 'cpu' (or 'cuda' on a machine with an NVIDIA GPU)"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={str(device)!r}, but this torch has no CUDA "
                f"(torch.cuda.is_available() is False): use device='cpu', or install "
                f"a CUDA build of torch on a machine with an NVIDIA GPU"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={str(device)!r}, but this machine has "
                f"{torch.cuda.device_count()} GPU(s): use 'cuda:0' … or 'cpu'"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={str(device)!r}, but this torch has no Apple GPU (MPS): use device='cpu'")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device={str(device)!r}: the course's models run on 'cpu' or 'cuda'")
    return dev


def course_device() -> torch.device:
    """Where the course's models run: ``$ONEHOT2GPT_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, …), else
    the CPU, so that the notebooks' stored outputs are what a default run prints. A GPU the torch
    cannot reach is a ValueError that names the variable."""
    wanted = os.environ.get(DEVICE_ENV, "").strip() or "cpu"
    try:
        return check_device(wanted)
    except ValueError as exc:
        raise ValueError(f"{DEVICE_ENV}={wanted!r}: {exc}; or unset {DEVICE_ENV} to run on the CPU") from None


def resolve_device(device=None) -> torch.device:
    """`device` checked (:func:`check_device`), or :func:`course_device` when it is None: what every
    loader and training cell of the course runs on."""
    return course_device() if device is None else check_device(device)
