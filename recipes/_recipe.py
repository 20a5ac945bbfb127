"""What every recipe shares: its command line, the checks on ``--out``, the atomic write, and the
record of the command and its settings that goes into the checkpoint's ``config.json`` ``info``.

``--out`` is checked before anything is trained (a folder that can be written, not a checkpoint
already there unless ``--force``). The result is written into a hidden folder beside ``--out`` and
renamed into place when the run has finished, so a run that fails or is interrupted (Ctrl-C) leaves
the previous checkpoint, or nothing; files are 0666 and folders 0777 less the umask (0644 and 0755
usually), so other users can load what a lecturer trained.

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
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["constants", "parse", "settings", "check_out", "holds_output", "atomic_folder", "command_line", "print_json"]


def constants(namespace: dict) -> dict:
    """The recipe's settings: the upper-case names of a script's `namespace` (``globals()``)."""
    return {k: v for k, v in namespace.items() if k.isupper() and not k.startswith("_")}


def parse(
    description: str, defaults: dict, *, gpu: bool = True, laptop: dict | None = None, argv=None
) -> argparse.Namespace:
    """The recipe's command line → its arguments: ``--out DIR`` (required; a new or empty folder
    that can be written, or with ``--force`` one holding a checkpoint to replace), ``--device``
    (cpu, or cuda where `gpu`), ``--dry-run`` and ``--set NAME=VALUE``. With `laptop` (a dict of
    settings) a ``--laptop`` option applies it before ``--set``. ``args.settings`` holds the
    settings after ``--set``. Ctrl-C then prints one line saying what ``--out`` holds."""
    script = Path(sys.argv[0]).name if argv is None else "recipe.py"
    parser = argparse.ArgumentParser(
        prog=f"python recipes/{script}",
        description=description,
        epilog="settings (change one with --set NAME=VALUE): " + ", ".join(f"{k}={v!r}" for k, v in defaults.items()),
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="folder to write: new, or empty (it appears when the run has finished); "
        "a relative path is taken from the current folder",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the checkpoint already in --out; the old one stays until this run has finished",
    )
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
        check_out(args.out, force=args.force)
    except ValueError as e:
        parser.error(str(e))
    _say_where_an_interrupt_left(args.out)
    if args.dry_run:
        print(f"would {'replace' if args.force and args.out.exists() else 'write'} {args.out} with these settings:")
        print_json(args.settings)
        sys.exit(0)
    return args


def _say_where_an_interrupt_left(out: Path) -> None:
    """On Ctrl-C, one line about `out` instead of a traceback into whatever was training."""
    hook = sys.excepthook

    def interrupted(kind, value, tb):
        if not issubclass(kind, KeyboardInterrupt):
            return hook(kind, value, tb)
        if Path(out) in _PLACED:
            print(f"interrupted after the run was written to --out {out}: it is whole", file=sys.stderr)
        else:
            print(f"interrupted: --out {out} is as it was before this run (nothing written)", file=sys.stderr)

    sys.excepthook = interrupted


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


def check_out(out: Path, *, force: bool = False) -> None:
    """Refuse, before the run rather than after it, an `out` that is a file or a link, a folder
    with something in it (a checkpoint unless `force`), or one whose parent folder cannot be
    written (the result is written beside `out`, then renamed)."""
    out = Path(out)
    if out.is_symlink():  # the rename at the end would replace the link, not the folder it names
        raise ValueError(f"--out {out} is a symbolic link (to {os.readlink(out)}); name the folder itself")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; name a new folder")
    if out.is_dir() and any(out.iterdir()):
        if not holds_output(out):
            raise ValueError(
                f"--out {out} is not empty and holds no checkpoint; name a new or empty folder "
                f"(--force replaces only a folder a recipe wrote)"
            )
        if not force:
            raise ValueError(
                f"--out {out} is not empty: it holds a checkpoint; name a new folder, or add --force to "
                f"replace it when this run has finished (until then the old one stays as it is)"
            )
    parent = Path(os.path.abspath(out)).parent  # where the run's hidden folder goes
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out {out}: {parent} is a file, not a folder; name a folder inside a folder")
    if not _can_write(parent):
        raise ValueError(
            f"--out {out}: {parent} is not writable (the run writes into a new folder there and "
            f"renames it to {out.name} at the end); name a folder inside one you can write, e.g. "
            f"--out ~/checkpoints/{out.name}"
        )


def _can_write(folder: Path) -> bool:
    """Whether a folder can be made in `folder` (tried, then removed: permissions, a read-only disk)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".onehot2gpt-write-check-", dir=folder))
    except OSError:
        return False
    return True


