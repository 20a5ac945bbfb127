"""The checking machinery behind every exercise: compare a student's function with the library's
reference on seeded random inputs (shape, dtype and values), and word the failure so that it names
the concept first and gives a hint (a question, an equation or shapes, never code) only after a second wrong attempt.

When :mod:`onehot2gpt_teach.grading` grades a submission, the verdict is not reached in the student's
kernel, where the student's code could change any function (the reference, :func:`assert_same`,
this module). There :func:`check_function` only *records*: it calls the student's function on the
inputs of the check's own seed and of the grader's hidden seeds and saves the answers to a file
(:func:`start_recording`). The grader then *replays* the same check in its own process, which never
runs student code: the same inputs, the library's reference, and the recorded answers in place of
the student's function (:func:`replaying`). Patching anything in the kernel can only spoil the
recorded answers, never turn a wrong answer into a pass.

While recording, the student's function is not called from inside the check: the check only draws
the inputs and queues them; :func:`stop_recording` makes the calls after the check has returned,
so no frame above the student's call (``sys._getframe``, ``inspect.stack()``, ``f_back``) holds
the check's reference or its locals. The in-notebook check (no grading) still calls the student's
function from inside the check: its verdict is the student's own feedback, never a grade.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import functools
import io
import math
import os
import stat
import types
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

# How many wrong answers each exercise has had in this kernel: the first failure names the
# concept; the hint is added from the second wrong attempt on (never before a try).
_WRONG_ATTEMPTS: dict[str, int] = {}
HINT_AFTER = 2


def reset_attempts() -> None:
    """Forget every exercise's wrong attempts (the next failure shows the concept only) and the
    answers that passed."""
    _WRONG_ATTEMPTS.clear()
    _PASSED.clear()


_PACKAGE = str(Path(__file__).resolve().parent)


def _inside_checks(filename: str) -> bool:
    try:
        return str(Path(filename).resolve()).startswith(_PACKAGE + os.sep)
    except (OSError, ValueError):
        return False


def _short_traceback(exc: BaseException) -> list[str]:
    """What IPython shows for a check's failure (``_render_traceback_``): the frames of the
    student's own code that raised (if it did; the checks' frames left out), then the check's
    message. The default traceback would print the check's source lines, and so its reference
    code and hints, before the student has tried twice."""
    import traceback

    lines: list[str] = []
    cause = exc.__cause__
    if cause is not None:
        frames = [f for f in traceback.extract_tb(cause.__traceback__) if not _inside_checks(f.filename)]
        if frames:
            lines.append("Traceback of your code (most recent call last):")
            lines += [line.rstrip("\n") for line in traceback.format_list(frames)]
        lines += [line.rstrip("\n") for line in traceback.format_exception_only(type(cause), cause)]
        lines.append("")
    first, *rest = str(exc).split("\n")
    return [*lines, f"{type(exc).__name__}: {first}", *rest]


def shown_briefly(exc: BaseException) -> BaseException:
    """`exc` made to show itself in IPython as :func:`_short_traceback` (an instance attribute: the
    exception keeps its type, which the grader and the tests read)."""
    exc._render_traceback_ = lambda: _short_traceback(exc)
    return exc


def fail(name: str, message: str, hint: str = "", concept: str = "") -> AssertionError:
    text = f"{name}: {message}"
    if concept:
        text += f"\nThink about: {concept}"
    if hint:
        text += f"\nHint: {hint}"
    return shown_briefly(AssertionError(text))


def describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"[:200]


SHOWN_ELEMENTS = 16  # a tensor this small is shown with its values in a failure's input line


def show(x, limit: int = 160) -> str:
    """An input or answer as a failure message shows it: a small tensor with its values, a larger
    one by shape and dtype, anything else by its repr, cut to `limit` characters."""
    if isinstance(x, torch.Tensor):
        if x.numel() <= SHOWN_ELEMENTS:
            return f"{x.tolist()!r} (a {tuple(x.shape)} {_dtype_kind(x.dtype).split(' ')[0]} tensor)"
        return describe(x)
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dtype_kind(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool (True/False)"
    if dtype.is_floating_point:
        return "floating point"
    if dtype.is_complex:
        return "complex"
    return "integer"


def assert_same(
    got, expected, name: str = "your answer", hint: str = "", rtol: float = 1e-4, atol: float = 1e-5
) -> None:
    """Raise an AssertionError with a hint unless `got` matches `expected` (tensors, numbers,
    sequences and dicts, compared recursively; tensors by shape, dtype and values; floats to the
    given tolerance)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise fail(name, f"expected a tensor, got {describe(got)}", hint)
        if got.layout != torch.strided:
            raise fail(name, f"returned a {got.layout} tensor; return an ordinary (dense) tensor (.to_dense())", hint)
        if got.device.type != expected.device.type:
            why = "it holds no values" if got.device.type == "meta" else "the check compares on the CPU"
            raise fail(name, f"returned a tensor on the {got.device.type} device ({why}); return it on the CPU", hint)
        if got.shape != expected.shape:
            raise fail(name, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}", hint)
        if got.dtype != expected.dtype:
            kind, want = _dtype_kind(got.dtype), _dtype_kind(expected.dtype)
            why = (
                f"a {want} tensor is expected, yours is {kind}"
                if kind != want
                else "same kind of number, different precision"
            )
            raise fail(name, f"expected dtype {expected.dtype}, got {got.dtype} ({why})", hint)
        if expected.is_floating_point() or got.is_floating_point():
            ok = torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol)
        else:
            ok = torch.equal(got, expected)
        if not ok:
            g, e = got.double(), expected.double()
            same = (g == e) | (g.isnan() & e.isnan())  # equal infinities count as equal
            diff = (g - e).abs().nan_to_num(nan=float("inf")).masked_fill(same, 0.0)
            where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
            raise fail(
                name,
                f"values differ; largest difference {diff.max().item():.3g} at "
                f"index {where}: got {got[where].item():.6g}, expected "
                f"{expected[where].item():.6g}",
                hint,
            )
        return
    if isinstance(expected, bool) or isinstance(got, bool):
        if got is not expected and got != expected or type(got) is not type(expected):
            raise fail(name, f"got {describe(got)}, expected {describe(expected)}", hint)
        return
    if isinstance(expected, float) or (isinstance(expected, int) and isinstance(got, float)):
        if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            raise fail(name, f"expected a number, got {describe(got)}", hint)
        got = float(got)
        if not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            raise fail(name, f"got {got:.6g}, expected {expected:.6g}", hint)
        return
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise fail(name, f"expected a dict with keys {sorted(expected)}, got {describe(got)}", hint)
        for key in expected:
            assert_same(got[key], expected[key], f"{name}[{key!r}]", hint, rtol, atol)
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            raise fail(name, f"expected a {type(expected).__name__}, got {describe(got)}", hint)
        if len(got) != len(expected):
            raise fail(name, f"expected {len(expected)} items, got {len(got)}", hint)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{name}[{i}]", hint, rtol, atol)
        return
    if got != expected:
        raise fail(name, f"got {describe(got)}, expected {describe(expected)}", hint)


