"""Verify the committed checkpoints, or convert folders of older formats (a maintainer's tool).

    python recipes/checkpoints.py verify [NAME ...]        # load each (all by default) with every check
    python recipes/checkpoints.py upgrade DIR ... [--tokenizer CLASS]

``upgrade`` (:func:`upgrade`) writes the current format (with checksums) in place, after checking
the folder's weights; the library refuses an older folder and names this command.
"""

import argparse
import json
from pathlib import Path

from onehot2gpt.checkpoints import (
    CONFIG,
    FORMAT,
    TOKENIZERS,
    VERSION,
    WEIGHTS,
    CheckpointError,
    list_checkpoints,
    load,
    sha256_file,
    write_record,
)

_OLD_FORMATS = {"onehot2gpt-gpt/1": "gpt", "onehot2gpt-bert/1": "bert", "onehot2gpt-bilm": "bilm"}


def upgrade(directory: str | Path, tokenizer: str | None = None) -> Path:
    """Convert a folder written by an older onehot2gpt (per-model formats, no checksums) into this
    format in place: the weights are checked (parse, finite, names and shapes through the model's
    builder), then config.json is rewritten with the sha256 of each file. The weights file is
    never rewritten (word2vec's ``vectors.safetensors`` is only renamed), so the model loads
    bit-identically. `tokenizer` names the class of ``vocab.json`` where it is not a Vocab
    (``"WorldTokenizer"`` for the zero-shot models)."""
    directory = Path(directory)
    old = json.loads((directory / CONFIG).read_text(encoding="utf-8"))
    if old.get("format") == FORMAT:
        raise ValueError(f"{directory} is already in format {FORMAT} version {old.get('version')}")
    if old.get("format") in _OLD_FORMATS:
        kind = _OLD_FORMATS[old["format"]]
        model = old.get("model", "BiLM" if kind == "bilm" else None)
        info = old.get("info", old.get("training", {}))
        extra = {"pooler": old["pooler"]} if "pooler" in old else {}
        config = old["config"]
        dtype = old.get("dtype", "float32")
    elif "format" not in old and (directory / "vectors.safetensors").is_file():
        kind, model, extra, dtype = "word2vec", "WordVectors", {}, old.get("stored_dtype", "float16")
        config = {"vocab_size": old["vocab_size"], "d_model": old["dim"]}
        info = {k: v for k, v in old.items() if k not in ("vocab_size", "dim", "stored_dtype")}
        (directory / "vectors.safetensors").rename(directory / WEIGHTS)  # the same bytes
    else:
        raise ValueError(f"{directory / CONFIG}: format {old.get('format')!r} is not one this library wrote")
    if tokenizer is None:
        tokenizer = next(
            (t for t, (_, f) in TOKENIZERS.items() if t != "WorldTokenizer" and (directory / f).is_file()), None
        )
    files = {WEIGHTS: sha256_file(directory / WEIGHTS)}
    if tokenizer:
        files[TOKENIZERS[tokenizer][1]] = sha256_file(directory / TOKENIZERS[tokenizer][1])
    previous = (directory / CONFIG).read_text(encoding="utf-8")
    write_record(directory, kind, model, config, files, tokenizer, dtype, extra, info)
    try:
        load(directory)  # every check, the model's shapes included
    except Exception:
        (directory / CONFIG).write_text(previous, encoding="utf-8")
        if kind == "word2vec":
            (directory / WEIGHTS).rename(directory / "vectors.safetensors")
        raise
    return directory


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog="python recipes/checkpoints.py", description="Verify the course checkpoints, or convert older folders."
    )
    sub = p.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="load every (or each named) course checkpoint with all checks")
    verify.add_argument("names", nargs="*")
    up = sub.add_parser("upgrade", help="convert folders of the older formats in place (adds checksums)")
    up.add_argument("directories", nargs="+", type=Path)
    up.add_argument("--tokenizer", choices=sorted(TOKENIZERS), help="class of the folder's tokenizer file")
    args = p.parse_args(argv)
    if args.command == "upgrade":
        for directory in args.directories:
            upgrade(directory, args.tokenizer)
            print(f"{directory}: upgraded to {FORMAT} version {VERSION}")
        return
    failed = 0
    for name in args.names or list_checkpoints():
        try:
            model, tokenizer, _, _ = load(name)
            print(f"ok      {name}: {type(model).__name__}, {type(tokenizer).__name__}")
        except (CheckpointError, FileNotFoundError, ValueError) as e:
            failed += 1
            print(f"FAILED  {name}: {e}")
    if failed:
        raise SystemExit(f"{failed} checkpoint(s) failed")


if __name__ == "__main__":
    main()
