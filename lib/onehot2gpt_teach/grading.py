"""Grade submitted student notebooks: run each in a fresh kernel and report which checked
exercises pass.

The exercises and their check cells are described in :mod:`onehot2gpt.exercises`. This module is
for instructors::

    python -m onehot2gpt_teach.grading submissions/ --reference notebooks --out grades

Submissions are the ``*.ipynb`` files anywhere under ``submissions/`` (hidden folders and
``.ipynb_checkpoints`` are skipped). A submission is matched to its course notebook by file name:
``10_zero_shot.ipynb`` is graded against ``notebooks/10_zero_shot.ipynb``; so is
``alice_10_zero_shot.ipynb``. The *student* is the first folder under ``submissions/``
(``alice/10_zero_shot.ipynb`` → ``alice``); for a file directly in ``submissions/`` it is the
file name without the course notebook's name (``alice_10_zero_shot.ipynb`` → ``alice``), or the
file stem when nothing is left.

Each submission runs cell by cell in its own kernel (the current Python environment), in an
empty temporary working folder, so one failing cell does not stop the rest and no state is
shared between students. The exercises are the reference notebook's check cells, named after
the check they call (``check_qa_prompt(qa_prompt)`` → ``qa_prompt``) and worth the points of the
cell's metadata ``{"onehot2gpt": {"points": 2}}`` (1 by default). The grader always runs the
*reference* check cell, at the place of the submission's own check cell (found by cell id, else
by identical source) or, where it was deleted, right after the exercise cell; a deleted or edited
check cell is reported. Before every check, ``onehot2gpt.exercises`` is reloaded in the kernel and
the ``check_*`` names are bound again.

The verdict is reached here, not in the kernel: there the check only records the answers of the
student's function, on the check's own inputs and on those of hidden seeds
(:func:`onehot2gpt.exercises.checking.start_recording`), and :func:`replay_check` judges them in
the grading process with the library's reference and comparison. Patching anything in the kernel
can only spoil the recorded answers.

Robustness: each submission is graded by a process of its own (``--jobs`` at a time), in a session
of its own, with a private HOME and a memory limit; a cell that runs longer than
``--cell-timeout`` is interrupted (and, when it ignores the interrupt, the kernel is restarted and
the cells that had run are run again); a kernel that dies is restarted the same way; when the
whole notebook passes ``--timeout`` the checks left are reported as not run; a submission that
kills its grading process is reported as a crash. Each graded submission goes to the journal
``results.jsonl`` at once, and a run that finds the journal grades only what is left. A file that
is not a notebook, or whose name matches no course notebook, is reported. This is not a sandbox:
student code runs with your permissions and your network, so grade untrusted files in a container.

Output, in ``--out`` (default: the submissions folder):

* ``grades.csv``: one row per (submission, exercise) with the columns ``student, notebook, file,
  exercise, result, check_cell, message, points, max_points``. ``result`` is ``pass``, ``fail``,
  ``timeout``, ``crash`` (the kernel or the grading process died), ``not run`` or ``error`` (the
  submission could not be graded); ``check_cell`` is ``ok``, ``modified`` or ``missing``;
  ``message`` is one line, e.g. the first line of the check's AssertionError and its hint.
* ``grades.md``: a summary table (passed and points per submission), the duplicates (a student
  with several files for one notebook: the best-graded counts), then one table per submission.
* ``grades_wide.csv``: one row per student for an LMS: total, maximum, one column per exercise.
* ``feedback/<student>.md``: one file per student.
"""

from __future__ import annotations

import argparse
import ast
import csv
import math
import re
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":
    # As a command (the grader, and each of its workers: one fresh process per submission), skip
    # jsonschema's optional "iri" format checker: importing it loads rfc3987_syntax, which compiles
    # a grammar at import, 0.9 of the 1.4 s each process spends on imports. The notebook schema
    # nbformat validates against checks no IRI, so no check is lost. Importers of this module keep it.
    sys.modules.setdefault("rfc3987_syntax", None)

try:
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError
    from nbclient.util import run_sync
    from traitlets import default
except ImportError as exc:  # these come with the test extra, not with the library itself
    raise ImportError(f"grading needs nbclient, nbformat and ipykernel ({exc}): pip install -e '.[test]'") from exc

CSV_COLUMNS = ("student", "notebook", "file", "exercise", "result", "check_cell", "message", "points", "max_points")
RESULTS = ("pass", "fail", "timeout", "crash", "not run", "error")
MAX_RESTARTS = 2  # kernel restarts per submission before the remaining checks are given up
PROBE_SECONDS = 2  # after interrupting a cell: how long the kernel may take to answer again
MESSAGE_CHARS = 300

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CHECK_CALL = re.compile(r"\bcheck_\w+")


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExerciseResult:
    """One row of the grade table: how one exercise of one submission went."""

    student: str
    notebook: str  # the course notebook's file name (or the submitted name if unknown)
    file: str  # the submission's path relative to the submissions folder
    exercise: str  # e.g. "qa_prompt"; "" for a row about the whole file
    result: str  # one of RESULTS
    check_cell: str  # "ok", "modified", "missing" or "" when unknown
    message: str  # one line; "" for a pass
    points: float = 0.0  # earned: the exercise's points for a pass, else 0
    max_points: float = 0.0  # the exercise's points (the check cell's metadata; 1 by default)

    def row(self) -> dict[str, str]:
        """The result as a dict keyed by CSV_COLUMNS."""
        return {name: _number(v) if isinstance(v := getattr(self, name), float) else v for name in CSV_COLUMNS}

    @classmethod
    def from_row(cls, row: dict) -> ExerciseResult:
        """The inverse of :meth:`row` (reading grades.csv or the journal)."""
        return cls(
            **{
                name: float(row.get(name) or 0) if name in ("points", "max_points") else str(row.get(name, ""))
                for name in CSV_COLUMNS
            }
        )


def _number(x: float) -> str:
    """1.0 → "1", 0.5 → "0.5"."""
    return f"{x:g}"


@dataclass(frozen=True)
class ReferenceCheck:
    """One check cell of a course notebook: the exercise it grades."""

    name: str  # exercise name, e.g. "one_hot"
    source: str  # the reference check cell's code
    cell_id: str | None
    anchors: tuple[tuple[str | None, str], ...]  # (id, first line) of the code cells before it,
    # nearest first: where to put it if deleted
    points: float = 1.0  # the cell's metadata {"onehot2gpt": {"points": …}}, else 1