def _wrong_answer(name: str, message: str, concept: str, hint: str) -> AssertionError:
    """Count a wrong attempt at `name` and word the failure (`message` is its whole first line):
    the concept first, the hint only from the second wrong attempt on (always, in a
    grader's replay: that message is the student's feedback)."""
    attempts = _WRONG_ATTEMPTS[name] = _WRONG_ATTEMPTS.get(name, 0) + 1
    if _GRADING["mode"] == "replay":
        attempts = HINT_AFTER
    text = message
    if concept:
        text += f"\nThink about: {concept}"
    if hint and attempts >= HINT_AFTER:
        text += f"\nHint: {hint}"
    elif hint:
        text += "\n(Fix it and run this check again: a more concrete hint comes after a second wrong attempt.)"
    return shown_briefly(AssertionError(text))


# --------------------------------------------------------------------------------------------
# Grading: record in the student's kernel, replay in the grader's process
# --------------------------------------------------------------------------------------------

_GRADING: dict = {"mode": None, "path": None, "hidden": (), "pending": []}


def start_recording(path: str | Path, hidden_seeds=()) -> None:
    """Make :func:`check_function` record instead of check (used by :mod:`onehot2gpt_teach.grading` in a
    student's kernel): each check then calls the student's function on the inputs of its own seed
    and of every seed in `hidden_seeds`, and saves the answers to `path` (``torch.save``, read back
    with ``weights_only=True``) without comparing them. The calls are made by :func:`stop_recording`,
    after the checks have returned (see the module's docstring)."""
    _GRADING.update(mode="record", path=Path(path), hidden=tuple(int(s) for s in hidden_seeds), pending=[])


