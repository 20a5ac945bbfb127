"""What every recipe shares: its command line, the checks on ``--out``, the atomic write, and the
record of the command and its settings that goes into the checkpoint's ``config.json`` ``info``.

A recipe's settings are the upper-case constants at the top of its script. ``--set NAME=VALUE``
changes one for a run (a test, an experiment); the settings actually used are recorded with the
command, so a checkpoint always says how it was made.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["constants", "parse", "settings", "atomic_folder", "command_line", "print_json"]


def constants(namespace: dict) -> dict:
    """The recipe's settings: the upper-case names of a script's `namespace` (``globals()``)."""
    return {k: v for k, v in namespace.items() if k.isupper() and not k.startswith("_")}


def parse(
    description: str, defaults: dict, *, gpu: bool = True, laptop: dict | None = None, argv=None
) -> argparse.Namespace:
    """The recipe's command line → its arguments: ``--out DIR`` (required; a new or empty folder
    that can be written), ``--device`` (cpu, or cuda where `gpu`), ``--dry-run`` and
    ``--set NAME=VALUE``. With `laptop` (a dict of settings) a ``--laptop`` option applies it
    before ``--set``. ``args.settings`` holds the settings after ``--set``."""
    script = Path(sys.argv[0]).name if argv is None else "recipe.py"
    parser = argparse.ArgumentParser(
        prog=f"python recipes/{script}",
        description=description,
        epilog="settings (change one with --set NAME=VALUE): " + ", ".join(f"{k}={v!r}" for k, v in defaults.items()),
    )
    parser.add_argument("--out", required=True, type=Path, help="folder to write: new, or empty")
    parser.add_argument(
        "--device", default="cpu", choices=["cpu", "cuda"] if gpu else ["cpu"], help="where to train (default: cpu)"
    )
    parser.add_argument("--dry-run", action="store_true", help="check --out, print the settings, train nothing")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="change one setting (repeatable)"
    )
    if laptop:
        parser.add_argument(
            "--laptop",
            action="store_true",
            help="the 2-core variant: " + ", ".join(f"{k}={v!r}" for k, v in laptop.items()),
        )
    args = parser.parse_args(argv)
    try:
        base = {**defaults, **laptop} if laptop and args.laptop else defaults
        args.settings = settings(base, args.set)
        check_out(args.out)
    except ValueError as e:
        parser.error(str(e))
    if args.dry_run:
        print(f"would write {args.out} with these settings:")
        print_json(args.settings)
        sys.exit(0)
    return args


def settings(defaults: dict, changes: list[str]) -> dict:
    """`defaults` with each ``NAME=VALUE`` of `changes` applied (VALUE a Python literal of the
    default's type; an int may become a float) → a new dict."""
    out = dict(defaults)
    for change in changes:
        name, sep, text = change.partition("=")
        if not sep or name not in defaults:
            raise ValueError(f"--set {change!r}: write NAME=VALUE with NAME one of {', '.join(defaults)}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text  # a bare word: a string
        old = defaults[name]
        wrong = isinstance(value, bool) != isinstance(old, bool)  # True is an int to Python, not to a recipe
        if (
            old is not None
            and (wrong or not isinstance(value, type(old)))
            and not (isinstance(old, float) and type(value) is int)
        ):
            raise ValueError(
                f"--set {change!r}: {name} takes a {type(old).__name__} value (now {old!r}); got {value!r}"
            )
        out[name] = float(value) if isinstance(old, float) else value
    return out


def check_out(out: Path) -> None:
    """Refuse an `out` that is a file, a folder with something in it, or not writable."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; name a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(
            f"--out {out} is not empty; name a new folder (a recipe never overwrites a checkpoint: "
            f"compare the new one with the old, then replace it by hand)"
        )
    parent = out.resolve()
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {parent} is not writable; name a folder you can write")


@contextlib.contextmanager
def atomic_folder(out: Path):
    """Yield a temporary folder beside `out`; when the block ends without an error it becomes
    `out`, otherwise it is removed. A run that stops half-way leaves no half-written checkpoint."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield tmp
        if out.is_dir():
            out.rmdir()  # empty: check_out saw to it
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def command_line() -> str:
    """The command that is running, as one would type it from the repository root."""
    return shlex.join(["python", f"recipes/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def print_json(record: dict) -> None:
    """The run's record as one JSON line (the last line a recipe prints)."""
    print(json.dumps(record, default=str), flush=True)
