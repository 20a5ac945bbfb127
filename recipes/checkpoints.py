"""Verify the committed checkpoints, or convert folders of older formats (a maintainer's tool).

    python recipes/checkpoints.py verify [NAME ...]        # load each (all by default) with every check
    python recipes/checkpoints.py upgrade DIR ... [--tokenizer CLASS]

``upgrade`` is :func:`onehot2gpt.checkpoints.upgrade`: it writes the current format (with
checksums) in place, after checking the folder's weights.
"""

import argparse
from pathlib import Path

from onehot2gpt.checkpoints import FORMAT, TOKENIZERS, VERSION, CheckpointError, list_checkpoints, load, upgrade


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