def stop_recording() -> None:
    """Call the student's functions on the inputs the checks queued since :func:`start_recording`,
    save their answers (after each check, so a later crash keeps the earlier ones), and go back to
    ordinary checking. The check frames are gone by then: the student's function runs below this
    function and :func:`_call` only, whose frames hold the queue (student functions and inputs)."""
    pending, path = _GRADING["pending"], _GRADING["path"]
    _GRADING.update(mode=None, path=None, hidden=(), pending=[])  # a student calling this again: no-op
    calls = []
    for name, student_fn, inputs in pending:
        calls.append({"name": name, "answers": _answers(student_fn, inputs)})
        torch.save({"calls": calls}, path)
        print(f"{name}: answers recorded for grading")


@contextlib.contextmanager
def replaying(calls: list, hidden_seeds=()):
    """Within the block, :func:`check_function` compares the reference with the recorded answers
    `calls` (what :func:`read_recording` returned) instead of calling a student's function; the
    grader runs the check cell's ``check_*`` calls inside it, in its own process."""
    saved = dict(_GRADING)
    _GRADING.update(mode="replay", path=None, hidden=tuple(int(s) for s in hidden_seeds), calls=list(calls))
    try:
        yield
    finally:
        _GRADING.clear()
        _GRADING.update(saved)


MAX_RECORDING_BYTES = 256 * 2**20  # the largest answers file the grader reads