@dataclass(frozen=True)
class Submission:
    """A submitted notebook, its student, and the course notebook it answers (None if unknown)."""

    path: Path
    file: str  # relative to the submissions folder, with '/' separators
    student: str
    reference: Path | None


# --------------------------------------------------------------------------------------------
# Finding submissions and reading check cells
# --------------------------------------------------------------------------------------------


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _normalise(source: str) -> str:
    """Source compared for 'unchanged': trailing spaces and blank edges do not count."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _first_line(source: str) -> str:
    return next((line.strip() for line in source.splitlines() if line.strip()), "")


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []) or [])


def exercise_name(check_source: str) -> str:
    """The exercise a check cell grades, from the check it calls: ``check_qa_prompt(qa_prompt)``
    → ``"qa_prompt"`` (several checks in one cell are joined by ``+``; ``""`` if none).

    Example: ``exercise_name("from onehot2gpt.exercises import check_one_hot\\n"
    "check_one_hot(my_one_hot)") == "one_hot"``
    """
    try:
        calls = [
            node.func.id
            for node in ast.walk(ast.parse(check_source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")
        ]
        calls.sort(key=lambda name: check_source.find(name + "("))
    except SyntaxError:
        calls = re.findall(r"\b(check_\w+)\s*\(", check_source)
    names = list(dict.fromkeys(name.removeprefix("check_") for name in calls))
    return "+".join(names)


def reference_checks(notebook) -> list[ReferenceCheck]:
    """The check cells (tagged ``check``) of a course notebook, in order, as ReferenceChecks.
    Exercise names are made unique by a suffix: ``encode``, ``encode (2)``."""
    checks, earlier, seen = [], [], {}
    for number, cell in enumerate(notebook.cells, 1):
        if cell.get("cell_type") != "code":
            continue
        source = _source(cell)
        if "check" in _tags(cell):
            name = exercise_name(source) or f"check at cell {number}"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name} ({seen[name]})"
            checks.append(
                ReferenceCheck(name, source, cell.get("id"), tuple(reversed(earlier)), check_points(cell, number))
            )
        earlier.append((cell.get("id"), _first_line(source)))
    return checks


def check_points(cell, number: int = 0) -> float:
    """The points of a check cell: its metadata ``{"onehot2gpt": {"points": 2}}``, 1 when absent.
    Raises ValueError for anything but a number ≥ 0."""
    meta = cell.get("metadata", {}).get("onehot2gpt", {})
    points = meta.get("points", 1) if isinstance(meta, dict) else 1
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points) or points < 0:
        raise ValueError(f"check cell {number}: metadata onehot2gpt.points must be a number ≥ 0, got {points!r}")
    return float(points)


def match_reference(file_name: str, reference_names: list[str]) -> str | None:
    """The course notebook a submitted file answers: the same name, else the longest course
    name the file name ends with after ``_``, ``-``, ``.`` or a space; None if none.

    Example: ``match_reference("alice_01_onehot.ipynb", ["01_onehot.ipynb"]) == "01_onehot.ipynb"``
    """
    if file_name in reference_names:
        return file_name
    endings = [name for name in reference_names if any(file_name.endswith(sep + name) for sep in "_-. ")]
    return max(endings, key=len) if endings else None


def find_submissions(submissions_dir: str | Path, reference_dir: str | Path) -> list[Submission]:
    """Every ``*.ipynb`` under `submissions_dir` (skipping hidden folders and
    ``.ipynb_checkpoints``), sorted, with its student name and course notebook. Raises
    FileNotFoundError for a missing folder and ValueError when there is nothing to grade."""
    root, reference_dir = Path(submissions_dir), Path(reference_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"submissions folder {root} not found: pass the folder that holds "
            "the submitted .ipynb files (one subfolder per student is fine)"
        )
    if not reference_dir.is_dir():
        raise FileNotFoundError(
            f"reference folder {reference_dir} not found: run from the "
            "repository root or pass --reference path/to/notebooks"
        )
    reference_names = sorted(p.name for p in reference_dir.glob("*.ipynb"))
    if not reference_names:
        raise ValueError(
            f"no course notebooks (*.ipynb) in {reference_dir}: pass the folder of "
            "the solved course notebooks with --reference"
        )
    submissions = []
    for path in sorted(root.rglob("*.ipynb")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        reference = match_reference(path.name, reference_names)
        if len(relative.parts) > 1:
            student = relative.parts[0]
        else:
            prefix = path.name[: -len(reference)] if reference else ""
            student = prefix.rstrip("_-. ") or path.stem
        submissions.append(
            Submission(path, relative.as_posix(), student, reference_dir / reference if reference else None)
        )
    if not submissions:
        raise ValueError(
            f"no .ipynb files found under {root}: put the submitted notebooks there "
            "(e.g. submissions/alice/10_zero_shot.ipynb)"
        )
    return submissions


# --------------------------------------------------------------------------------------------
# The execution plan: the submission's cells with the reference checks in place
# --------------------------------------------------------------------------------------------


@dataclass
class _Step:
    source: str
    label: str  # "cell 7" (1-based position in the submission) or "check"
    check: int | None = None  # index into the reference checks


def plan_cells(notebook, checks: list[ReferenceCheck]) -> tuple[list[_Step], list[str]]:
    """The steps to run for a submission (its code cells, each of its check cells replaced by
    the reference check) and, per reference check, ``"ok"``, ``"modified"`` or ``"missing"``.
    A missing check goes right after the submission's copy of the code cell before it in the
    reference (matched by id, else by first line), or at the end. Check-tagged cells that match
    no reference check are not run."""
    cells = list(notebook.cells)
    by_id = {cell.get("id"): i for i, cell in enumerate(cells) if cell.get("id")}
    matched: dict[int, int] = {}  # submission cell index → reference check index
    status = []
    for k, check in enumerate(checks):
        i = by_id.get(check.cell_id) if check.cell_id else None
        if i is not None and i not in matched:
            same = cells[i].get("cell_type") == "code" and _normalise(_source(cells[i])) == _normalise(check.source)
            matched[i] = k
            status.append("ok" if same else "modified")
            continue
        twin = next(
            (
                i
                for i, cell in enumerate(cells)
                if i not in matched
                and cell.get("cell_type") == "code"
                and _normalise(_source(cell)) == _normalise(check.source)
            ),
            None,
        )
        if twin is not None:
            matched[twin] = k
            status.append("ok")
        else:
            status.append("missing")

    steps, inserted_after = [], {}
    for k, check in enumerate(checks):
        if status[k] != "missing":
            continue
        anchor = len(cells) - 1
        for cell_id, first in check.anchors:
            hit = by_id.get(cell_id) if cell_id else None
            if hit is None and first:
                hit = next(
                    (
                        i
                        for i, cell in enumerate(cells)
                        if cell.get("cell_type") == "code" and _first_line(_source(cell)) == first
                    ),
                    None,
                )
            if hit is not None:
                anchor = hit
                break
        inserted_after.setdefault(anchor, []).append(k)
    for k in inserted_after.pop(-1, []):  # an empty notebook: checks only
        steps.append(_Step(checks[k].source, "check", k))
    for i, cell in enumerate(cells):
        if i in matched:
            steps.append(_Step(checks[matched[i]].source, "check", matched[i]))
        elif cell.get("cell_type") == "code" and "check" not in _tags(cell):
            steps.append(_Step(_source(cell), f"cell {i + 1}"))
        for k in inserted_after.get(i, []):
            steps.append(_Step(checks[k].source, "check", k))
    return steps, status


def _check_prelude(check_source: str, answers: str | Path | None = None, hidden_seeds=()) -> str:
    """Code run just before a reference check: reload the exercises module and bind again the
    check names the cell uses, so that a check_* redefined by the student cannot stand in; with
    `answers`, make the checks record the student's answers to that file (and for the inputs of
    `hidden_seeds` too) instead of judging them in the kernel."""
    from onehot2gpt import exercises

    names = sorted(n for n in set(_CHECK_CALL.findall(check_source)) if hasattr(exercises, n))
    # The checks live in submodules (checking, nb01 … nb11): reload those first, in name order so
    # that `checking` comes back before the modules that import from it, then the package.
    lines = [
        "import importlib as _grading_importlib, sys as _grading_sys",
        "_grading_importlib.import_module('onehot2gpt.exercises')",
        "for _grading_name in sorted(m for m in list(_grading_sys.modules) if m.startswith('onehot2gpt.exercises.')):",
        "    _grading_importlib.reload(_grading_sys.modules[_grading_name])",
        "_grading_exercises = _grading_importlib.reload(_grading_sys.modules['onehot2gpt.exercises'])",
    ]
    lines += [f"{name} = _grading_exercises.{name}" for name in names]
    lines.append("del _grading_importlib, _grading_sys, _grading_exercises, _grading_name")
    if answers is not None:  # the checks record the student's answers; the grader judges them
        lines += [
            "import onehot2gpt.exercises.checking as _grading_checking",
            f"_grading_checking.start_recording({str(answers)!r}, {[int(s) for s in hidden_seeds]!r})",
            "del _grading_checking",
        ]
    return "\n".join(lines) + "\n"


_STOP_RECORDING = (
    "import onehot2gpt.exercises.checking as _grading_checking\n"
    "_grading_checking.stop_recording()\ndel _grading_checking\n"
)


def check_calls(check_source: str) -> list[str]:
    """The ``check_*`` functions a check cell calls, in order (``check_one_hot(my_one_hot)`` →
    ``["check_one_hot"]``); only names that :mod:`onehot2gpt.exercises` defines."""
    from onehot2gpt import exercises

    try:
        calls = [
            node
            for node in ast.walk(ast.parse(check_source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")
        ]
        names = [node.func.id for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset))]
    except SyntaxError:
        names = re.findall(r"\b(check_\w+)\s*\(", check_source)
    return [name for name in names if callable(getattr(exercises, name, None))]


def _not_called(*args, **kwargs):
    """Stands in for the student's function in a replay: the grader never runs student code."""
    return None


