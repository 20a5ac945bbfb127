"""Copy detection across a class: each exercise's solution cell compared between students.

For every course notebook and every exercise in it (a code cell tagged ``exercise``, named like
the grader names it: after the check cell that follows it), the submission's copy of that cell
(found by cell id, else by its first line, the ``def`` line the student version keeps) is compared
with the same cell of every other student's submissions and with the course's own solution, using
`copydetect <https://pypi.org/project/copydetect/>`_: its code fingerprints (hashed k-grams of
the code with names, strings and comments filtered out, so that renaming variables or rewriting
comments does not hide a copy). The fingerprints of the student version of the cell (the ``def``
line, the code around the solution block and the ``raise NotImplementedError`` stub) are removed
as boilerplate before comparing, so that the code every student was given counts for nothing.

A pair is listed when its score, the smaller of the two sides' copydetect similarities (the share
of a side's fingerprinted code that also occurs in the other side), is at least ``threshold``::

    python -m onehot2gpt_teach.similarity submissions/ --reference notebooks --out grades

writes ``similarity.md`` (each flagged pair with its overlapping lines) and ``similarity.csv``
(one row per flagged pair) into ``--out``; ``onehot2gpt-grade`` writes the same two files after
grading the class. A score is a lead for a human reading both cells, not a verdict.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from ._cli import output_folder
from .grading_checks import find_submissions, reference_checks
from .student import cell_tags, strip_solutions

# Chosen on planted cases of eight course exercises (docs/grading.md, "Copies"). copydetect's defaults
# (25 and 25) missed a copy of `cosine` with one line edited: an exercise's body filters down to a few dozen
# characters.
THRESHOLD = 0.7
NOISE = 10  # copydetect's noise threshold k: matches shorter than this many filtered characters are ignored
GUARANTEE = 10  # copydetect's guarantee threshold: = NOISE, every k-gram kept (winnowing window 1)
SOLUTION = "(course solution)"  # the student name of the course notebook's own solution
CSV_COLUMNS = (
    "notebook",
    "exercise",
    "score",
    "student_a",
    "file_a",
    "similarity_a",
    "lines_a",
    "student_b",
    "file_b",
    "similarity_b",
    "lines_b",
    "code_a",
    "code_b",
)


def _copydetect():
    try:
        import copydetect
    except ImportError as exc:
        raise ImportError(f"copy detection needs copydetect ({exc}): pip install -e '.[teach]' (or make lab)") from exc
    return copydetect


def _read_notebook(path: str | Path, what: str):
    import nbformat

    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as exc:  # not JSON, not a notebook, unreadable file: all the same to the caller
        raise ValueError(
            f"{what} {path} could not be read as a notebook ({type(exc).__name__}: {exc}); "
            "open it in Jupyter to repair it, or remove it"
        ) from exc


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _lines(source: str) -> list[str]:
    """The non-blank lines of `source`, stripped."""
    return [line.strip() for line in source.splitlines() if line.strip()]


def _first_line(source: str) -> str:
    return next(iter(_lines(source)), "")


def _check_thresholds(threshold: float, noise: int, guarantee: int) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise ValueError(f"threshold={threshold!r}: give a share between 0 and 1 (default {THRESHOLD})")
    if isinstance(noise, bool) or not isinstance(noise, int) or noise < 1:
        raise ValueError(f"noise={noise!r}: give a whole number of characters, 1 or more (default {NOISE})")
    if isinstance(guarantee, bool) or not isinstance(guarantee, int) or guarantee < noise:
        raise ValueError(f"guarantee={guarantee!r}: give a whole number ≥ noise ({noise}) (default {GUARANTEE})")


# --------------------------------------------------------------------------------------------
# Exercises and solution cells
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exercise:
    """One exercise cell of a course notebook."""

    name: str  # the grader's exercise name (the check cell after it), e.g. "one_hot"
    cell_id: str | None
    first_line: str  # its first non-blank line, e.g. "def my_one_hot(ids, vocab_size):"
    solution: str  # the course's solved cell
    stub: str  # the student version of the cell: the boilerplate


def reference_exercises(notebook) -> list[Exercise]:
    """The exercise cells (tagged ``exercise``) of a course notebook, in order, each named after
    the check cell that follows it (the grader's name, :func:`~onehot2gpt_teach.grading.reference_checks`),
    ``"exercise at cell N"`` when no check follows. Raises ValueError for an exercise cell
    without a well-formed ``### BEGIN SOLUTION`` block."""
    names = iter(check.name for check in reference_checks(notebook))
    exercises, pending = [], []
    for number, cell in enumerate(notebook.cells, 1):
        if cell.get("cell_type") != "code":
            continue
        if "check" in cell_tags(cell):
            name = next(names, "")
            for k, (n, c) in enumerate(pending):
                exercises.append((f"{name} (part {k + 1})" if len(pending) > 1 else name, c))
            pending = []
        elif "exercise" in cell_tags(cell):
            pending.append((number, cell))
    exercises += [(f"exercise at cell {n}", c) for n, c in pending]
    out = []
    for name, cell in exercises:
        source = _source(cell)
        try:
            stub = strip_solutions(source)
        except ValueError as exc:
            raise ValueError(f"exercise {name!r} of the course notebook: {exc}") from exc
        out.append(Exercise(name, cell.get("id"), _first_line(source), source, stub))
    return out


def solution_cells(notebook, exercises: list[Exercise]) -> dict[str, str]:
    """{exercise name: source} of a submission's exercise cells: the code cell with the exercise's
    cell id, else the first code cell whose first line is the exercise's; an exercise not found is
    left out."""
    cells = [cell for cell in notebook.cells if cell.get("cell_type") == "code"]
    by_id = {cell.get("id"): cell for cell in cells if cell.get("id")}
    found, used = {}, set()
    for exercise in exercises:
        cell = by_id.get(exercise.cell_id) if exercise.cell_id else None
        if cell is None or id(cell) in used:
            cell = next(
                (c for c in cells if id(c) not in used and _first_line(_source(c)) == exercise.first_line), None
            )
        if cell is not None:
            used.add(id(cell))
            found[exercise.name] = _source(cell)
    return found


# --------------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """Two students' cells of one exercise that share code, and the lines they share."""

    notebook: str
    exercise: str
    score: float  # min(similarity_a, similarity_b)
    student_a: str
    file_a: str
    similarity_a: float  # the share of a's fingerprinted code also found in b's (copydetect)
    lines_a: tuple[int, ...]  # line numbers (1-based, in the cell) of a's overlapping code, the given lines left out
    code_a: str  # those lines
    student_b: str
    file_b: str
    similarity_b: float
    lines_b: tuple[int, ...]
    code_b: str

    def row(self) -> dict[str, str]:
        """The pair as a dict keyed by CSV_COLUMNS."""
        return {
            name: (
                f"{value:.2f}"
                if isinstance(value := getattr(self, name), float)
                else _ranges(value)
                if isinstance(value, tuple)
                else value
            )
            for name in CSV_COLUMNS
        }


def _ranges(lines: tuple[int, ...]) -> str:
    """(1, 2, 3, 7) → "1-3, 7"."""
    parts, start = [], None
    for k, line in enumerate(lines):
        if start is None:
            start = line
        if k + 1 == len(lines) or lines[k + 1] != line + 1:
            parts.append(str(start) if start == line else f"{start}-{line}")
            start = None
    return ", ".join(parts)


def _fingerprint(source: str, name: str, boilerplate: set, noise: int, guarantee: int):
    """copydetect's fingerprint of `source` (as Python) without the hashes in `boilerplate`."""
    copydetect = _copydetect()
    from copydetect.utils import get_token_coverage

    fp = copydetect.CodeFingerprint(name, noise, guarantee - noise + 1, fp=io.StringIO(source), language="python")
    # Removed here rather than through CodeFingerprint(boilerplate=…), whose set intersection
    # assumes each fingerprint occurs once in a cell and so also drops repeated non-boilerplate ones.
    fp.hashes = fp.hashes - boilerplate
    fp.hash_idx = {h: idx for h, idx in fp.hash_idx.items() if h not in boilerplate}
    fp.token_coverage = get_token_coverage(fp.hash_idx, noise, len(fp.filtered_code))
    return fp


def _overlap(source: str, slices, given: set[str]) -> tuple[tuple[int, ...], str]:
    """The line numbers (1-based) a copydetect slice array touches, and those lines; blank lines and
    lines of `given` (the student version's, stripped) left out: a shared fingerprint may start in
    the code every student was given and run into the solution."""
    lines = set()
    if len(slices) and len(slices[0]):
        for start, end in zip(slices[0], slices[1]):
            first = source.count("\n", 0, int(start)) + 1
            last = source.count("\n", 0, max(int(end) - 1, int(start))) + 1
            lines.update(range(first, last + 1))
    text = source.splitlines()
    lines = tuple(sorted(n for n in lines if n <= len(text) and text[n - 1].strip() not in given | {""}))
    return lines, "\n".join(text[n - 1] for n in lines)


def compare_cells(
    cells: dict[tuple[str, str], str],
    stub: str,
    notebook: str = "",
    exercise: str = "",
    threshold: float = THRESHOLD,
    noise: int = NOISE,
    guarantee: int = GUARANTEE,
) -> list[Pair]:
    """The pairs of `cells` ({(student, file): source} of one exercise) of different students
    whose score (the smaller copydetect similarity of the two) is at least `threshold`, with the
    fingerprints of `stub` (the student version of the cell) removed from both; highest first."""
    _check_thresholds(threshold, noise, guarantee)
    copydetect = _copydetect()
    boilerplate = set(copydetect.CodeFingerprint("stub.py", noise, 1, fp=io.StringIO(stub), language="python").hashes)
    given = {line.strip() for line in stub.splitlines()}
    prints = {key: _fingerprint(source, key[1], boilerplate, noise, guarantee) for key, source in cells.items()}
    pairs = []
    for a, b in combinations(sorted(cells), 2):
        if a[0] == b[0]:
            continue  # one student's own files (a resubmission)
        _, (sim_a, sim_b), (slices_a, slices_b) = copydetect.compare_files(prints[a], prints[b])
        score = min(float(sim_a), float(sim_b))
        if score <= 0 or score < threshold:
            continue
        lines_a, code_a = _overlap(cells[a], slices_a, given)
        lines_b, code_b = _overlap(cells[b], slices_b, given)
        pairs.append(
            Pair(notebook, exercise, score, *a, float(sim_a), lines_a, code_a, *b, float(sim_b), lines_b, code_b)
        )
    return sorted(pairs, key=lambda p: (-p.score, p.student_a, p.student_b))


def find_copies(
    submissions_dir: str | Path,
    reference_dir: str | Path,
    threshold: float = THRESHOLD,
    noise: int = NOISE,
    guarantee: int = GUARANTEE,
) -> tuple[list[Pair], list[str]]:
    """Every flagged pair of the class (:func:`compare_cells` per exercise of each course
    notebook, the course's own solution taking part as the student ``"(course solution)"``) and
    the submissions not compared, each as ``"file: reason"`` (unreadable, or matching no course
    notebook). Raises FileNotFoundError and ValueError as :func:`~onehot2gpt_teach.grading.find_submissions`
    does (no folder, no submissions), ValueError for a bad threshold or an unreadable course notebook."""
    _check_thresholds(threshold, noise, guarantee)
    _copydetect()
    submissions = find_submissions(submissions_dir, reference_dir)
    skipped, groups = [], {}
    exercises: dict[Path, list[Exercise]] = {}
    for sub in submissions:
        if sub.reference is None:
            skipped.append(f"{sub.file}: matches no course notebook")
            continue
        if sub.reference not in exercises:
            exercises[sub.reference] = reference_exercises(_read_notebook(sub.reference, "course notebook"))
        try:
            notebook = _read_notebook(sub.path, "submission")
            found = solution_cells(notebook, exercises[sub.reference])
        except ValueError as exc:
            skipped.append(f"{sub.file}: {exc}")
            continue
        except (AttributeError, TypeError) as exc:  # cells that are not what nbformat describes
            skipped.append(f"{sub.file}: its cells could not be read ({type(exc).__name__}: {exc})")
            continue
        for name, source in found.items():
            groups.setdefault((sub.reference, name), {})[(sub.student, sub.file)] = source
    pairs = []
    for (reference, name), cells in groups.items():
        exercise = next(e for e in exercises[reference] if e.name == name)
        cells[(SOLUTION, reference.name)] = exercise.solution
        if len({student for student, _ in cells}) < 2:
            continue
        answered = {k: v for k, v in cells.items() if _lines(v) != _lines(exercise.stub)}
        pairs += compare_cells(answered, exercise.stub, reference.name, name, threshold, noise, guarantee)
    return sorted(pairs, key=lambda p: (p.notebook, p.exercise, -p.score)), skipped


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def markdown_report(pairs: list[Pair], skipped: list[str], threshold: float = THRESHOLD) -> str:
    """similarity.md: a table of the flagged pairs, then each pair's overlapping lines."""
    lines = [
        "# Similar solutions",
        "",
        f"Pairs of one exercise's solution cells whose score (the smaller of the two copydetect "
        f"similarities: the share of one cell's code, without the student version's own code, that also "
        f"occurs in the other) is at least {threshold:g}. A lead for reading both cells, not a verdict. "
        f"`{SOLUTION}` is the course notebook's own solution.",
        "",
    ]
    if not pairs:
        lines.append("No pair reaches the threshold.")
    else:
        lines += ["| notebook | exercise | score | a | b |", "|---|---|---|---|---|"]
        lines += [
            f"| {p.notebook} | {p.exercise} | {p.score:.2f} | {p.student_a} ({p.similarity_a:.2f}) "
            f"| {p.student_b} ({p.similarity_b:.2f}) |"
            for p in pairs
        ]
        for p in pairs:
            lines += ["", f"## {p.notebook} · {p.exercise}: {p.student_a} and {p.student_b} ({p.score:.2f})", ""]
            for student, file, numbers, code in (
                (p.student_a, p.file_a, p.lines_a, p.code_a),
                (p.student_b, p.file_b, p.lines_b, p.code_b),
            ):
                lines += [
                    f"{student}, `{file}`, lines {_ranges(numbers) or '(none)'}:",
                    "",
                    "```python",
                    code,
                    "```",
                    "",
                ]
    if skipped:
        lines += ["", "## Not compared", ""] + [f"- {reason}" for reason in skipped]
    return "\n".join(lines).rstrip() + "\n"


def write_similarity(
    pairs: list[Pair], skipped: list[str], out_dir: str | Path, threshold: float = THRESHOLD
) -> tuple[Path, Path]:
    """Write ``similarity.md`` and ``similarity.csv`` (columns CSV_COLUMNS) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md, table = out_dir / "similarity.md", out_dir / "similarity.csv"
    md.write_text(markdown_report(pairs, skipped, threshold), encoding="utf-8")
    with table.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(p.row() for p in pairs)
    return md, table


def report_copies(
    submissions_dir: str | Path,
    reference_dir: str | Path,
    out_dir: str | Path,
    threshold: float = THRESHOLD,
    noise: int = NOISE,
    guarantee: int = GUARANTEE,
) -> tuple[Path, Path]:
    """:func:`find_copies`, then :func:`write_similarity`: what ``onehot2gpt-grade`` runs after grading."""
    pairs, skipped = find_copies(submissions_dir, reference_dir, threshold, noise, guarantee)
    return write_similarity(pairs, skipped, out_dir, threshold)


def threshold_argument(text: str) -> float:
    """argparse type: a share between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share between 0 and 1 (default {THRESHOLD})")
    return value


def main(argv: list[str] | None = None) -> int:
    """Command line: compare a class's solution cells, write similarity.md and similarity.csv."""
    parser = argparse.ArgumentParser(
        prog="python -m onehot2gpt_teach.similarity",
        description="Compare each exercise's solution cells across a class with copydetect "
        "(similarity.md, similarity.csv).",
    )
    parser.add_argument("submissions", help="folder of submitted .ipynb files, as for onehot2gpt-grade")
    parser.add_argument(
        "--reference", default="notebooks", help="folder of the solved course notebooks (default: notebooks)"
    )
    parser.add_argument("--out", help="where to write the two files (default: the submissions folder)")
    parser.add_argument(
        "--threshold",
        type=threshold_argument,
        default=THRESHOLD,
        help=f"list pairs whose score is at least this share, 0 to 1 (default: {THRESHOLD})",
    )
    args = parser.parse_args(argv)
    out = output_folder(parser, "--out", args.out or args.submissions)
    try:
        paths = report_copies(args.submissions, args.reference, out, args.threshold)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        parser.error(str(exc))
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