def read_recording(path: str | Path) -> list:
    """The answers a kernel recorded, read safely (``torch.load(weights_only=True)``: plain tensors,
    numbers, strings, lists, tuples and dicts only). Raises ValueError with what went wrong."""
    try:  # a plain file of the kernel's folder: not a link (to a host file) or a FIFO (to hang on)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ValueError("no answers were recorded: the check did not reach your function") from None
    except OSError as exc:
        raise ValueError(f"the recorded answers could not be opened as a plain file ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORDING_BYTES:
            raise ValueError(
                f"the recorded answers are not a plain file of at most {MAX_RECORDING_BYTES // 2**20} MiB: "
                "return smaller answers"
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_RECORDING_BYTES + 1)
    finally:
        os.close(fd)
    try:
        record = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # anything but plain data (a tensor subclass, a custom object, …)
        raise ValueError(
            f"the recorded answers could not be read as plain data ({type(exc).__name__}): "
            "return tensors, numbers, strings, lists or dicts"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("calls"), list):
        raise ValueError("the recorded answers are not in the grader's format")
    return record["calls"]


def _plain(x):
    """An answer as plain data for the record: numpy scalars become Python numbers (as the check's
    comparison treats them); containers are converted item by item; anything else is kept."""
    if isinstance(x, (list, tuple)):
        items = [_plain(v) for v in x]
        return items if isinstance(x, list) else tuple(items)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0:
        return x.item()
    return x


def _record(student_fn: Callable, make_inputs, name: str, seeds: list[int], trials: int) -> None:
    """Queue `student_fn` with every trial's inputs of every seed for :func:`stop_recording`. The
    inputs are drawn here, in the order a live check draws them (the student's function never
    touches the generator), so the replay draws the same ones."""
    inputs = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        inputs.append([make_inputs(gen) for _ in range(trials)])
    _GRADING["pending"].append((name, _confined(student_fn), inputs))


def _code_names(code: types.CodeType) -> set[str]:
    """The global names a code object (and the functions and comprehensions inside it) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _confined(fn, depth: int = 0):
    """`fn` as the recording calls it. A check may wrap the student's function in a function of its
    own (``as_int``, ``without_grad``): that wrapper's frame sits between the recording and the
    student's function, and its module's globals would hold the check's reference helpers
    (``_reference_analogy``). Such a wrapper (a function of this package) is rebuilt with only the
    globals its code names, and so are the functions in its closure; the student's function and
    anything else are returned as they are."""
    package = __name__.rpartition(".")[0]
    module = getattr(fn, "__globals__", {}).get("__name__", "")
    if not isinstance(fn, types.FunctionType) or depth > 8 or not (module + ".").startswith(package + "."):
        return fn
    scope = {"__name__": module, "__builtins__": fn.__globals__.get("__builtins__", builtins)}
    scope.update({n: fn.__globals__[n] for n in _code_names(fn.__code__) if n in fn.__globals__})
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(types.CellType(_confined(cell.cell_contents, depth + 1)))
        except ValueError:  # an empty cell: kept
            cells.append(cell)
    confined = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, tuple(cells) or None)
    confined.__kwdefaults__ = fn.__kwdefaults__
    return confined


def _call(fn, args):
    """The one frame between the recording and the student's function: it holds the function and
    its inputs, nothing else."""
    return fn(*args)


def _answers(student_fn: Callable, inputs: list) -> list:
    """`student_fn`'s answers on the queued inputs (one list of argument tuples per seed): ("value",
    answer), or ("raised", exception name, message) or ("unreadable", what) and no further calls."""
    answers = []
    for trials in inputs:
        for args in trials:
            try:
                got = _plain(_call(student_fn, copy.deepcopy(args)))
            except Exception as exc:  # recorded: the replay reports it like a live check would
                answers.append(("raised", type(exc).__name__, str(exc)[:2000]))
                return answers
            buffer = io.BytesIO()
            try:
                torch.save(got, buffer)
                buffer.seek(0)
                torch.load(buffer, weights_only=True)
            except Exception:  # not plain data: the replay says so
                kind = type(got).__qualname__
                subclass = " (a subclass of torch.Tensor)" if isinstance(got, torch.Tensor) else ""
                answers.append(("unreadable", f"a {kind}{subclass}"))
                return answers
            answers.append(("value", got))
    return answers


def _replayed(name: str) -> list:
    """The recorded answers of the next check (replay mode)."""
    if not _GRADING["calls"]:
        raise fail(name, "no answers were recorded for this check: it did not reach your function")
    call = _GRADING["calls"].pop(0)
    if not isinstance(call, dict) or call.get("name") != name or not isinstance(call.get("answers"), list):
        raise fail(
            name,
            f"the recorded answers belong to {call.get('name') if isinstance(call, dict) else '?'!r}, "
            f"not to this check",
        )
    return list(call["answers"])


def check_function(
    student_fn: Callable,
    reference_fn: Callable,
    make_inputs: Callable[[torch.Generator], tuple],
    *,
    name: str | None = None,
    concept: str = "",
    hint: str = "",
    diagnose: Callable[..., str | None] | None = None,
    trials: int = 5,
    seed: int = 0,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Call `student_fn` and `reference_fn` on `trials` fresh random inputs from
    `make_inputs(generator)` (a tuple of arguments) and assert they agree (shape, dtype, values).

    Prints one line on success. On a wrong answer it raises an AssertionError that names the
    `concept` to revisit, plus what `diagnose(got, expected, *args)` recognises (a common
    mistake, in words); the `hint` is added only from the second wrong attempt on.
    An unwritten exercise (NotImplementedError) gets neither: nothing is given away.

    While grading (see the module's docstring) the trials of the grader's hidden seeds follow
    those of `seed`; in the student's kernel the answers are only recorded."""
    require_callable(student_fn)
    name = name or getattr(student_fn, "__name__", "your function")
    seeds = [seed, *_GRADING["hidden"]]
    if _GRADING["mode"] == "record":
        _record(student_fn, make_inputs, name, seeds, trials)
        return
    answers = _replayed(name) if _GRADING["mode"] == "replay" else None
    for k, current in enumerate(seeds):
        gen = torch.Generator().manual_seed(current)
        for trial in range(trials):
            args = make_inputs(gen)
            expected = reference_fn(*copy.deepcopy(args))
            label = f"test {trial + 1} of {trials}" if k == 0 else f"hidden test {trial + 1} of {trials}"
            try:
                if answers is None:
                    got = _call(student_fn, copy.deepcopy(args))
                else:
                    got = _answer(answers, name)
            except NotImplementedError:
                raise fail(
                    name,
                    "not written yet: replace the `raise NotImplementedError` line with your code, run that cell, "
                    "then run this check again",
                ) from None
            except _Unreadable as exc:
                raise _wrong_answer(
                    name,
                    f"{name}: returned {exc}, which a check cannot compare: return "
                    "tensors, numbers, strings, lists or dicts",
                    concept,
                    hint,
                ) from None
            except Exception as exc:  # the student's code raised: show what and on which input
                raise _wrong_answer(
                    name,
                    f"{name}: raised {type(exc).__name__}: {exc}\n  on input {', '.join(describe(a) for a in args)}",
                    concept,
                    hint,
                ) from exc
            try:
                assert_same(got, expected, f"{name} ({label})", "", rtol, atol)
            except AssertionError as wrong:
                message = str(wrong)
                if k == 0:  # a visible test: the input, and for a list, string or dict the whole answer
                    message += f"\n  on input {', '.join(show(a) for a in args)}"
                    if isinstance(expected, (list, tuple, dict, str)):
                        message += f"\n  expected {show(expected)}\n  got      {show(got)}"
                else:  # a hidden test's input stays hidden: its shapes only
                    message += f"\n  on a hidden input ({', '.join(describe(a) for a in args)})"
                found = diagnose(got, expected, *copy.deepcopy(args)) if diagnose else None
                if found:
                    message += f"\n  Looks like: {found}"
                raise _wrong_answer(name, message, concept, hint) from None
    _WRONG_ATTEMPTS.pop(name, None)
    hidden = f" and {trials * (len(seeds) - 1)} hidden ones" if len(seeds) > 1 else ""
    print(f"✓ {name}: matches the reference on {trials} random inputs{hidden}")