def replay_check(check_source: str, answers: str | Path, hidden_seeds=()) -> tuple[str, str]:
    """The verdict on a check cell, reached in this process from the answers the student's kernel
    recorded (see :mod:`onehot2gpt.exercises.checking`): the cell's checks run again here, with the
    library's own reference and comparison, on the same inputs and those of `hidden_seeds` →
    ``("pass", "")`` or ``("fail", one-line message)``."""
    import contextlib
    import io

    from onehot2gpt import exercises
    from onehot2gpt.exercises import checking

    names = check_calls(check_source)
    if not names:
        return "fail", "the check cell calls no check of onehot2gpt.exercises"
    try:
        calls = checking.read_recording(answers)
    except ValueError as exc:
        return "fail", str(exc)
    checking.reset_attempts()
    try:
        with checking.replaying(calls, hidden_seeds), contextlib.redirect_stdout(io.StringIO()):
            for name in names:
                getattr(exercises, name)(_not_called)
    except Exception as exc:  # the check's verdict (AssertionError) or its report of bad answers
        return "fail", one_line(type(exc).__name__, str(exc))
    finally:
        checking.reset_attempts()
    return "pass", ""


# --------------------------------------------------------------------------------------------
# Running one submission
# --------------------------------------------------------------------------------------------

# How this process starts kernels: a command before the kernel's own (["unshare", "-rn"] to cut
# the network) and whether the kernel talks to us over Unix sockets (a kernel in a network
# namespace of its own cannot reach our TCP ports). Set by a grading process (:func:`_worker`).
_KERNEL: dict = {"prefix": [], "ipc": False}
_UNSHARE = ["unshare", "--user", "--map-root-user", "--net"]


