"""Every exercise's answer is used by a later cell (issue 47): for each exercise cell of a course
notebook, at least one of the names it defines (a top-level function or class) is read by a later
code cell that is not a check (usually through ``yours_if_solved(my_f, check_f, library_f)``), so
solving the exercise changes what the notebook goes on to show."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from one_run import python_code, source
from onehot2gpt_teach.student import cell_tags, exercise_names

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def defined_names(code: str) -> set[str]:
    """The top-level functions and classes a cell defines."""
    tree = ast.parse(python_code(code))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def names_read(code: str) -> set[str]:
    """Every name a cell mentions (read, called or passed on)."""
    return {n.id for n in ast.walk(ast.parse(python_code(code))) if isinstance(n, ast.Name)}


def unused_exercises(notebook: dict) -> list[str]:
    """The exercises of `notebook` none of whose names a later non-check code cell reads."""
    cells, unused = notebook["cells"], []
    for i, name in exercise_names(notebook).items():
        defined = defined_names(source(cells[i]))
        later = set()
        for cell in cells[i + 1 :]:
            if cell["cell_type"] == "code" and "check" not in cell_tags(cell):
                later |= names_read(source(cell))
        if not defined & later:
            unused.append(f"{name or '?'} (cell {i}, defines {sorted(defined)})")
    return unused


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_exercise_is_used_by_a_later_cell(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert exercise_names(notebook), f"{path.name} has no exercises"
    unused = unused_exercises(notebook)
    assert not unused, (
        f"{path.name}: no later cell (other than its check) uses these exercises' answers: "
        + "; ".join(unused)
        + ". Pass the student's function to a later cell with yours_if_solved(my_f, check_f, library_f), "
        "or drop the exercise"
    )


def test_unused_exercises_sees_a_use_and_ignores_the_check():
    def nb(*cells):
        return {
            "cells": [
                {"cell_type": "code", "id": f"c{i}", "metadata": {"tags": tags}, "source": src, "outputs": []}
                for i, (src, tags) in enumerate(cells)
            ]
        }

    exercise = ("def my_f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION", ["exercise"])
    check = ("check_f(my_f)", ["check"])
    used = ("f = yours_if_solved(my_f, check_f, lib_f)\nprint(f(1))", [])
    assert unused_exercises(nb(exercise, check, used)) == []
    assert unused_exercises(nb(exercise, check)) == ["f (cell 0, defines ['my_f'])"]
    assert unused_exercises(nb(used, exercise, check)) == ["f (cell 1, defines ['my_f'])"]