def confine(fn: Callable) -> Callable:
    """`fn` (a function of this package that a check hands to the student's code, such as an
    attention head to call) rebuilt with only the globals its code names: the student's code
    holding it reaches none of its module's reference helpers."""
    return _confined(fn)


# The functions on the stack while the student's function runs keep only the globals they name:
# this module's other functions (attention_variant, which computes what an exercise asks for) are
# not in their frames' globals.
_call = _confined(_call)
_answers = _confined(_answers)
stop_recording = _confined(stop_recording)


class _Unreadable(Exception):
    """A recorded answer that was not plain data."""


class _Raised(Exception):
    """A recorded exception of the student's function, raised again in the replay."""


def _answer(answers: list, name: str):
    """The next recorded answer: its value, or the recorded exception raised again."""
    if not answers:
        raise fail(name, "fewer answers were recorded than the check asks for")
    entry = answers.pop(0)
    kind = entry[0] if isinstance(entry, (list, tuple)) and entry else None
    if kind == "value" and len(entry) == 2:
        return entry[1]
    if kind == "raised" and len(entry) == 3:
        if entry[1] == "NotImplementedError":
            raise NotImplementedError
        raise type(str(entry[1]), (_Raised,), {})(str(entry[2]))
    if kind == "unreadable" and len(entry) == 2:
        raise _Unreadable(str(entry[1]))
    raise fail(name, "a recorded answer is not in the grader's format")


def rand_int(gen: torch.Generator, low: int, high: int) -> int:
    """One random integer in low..high-1 from `gen` (the inputs of every check are seeded)."""
    return int(torch.randint(low, high, (1,), generator=gen))


def random_ids(gen: torch.Generator, max_len: int = 12, max_vocab: int = 20):
    vocab_size = rand_int(gen, 2, max_vocab)
    length = rand_int(gen, 1, max_len)
    return torch.randint(0, vocab_size, (length,), generator=gen), vocab_size


# --------------------------------------------------------------------------------------------
# Helpers of the checks' wrappers and diagnoses
# --------------------------------------------------------------------------------------------


