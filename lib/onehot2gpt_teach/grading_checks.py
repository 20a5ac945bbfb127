"""Grading, part 1: the results, the course notebook's check cells, the submissions, and the
verdict on a check (:func:`replay_check`). See :mod:`onehot2gpt_teach.grading`."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path

CSV_COLUMNS = ("student", "notebook", "file", "exercise", "result", "check_cell", "message", "points", "max_points")
RESULTS = ("pass", "fail", "timeout", "crash", "not run", "error")
MESSAGE_CHARS = 1000

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
        return {name: points_text(v) if isinstance(v := getattr(self, name), float) else v for name in CSV_COLUMNS}

    @classmethod
    def from_row(cls, row: dict) -> ExerciseResult:
        """The inverse of :meth:`row` (reading grades.csv or the journal)."""
        return cls(
            **{
                name: float(row.get(name) or 0) if name in ("points", "max_points") else str(row.get(name, ""))
                for name in CSV_COLUMNS
            }
        )


def points_text(x: float) -> str:
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


def build_rows(
    submission: Submission,
    checks: list[ReferenceCheck],
    verdicts: dict[int, tuple[str, str]],
    status: list[str] | None,
    missing: tuple[str, str],
) -> list[ExerciseResult]:
    """The submission's rows, one per reference check, built by the grader from what it knows (the
    course notebook's checks and points, the submission's identity) and the verdicts {check index:
    (result, message)}; a check without a verdict gets `missing`. A check cell the submission
    edited or deleted (`status`) is named in its message."""
    notebook = submission.reference.name if submission.reference else submission.path.name
    rows = []
    for k, check in enumerate(checks):
        result, message = verdicts.get(k, missing)
        state = status[k] if status else ""
        if state not in ("", "ok"):
            note = f"check cell {state}: graded with the reference check cell"
            message = f"{note}; {message}" if message else note
        points = check.points if result == "pass" else 0.0
        rows.append(
            ExerciseResult(
                submission.student, notebook, submission.file, check.name, result, state, message, points, check.points
            )
        )
    return rows


def file_row(submission: Submission, result: str, message: str) -> ExerciseResult:
    """One row about the whole submission (no exercise): an unknown notebook, an unreadable course notebook."""
    notebook = submission.reference.name if submission.reference else submission.path.name
    return ExerciseResult(submission.student, notebook, submission.file, "", result, "", message)


def unknown_notebook(submission: Submission) -> ExerciseResult:
    """The row of a submission whose file name matches no course notebook."""
    return file_row(
        submission,
        "error",
        f"unknown notebook {submission.path.name!r}: no course notebook "
        "of that name; rename it like the course notebook it answers",
    )


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

    Example: ``exercise_name("from onehot2gpt_exercises import check_one_hot\\n"
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


_RESUBMISSION = re.compile(r"-([0-9]+)(\.ipynb)$")


def resubmission(file_name: str) -> tuple[str, int]:
    """A submitted file name without the suffix an LMS adds to a file handed in again under the same
    name (Canvas: ``name-1.ipynb``, ``name-2.ipynb``) → (the name, the resubmission's number; 0
    without a suffix).

    Example: ``resubmission("alice_01_onehot-2.ipynb") == ("alice_01_onehot.ipynb", 2)``
    """
    found = _RESUBMISSION.search(file_name)
    if not found:
        return file_name, 0
    return file_name[: found.start()] + found.group(2), int(found.group(1))


def match_reference(file_name: str, reference_names: list[str]) -> str | None:
    """The course notebook a submitted file answers: the same name, else the longest course
    name the file name ends with after ``_``, ``-``, ``.`` or a space; else the same for the name
    without a resubmission suffix (:func:`resubmission`); None if none.

    Example: ``match_reference("alice_01_onehot-1.ipynb", ["01_onehot.ipynb"]) == "01_onehot.ipynb"``
    """
    for name in dict.fromkeys((file_name, resubmission(file_name)[0])):
        if name in reference_names:
            return name
        endings = [ref for ref in reference_names if any(name.endswith(sep + ref) for sep in "_-. ")]
        if endings:
            return max(endings, key=len)
    return None


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
        else:  # a resubmission (name-1.ipynb) names the same student as the file it replaces
            name = path.name if not reference or path.name.endswith(reference) else resubmission(path.name)[0]
            prefix = name[: -len(reference)] if reference else ""
            student = prefix.rstrip("_-. ") or Path(name).stem
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
class Step:
    source: str
    label: str  # "cell 7" (1-based position in the submission) or "check"
    check: int | None = None  # index into the reference checks


def plan_cells(notebook, checks: list[ReferenceCheck]) -> tuple[list[Step], list[str]]:
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
        steps.append(Step(checks[k].source, "check", k))
    for i, cell in enumerate(cells):
        if i in matched:
            steps.append(Step(checks[matched[i]].source, "check", matched[i]))
        elif cell.get("cell_type") == "code" and "check" not in _tags(cell):
            steps.append(Step(_source(cell), f"cell {i + 1}"))
        for k in inserted_after.get(i, []):
            steps.append(Step(checks[k].source, "check", k))
    return steps, status


def check_prelude(check_source: str, answers: str | Path | None = None, hidden_seeds=()) -> str:
    """Code run just before a reference check: reload the exercises module and bind again the
    check names the cell uses, so that a check_* redefined by the student cannot stand in; with
    `answers`, make the checks record the student's answers to that file (and for the inputs of
    `hidden_seeds` too) instead of judging them in the kernel."""
    import onehot2gpt_exercises as exercises

    names = sorted(n for n in set(_CHECK_CALL.findall(check_source)) if hasattr(exercises, n))
    # The checks live in submodules (checking, nb01 … nb11): reload those first, in name order so
    # that `checking` comes back before the modules that import from it, then the package.
    lines = [
        "import importlib as _grading_importlib, sys as _grading_sys",
        "_grading_importlib.import_module('onehot2gpt_exercises')",
        "for _grading_name in sorted(m for m in list(_grading_sys.modules) if m.startswith('onehot2gpt_exercises.')):",
        "    _grading_importlib.reload(_grading_sys.modules[_grading_name])",
        "_grading_exercises = _grading_importlib.reload(_grading_sys.modules['onehot2gpt_exercises'])",
    ]
    lines += [f"{name} = _grading_exercises.{name}" for name in names]
    lines.append("del _grading_importlib, _grading_sys, _grading_exercises, _grading_name")
    if answers is not None:  # the checks record the student's answers; the grader judges them
        lines += [
            "import onehot2gpt_exercises.checking as _grading_checking",
            f"_grading_checking.start_recording({str(answers)!r}, {[int(s) for s in hidden_seeds]!r})",
            "del _grading_checking",
        ]
    return "\n".join(lines) + "\n"


STOP_RECORDING = (
    "import onehot2gpt_exercises.checking as _grading_checking\n"
    "_grading_checking.stop_recording()\ndel _grading_checking\n"
)


def check_calls(check_source: str) -> list[str]:
    """The ``check_*`` functions a check cell calls, in order (``check_one_hot(my_one_hot)`` →
    ``["check_one_hot"]``); only names that :mod:`onehot2gpt_exercises` defines."""
    import onehot2gpt_exercises as exercises

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
    recorded (see :mod:`onehot2gpt_exercises.checking`): the cell's checks run again here, with the
    library's own reference and comparison, on the same inputs and those of `hidden_seeds` →
    ``("pass", "")`` or ``("fail", one-line message)``."""
    import contextlib
    import io

    import onehot2gpt_exercises as exercises
    from onehot2gpt_exercises import checking

    names = check_calls(check_source)
    if not names:
        return "fail", "the check cell calls no check of onehot2gpt_exercises"
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


def one_line(ename: str, evalue: str, limit: int = MESSAGE_CHARS) -> str:
    """An error as one line: all its lines, stripped, joined by ``"; "``, so that a check's verdict
    keeps its whole diagnosis (which test, on which input, what the mistake looks like, the concept
    and the hint); the exception name is left out for AssertionErrors, whose text is the check's
    message. Cut to `limit` characters.

    Example: ``one_line("AssertionError", "f: values differ\\n  on input x\\nHint: add 1")
    == "f: values differ; on input x; Hint: add 1"``
    """
    lines = [line.strip() for line in _ANSI.sub("", evalue).splitlines() if line.strip()]
    text = "; ".join(lines)
    text = text if ename == "AssertionError" and text else f"{ename}: {text}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
