"""Every course notebook is stored with outputs (so nbval compares something), has checked
exercises, and has a student version that is in sync and fails exactly its check cells."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from onehot2gpt.exercises import cell_tags, make_student_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDENT_DIR = ROOT / "notebooks" / "student"
IGNORE_MARKERS = ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP", "# NBVAL_RAISES_EXCEPTION")
ids = [p.name for p in NOTEBOOKS]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and source(c).strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_topic.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_stored_with_outputs(path):
    cells = code_cells(load(path))
    not_run = [source(c).splitlines()[0] for c in cells if c.get("execution_count") is None]
    assert not not_run, f"{path.name}: cells saved without running them: {not_run[:3]}"
    assert sum(bool(c["outputs"]) for c in cells) >= len(cells) / 3, \
        f"{path.name}: too few cells have stored outputs for nbval to compare"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_at_most_a_fifth_of_code_cells_ignore_their_output(path):
    cells = code_cells(load(path))
    skipped = [c for c in cells if "# NBVAL_SKIP" in source(c)]
    assert not skipped, f"{path.name}: NBVAL_SKIP hides a cell from the tests; don't use it"
    ignored = [c for c in cells if any(m in source(c) for m in IGNORE_MARKERS)]
    assert len(ignored) <= 0.2 * len(cells), \
        f"{path.name}: {len(ignored)} of {len(cells)} code cells ignore their output (max 20%)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_exercises_are_each_followed_by_a_check(path):
    cells = load(path)["cells"]
    exercises = [i for i, c in enumerate(cells) if "exercise" in cell_tags(c)]
    assert len(exercises) >= 3, f"{path.name}: at least 3 exercises, found {len(exercises)}"
    for i in exercises:
        following = [c for c in cells[i + 1:] if c["cell_type"] == "code"][:1]
        assert following and "check" in cell_tags(following[0]), \
            f"{path.name}: exercise cell {i} must be followed by a code cell tagged 'check'"
        assert "check_" in source(following[0])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_student_notebook_is_in_sync(path):
    student = STUDENT_DIR / path.name
    assert student.exists(), f"missing {student.relative_to(ROOT)}: run `make student`"
    expected = make_student_notebook(load(path), path.name)
    got = load(student)
    assert [source(c) for c in got["cells"]] == [source(c) for c in expected["cells"]], \
        f"{student.relative_to(ROOT)} is out of date: run `make student` and commit it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_student_notebook_fails_exactly_its_checks(path):
    nb = nbformat.read(STUDENT_DIR / path.name, as_version=4)
    NotebookClient(nb, timeout=900, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "check" in cell_tags(cell):
            assert errors and errors[0].ename == "AssertionError", \
                f"{path.name} cell {i}: an unsolved exercise's check must fail with AssertionError"
            assert "not written yet" in errors[0].evalue
        else:
            assert not errors, (f"{path.name} cell {i} fails in the student version: "
                                f"{errors[0].ename}: {errors[0].evalue}")
