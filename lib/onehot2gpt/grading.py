"""Grade submitted student notebooks: run each in a fresh kernel and report which checked
exercises pass.

The exercises and their check cells are described in :mod:`onehot2gpt.exercises`. This module is
for instructors::

    python -m onehot2gpt.grading submissions/ --reference notebooks --out grades

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
the check they call (``check_qa_prompt(qa_prompt)`` → ``qa_prompt``). The grader always runs
the *reference* check cell, at the place of the submission's own check cell (found by cell id,
else by identical source) or, where it was deleted, right after the exercise cell; a deleted or
edited check cell is reported. Before every check, ``onehot2gpt.exercises`` is reloaded in the
kernel and the ``check_*`` names are bound again, so an exercise cell cannot pass by redefining
a check.

Robustness: a cell that runs longer than ``--cell-timeout`` is interrupted (and, when it
ignores the interrupt, the kernel is restarted and the cells that had run are run again); a
kernel that dies is restarted the same way; when the whole notebook passes ``--timeout`` the
checks left are reported as not run. A file that is not a notebook, or whose name matches no
course notebook, is reported. This makes the obvious cheats hard, but it is not a sandbox:
student code runs with your permissions, so grade untrusted files in a container.

Output, in ``--out`` (default: the submissions folder):

* ``grades.csv``: one row per (submission, exercise) with the columns ``student, notebook,
  file, exercise, result, check_cell, message``. ``result`` is ``pass``, ``fail``, ``timeout``,
  ``crash`` (the kernel died), ``not run`` or ``error`` (the submission could not be graded);
  ``check_cell`` is ``ok``, ``modified`` or ``missing``; ``message`` is one line, e.g. the first
  line of the check's AssertionError and its hint.
* ``grades.md``: a summary table (passed/total per submission), then one table per submission.
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

try:
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError
    from nbclient.util import run_sync
    from traitlets import default
except ImportError as exc:  # these come with the test extra, not with the library itself
    raise ImportError(f"grading needs nbclient, nbformat and ipykernel ({exc}): "
                      "pip install -e '.[test]'") from exc

CSV_COLUMNS = ("student", "notebook", "file", "exercise", "result", "check_cell", "message")
RESULTS = ("pass", "fail", "timeout", "crash", "not run", "error")
MAX_RESTARTS = 2         # kernel restarts per submission before the remaining checks are given up
PROBE_SECONDS = 2        # after interrupting a cell: how long the kernel may take to answer again
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
    notebook: str      # the course notebook's file name (or the submitted name if unknown)
    file: str          # the submission's path relative to the submissions folder
    exercise: str      # e.g. "qa_prompt"; "" for a row about the whole file
    result: str        # one of RESULTS
    check_cell: str    # "ok", "modified", "missing" or "" when unknown
    message: str       # one line; "" for a pass

    def row(self) -> dict[str, str]:
        """The result as a dict keyed by CSV_COLUMNS."""
        return {name: getattr(self, name) for name in CSV_COLUMNS}


@dataclass(frozen=True)
class ReferenceCheck:
    """One check cell of a course notebook: the exercise it grades."""
    name: str                        # exercise name, e.g. "one_hot"
    source: str                      # the reference check cell's code
    cell_id: str | None
    anchors: tuple[tuple[str | None, str], ...]  # (id, first line) of the code cells before it,
                                                  # nearest first: where to put it if deleted


@dataclass(frozen=True)
class Submission:
    """A submitted notebook, its student, and the course notebook it answers (None if unknown)."""
    path: Path
    file: str                  # relative to the submissions folder, with '/' separators
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
        calls = [node.func.id for node in ast.walk(ast.parse(check_source))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id.startswith("check_")]
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
            checks.append(ReferenceCheck(name, source, cell.get("id"), tuple(reversed(earlier))))
        earlier.append((cell.get("id"), _first_line(source)))
    return checks


def match_reference(file_name: str, reference_names: list[str]) -> str | None:
    """The course notebook a submitted file answers: the same name, else the longest course
    name the file name ends with after ``_``, ``-``, ``.`` or a space; None if none.

    Example: ``match_reference("alice_01_onehot.ipynb", ["01_onehot.ipynb"]) == "01_onehot.ipynb"``
    """
    if file_name in reference_names:
        return file_name
    endings = [name for name in reference_names
               if any(file_name.endswith(sep + name) for sep in "_-. ")]
    return max(endings, key=len) if endings else None


def find_submissions(submissions_dir: str | Path, reference_dir: str | Path) -> list[Submission]:
    """Every ``*.ipynb`` under `submissions_dir` (skipping hidden folders and
    ``.ipynb_checkpoints``), sorted, with its student name and course notebook. Raises
    FileNotFoundError for a missing folder and ValueError when there is nothing to grade."""
    root, reference_dir = Path(submissions_dir), Path(reference_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"submissions folder {root} not found: pass the folder that holds "
                                "the submitted .ipynb files (one subfolder per student is fine)")
    if not reference_dir.is_dir():
        raise FileNotFoundError(f"reference folder {reference_dir} not found: run from the "
                                "repository root or pass --reference path/to/notebooks")
    reference_names = sorted(p.name for p in reference_dir.glob("*.ipynb"))
    if not reference_names:
        raise ValueError(f"no course notebooks (*.ipynb) in {reference_dir}: pass the folder of "
                         "the solved course notebooks with --reference")
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
        submissions.append(Submission(path, relative.as_posix(), student,
                                      reference_dir / reference if reference else None))
    if not submissions:
        raise ValueError(f"no .ipynb files found under {root}: put the submitted notebooks there "
                         "(e.g. submissions/alice/10_zero_shot.ipynb)")
    return submissions


# --------------------------------------------------------------------------------------------
# The execution plan: the submission's cells with the reference checks in place
# --------------------------------------------------------------------------------------------

@dataclass
class _Step:
    source: str
    label: str                 # "cell 7" (1-based position in the submission) or "check"
    check: int | None = None   # index into the reference checks


def plan_cells(notebook, checks: list[ReferenceCheck]) -> tuple[list[_Step], list[str]]:
    """The steps to run for a submission (its code cells, each of its check cells replaced by
    the reference check) and, per reference check, ``"ok"``, ``"modified"`` or ``"missing"``.
    A missing check goes right after the submission's copy of the code cell before it in the
    reference (matched by id, else by first line), or at the end. Check-tagged cells that match
    no reference check are not run."""
    cells = list(notebook.cells)
    by_id = {cell.get("id"): i for i, cell in enumerate(cells) if cell.get("id")}
    matched: dict[int, int] = {}          # submission cell index → reference check index
    status = []
    for k, check in enumerate(checks):
        i = by_id.get(check.cell_id) if check.cell_id else None
        if i is not None and i not in matched:
            same = (cells[i].get("cell_type") == "code"
                    and _normalise(_source(cells[i])) == _normalise(check.source))
            matched[i] = k
            status.append("ok" if same else "modified")
            continue
        twin = next((i for i, cell in enumerate(cells) if i not in matched
                     and cell.get("cell_type") == "code"
                     and _normalise(_source(cell)) == _normalise(check.source)), None)
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
                hit = next((i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"
                            and _first_line(_source(cell)) == first), None)
            if hit is not None:
                anchor = hit
                break
        inserted_after.setdefault(anchor, []).append(k)
    for k in inserted_after.pop(-1, []):               # an empty notebook: checks only
        steps.append(_Step(checks[k].source, "check", k))
    for i, cell in enumerate(cells):
        if i in matched:
            steps.append(_Step(checks[matched[i]].source, "check", matched[i]))
        elif cell.get("cell_type") == "code" and "check" not in _tags(cell):
            steps.append(_Step(_source(cell), f"cell {i + 1}"))
        for k in inserted_after.get(i, []):
            steps.append(_Step(checks[k].source, "check", k))
    return steps, status


def _check_prelude(check_source: str) -> str:
    """Code run just before a reference check: reload the exercises module and bind again the
    check names the cell uses, so that a check_* redefined by the student cannot stand in."""
    from . import exercises
    names = sorted(n for n in set(_CHECK_CALL.findall(check_source)) if hasattr(exercises, n))
    # The checks live in submodules (checking, nb01 … nb11): reload those first, in name order so
    # that `checking` comes back before the modules that import from it, then the package.
    lines = ["import importlib as _grading_importlib, sys as _grading_sys",
             "_grading_importlib.import_module('onehot2gpt.exercises')",
             "for _grading_name in sorted(m for m in list(_grading_sys.modules) "
             "if m.startswith('onehot2gpt.exercises.')):",
             "    _grading_importlib.reload(_grading_sys.modules[_grading_name])",
             "_grading_exercises = _grading_importlib.reload(_grading_sys.modules['onehot2gpt.exercises'])"]
    lines += [f"{name} = _grading_exercises.{name}" for name in names]
    lines.append("del _grading_importlib, _grading_sys, _grading_exercises, _grading_name")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Running one submission
# --------------------------------------------------------------------------------------------

class _CurrentEnvSpecs(KernelSpecManager):
    """Always the ipykernel of this Python, whatever kernel the submission names."""

    def get_kernel_spec(self, kernel_name):
        import ipykernel.kernelspec
        return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                      **ipykernel.kernelspec.get_kernel_dict())


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
    status: str               # "ok", "error", "timeout" or "dead"
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

    def __init__(self, steps: list[_Step], n_checks: int, workdir: str, cell_timeout: float,
                 timeout: float):
        self.steps, self.workdir = steps, workdir
        self.cell_timeout, self.timeout = cell_timeout, timeout
        self.results: list[tuple[str, str] | None] = [None] * n_checks
        self.deadline = time.monotonic() + timeout
        self.timeout_name = f"GradingTimeout_{secrets.token_hex(4)}"  # no student cell raises it
        self.replay: list[_Step] = []      # cells that ran cleanly: re-run after a restart
        self.problems: list[tuple[int, str, str]] = []  # (step position, status, "cell 5 …")
        self.restarts = 0
        self.client: _Client | None = None

    def finish(self, result: str, message: str) -> None:
        """Give every check that has no result yet this (result, message)."""
        self.results = [(result, message) if r is None else r for r in self.results]

    async def _start(self) -> _Client:
        client = _Client(nbformat.v4.new_notebook(), kernel_manager_class=_CurrentEnvKernelManager,
                         kernel_name="python3", interrupt_on_timeout=True, force_raise_errors=True,
                         error_on_timeout={"ename": self.timeout_name, "evalue": "",
                                           "traceback": []},
                         shutdown_kernel="immediate", startup_timeout=120)
        self.client = client
        client.km = client.create_kernel_manager()
        # the kernel's own stdout/stderr (C-level prints, ipykernel warnings) are not wanted
        await client.async_start_new_kernel(cwd=self.workdir, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
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
                    self.finish("not run", f"the kernel was restarted {MAX_RESTARTS} times, the "
                                f"last time after {self.steps[position - 1].label}; gave up")
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
                self.finish("not run", f"{step.label} did not run again after a kernel restart "
                            f"({'timed out' if outcome.status == 'timeout' else 'kernel died'})")
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
            source = step.source
            if step.check is not None:
                source = _check_prelude(source) + source
            outcome = await self._execute(client, source, limit)
            self._record(position, step, outcome, limit)
            position += 1
            if outcome.status == "dead":
                return position, True
            if outcome.status == "timeout":
                if limit < self.cell_timeout:      # the whole notebook ran out of time
                    self._out_of_time(f"in {step.label}")
                    return len(self.steps), False
                if not await self._answers(client):  # the interrupt was ignored: start afresh
                    if self.problems and self.problems[-1][0] == position - 1:
                        at, status, text = self.problems[-1]
                        self.problems[-1] = (at, status, text.replace(
                            "and was interrupted", "and ignored the interrupt; kernel restarted"))
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
        previous = max((p for p, s in enumerate(self.steps[:position]) if s.check is not None),
                       default=-1)
        section = [(status, text) for p, status, text in self.problems if previous < p < position]
        earlier = [(status, text) for p, status, text in self.problems if p < position]
        if section:
            return section[-1]
        return earlier[0] if earlier and undefined else ("", "")

    def _record(self, position: int, step: _Step, outcome: _Outcome, limit: float) -> None:
        what = step.label if step.check is None else "the check"
        if limit >= self.cell_timeout:
            timed_out = f"{what} timed out after {limit:g} s and was interrupted"
        else:
            timed_out = (f"{what} was stopped when the notebook's time limit of "
                         f"{self.timeout:g} s ran out")
        texts = {"timeout": timed_out, "dead": f"the kernel died in {what} (os._exit, a crash or "
                 "running out of memory?) and was restarted",
                 "error": f"{step.label} raised {outcome.message}"}
        if step.check is None:
            if outcome.status == "ok":
                self.replay.append(step)
            else:
                self.problems.append((position, outcome.status, texts[outcome.status]))
            return
        if outcome.status == "ok":
            self.results[step.check] = ("pass", "")
        elif outcome.status in ("timeout", "dead"):
            self.results[step.check] = (_RESULT_OF[outcome.status], texts[outcome.status])
        else:
            status, context = self._context(position, "NameError" in outcome.message)
            message = f"{context}; then {outcome.message}" if context else outcome.message
            self.results[step.check] = (_RESULT_OF.get(status, "fail"), message)


_RESULT_OF = {"timeout": "timeout", "dead": "crash"}   # a check's result after such a problem


def _read_notebook(path: Path):
    """nbformat's reading plus the structure the grader relies on; raises ValueError."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook, unreadable: all one answer
        raise ValueError(f"not a valid notebook: {one_line(type(exc).__name__, str(exc))}") from exc
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and isinstance(c.get("cell_type"), str)
            and isinstance(c.get("source", ""), (str, list)) for c in cells):
        raise ValueError("not a valid notebook: it has no list of cells with a type and a source")
    return notebook


