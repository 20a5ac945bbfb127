"""The lecturer's console scripts (onehot2gpt_teach, [project.scripts] in pyproject.toml): each is
installed, answers --help, and turns a bad argument into an error naming the option and the value."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from onehot2gpt_teach import autograders, course, figures, grading, student

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "onehot2gpt-student": "onehot2gpt_teach.student:main",
    "onehot2gpt-grade": "onehot2gpt_teach.grading:main",
    "onehot2gpt-autograder": "onehot2gpt_teach.autograders:main",
    "onehot2gpt-prepare": "onehot2gpt_teach.course:main",
    "onehot2gpt-figures": "onehot2gpt_teach.figures:main",
    "onehot2gpt-slides": "onehot2gpt_teach.slides:main",
}


def test_pyproject_declares_every_script():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert {name: declared.get(name) for name in SCRIPTS} == SCRIPTS


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_is_installed_and_answers_help(name):
    script = Path(sys.executable).parent / name
    assert script.exists(), f"{script} missing: reinstall with pip install -e . --no-deps --no-build-isolation"
    run = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith(f"usage: {name}"), run.stdout[:300]


@pytest.mark.parametrize("module", ["student", "grading", "autograders", "course", "figures", "slides"])
def test_python_dash_m_still_works(module):
    run = subprocess.run(
        [sys.executable, "-m", f"onehot2gpt_teach.{module}", "--help"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: "), run.stderr[-2000:]


def _error(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_a_missing_notebook_is_named(tmp_path, capsys):
    missing = str(tmp_path / "01_nothing.ipynb")
    for main, argv in [
        (student.main, [missing, "--out", str(tmp_path / "out")]),
        (course.main, [missing]),
        (autograders.main, ["gradescope", missing, "--out", str(tmp_path / "a.zip")]),
        (autograders.main, ["classroom", missing, "--out", str(tmp_path / "starter")]),
    ]:
        err = _error(main, argv, capsys)
        assert f"notebook {missing}: no such file" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "a.zip").exists()


def test_an_out_folder_that_is_a_file_is_named(tmp_path, capsys):
    taken = tmp_path / "taken.txt"
    taken.write_text("x")
    notebook = tmp_path / "01_x.ipynb"
    notebook.write_text("{}")
    for main, argv in [
        (student.main, [str(notebook), "--out", str(taken)]),
        (figures.main, ["--out", str(taken)]),
        (grading.main, [str(tmp_path), "--out", str(taken)]),
        (autograders.main, ["classroom", str(notebook), "--out", str(taken)]),
    ]:
        err = _error(main, argv, capsys)
        assert f"--out {taken}: is a file, not a folder" in err, err
    assert taken.read_text() == "x"


def test_an_out_that_cannot_be_made_is_named(tmp_path, capsys):
    """A folder inside a file can never be made (whoever runs this, root included)."""
    taken = tmp_path / "taken.txt"
    taken.write_text("x")
    inside = taken / "figures"
    err = _error(figures.main, ["--out", str(inside)], capsys)
    assert f"--out {inside}: {taken} cannot be written" in err, err
    err = _error(autograders.main, ["gradescope", str(_notebook(tmp_path)), "--out", str(taken / "a.zip")], capsys)
    assert f"--out {taken / 'a.zip'}: {taken} cannot be written" in err, err


def _notebook(folder: Path) -> Path:
    notebook = folder / "01_x.ipynb"
    notebook.write_text("{}")
    return notebook


def test_the_gradescope_out_must_be_a_zip(tmp_path, capsys):
    notebook = tmp_path / "01_x.ipynb"
    notebook.write_text("{}")
    err = _error(autograders.main, ["gradescope", str(notebook), "--out", str(tmp_path / "bundle.tar")], capsys)
    assert f"--out {tmp_path / 'bundle.tar'}: give a file name ending in .zip" in err, err


def test_student_writes_nothing_when_one_notebook_is_bad(tmp_path, capsys):
    cell = {"cell_type": "code", "metadata": {"tags": ["exercise"]}, "outputs": [], "execution_count": 1}
    good = {"cells": [{**cell, "source": "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"}]}
    bad = {"cells": [{**cell, "source": "def f():\n    ### BEGIN SOLUTION\n    return 1"}]}
    for name, nb in [("01_good.ipynb", good), ("02_bad.ipynb", bad)]:
        (tmp_path / name).write_text(json.dumps({**nb, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    out = tmp_path / "student"
    err = _error(
        student.main, [str(tmp_path / "01_good.ipynb"), str(tmp_path / "02_bad.ipynb"), "--out", str(out)], capsys
    )
    assert f"notebook {tmp_path / '02_bad.ipynb'}: ### BEGIN SOLUTION without a matching ### END SOLUTION" in err, err
    assert not out.exists()
    assert student.main([str(tmp_path / "01_good.ipynb"), "--out", str(out)]) == 0
    assert "raise NotImplementedError" in (out / "01_good.ipynb").read_text()


def test_figures_without_a_clone_ask_for_out(tmp_path, monkeypatch, capsys):
    """Installed from a wheel, the default folder (notebooks/figures of a clone) does not exist."""
    monkeypatch.setattr(figures, "DEFAULT_OUT", tmp_path / "site-packages" / "notebooks" / "figures")
    err = _error(figures.main, ["--svg-only"], capsys)
    assert f"--out: {tmp_path / 'site-packages'} is not a clone of the course; give --out DIR" in err, err
    assert not (tmp_path / "site-packages").exists()
    assert figures.main(["--svg-only", "--out", str(tmp_path / "fig")]) == 0
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == sorted(figures.FIGURES)


def test_prepare_changes_no_notebook_when_one_is_missing(tmp_path, capsys):
    notebook = tmp_path / "01_x.ipynb"
    notebook.write_text("not json")  # would fail if prepare reached it
    missing = tmp_path / "02_missing.ipynb"
    err = _error(course.main, [str(notebook), str(missing)], capsys)
    assert f"notebook {missing}: no such file" in err, err
    assert notebook.read_text() == "not json"
