"""Benchmark: how long every course notebook takes to run top to bottom.

Each ``notebooks/NN_*.ipynb`` is executed in a fresh kernel (nbclient, the way nbval and the
student tests run them), one after the other, with ``--threads`` torch threads (the course's
default: 2). The time is wall-clock from kernel start to the last cell, kernel start included.
Targets: each notebook ≤ 90 s and all of them ≤ 15 minutes on 2 cores, and every cell that runs
longer than 10 s shows a progress bar (``slow_cells_without_progress`` lists those that do not).

Run from the repository root::

    python bench/notebooks.py [--threads 2] [--only 09 10] [--timeout 600] [--solved-student]

``--solved-student`` times the student versions instead, each exercise filled with the course's
answer (what a student who solved everything runs); the same targets apply.

Prints one line per notebook and, as the last line, one JSON object:
``{"seconds": {"01_onehot.ipynb": 12.3, …}, "total_seconds": …, "slowest": …,
"over_90_s": [...], "slow_cells_without_progress": [...], "threads": 2}``. A notebook that fails is reported with its error and
counted in ``failed``; the script exits non-zero then.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
TARGET_EACH, TARGET_TOTAL = 90.0, 15 * 60.0
SLOW_CELL_S = 10.0  # a cell that runs longer shows progress (issue 48)


# The line a finished course progress bar leaves (onehot2gpt.progress), e.g. "SST-2: 50/50, 5.2 s".
BAR_LINE = re.compile(r"(?m)^.*\d+(/\S+)?, \d+(\.\d)? s$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def cell_seconds(cell) -> float:
    """How long one executed cell ran, from nbclient's timing metadata."""
    timing = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in timing or "shell.execute_reply" not in timing:
        return 0.0
    start, end = (
        datetime.fromisoformat(timing[k].replace("Z", "+00:00")) for k in ("iopub.execute_input", "shell.execute_reply")
    )
    return (end - start).total_seconds()


def shows_progress(cell) -> bool:
    """A progress bar's widget or the line it leaves, among the cell's outputs."""
    return any(
        WIDGET_VIEW in o.get("data", {})
        and not "".join(o["data"].get("text/plain", "")).strip()
        or o.get("output_type") == "stream"
        and BAR_LINE.search("".join(o.get("text", "")))
        for o in cell.get("outputs", [])
    )


def solved_student(path: Path):
    """The student version of course notebook `path` with every exercise cell holding the course's
    answer (matched by cell id): what a student who solved everything runs."""
    student = nbformat.read(ROOT / "notebooks" / "student" / path.name, as_version=4)
    answers = {c.get("id"): c.source for c in nbformat.read(path, as_version=4).cells}
    for cell in student.cells:
        if "exercise" in cell.get("metadata", {}).get("tags", []):
            cell.source = answers[cell.get("id")]
    return student


def run(path: Path, timeout: int, student: bool = False) -> tuple[float, list[str]]:
    """Run one notebook (its solved student version if `student`) → (its seconds, the cells over
    SLOW_CELL_S that show no progress)."""
    nb = solved_student(path) if student else nbformat.read(path, as_version=4)
    folder = path.parent / "student" if student else path.parent
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    seconds = time.perf_counter() - start
    silent = [
        f"{path.name} cell {i}: {cell_seconds(c):.1f} s"
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and cell_seconds(c) > SLOW_CELL_S and not shows_progress(c)
    ]
    return seconds, silent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2, help="ONEHOT2GPT_THREADS for the kernels")
    p.add_argument("--only", nargs="+", help="notebook numbers, e.g. 09 10")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    p.add_argument(
        "--solved-student",
        action="store_true",
        help="time the student versions with every exercise solved (the course's answers) instead",
    )
    args = p.parse_args(argv)
    os.environ["ONEHOT2GPT_THREADS"] = str(args.threads)
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.only:
        paths = [q for q in paths if q.name[:2] in args.only]
        if not paths:
            p.error(f"no notebook numbered {' '.join(args.only)} in notebooks/")
    seconds, failed, silent = {}, {}, []
    for path in paths:
        try:
            took, quiet = run(path, args.timeout, args.solved_student)
            seconds[path.name] = round(took, 1)
            silent += quiet
            print(f"{path.name:32} {seconds[path.name]:7.1f} s", flush=True)
        except Exception as exc:  # report and go on: one broken notebook must not hide the others
            failed[path.name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
            print(f"{path.name:32} FAILED {failed[path.name]}", flush=True)
    total = round(sum(seconds.values()), 1)
    result = {
        "seconds": seconds,
        "total_seconds": total,
        "slowest": max(seconds, key=seconds.get) if seconds else None,
        "over_90_s": [n for n, s in seconds.items() if s > TARGET_EACH],
        "slow_cells_without_progress": silent,
        "targets": {"each_s": TARGET_EACH, "total_s": TARGET_TOTAL, "cell_without_progress_s": SLOW_CELL_S},
        "failed": failed,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "solved_student_versions": args.solved_student,
    }
    print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