def grade_submission(submission: Submission, *, cell_timeout: float = 300,
                     timeout: float = 1800) -> list[ExerciseResult]:
    """Run one submission in a fresh kernel and grade it: one ExerciseResult per check cell of
    its course notebook (one row with result ``error`` when there is no course notebook or it
    cannot be read). Never raises for a broken submission."""
    try:
        return _grade_submission(submission, cell_timeout, timeout)
    except Exception as exc:  # a grader bug must not end the run for everyone else
        message = f"grader error: {one_line(type(exc).__name__, str(exc))}"
        return [ExerciseResult(submission.student, submission.path.name, submission.file, "",
                               "error", "", message)]


def _grade_submission(submission: Submission, cell_timeout: float,
                      timeout: float) -> list[ExerciseResult]:
    def rows(results, status=None):
        return [ExerciseResult(submission.student, notebook_name, submission.file, check.name,
                               result, status[k] if status else "", message)
                for k, (check, (result, message)) in enumerate(zip(checks, results))]

    notebook_name = submission.reference.name if submission.reference else submission.path.name
    if submission.reference is None:
        return [ExerciseResult(submission.student, notebook_name, submission.file, "", "error", "",
                               f"unknown notebook {submission.path.name!r}: no course notebook "
                               "of that name; rename it like the course notebook it answers")]
    try:
        checks = reference_checks(_read_notebook(submission.reference))
    except ValueError as exc:
        return [ExerciseResult(submission.student, notebook_name, submission.file, "", "error", "",
                               f"reference {submission.reference}: {exc}")]
    if not checks:
        return [ExerciseResult(submission.student, notebook_name, submission.file, "", "error", "",
                               f"reference {submission.reference} has no cell tagged 'check'")]
    try:
        notebook = _read_notebook(submission.path)
    except ValueError as exc:
        return rows([("error", str(exc))] * len(checks))
    steps, status = plan_cells(notebook, checks)
    with tempfile.TemporaryDirectory(prefix="onehot2gpt-grading-") as workdir:
        run = _Run(steps, len(checks), workdir, cell_timeout, timeout)
        try:
            run_sync(run.run)()
        except Exception as exc:  # the kernel would not start, or a grader bug: report, go on
            run.finish("error", f"grader error: {one_line(type(exc).__name__, str(exc))}")
        finally:
            if run.client is not None:     # interrupted (Ctrl-C) or failed mid-way
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


