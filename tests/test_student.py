"""The student-notebook generator (onehot2gpt_teach.student)."""

import pytest
from onehot2gpt_teach import student


def test_strip_solutions_keeps_indentation_and_rest_of_cell():
    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nprint(1)"
    out = student.strip_solutions(src)
    assert out == f"def f(x):\n    '''doc'''\n    {student.STUB}\n\nprint(1)"
    scope = {}
    exec(out.replace("print(1)", ""), scope)
    with pytest.raises(NotImplementedError):
        scope["f"](1)


@pytest.mark.parametrize(
    "bad",
    ["x = 1", "### BEGIN SOLUTION\nx", "### END SOLUTION", "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"],
)
def test_strip_solutions_rejects_malformed_markers(bad):
    with pytest.raises(ValueError):
        student.strip_solutions(bad)


def test_make_student_notebook_clears_outputs_and_leaves_source_alone():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# Title"},
            {
                "cell_type": "code",
                "metadata": {"tags": ["exercise"]},
                "execution_count": 3,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "hi"}],
                "source": "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
            },
            {
                "cell_type": "code",
                "metadata": {"tags": ["check"]},
                "execution_count": 4,
                "outputs": [],
                "source": "check(f)",
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    made = student.make_student_notebook(nb, "01_x.ipynb")
    assert "return 1" not in made["cells"][2]["source"]
    assert all(c.get("outputs", []) == [] for c in made["cells"])
    assert made["cells"][1]["metadata"]["tags"] == ["student-note"]
    assert nb["cells"][1]["execution_count"] == 3 and "return 1" in nb["cells"][1]["source"]
