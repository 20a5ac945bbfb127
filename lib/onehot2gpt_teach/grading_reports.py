"""Grading, part 4: the reports (grades.csv, grades.md, grades_wide.csv, one feedback file per
student). See :mod:`onehot2gpt_teach.grading`."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from .grading_checks import CSV_COLUMNS, ExerciseResult, points_text

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