def grade(submissions_dir: str | Path, reference_dir: str | Path = "notebooks", *,
          cell_timeout: float = 300, timeout: float = 1800, log=None) -> list[ExerciseResult]:
    """Grade every notebook under `submissions_dir` against the course notebooks in
    `reference_dir`, one fresh kernel each; `log(text)` (e.g. print) hears one line per
    submission. Returns all ExerciseResults in submission order."""
    results = []
    for submission in find_submissions(submissions_dir, reference_dir):
        start = time.monotonic()
        rows = grade_submission(submission, cell_timeout=cell_timeout, timeout=timeout)
        results += rows
        if log:
            passed = sum(r.result == "pass" for r in rows)
            total = sum(1 for r in rows if r.exercise)
            summary = f"{passed}/{total} passed" if total else f"error: {rows[0].message}"
            log(f"{submission.file}: {summary} ({time.monotonic() - start:.1f} s)")
    return results


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


def markdown_report(results: list[ExerciseResult], settings: str = "") -> str:
    """A Markdown summary: passed/total per submission, then one table per submission."""
    by_file: dict[str, list[ExerciseResult]] = {}
    for r in results:
        by_file.setdefault(r.file, []).append(r)
    lines = ["# Grades", ""] + ([settings, ""] if settings else [])
    lines += ["| student | notebook | passed | problems |", "|---|---|---|---|"]
    for file, rows in by_file.items():
        exercises = [r for r in rows if r.exercise]
        passed = sum(r.result == "pass" for r in exercises)
        problems = [f"{sum(r.check_cell == s for r in exercises)} check cell(s) {s}"
                    for s in ("modified", "missing") if any(r.check_cell == s for r in exercises)]
        problems += [f"{sum(r.result == s for r in exercises)} {s}"
                     for s in ("timeout", "crash", "not run")
                     if any(r.result == s for r in exercises)]
        if any(r.result == "error" for r in rows):
            problems.insert(0, next(r.message for r in rows if r.result == "error"))
        score = f"{passed}/{len(exercises)}" if exercises else "–"
        lines.append(f"| {_cell(rows[0].student)} | {_cell(rows[0].notebook)} | {score} | "
                     f"{_cell('; '.join(problems))} |")
    mark = {"pass": "✓ pass", "fail": "✗ fail"}
    for file, rows in by_file.items():
        lines += ["", f"## {rows[0].student}: {file}", "",
                  "| exercise | result | check cell | message |", "|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {_cell(r.exercise or '(file)')} | {mark.get(r.result, r.result)} | "
                         f"{r.check_cell} | {_cell(r.message)} |")
    return "\n".join(lines) + "\n"