def require_callable(fn) -> None:
    """A TypeError unless `fn` is a function (a check cell that passes ``my_fn()`` instead of ``my_fn``)."""
    if not callable(fn):
        raise shown_briefly(TypeError(f"pass your function itself (without calling it), got {describe(fn)}"))


def without_grad(fn: Callable) -> Callable:
    """`fn` run under ``torch.no_grad()`` (a check compares values, so no autograd graph is kept)."""
    require_callable(fn)

    def run(*args):
        with torch.no_grad():
            return fn(*args)

    return run


def close(got, expected, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether two tensors agree to the checks' tolerance, compared in float64."""
    return torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol)


# The answers that passed a check in this kernel: check name → the answer's fingerprint. A
# check that builds a trained model is slow, and yours_if_solved would run it again right after
# the check cell; an answer unchanged since it passed is taken as passing. Never read when grading.
_PASSED: dict[str, tuple] = {}


def _fingerprint(answer) -> tuple:
    """What identifies an answer as unchanged: the object, and the code of it (a function) or of
    every function in its class and its bases (a class)."""
    if isinstance(answer, type):
        codes = tuple(
            (klass.__qualname__, name, getattr(value, "__code__", None))
            for klass in answer.__mro__
            if klass.__module__ != "builtins"
            for name, value in sorted(vars(klass).items())
            if callable(value)
        )
        return (id(answer), codes)
    return (id(answer), getattr(answer, "__code__", None), getattr(answer, "__defaults__", None))


def keeps_rng(check: Callable) -> Callable:
    """`check` run with torch's global random state given back afterwards: a check that builds
    models (their random initialisation, overwritten by a checkpoint) leaves the notebook's
    randomness as it found it, however often it runs, passed or failed. A pass is remembered
    (:func:`yours_if_solved` does not run the check again on the same, unchanged answer)."""

    @functools.wraps(check)
    def run(answer, *args, **kwargs):
        with torch.random.fork_rng():
            result = check(answer, *args, **kwargs)
        if _GRADING["mode"] is None:
            _PASSED[check.__name__] = _fingerprint(answer)
        return result

    return run


def same_shape(got, expected) -> bool:
    """Whether `got` is a tensor shaped like the tensor `expected` (a diagnosis compares only then)."""
    return isinstance(got, torch.Tensor) and got.shape == expected.shape


