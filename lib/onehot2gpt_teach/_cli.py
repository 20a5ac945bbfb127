"""Checks the console scripts share: each turns a bad argument into an error that names the
option, the value and what to do (``parser.error`` exits with status 2 and the usage line)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def output_folder(parser: argparse.ArgumentParser, option: str, value: str | Path) -> Path:
    """`value` as a folder to write into: an existing folder or one that can be made."""
    path = Path(value)
    if path.exists() and not path.is_dir():
        parser.error(f"{option} {value}: is a file, not a folder; give a folder to write into (made if missing)")
    base = _nearest_existing(path)
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        parser.error(f"{option} {value}: {base} cannot be written; give a folder you can write to")
    return path


def output_file(parser: argparse.ArgumentParser, option: str, value: str | Path, suffix: str) -> Path:
    """`value` as a file to (over)write, ending in `suffix`, whose folder exists or can be made."""
    path = Path(value)
    if path.suffix != suffix:
        parser.error(f"{option} {value}: give a file name ending in {suffix}")
    if path.is_dir():
        parser.error(f"{option} {value}: is a folder; give a file name ending in {suffix}")
    base = _nearest_existing(path.parent)
    if path.exists() and not os.access(path, os.W_OK):
        parser.error(f"{option} {value}: the file cannot be overwritten; give another name or remove it")
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        parser.error(f"{option} {value}: {base} cannot be written; give a path you can write to")
    return path


def input_file(parser: argparse.ArgumentParser, what: str, value: str | Path, suffix: str = ".ipynb") -> Path:
    """`value` as an existing file ending in `suffix`."""
    path = Path(value)
    if not path.is_file():
        parser.error(f"{what} {value}: no such file; give the path of a {suffix} file, e.g. notebooks/01_onehot.ipynb")
    if path.suffix != suffix:
        parser.error(f"{what} {value}: not a {suffix} file; give a notebook such as notebooks/01_onehot.ipynb")
    return path


def input_folder(parser: argparse.ArgumentParser, what: str, value: str | Path) -> Path:
    """`value` as an existing folder."""
    path = Path(value)
    if not path.is_dir():
        parser.error(f"{what} {value}: no such folder; give an existing folder")
    return path
