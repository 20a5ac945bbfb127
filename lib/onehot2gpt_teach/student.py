"""Student notebooks: every solution block replaced by ``raise NotImplementedError``, outputs
cleared. Generated, never edited by hand::

    onehot2gpt-student notebooks/01_onehot.ipynb --out notebooks/student
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


def make_student_notebook(notebook: dict, name: str) -> dict:
    """A student copy of `notebook` (nbformat JSON as a dict): solutions stubbed, outputs cleared,
    a note on top. The source notebook is left unchanged."""
    nb = copy.deepcopy(notebook)
    n_exercises = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code":
            if "exercise" in cell_tags(cell):
                src, n_exercises = strip_solutions(src), n_exercises + 1
            elif BEGIN in src:
                raise ValueError(f"{name}: a cell with a solution block must be tagged 'exercise'")
            cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = src
    if n_exercises == 0:
        raise ValueError(f"{name} has no cell tagged 'exercise'")
    note = {
        "cell_type": "markdown",
        "id": "student-note",
        "metadata": {"tags": ["student-note"]},
        "source": GENERATED_NOTE.format(name=name),
    }
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
    args = parser.parse_args(argv)
    out = output_folder(parser, "--out", args.out)
    sources = [input_file(parser, "notebook", path) for path in args.notebooks]
    made = {}  # every notebook is made before any is written: a bad one leaves the folder as it was
    for src in sources:
        if not re.search(r"\d\d_.*\.ipynb$", src.name):
            print(f"skipping {src}: not a numbered course notebook (NN_name.ipynb)", file=sys.stderr)
            continue
        try:
            made[src] = make_student_notebook(json.loads(src.read_text(encoding="utf-8")), src.name)
        except (ValueError, KeyError) as exc:  # not JSON, not a notebook, or badly marked exercises
            parser.error(f"notebook {src}: {exc}; fix the course notebook and run again")
    for src, student in made.items():
        print(_write(student, out / src.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