def first_match(got, mistakes: dict, rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    """The first description in `mistakes` (description → what that mistake gives) whose tensor
    `got` matches, else None."""
    for words, wrong in mistakes.items():
        if close(got, wrong, rtol, atol):
            return words
    return None


def filled_module(cls, arguments: tuple, state: dict, name: str, pick: Callable | None = None) -> Callable:
    """A function of the inputs that builds the student's ``cls(*arguments)`` once, fills it with
    `state` (a checkpoint's weights: the names and shapes the notebook's given ``__init__`` defines)
    and returns what it computes without gradients (``pick(output)`` when given: the part a check
    compares). The check passes this as the student's function, so the recording builds the model
    itself and no frame above the student's code holds the reference."""
    made: list = []

    def run(*inputs):
        if not made:
            with torch.random.fork_rng():  # its random initialisation is overwritten: the notebook's randomness stays
                module = cls(*arguments)
            mine = {k: tuple(v.shape) for k, v in module.state_dict().items()}
            theirs = {k: tuple(v.shape) for k, v in state.items()}
            if mine != theirs:
                missing, extra = sorted(set(theirs) - set(mine)), sorted(set(mine) - set(theirs))
                shapes = sorted(k for k in set(mine) & set(theirs) if mine[k] != theirs[k])
                raise ValueError(
                    f"{name}'s weights are not the checkpoint's: missing {missing[:3]}, unexpected {extra[:3]}, "
                    f"other shape {shapes[:3]}; keep __init__ as the notebook gives it"
                )
            module.load_state_dict(state)
            made.append(module.eval())
        with torch.no_grad():
            out = made[0](*inputs)
            again = made[0](*inputs)
        if not _identical(out, again):
            raise ValueError(
                f"{name} gave two different answers to the same input in eval mode: something random is still "
                "switched on, most likely dropout that ignores .eval(). Use the dropout modules __init__ gives "
                "(nn.Dropout is off after .eval()), or F.dropout(x, p, training=self.training)"
            )
        return pick(out) if pick is not None else out

    run.__name__ = name
    return run


def _identical(a, b) -> bool:
    """Whether two answers (tensors, or tuples and lists of them) are equal element for element."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b) or (a.isnan() & b.isnan() | (a == b)).all())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return True


def attention_variant(
    x,
    w_qkv,
    b_qkv,
    w_o,
    b_o,
    n_heads,
    mask=None,
    *,
    scale=None,
    use_mask=True,
    mask_after=False,
    out_proj=True,
    heads="split",
):
    """Multi-head self-attention over x (B, T, D) from its weights, with one step switchable to a
    typical mistake: `scale` None (√(D/H)), "D" (√D) or a number; `use_mask`; `out_proj` (W^O
    applied); `mask_after` (the mask applied to the weights after the softmax); `heads` "split"
    (consecutive features per head), "round-robin", or "view" (one view straight to (B, H, T, D/H),
    no transpose, merged back the same way). → (output (B, T, D), weights (B, H, T, T))."""
    B, T, D = x.shape
    hs = D // n_heads

    def split(t):
        if heads == "split":
            return t.view(B, T, n_heads, hs).transpose(1, 2)
        if heads == "view":
            return t.reshape(B, n_heads, T, hs)  # positions mixed into heads
        return t.view(B, T, hs, n_heads).permute(0, 3, 1, 2)  # features dealt out round-robin

    q, k, v = (split(t) for t in F.linear(x, w_qkv, b_qkv).split(D, dim=-1))
    scores = q @ k.transpose(-2, -1) / {None: math.sqrt(hs), "D": math.sqrt(D)}.get(scale, scale)
    if mask is not None and use_mask and not mask_after:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1)
    if mask is not None and use_mask and mask_after:
        w = w.masked_fill(~mask, 0.0)
    out = (w @ v).reshape(B, T, D) if heads == "view" else (w @ v).transpose(1, 2).reshape(B, T, D)
    return (F.linear(out, w_o, b_o) if out_proj else out), w


def block_variant(
    x, p, n_heads, mask=None, *, attn="attn", act=torch.relu, eps=1e-5, pre_norm=False, residual=True, **slip
):
    """A Transformer block from its state_dict `p` (attention weights under `attn`, then ``ff.linear1``,
    ``ff.linear2``, ``norm1``, ``norm2``), post- or pre-norm, with one step switchable to a typical
    mistake (`residual`, and :func:`attention_variant`'s switches in `slip`)."""
    D, keep = x.size(-1), 1.0 if residual else 0.0

    def attention(h):
        weights = (p[f"{attn}.{n}_proj.{w}"] for n in ("in", "out") for w in ("weight", "bias"))
        return attention_variant(h, *weights, n_heads, mask, **slip)[0]

    def ff(h):
        return F.linear(
            act(F.linear(h, p["ff.linear1.weight"], p["ff.linear1.bias"])), p["ff.linear2.weight"], p["ff.linear2.bias"]
        )

    def norm(h, i):
        return F.layer_norm(h, (D,), p[f"norm{i}.weight"], p[f"norm{i}.bias"], eps)

    if pre_norm:
        x = keep * x + attention(norm(x, 1))
        return keep * x + ff(norm(x, 2))
    x = norm(keep * x + attention(x), 1)
    return norm(keep * x + ff(x), 2)


# --------------------------------------------------------------------------------------------
# Using the student's solution in the cells after its check: solving an exercise changes what
# the notebook shows, and an unsolved one leaves the rest of the notebook (and the student
# version) running on the library's version.
# --------------------------------------------------------------------------------------------


def yours_or(student_fn: Callable, stand_in: Callable, name: str | None = None) -> Callable:
    """`student_fn` wrapped so that later cells can use it: while it is still unwritten (raises
    NotImplementedError) `stand_in` (the library's version) answers instead, with a one-line note.
    A written solution is always used, right or wrong, so solving the exercise changes what the
    notebook shows."""
    name = name or getattr(student_fn, "__name__", "your function")
    noted = []

    def use(*args, **kwargs):
        try:
            return student_fn(*args, **kwargs)
        except NotImplementedError:
            if not noted:
                noted.append(True)
                print(f"({name} is not written yet: the library's version stands in for it here)")
            return stand_in(*args, **kwargs)

    use.__name__ = name
    return use


def yours_if_solved(fn: Callable, check: Callable, fallback: Callable, name: str | None = None) -> Callable:
    """`fn` if it passes `check` (run quietly), else `fallback`; prints one line saying which.

    Later cells call what this returns, so solving an exercise changes what the notebook shows,
    while an unsolved (or still wrong) exercise leaves the rest of the notebook running. A failed
    quiet run does not count as a wrong attempt.
    """
    name = name or getattr(fn, "__name__", "your function")
    if _PASSED.get(getattr(check, "__name__", "")) == _fingerprint(fn):  # it passed just now, unchanged
        print(f"the cells below use your {name}")
        return fn
    attempts = dict(_WRONG_ATTEMPTS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng():
            check(fn)
    except Exception:  # not written yet, wrong, or not a function: the cells below use the fallback
        _WRONG_ATTEMPTS.clear()
        _WRONG_ATTEMPTS.update(attempts)
        print(
            f"{name} does not pass its check yet: the cells below use "
            f"{getattr(fallback, '__name__', 'the reference')} instead"
        )
        return fallback
    print(f"the cells below use your {name}")
    return fn


def _definitions(source: str, names: set) -> list:
    """The top-level function and class definitions of `names` in a cell's `source` (nothing
    else of the cell runs), or [] if it does not parse."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]


def from_notebook(notebook, name: str, check: Callable, fallback: Callable, needs=()) -> Callable:
    """Your `name` as you wrote it in an earlier notebook, for a later notebook to build on.

    `notebook` is that notebook's file (``"06_transformer.ipynb"``, relative to the folder this
    notebook runs in). Its set-up cell (the first code cell that is not Colab's) runs in a fresh
    namespace; then, from its exercise cells, only the definitions of `name` and of the functions
    it calls that you also wrote (`needs`), nothing else of those cells. The result goes through
    :func:`yours_if_solved`: yours if it passes `check`, else `fallback`, with one line saying which
    and why (no such file, no such definition, or not passing yet)."""
    import ast
    import json

    path = Path(notebook)
    label = getattr(fallback, "__name__", "the reference")

    def stand_in(why: str) -> Callable:
        print(f"{name} from {path.name}: {why}; the cells below use {label} instead")
        return fallback

    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except FileNotFoundError:
        return stand_in(f"{path} is not in this folder (open the notebooks from one folder to carry your work over)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return stand_in(f"{path} could not be read ({type(exc).__name__})")
    code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]

    def text(cell) -> str:
        source = cell.get("source", "")
        return "".join(source) if isinstance(source, list) else str(source)

    def tags(cell) -> list:
        return (cell.get("metadata") or {}).get("tags") or []

    setup = next((text(c) for c in code if "colab-setup" not in tags(c)), "")
    wanted = {name, *needs}
    found = [d for c in code if "exercise" in tags(c) for d in _definitions(text(c), wanted)]
    if name not in {d.name for d in found}:
        return stand_in(f"no exercise cell there defines {name}")
    namespace: dict = {"__name__": f"from_{path.stem}"}
    import random

    import numpy as np

    states = random.getstate(), np.random.get_state(), torch.get_num_threads()
    try:  # the set-up seeds and sets threads: this notebook's randomness and threads are given back
        with contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng():
            exec(compile(setup, str(path), "exec"), namespace)  # noqa: S102 - the student's own notebook
            exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    except Exception as exc:  # the set-up or a definition fails here: theirs cannot be used
        return stand_in(f"its code did not run here ({type(exc).__name__}: {str(exc)[:120]})")
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_num_threads(states[2])
    print(f"{name}: taken from your {path.name}")
    return yours_if_solved(namespace[name], check, fallback, name)