def holds_output(folder: Path) -> bool:
    """Whether `folder` holds what a recipe writes, which ``--force`` may replace: a checkpoint,
    folders of checkpoints (``zero-shot-qa``) or the ULMFiT ablation's ``ulmfit-ablation.json``."""
    folder = Path(folder)
    if _is_checkpoint(folder):
        return True
    entries = list(folder.iterdir())
    return bool(entries) and all(_is_checkpoint(p) if p.is_dir() else p.name == "ulmfit-ablation.json" for p in entries)


def _is_checkpoint(folder: Path) -> bool:
    from onehot2gpt.checkpoints import CONFIG, FORMAT

    try:
        record = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("format") == FORMAT


@contextlib.contextmanager
def atomic_folder(out: Path, *, replace: bool = False):
    """Yield a new hidden folder beside `out`; when the block ends without an error it becomes
    `out` (with `replace`, in place of the checkpoint there, which is removed only then), otherwise
    it is removed. A run that fails or is interrupted half-way leaves the previous checkpoint or
    nothing, never a half-written folder. Files get 0666 and folders 0777 less the umask
    (safetensors writes 0600, mkdtemp 0700: no other user could load them)."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as e:
        raise SystemExit(f"--out {out}: cannot make a folder beside it ({e}); name a folder you can write") from None
    try:
        yield tmp
        _readable(tmp)
        _move_into_place(tmp, out, replace)
    finally:
        if tmp not in _KEPT:
            shutil.rmtree(tmp, ignore_errors=True)


def _readable(folder: Path) -> None:
    """Give everything under `folder` the modes a plain ``open``/``mkdir`` would: 0666/0777 less the umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    for root, _, files in os.walk(folder):
        os.chmod(root, 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)


def _move_into_place(tmp: Path, out: Path, replace: bool) -> None:
    """Rename the finished `tmp` to `out` (with `replace`, in place of the checkpoint there); Ctrl-C
    (SIGINT) or SIGTERM meanwhile takes effect once `out` is whole. Where that cannot be done, the
    result is kept beside `out` under a name the message gives."""
    with _interrupts_deferred():
        try:
            if out.is_dir() and any(out.iterdir()):
                if not (replace and holds_output(out)):
                    raise SystemExit(
                        f"--out {out} was filled by something else while this run trained; this run's "
                        f"result is in {_keep(tmp, out)}: compare the two, then keep one"
                    )
                old = out.with_name(f".{out.name}.old-{secrets.token_hex(4)}")
                os.rename(out, old)
                try:
                    os.rename(tmp, out)
                except OSError:
                    os.rename(old, out)
                    raise
                _PLACED.add(out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                if out.is_dir():
                    out.rmdir()  # empty
                os.replace(tmp, out)
                _PLACED.add(out)
        except OSError as e:
            raise SystemExit(
                f"--out {out}: could not rename the finished run into place ({e}); its result is in {_keep(tmp, out)}"
            ) from None


def _keep(tmp: Path, out: Path) -> Path:
    """Rename the finished `tmp` to a visible name beside `out` → that name (`tmp` where it cannot)."""
    kept = out.with_name(f"{out.name}.new-{secrets.token_hex(3)}")
    try:
        os.rename(tmp, kept)
    except OSError:
        _KEPT.add(tmp)
        return tmp
    return kept


_KEPT: set[Path] = set()  # finished folders that could not be renamed: atomic_folder leaves them
_PLACED: set[Path] = set()  # the --out folders this run has written


@contextlib.contextmanager
def _interrupts_deferred():
    """SIGINT and SIGTERM that arrive inside the block take effect when it ends (in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    mine = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not None]  # None: set outside Python
    previous = {s: signal.signal(s, lambda n, _: received.append(n)) for s in mine}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            signal.raise_signal(received[0])


def command_line() -> str:
    """The command that is running, as one would type it from the repository root."""
    return shlex.join(["python", f"recipes/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def print_json(record: dict) -> None:
    """The run's record as one JSON line (the last line a recipe prints)."""
    print(json.dumps(record, default=str), flush=True)
