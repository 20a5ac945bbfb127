"""Student notebooks: every solution block replaced by ``raise NotImplementedError``, outputs
cleared. Generated, never edited by hand::

    onehot2gpt-student notebooks/01_onehot.ipynb --out notebooks/student

A lecturer can hand out part of a notebook's exercises: an assignment named in the notebook's
metadata ``{"onehot2gpt": {"assignments": {"build-gpt": ["causal_self_attention", "gpt_model"]}}}``
(exercise names as the grader gives them: the check's name without ``check_``), then
``onehot2gpt-student notebooks/09_gpt.ipynb --assignment build-gpt --out handout`` stubs only
those; the other exercises stay as worked code. ``onehot2gpt-grade --assignment build-gpt``
grades only them.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

from ._cli import input_file, output_folder

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Your turn: replace this line with your code")'
GENERATED_NOTE = (
    "**Student version.** Generated from `notebooks/{name}` by `onehot2gpt-student`; the exercises are yours to write."
)


def strip_solutions(source: str) -> str:
    """Replace every `### BEGIN SOLUTION` … `### END SOLUTION` block with a NotImplementedError
    line at the same indentation."""
    out, inside, found = [], False, False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError("nested ### BEGIN SOLUTION: close the first block first")
            inside, found = True, True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif stripped == END:
            if not inside:
                raise ValueError("### END SOLUTION without a matching ### BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("### BEGIN SOLUTION without a matching ### END SOLUTION")
    if not found:
        raise ValueError("an exercise cell must contain a ### BEGIN SOLUTION block")
    return "\n".join(out)


def cell_tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def keep_solutions(source: str) -> str:
    """The cell with its solution kept as worked code: the ``### BEGIN``/``### END SOLUTION``
    marker lines removed, nothing else."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END))


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def exercise_names(notebook: dict) -> dict[int, str]:
    """{index of an exercise cell: its exercise's name}, the name from the check cell after it
    (``check_gpt_model(MyGPT)`` → ``gpt_model``, as the grader names it)."""
    from .grading_checks import exercise_name

    cells, names = notebook["cells"], {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "exercise" in cell_tags(cell):
            check = next((c for c in cells[i + 1 :] if c["cell_type"] == "code" and "check" in cell_tags(c)), None)
            names[i] = exercise_name(_text(check)) if check is not None else ""
    return names


def assignments(notebook: dict) -> dict[str, list[str]]:
    """The notebook's assignments: its metadata ``{"onehot2gpt": {"assignments": {"name": [exercise,
    …]}}}``, each a part of its exercises a lecturer hands out. Raises ValueError for a malformed one."""
    meta = notebook.get("metadata", {}).get("onehot2gpt", {})
    found = meta.get("assignments", {}) if isinstance(meta, dict) else {}
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and v and all(isinstance(e, str) for e in v)
        for k, v in found.items()
    ):
        raise ValueError(
            "metadata onehot2gpt.assignments must map each assignment's name to a non-empty list of exercise names, "
            f'e.g. {{"build-gpt": ["causal_self_attention", "gpt_model"]}}; got {found!r}'
        )
    return found


def make_student_notebook(notebook: dict, name: str, assignment: str | None = None) -> dict:
    """A student copy of `notebook` (nbformat JSON as a dict): solutions stubbed, outputs cleared,
    a note on top. With `assignment` (a name in the notebook's metadata, :func:`assignments`), only
    that assignment's exercises are stubbed; the others stay as worked code (tagged ``given``) with
    their checks. The source notebook is left unchanged."""
    nb = copy.deepcopy(notebook)
    names = exercise_names(nb)
    chosen = None
    if assignment is not None:
        defined = assignments(nb)
        if assignment not in defined:
            raise ValueError(
                f"{name} has no assignment {assignment!r}; its metadata onehot2gpt.assignments names "
                f"{sorted(defined) or 'none'}: add it there, or pick one of those"
            )
        chosen = set(defined[assignment])
        unknown = sorted(chosen - set(names.values()))
        if unknown:
            raise ValueError(
                f"{name}: assignment {assignment!r} names exercises it does not have: {unknown}; "
                f"its exercises are {sorted(set(names.values()))}"
            )
    n_exercises = 0
    for i, cell in enumerate(nb["cells"]):
        src = _text(cell)
        if cell["cell_type"] == "code":
            if "exercise" in cell_tags(cell) and chosen is not None and names[i] not in chosen:
                strip_solutions(src)  # the markers are checked all the same
                src = keep_solutions(src)
                cell["metadata"]["tags"] = [t if t != "exercise" else "given" for t in cell_tags(cell)]
            elif "exercise" in cell_tags(cell):
                src, n_exercises = strip_solutions(src), n_exercises + 1
            elif BEGIN in src:
                raise ValueError(f"{name}: a cell with a solution block must be tagged 'exercise'")
            cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = src
    if n_exercises == 0:
        raise ValueError(f"{name} has no cell tagged 'exercise'")
    text = GENERATED_NOTE.format(name=name)
    if chosen is not None:
        text += (
            f" This is the assignment `{assignment}`: write {', '.join(f'`{e}`' for e in sorted(chosen))}; "
            "the notebook's other exercises are given as worked code."
        )
    note = {"cell_type": "markdown", "id": "student-note", "metadata": {"tags": ["student-note"]}, "source": text}
    nb["cells"].insert(1, note)
    # The title's "Open in Colab" badge opens this student copy, not the course notebook.
    title = nb["cells"][0]
    if title["cell_type"] == "markdown":
        title["source"] = title["source"].replace(
            f"/blob/main/notebooks/{name})", f"/blob/main/notebooks/student/{name})"
        )
    return nb


def write_student_notebook(src: str | Path, out_dir: str | Path) -> Path:
    """Read a source notebook, write its student version into `out_dir`, return the new path."""
    src = Path(src)
    student = make_student_notebook(json.loads(src.read_text(encoding="utf-8")), src.name)
    return _write(student, Path(out_dir) / src.name)


def _write(notebook: dict, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    what = "Write the student versions of course notebooks: solutions stubbed, outputs cleared."
    parser = argparse.ArgumentParser(prog="onehot2gpt-student", description=what)
    parser.add_argument("notebooks", nargs="+", help="course notebooks, e.g. notebooks/[0-9][0-9]_*.ipynb")
    parser.add_argument("--out", default="notebooks/student", help="output folder (default: notebooks/student)")
    parser.add_argument(
        "--assignment",
        metavar="NAME",
        help="hand out only this assignment's exercises (named in each notebook's metadata "
        "onehot2gpt.assignments); the other exercises stay as worked code",
    )
    args = parser.parse_args(argv)
    out = output_folder(parser, "--out", args.out)
    sources = [input_file(parser, "notebook", path) for path in args.notebooks]
    made = {}  # every notebook is made before any is written: a bad one leaves the folder as it was
    for src in sources:
        if not re.search(r"\d\d_.*\.ipynb$", src.name):
            print(f"skipping {src}: not a numbered course notebook (NN_name.ipynb)", file=sys.stderr)
            continue
        try:
            made[src] = make_student_notebook(json.loads(src.read_text(encoding="utf-8")), src.name, args.assignment)
        except (ValueError, KeyError) as exc:  # not JSON, not a notebook, or badly marked exercises
            parser.error(f"notebook {src}: {exc}; fix the course notebook and run again")
    for src, student in made.items():
        print(_write(student, out / src.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
