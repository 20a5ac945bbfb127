"""Grading, part 4: the reports (grades.csv, grades.md, grades_wide.csv, one feedback file per
student). See :mod:`onehot2gpt_teach.grading`."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from .grading_checks import CSV_COLUMNS, ExerciseResult, points_text, resubmission

# An absolute path of two parts or more (``/home/lecturer/course``, ``/tmp/x/answers.pt``).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~-])(?:/[^\s/:;,'\"()\[\]{}<>|`]+){2,}")
# Environment values shorter than this are left in student text: too common to be a secret.
_ENV_CHARS = 6
# A hidden seed below this is left in student text: such a number is too common in a message (and
# a seed that small is guessable anyway; the default seed is a random 31-bit number).
_SEED_MIN = 1000


def redact(text: str, hidden_seeds=(), environ=None) -> str:
    """`text` fit for a student: every hidden seed (≥ 1000) and every value of the grader's
    environment (`environ`, default ``os.environ``; values of 6 characters or more) replaced by
    ``…``, and every absolute path cut to ``…/`` and its last part.

    Example: ``redact("seed 123456 in /home/me/course/x.py", [123456], {}) == "seed … in …/x.py"``
    """
    environ = os.environ if environ is None else environ
    values = sorted({v for v in environ.values() if len(v) >= _ENV_CHARS}, key=len, reverse=True)
    for value in values:
        text = text.replace(value, "…")
    for seed in sorted({int(s) for s in hidden_seeds if int(s) >= _SEED_MIN}, reverse=True):
        text = re.sub(rf"(?<![0-9]){seed}(?![0-9])", "…", text)
    return _ABSOLUTE_PATH.sub(lambda m: "…/" + m.group(0).rsplit("/", 1)[1], text)


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
    (a resubmission ``name-1.ipynb``, a folder and a draft subfolder, a prefixed copy, …), the one
    that counts first: the newest resubmission (the highest suffix, :func:`resubmission`), then
    the best-graded file."""
    files: dict[tuple[str, str], dict[str, float]] = {}
    for r in results:
        if r.exercise:
            score = files.setdefault((r.student, r.notebook), {})
            score[r.file] = score.get(r.file, 0.0) + r.points

    def order(file: str, scores: dict[str, float]) -> tuple:
        return (-resubmission(Path(file).name)[1], -scores[file], file)

    return {key: sorted(scores, key=lambda f: order(f, scores)) for key, scores in files.items() if len(scores) > 1}


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
            f"{points_text(sum(r.points for r in exercises))}/{points_text(sum(r.max_points for r in exercises))}"
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
            "These students handed in more than one file for a notebook; the newest resubmission "
            "(name-1, name-2, …) counts in grades_wide.csv and the feedback, else the best-graded "
            "file, and the others are listed here:",
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
            pts = f"{points_text(r.points)}/{points_text(r.max_points)}" if r.exercise else ""
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
                    points_text(sum(earned.values())),
                    points_text(sum(columns.values())),
                    *(points_text(earned.get(c, 0.0)) for c in columns),
                    "; ".join(files),
                    "; ".join(extra),
                ]
            )
    return path


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "student"


def write_feedback(results: list[ExerciseResult], folder: str | Path, hidden_seeds=()) -> Path:
    """One Markdown file per student (``feedback/<student>.md``): per notebook the points, each
    exercise's result and what to look at; duplicates named. The lecturer hands these out, so each
    message goes through :func:`redact` (no hidden seed, no value of the grader's environment, no
    path outside the submission)."""
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
        lines += [f"Points: **{points_text(total)} of {points_text(most)}**.", ""]
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
                pts = f"{points_text(r.points)}/{points_text(r.max_points)}" if r.exercise else ""
                message = _cell(redact(r.message, hidden_seeds))
                lines.append(f"| {_cell(r.exercise or '(file)')} | {r.result} | {pts} | {message} |")
            lines.append("")
        (folder / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    return folder


def write_reports(
    results: list[ExerciseResult], out_dir: str | Path, settings: str = "", hidden_seeds=()
) -> tuple[Path, Path, Path, Path]:
    """Write ``grades.csv`` (one row per exercise), ``grades.md`` (the lecturer's summary),
    ``grades_wide.csv`` (one row per student, for the LMS) and ``feedback/`` (one file per
    student, `hidden_seeds` redacted) into `out_dir` (created if needed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "grades.md"
    md.write_text(markdown_report(results, settings), encoding="utf-8")
    return (
        write_csv(results, out_dir / "grades.csv"),
        md,
        write_wide_csv(results, out_dir / "grades_wide.csv"),
        write_feedback(results, out_dir / "feedback", hidden_seeds),
    )
