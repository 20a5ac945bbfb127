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


# ---- assignments: a part of a notebook's exercises handed out ---------------------------------

COURSE_09 = __import__("pathlib").Path(__file__).resolve().parents[1] / "notebooks" / "09_gpt.ipynb"


def _course_09():
    import json

    return json.loads(COURSE_09.read_text(encoding="utf-8"))


def test_an_assignment_stubs_its_exercises_and_gives_the_others_as_worked_code():
    nb = _course_09()
    chosen = nb["metadata"]["onehot2gpt"]["assignments"]["build-gpt"]
    made = student.make_student_notebook(nb, "09_gpt.ipynb", "build-gpt")
    names = student.exercise_names(nb)
    assert sorted(set(names.values())) == sorted(
        ["causal_self_attention", "gpt_mlp", "gpt_block", "gpt_model", "top_k_filter", "top_p_filter"]
        + ["kv_cache_step", "lens_readout"]
    )
    by_id = {c.get("id"): c for c in made["cells"]}
    for i, name in names.items():
        cell = by_id[nb["cells"][i]["id"]]
        if name in chosen:
            assert student.STUB in cell["source"] and cell["metadata"]["tags"] == ["exercise"], name
        else:  # worked code: the course's solution without its markers, tagged "given"
            assert student.STUB not in cell["source"] and student.BEGIN not in cell["source"], name
            assert "given" in cell["metadata"]["tags"] and "exercise" not in cell["metadata"]["tags"], name
    assert "assignment `build-gpt`" in made["cells"][1]["source"]


def test_without_an_assignment_every_exercise_is_stubbed():
    made = student.make_student_notebook(_course_09(), "09_gpt.ipynb")
    assert sum(student.STUB in "".join(c["source"]) for c in made["cells"]) == len(student.exercise_names(_course_09()))


@pytest.mark.parametrize(
    "assignments, assignment, message",
    [
        ({"a": ["gpt_model"]}, "b", r"has no assignment 'b'; its metadata onehot2gpt.assignments names \['a'\]"),
        ({"a": ["gpt_model", "no_such"]}, "a", r"names exercises it does not have: \['no_such'\]"),
        ({"a": []}, "a", "non-empty list of exercise names"),
        (["gpt_model"], "a", "must map each assignment's name"),
    ],
)
def test_a_bad_assignment_is_refused_with_what_to_do(assignments, assignment, message):
    nb = _course_09()
    nb["metadata"]["onehot2gpt"]["assignments"] = assignments
    with pytest.raises(ValueError, match=message):
        student.make_student_notebook(nb, "09_gpt.ipynb", assignment)


def test_the_command_writes_an_assignments_handout(tmp_path, capsys):
    assert student.main([str(COURSE_09), "--assignment", "decoding", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "09_gpt.ipynb").read_text(encoding="utf-8")
    assert "assignment `decoding`" in text
    with pytest.raises(SystemExit):
        student.main([str(COURSE_09), "--assignment", "nope", "--out", str(tmp_path / "x")])
    assert "has no assignment 'nope'" in capsys.readouterr().err