def network_isolation_available() -> bool:
    """Whether kernels can be started without network here: Linux user and network namespaces
    (``unshare --user --map-root-user --net``, as an ordinary user)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run([*_UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class _CurrentEnvSpecs(KernelSpecManager):
    """Always the ipykernel of this Python, whatever kernel the submission names."""

    def get_kernel_spec(self, kernel_name):
        import ipykernel.kernelspec

        spec = self.kernel_spec_class(
            resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
        )
        spec.argv = [*_KERNEL["prefix"], *spec.argv]
        return spec


class _CurrentEnvKernelManager(AsyncKernelManager):
    @default("kernel_spec_manager")
    def _current_env_specs(self):
        return _CurrentEnvSpecs(data_dir=self.data_dir)


class _Client(NotebookClient):
    """A NotebookClient that keeps only error outputs (a cell printing forever costs no memory)."""

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "error":
            return super().output(outs, msg, display_id, cell_index)
        return None


@dataclass
class _Outcome:
    status: str  # "ok", "error", "timeout" or "dead"
    message: str = ""


def one_line(ename: str, evalue: str, limit: int = MESSAGE_CHARS) -> str:
    """An error as one line: its first line plus its ``Hint:`` line, or else its ``Think about:``
    line, if any (the exception name is left out for AssertionErrors, whose text is the check's
    message).

    Example: ``one_line("AssertionError", "f: values differ\\nHint: add 1")
    == "f: values differ; Hint: add 1"``
    """
    lines = [line.strip() for line in _ANSI.sub("", evalue).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    text = first if ename == "AssertionError" and first else f"{ename}: {first}".rstrip(": ")
    hint = next((line for line in lines[1:] if line.startswith("Hint:")), "")
    hint = hint or next((line for line in lines[1:] if line.startswith("Think about:")), "")
    if hint:
        text += f"; {hint}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Run:
    """One submission's steps in one kernel, restarting it when it hangs or dies."""

    def __init__(
        self,
        steps: list[_Step],
        n_checks: int,
        workdir: str,
        cell_timeout: float,
        timeout: float,
        answers_dir: str | None = None,
        hidden_seeds=(),
    ):
        self.steps, self.workdir = steps, workdir
        self.answers_dir, self.hidden_seeds = answers_dir or workdir, tuple(hidden_seeds)
        self.cell_timeout, self.timeout = cell_timeout, timeout
        self.results: list[tuple[str, str] | None] = [None] * n_checks
        self.deadline = time.monotonic() + timeout
        self.timeout_name = f"GradingTimeout_{secrets.token_hex(4)}"  # no student cell raises it
        self.replay: list[_Step] = []  # cells that ran cleanly: re-run after a restart
        self.problems: list[tuple[int, str, str]] = []  # (step position, status, "cell 5 …")
        self.restarts = 0
        self.client: _Client | None = None

    def finish(self, result: str, message: str) -> None:
        """Give every check that has no result yet this (result, message)."""
        self.results = [(result, message) if r is None else r for r in self.results]

    async def _start(self) -> _Client:
        client = _Client(
            nbformat.v4.new_notebook(),
            kernel_manager_class=_CurrentEnvKernelManager,
            kernel_name="python3",
            interrupt_on_timeout=True,
            force_raise_errors=True,
            error_on_timeout={"ename": self.timeout_name, "evalue": "", "traceback": []},
            shutdown_kernel="immediate",
            startup_timeout=120,
        )
        self.client = client
        client.km = client.create_kernel_manager()
        if _KERNEL["ipc"]:  # Unix sockets in our private folder: they cross network namespaces
            client.km.transport = "ipc"
            client.km.ip = str(Path(self.answers_dir) / f"kernel-{secrets.token_hex(3)}")
        # the kernel's own stdout/stderr (C-level prints, ipykernel warnings) are not wanted
        await client.async_start_new_kernel(cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await client.async_start_new_kernel_client()
        return client

    async def stop(self) -> None:
        """Shut the kernel down (at once) if one is running."""
        client, self.client = self.client, None
        if client is not None and client.km is not None:
            await client._async_cleanup_kernel()

    async def _execute(self, client: _Client, source: str, limit: float) -> _Outcome:
        cell = nbformat.v4.new_code_cell(source)
        client.nb.cells = [cell]
        client.timeout = max(1, math.ceil(limit))
        try:
            await client.async_execute_cell(cell, 0)
        except CellExecutionError as err:
            if err.ename == self.timeout_name:
                return _Outcome("timeout")
            return _Outcome("error", one_line(err.ename, err.evalue))
        except DeadKernelError:
            return _Outcome("dead")
        return _Outcome("ok")

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _out_of_time(self, where: str) -> None:
        self.finish("not run", f"the notebook's time limit of {self.timeout:g} s ran out {where}")

    async def run(self) -> None:
        """Run every step, restarting the kernel at most MAX_RESTARTS times; fills
        self.results with (result, message) per reference check."""
        position = 0
        try:
            while position < len(self.steps):
                client = await self._start()
                if self.restarts and not await self._replay(client):
                    return
                position, restart = await self._run_from(client, position)
                await self.stop()
                if not restart:
                    break
                self.restarts += 1
                if self.restarts > MAX_RESTARTS:
                    self.finish(
                        "not run",
                        f"the kernel was restarted {MAX_RESTARTS} times, the "
                        f"last time after {self.steps[position - 1].label}; gave up",
                    )
                    return
        finally:
            await self.stop()
        self.finish("not run", "the notebook ended before this check")

    async def _replay(self, client: _Client) -> bool:
        for step in self.replay:
            if self._left() <= 0:
                self._out_of_time("while re-running cells after a kernel restart")
                return False
            outcome = await self._execute(client, step.source, min(self.cell_timeout, self._left()))
            if outcome.status in ("timeout", "dead"):
                self.finish(
                    "not run",
                    f"{step.label} did not run again after a kernel restart "
                    f"({'timed out' if outcome.status == 'timeout' else 'kernel died'})",
                )
                return False
        return True

    async def _run_from(self, client: _Client, position: int) -> tuple[int, bool]:
        """Run steps from `position` on; return where to go on and whether to restart."""
        while position < len(self.steps):
            step, left = self.steps[position], self._left()
            if left <= 0:
                self._out_of_time(f"before {step.label}")
                return len(self.steps), False
            limit = min(self.cell_timeout, left)
            source, answers = step.source, None
            if step.check is not None:
                answers = Path(self.answers_dir) / f"answers-{position}-{secrets.token_hex(4)}.pt"
                source = _check_prelude(source, answers, self.hidden_seeds) + source
            outcome = await self._execute(client, source, limit)
            if answers is not None and outcome.status in ("ok", "error"):
                await self._execute(client, _STOP_RECORDING, PROBE_SECONDS)
            self._record(position, step, outcome, limit, answers)
            position += 1
            if outcome.status == "dead":
                return position, True
            if outcome.status == "timeout":
                if limit < self.cell_timeout:  # the whole notebook ran out of time
                    self._out_of_time(f"in {step.label}")
                    return len(self.steps), False
                if not await self._answers(client):  # the interrupt was ignored: start afresh
                    if self.problems and self.problems[-1][0] == position - 1:
                        at, status, text = self.problems[-1]
                        self.problems[-1] = (
                            at,
                            status,
                            text.replace("and was interrupted", "and ignored the interrupt; kernel restarted"),
                        )
                    return position, True
        return position, False

    async def _answers(self, client: _Client) -> bool:
        """Whether the kernel runs code again after an interrupt. nbclient has already waited
        `iopub_timeout` seconds for the interrupted cell to end, so a short probe suffices."""
        saved, client.iopub_timeout = client.iopub_timeout, 1
        try:
            return (await self._execute(client, "pass", PROBE_SECONDS)).status == "ok"
        finally:
            client.iopub_timeout = saved

    def _context(self, position: int, undefined: bool) -> tuple[str, str]:
        """The (status, text) of the problem before a check that most likely explains its
        failure: the last one since the previous check, else, when the check met an undefined
        name, the first one in the notebook (a failed import cell, say)."""
        previous = max((p for p, s in enumerate(self.steps[:position]) if s.check is not None), default=-1)
        section = [(status, text) for p, status, text in self.problems if previous < p < position]
        earlier = [(status, text) for p, status, text in self.problems if p < position]
        if section:
            return section[-1]
        return earlier[0] if earlier and undefined else ("", "")

    def _record(self, position: int, step: _Step, outcome: _Outcome, limit: float, answers: Path | None = None) -> None:
        what = step.label if step.check is None else "the check"
        if limit >= self.cell_timeout:
            timed_out = f"{what} timed out after {limit:g} s and was interrupted"
        else:
            timed_out = f"{what} was stopped when the notebook's time limit of {self.timeout:g} s ran out"
        texts = {
            "timeout": timed_out,
            "dead": f"the kernel died in {what} (os._exit, a crash or running out of memory?) and was restarted",
            "error": f"{step.label} raised {outcome.message}",
        }
        if step.check is None:
            if outcome.status == "ok":
                self.replay.append(step)
            else:
                self.problems.append((position, outcome.status, texts[outcome.status]))
            return
        if outcome.status in ("timeout", "dead"):
            self.results[step.check] = (_RESULT_OF[outcome.status], texts[outcome.status])
            return
        # The verdict: the recorded answers judged here, never what the kernel printed or raised.
        verdict = replay_check(step.source, answers, self.hidden_seeds) if answers else ("fail", "")
        if verdict[0] == "pass":
            self.results[step.check] = verdict
            return
        # the check did not get to the answers (say why), or judged them wrong; either way the
        # problem just before it (a cell that failed, timed out or crashed) may explain it
        message = outcome.message if outcome.status == "error" else verdict[1]
        status, context = self._context(position, "NameError" in message)
        message = f"{context}; then {message}" if context else message
        self.results[step.check] = (_RESULT_OF.get(status, "fail"), message)


_RESULT_OF = {"timeout": "timeout", "dead": "crash"}  # a check's result after such a problem


def _read_notebook(path: Path):
    """nbformat's reading plus the structure the grader relies on; raises ValueError."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook, unreadable: all one answer
        raise ValueError(f"not a valid notebook: {one_line(type(exc).__name__, str(exc))}") from exc
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(
        isinstance(c, dict) and isinstance(c.get("cell_type"), str) and isinstance(c.get("source", ""), (str, list))
        for c in cells
    ):
        raise ValueError("not a valid notebook: it has no list of cells with a type and a source")
    return notebook


def grade_submission(
    submission: Submission, *, cell_timeout: float = 300, timeout: float = 1800, hidden_seeds=()
) -> list[ExerciseResult]:
    """Run one submission in a fresh kernel and grade it: one ExerciseResult per check cell of
    its course notebook (one row with result ``error`` when there is no course notebook or it
    cannot be read). The checks also run on the inputs of `hidden_seeds`. Never raises for a
    broken submission. (This runs the kernel as a child of this process: :func:`grade` runs each
    submission in a process of its own.)"""
    try:
        return _grade_submission(submission, cell_timeout, timeout, tuple(hidden_seeds))
    except Exception as exc:  # a grader bug must not end the run for everyone else
        message = f"grader error: {one_line(type(exc).__name__, str(exc))}"
        return [ExerciseResult(submission.student, submission.path.name, submission.file, "", "error", "", message)]


def _grade_submission(
    submission: Submission, cell_timeout: float, timeout: float, hidden_seeds: tuple[int, ...] = ()
) -> list[ExerciseResult]:
    def rows(results, status=None):
        return [
            ExerciseResult(
                submission.student,
                notebook_name,
                submission.file,
                check.name,
                result,
                status[k] if status else "",
                message,
                check.points if result == "pass" else 0.0,
                check.points,
            )
            for k, (check, (result, message)) in enumerate(zip(checks, results))
        ]

    notebook_name = submission.reference.name if submission.reference else submission.path.name
    if submission.reference is None:
        return [
            ExerciseResult(
                submission.student,
                notebook_name,
                submission.file,
                "",
                "error",
                "",
                f"unknown notebook {submission.path.name!r}: no course notebook "
                "of that name; rename it like the course notebook it answers",
            )
        ]
    try:
        checks = reference_checks(_read_notebook(submission.reference))
    except ValueError as exc:
        return [
            ExerciseResult(
                submission.student,
                notebook_name,
                submission.file,
                "",
                "error",
                "",
                f"reference {submission.reference}: {exc}",
            )
        ]
    if not checks:
        return [
            ExerciseResult(
                submission.student,
                notebook_name,
                submission.file,
                "",
                "error",
                "",
                f"reference {submission.reference} has no cell tagged 'check'",
            )
        ]
    try:
        notebook = _read_notebook(submission.path)
    except ValueError as exc:
        return rows([("error", str(exc))] * len(checks))
    steps, status = plan_cells(notebook, checks)
    with (
        tempfile.TemporaryDirectory(prefix="onehot2gpt-grading-") as workdir,
        tempfile.TemporaryDirectory(prefix="onehot2gpt-answers-") as answers_dir,
    ):
        run = _Run(steps, len(checks), workdir, cell_timeout, timeout, answers_dir, hidden_seeds)
        try:
            run_sync(run.run)()
        except Exception as exc:  # the kernel would not start, or a grader bug: report, go on
            run.finish("error", f"grader error: {one_line(type(exc).__name__, str(exc))}")
        finally:
            if run.client is not None:  # interrupted (Ctrl-C) or failed mid-way
                try:
                    run_sync(run.stop)()
                except Exception:
                    pass
    results = []
    for (result, message), state in zip(run.results, status):
        if state != "ok":
            note = f"check cell {state}: graded with the reference check cell"
            message = f"{note}; {message}" if message else note
        results.append((result, message))
    return rows(results, status)


# --------------------------------------------------------------------------------------------
# A class: one process per submission, several at a time, a journal to resume from
# --------------------------------------------------------------------------------------------

WORKER_GRACE = 120  # seconds a submission's process may take beyond --timeout (start-up, replays)
MEMORY_GB = 8.0  # address space for a submission's process and its kernel (RLIMIT_AS)
JOURNAL = "results.jsonl"


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_rows(submission: Submission, result: str, message: str) -> list[ExerciseResult]:
    """Every exercise of the submission's course notebook with one result (or one file row)."""
    notebook = submission.reference.name if submission.reference else submission.path.name
    try:
        checks = reference_checks(_read_notebook(submission.reference)) if submission.reference else []
    except ValueError:
        checks = []
    if not checks:
        return [ExerciseResult(submission.student, notebook, submission.file, "", result, "", message)]
    return [
        ExerciseResult(submission.student, notebook, submission.file, c.name, result, "", message, 0.0, c.points)
        for c in checks
    ]


def _limit_resources(memory_gb: float | None) -> list[str]:
    """Limit this process (and the kernel it starts) to `memory_gb` of address space; → what was
    limited, for the report."""
    done = []
    try:
        import resource

        if memory_gb:
            limit = int(memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            done.append(f"{memory_gb:g} GB of memory")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # not POSIX, or the limit is above the hard one
        pass
    return done


def _worker(spec_path: str) -> int:
    """``python -m onehot2gpt_teach.grading --worker SPEC``: grade one submission in this process (its
    kernel a child of it) and write the rows to the spec's result file."""
    import json
    import os
    import shutil

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    _limit_resources(spec.get("memory_gb"))
    if not spec.get("network", True) and network_isolation_available():
        _KERNEL.update(prefix=list(_UNSHARE), ipc=True)
    home = tempfile.mkdtemp(prefix="onehot2gpt-home-")  # a private HOME for the kernel
    os.environ.update(
        HOME=home,
        IPYTHONDIR=str(Path(home) / ".ipython"),
        MPLCONFIGDIR=str(Path(home) / ".matplotlib"),
        **spec.get("env", {}),
    )
    try:
        sub = spec["submission"]
        submission = Submission(
            Path(sub["path"]), sub["file"], sub["student"], Path(sub["reference"]) if sub["reference"] else None
        )
        rows = grade_submission(
            submission, cell_timeout=spec["cell_timeout"], timeout=spec["timeout"], hidden_seeds=spec["hidden_seeds"]
        )
        out = Path(spec["result"])
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps([r.row() for r in rows]), encoding="utf-8")
        os.replace(tmp, out)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


class _Workers:
    """Starts one grading process per submission, each in a session of its own (so that a
    submission killing its process group reaches no one else), and kills what is left of it."""

    def __init__(self):
        import threading

        self.running: set = set()
        self.lock = threading.Lock()

    def run(
        self,
        submission: Submission,
        *,
        cell_timeout: float,
        timeout: float,
        hidden_seeds,
        memory_gb: float | None,
        threads: int | None,
        network: bool = True,
    ) -> list[ExerciseResult]:
        import json
        import signal

        from onehot2gpt.data import cache_dir

        with tempfile.TemporaryDirectory(prefix="onehot2gpt-worker-") as tmp:
            result = Path(tmp) / "rows.json"
            env = {"ONEHOT2GPT_CACHE": str(cache_dir())}
            if threads:
                env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            spec = {
                "submission": {
                    "path": str(submission.path),
                    "file": submission.file,
                    "student": submission.student,
                    "reference": str(submission.reference) if submission.reference else "",
                },
                "cell_timeout": cell_timeout,
                "timeout": timeout,
                "hidden_seeds": list(hidden_seeds),
                "memory_gb": memory_gb,
                "result": str(result),
                "env": env,
                "network": network,
            }
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps(spec), encoding="utf-8")
            proc = subprocess.Popen(
                [sys.executable, "-m", "onehot2gpt_teach.grading", "--worker", str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            with self.lock:
                self.running.add(proc)
            timed_out = False
            try:
                proc.wait(timeout=timeout + WORKER_GRACE)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                self._kill(proc)
                with self.lock:
                    self.running.discard(proc)
            try:
                return [ExerciseResult.from_row(r) for r in json.loads(result.read_text(encoding="utf-8"))]
            except (OSError, ValueError, TypeError):
                pass
        if timed_out:
            return _file_rows(
                submission,
                "timeout",
                f"grading this submission took longer than "
                f"{timeout + WORKER_GRACE:g} s (--timeout plus {WORKER_GRACE} s) and was stopped",
            )
        code = proc.returncode
        how = (
            f"was killed by signal {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"ended with exit code {code}"
        )
        return _file_rows(
            submission,
            "crash",
            f"the process grading this submission {how} before it "
            "finished (did the submission kill its kernel's parent, or run out of memory?)",
        )

    def _kill(self, proc) -> None:
        """Kill the process's whole session: the grading process and its kernel."""
        import os
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def kill_all(self) -> None:
        with self.lock:
            running = list(self.running)
        for proc in running:
            self._kill(proc)


def read_journal(path: str | Path) -> tuple[tuple[int, ...] | None, dict[tuple[str, str], list[ExerciseResult]]]:
    """A journal written by :func:`grade` → (its hidden seeds, {(file, sha256): rows}). Lines that
    cannot be read (a run killed mid-write) are skipped: those submissions are graded again."""
    import json

    seeds, done = None, {}
    path = Path(path)
    if not path.exists():
        return None, {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            if "hidden_seeds" in entry and "file" not in entry:
                seeds = tuple(int(x) for x in entry["hidden_seeds"])
            else:
                done[(entry["file"], entry["sha256"])] = [ExerciseResult.from_row(r) for r in entry["rows"]]
        except (ValueError, KeyError, TypeError):
            continue
    return seeds, done


def _append(path: Path, entry: dict) -> None:
    import json
    import os

    with path.open("a+", encoding="utf-8") as f:
        f.seek(0, 2)
        if f.tell():  # a run killed mid-line left no line break: start a new line
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                f.write("\n")
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def grade(
    submissions_dir: str | Path,
    reference_dir: str | Path = "notebooks",
    *,
    cell_timeout: float = 300,
    timeout: float = 1800,
    log=None,
    jobs: int = 1,
    hidden_seeds=None,
    journal: str | Path | None = None,
    memory_gb: float | None = MEMORY_GB,
    network: bool = False,
    on_result=None,
) -> list[ExerciseResult]:
    """Grade every notebook under `submissions_dir` against the course notebooks in
    `reference_dir` → all ExerciseResults, in submission order.

    Each submission runs in a process of its own (its kernel a child of it, in a session of its
    own, limited to `memory_gb` of memory, with a private HOME and, unless `network`, no network
    where the OS allows it (:func:`network_isolation_available`)), `jobs` at a time. A submission
    that kills its process or its kernel is reported as a ``crash``; one that outlives
    `timeout` plus :data:`WORKER_GRACE` as a ``timeout``; the run goes on. The checks also run on
    the inputs of `hidden_seeds` (default: one random seed, or the journal's). With `journal`
    (a ``.jsonl`` file), every graded submission is appended as soon as it is done, and a run
    that finds the file takes the submissions graded before (same file, same contents) from it:
    an interrupted run resumes. `log(text)` hears one line per submission; `on_result(results)`
    is called with the results so far after each one."""
    import concurrent.futures
    import os

    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number ≥ 1, got {jobs!r}")
    submissions = find_submissions(submissions_dir, reference_dir)
    done: dict = {}
    if journal is not None:
        journal = Path(journal)
        recorded, done = read_journal(journal)
        if hidden_seeds is None:
            hidden_seeds = recorded
        elif recorded is not None and done and tuple(hidden_seeds) != recorded:
            raise ValueError(
                f"{journal} holds grades made with other hidden seeds {list(recorded)}: "
                f"grade with the same --hidden-seed, or delete the file to start afresh"
            )
    if hidden_seeds is None:
        hidden_seeds = (secrets.randbelow(2**31 - 2) + 1,)
    hidden_seeds = tuple(int(x) for x in hidden_seeds)
    if journal is not None and not journal.exists():
        journal.parent.mkdir(parents=True, exist_ok=True)
        _append(journal, {"hidden_seeds": list(hidden_seeds)})
    threads = max(1, (os.cpu_count() or 1) // jobs)
    results: dict[int, list[ExerciseResult]] = {}
    todo = []
    for i, submission in enumerate(submissions):
        key = (submission.file, _sha256(submission.path))
        if key in done:
            results[i] = done[key]
            if log:
                log(f"{submission.file}: graded before ({journal.name}), not run again")
        else:
            todo.append((i, submission, key))
    workers = _Workers()
    import threading

    lock = threading.Lock()

    def one(item):
        i, submission, key = item
        start = time.monotonic()
        rows = workers.run(
            submission,
            cell_timeout=cell_timeout,
            timeout=timeout,
            hidden_seeds=hidden_seeds,
            memory_gb=memory_gb,
            threads=threads,
            network=network,
        )
        with lock:
            results[i] = rows
            if journal is not None:
                _append(journal, {"file": key[0], "sha256": key[1], "rows": [r.row() for r in rows]})
            if log:
                passed = sum(r.result == "pass" for r in rows)
                total = sum(1 for r in rows if r.exercise)
                summary = f"{passed}/{total} passed" if total else f"{rows[0].result}: {rows[0].message}"
                log(f"{submission.file}: {summary} ({time.monotonic() - start:.1f} s)")
            if on_result:
                on_result([r for k in sorted(results) for r in results[k]])

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    except BaseException:  # Ctrl-C: stop every grading process, keep the journal
        workers.kill_all()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [r for i in sorted(results) for r in results[i]]


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def write_csv(results: list[ExerciseResult], path: str | Path) -> Path:
    """Write one row per ExerciseResult with the columns CSV_COLUMNS; returns the path."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(r.row() for r in results)
    return path


def duplicates(results: list[ExerciseResult]) -> dict[tuple[str, str], list[str]]:
    """{(student, notebook): files} for every student with more than one file for a notebook
    (a folder and a draft subfolder, a prefixed copy, …), files best-graded first: the first is
    the one that counts."""
    files: dict[tuple[str, str], dict[str, float]] = {}
    for r in results:
        if r.exercise:
            score = files.setdefault((r.student, r.notebook), {})
            score[r.file] = score.get(r.file, 0.0) + r.points
    return {key: sorted(scores, key=lambda f: (-scores[f], f)) for key, scores in files.items() if len(scores) > 1}


def _counted(results: list[ExerciseResult]) -> list[ExerciseResult]:
    """The rows that count: for a duplicated (student, notebook), only the best-graded file's."""
    dropped = {f for files in duplicates(results).values() for f in files[1:]}
    return [r for r in results if r.file not in dropped]


def markdown_report(results: list[ExerciseResult], settings: str = "") -> str:
    """A Markdown summary: passed/total and points per submission, duplicates, then one table per
    submission."""
    by_file: dict[str, list[ExerciseResult]] = {}
    for r in results:
        by_file.setdefault(r.file, []).append(r)
    twins = duplicates(results)
    not_counted = {f: files[0] for files in twins.values() for f in files[1:]}
    lines = ["# Grades", ""] + ([settings, ""] if settings else [])
    lines += ["| student | notebook | passed | points | problems |", "|---|---|---|---|---|"]
    for file, rows in by_file.items():
        exercises = [r for r in rows if r.exercise]
        passed = sum(r.result == "pass" for r in exercises)
        problems = [
            f"{sum(r.check_cell == s for r in exercises)} check cell(s) {s}"
            for s in ("modified", "missing")
            if any(r.check_cell == s for r in exercises)
        ]
        problems += [
            f"{sum(r.result == s for r in exercises)} {s}"
            for s in ("timeout", "crash", "not run")
            if any(r.result == s for r in exercises)
        ]
        if any(r.result in ("error", "crash", "timeout") for r in rows if not r.exercise) or any(
            r.result == "error" for r in rows
        ):
            problems.insert(0, next(r.message for r in rows if r.result in ("error", "crash", "timeout")))
        if file in not_counted:
            problems.insert(0, f"duplicate: not counted, {not_counted[file]} counts")
        score = f"{passed}/{len(exercises)}" if exercises else "–"
        points = (
            f"{_number(sum(r.points for r in exercises))}/{_number(sum(r.max_points for r in exercises))}"
            if exercises
            else "–"
        )
        lines.append(
            f"| {_cell(rows[0].student)} | {_cell(rows[0].notebook)} | {score} | {points} | "
            f"{_cell('; '.join(problems))} |"
        )
    if twins:
        lines += [
            "",
            "## Duplicates",
            "",
            "These students handed in more than one file for a notebook; the best-graded one "
            "counts in grades_wide.csv and the feedback, and the others are listed here:",
            "",
        ]
        for (student, notebook), files in twins.items():
            lines.append(
                f"* {_cell(student)}, {_cell(notebook)}: {_cell(files[0])} counts; "
                f"not counted: {_cell(', '.join(files[1:]))}"
            )
    mark = {"pass": "✓ pass", "fail": "✗ fail"}
    for file, rows in by_file.items():
        lines += [
            "",
            f"## {rows[0].student}: {file}",
            "",
            "| exercise | result | points | check cell | message |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            pts = f"{_number(r.points)}/{_number(r.max_points)}" if r.exercise else ""
            lines.append(
                f"| {_cell(r.exercise or '(file)')} | {mark.get(r.result, r.result)} | {pts} | "
                f"{r.check_cell} | {_cell(r.message)} |"
            )
    return "\n".join(lines) + "\n"


def write_wide_csv(results: list[ExerciseResult], path: str | Path) -> Path:
    """One row per student, ready for an LMS import: ``student, total, max_total``, then one column
    per exercise (``"01_onehot.ipynb: one_hot"``, points earned; every exercise of every notebook
    graded in this run, 0 where the student handed nothing in), ``files`` (counted) and
    ``duplicates`` (handed in, not counted)."""
    counted = _counted(results)
    columns: dict[str, float] = {}
    for r in counted:
        if r.exercise:
            columns.setdefault(f"{r.notebook}: {r.exercise}", r.max_points)
    students = sorted({r.student for r in results})
    twins = duplicates(results)
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "total", "max_total", *columns, "files", "duplicates"])
        for student in students:
            earned = {f"{r.notebook}: {r.exercise}": r.points for r in counted if r.student == student and r.exercise}
            files = sorted({r.file for r in counted if r.student == student})
            extra = sorted(f for (s, _), fs in twins.items() if s == student for f in fs[1:])
            writer.writerow(
                [
                    student,
                    _number(sum(earned.values())),
                    _number(sum(columns.values())),
                    *(_number(earned.get(c, 0.0)) for c in columns),
                    "; ".join(files),
                    "; ".join(extra),
                ]
            )
    return path


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "student"


def write_feedback(results: list[ExerciseResult], folder: str | Path) -> Path:
    """One Markdown file per student (``feedback/<student>.md``): per notebook the points, each
    exercise's result and what to look at; duplicates named. The lecturer hands these out."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    counted = _counted(results)
    twins = duplicates(results)
    used: dict[str, str] = {}
    for student in sorted({r.student for r in results}):
        name = _safe_name(student)
        while name in used.values():
            name += "_"
        used[student] = name
        rows = [r for r in counted if r.student == student]
        lines = [f"# Feedback for {student}", ""]
        total, most = sum(r.points for r in rows if r.exercise), sum(r.max_points for r in rows if r.exercise)
        lines += [f"Points: **{_number(total)} of {_number(most)}**.", ""]
        for notebook in dict.fromkeys(r.notebook for r in rows):
            mine = [r for r in rows if r.notebook == notebook]
            lines += [f"## {notebook} ({mine[0].file})", ""]
            for (s, nb), files in twins.items():
                if s == student and nb == notebook:
                    lines += [
                        f"You handed in {len(files)} files for this notebook; {files[0]} is graded "
                        f"(not: {', '.join(files[1:])}).",
                        "",
                    ]
            lines += ["| exercise | result | points | what to look at |", "|---|---|---|---|"]
            for r in mine:
                pts = f"{_number(r.points)}/{_number(r.max_points)}" if r.exercise else ""
                lines.append(f"| {_cell(r.exercise or '(file)')} | {r.result} | {pts} | {_cell(r.message)} |")
            lines.append("")
        (folder / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    return folder


def write_reports(
    results: list[ExerciseResult], out_dir: str | Path, settings: str = ""
) -> tuple[Path, Path, Path, Path]:
    """Write ``grades.csv`` (one row per exercise), ``grades.md`` (the lecturer's summary),
    ``grades_wide.csv`` (one row per student, for the LMS) and ``feedback/`` (one file per
    student) into `out_dir` (created if needed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "grades.md"
    md.write_text(markdown_report(results, settings), encoding="utf-8")
    return (
        write_csv(results, out_dir / "grades.csv"),
        md,
        write_wide_csv(results, out_dir / "grades_wide.csv"),
        write_feedback(results, out_dir / "feedback"),
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: grade a folder of submissions, write the reports."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--worker":
        return _worker(argv[1])
    parser = argparse.ArgumentParser(
        prog="python -m onehot2gpt_teach.grading",
        description="Run submitted student notebooks in fresh kernels, one process each, and grade "
        "their checked exercises (grades.csv, grades.md, grades_wide.csv, feedback/).",
    )
    parser.add_argument(
        "submissions",
        help="folder of submitted .ipynb files, searched recursively; the first subfolder names the student",
    )
    parser.add_argument(
        "--reference", default="notebooks", help="folder of the solved course notebooks (default: notebooks)"
    )
    parser.add_argument("--out", help="where to write the reports and the journal (default: the submissions folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for a whole notebook (default: 1800)")
    parser.add_argument(
        "--cell-timeout", type=float, default=300, help="seconds for one cell before it is interrupted (default: 300)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at the same time (default: 1); each gets the machine's cores divided by this",
    )
    parser.add_argument(
        "--hidden-seed",
        type=int,
        action="append",
        help="seed of hidden test inputs, never in the student notebooks (repeat for "
        "more; default: one random seed, kept in the journal so a resumed run "
        "uses it again)",
    )
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=MEMORY_GB,
        help=f"memory for each submission's process and kernel (default: {MEMORY_GB:g}; 0 for no limit)",
    )
    parser.add_argument(
        "--network",
        action="store_true",
        help="let submissions reach the network (by default their kernels get none "
        "where the OS allows: Linux user namespaces)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help=f"grade everything again, ignoring the journal ({JOURNAL}) of an earlier run",
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.cell_timeout <= 0:
        parser.error("--timeout and --cell-timeout must be positive numbers of seconds")
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.memory_gb < 0:
        parser.error("--memory-gb must be 0 (no limit) or a positive number")
    out = Path(args.out or args.submissions)
    journal = out / JOURNAL
    if args.fresh and journal.exists():
        journal.unlink()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    settings = (
        f"Graded against `{args.reference}`; limits: {args.cell_timeout:g} s a cell, "
        f"{args.timeout:g} s a notebook, {args.memory_gb:g} GB a submission "
        f"({'no limit' if not args.memory_gb else 'address space'}); {args.jobs} at a time; network: "
        f"{'allowed' if args.network else 'cut' if network_isolation_available() else 'not isolated (no user namespaces here)'}."
    )
    try:
        results = grade(
            args.submissions,
            args.reference,
            cell_timeout=args.cell_timeout,
            timeout=args.timeout,
            log=log,
            jobs=args.jobs,
            hidden_seeds=args.hidden_seed,
            journal=journal,
            memory_gb=args.memory_gb or None,
            network=args.network,
            on_result=lambda so_far: write_reports(so_far, out, settings + " (in progress)"),
        )
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:  # every grading process was stopped on the way out
        print(
            f"interrupted: the submissions graded so far are in {journal}; run the same command "
            "again to grade the rest",
            file=sys.stderr,
        )
        return 130
    for path in write_reports(results, out, settings):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