def write_reports(results: list[ExerciseResult], out_dir: str | Path,
                  settings: str = "") -> tuple[Path, Path]:
    """Write ``grades.csv`` and ``grades.md`` into `out_dir` (created if needed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "grades.md"
    md.write_text(markdown_report(results, settings), encoding="utf-8")
    return write_csv(results, out_dir / "grades.csv"), md


def main(argv: list[str] | None = None) -> int:
    """Command line: grade a folder of submissions, write grades.csv and grades.md."""
    parser = argparse.ArgumentParser(
        prog="python -m onehot2gpt.grading",
        description="Run submitted student notebooks in fresh kernels and report which checked "
                    "exercises pass (grades.csv, grades.md).")
    parser.add_argument("submissions", help="folder of submitted .ipynb files, searched "
                        "recursively; the first subfolder names the student")
    parser.add_argument("--reference", default="notebooks",
                        help="folder of the solved course notebooks (default: notebooks)")
    parser.add_argument("--out", help="where to write grades.csv and grades.md "
                        "(default: the submissions folder)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds for a whole notebook (default: 1800)")
    parser.add_argument("--cell-timeout", type=float, default=300,
                        help="seconds for one cell before it is interrupted (default: 300)")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.cell_timeout <= 0:
        parser.error("--timeout and --cell-timeout must be positive numbers of seconds")
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    try:
        results = grade(args.submissions, args.reference, cell_timeout=args.cell_timeout,
                        timeout=args.timeout, log=log)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:                 # the running kernel was shut down on the way out
        print("interrupted: no grades written", file=sys.stderr)
        return 130
    settings = (f"Graded against `{args.reference}`; limits: {args.cell_timeout:g} s a cell, "
                f"{args.timeout:g} s a notebook.")
    for path in write_reports(results, args.out or args.submissions, settings):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
