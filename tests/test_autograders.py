"""The Gradescope bundle and the GitHub Classroom assignment, each tried the way its platform
runs it: the platform's folders laid out in a temporary directory, its commands run there."""

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml
from onehot2gpt_teach import autograders
from test_grading import EXERCISES, student_version, tiny_course_notebook

POINTS = [1, 2, 1]  # the tiny notebook's mask check is worth 2


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    nbformat.write(tiny_course_notebook(), folder / "01_tiny.ipynb")
    return folder / "01_tiny.ipynb"


def _gradescope(tmp_path, bundle, submitted: dict) -> dict:
    """Lay out /autograder as Gradescope does, run run_autograder, → results.json."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in z.infolist()}
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    (root / "submission").mkdir()
    for name, nb in submitted.items():
        nbformat.write(nb, root / "submission" / name)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_gradescope_bundle_grades_a_submission_into_results_json(tmp_path, reference):
    bundle = autograders.gradescope_bundle(
        reference,
        tmp_path / "autograder.zip",
        hidden_seed=99,
        cell_timeout=30,
        timeout=120,
        checkpoints=["gpt-char-shakespeare"],
    )
    names = zipfile.ZipFile(bundle).namelist()
    assert {
        "setup.sh",
        "run_autograder",
        autograders.SETTINGS,
        "course/pyproject.toml",
        "course/lib/onehot2gpt_teach/grading.py",
        "course/lib/onehot2gpt_exercises/checking.py",
        "course/notebooks/01_tiny.ipynb",
        "course/lib/onehot2gpt/assets/checkpoints/gpt-char-shakespeare/config.json",
        # package data the install inside Gradescope needs (notebook 04's record, bertviz's scripts)
        "course/lib/onehot2gpt/assets/registry.json",
        "course/lib/onehot2gpt/assets/results/ulmfit-ablation.json",
        "course/lib/onehot2gpt/static/vendor/MANIFEST.json",
    } <= set(names)
    assert not any("bert-wikitext2" in n or "__pycache__" in n for n in names)
    settings = json.loads(zipfile.ZipFile(bundle).read(autograders.SETTINGS))
    assert settings["hidden_seeds"] == [99] and [e["points"] for e in settings["exercises"]] == POINTS
    solved = _gradescope(tmp_path / "a", bundle, {"01_tiny.ipynb": tiny_course_notebook()})
    assert [t["name"] for t in solved["tests"]] == EXERCISES
    assert [t["max_score"] for t in solved["tests"]] == POINTS and solved["score"] == 4
    assert all(t["status"] == "passed" and t["visibility"] == "visible" for t in solved["tests"])
    renamed = _gradescope(tmp_path / "b", bundle, {"my work.ipynb": student_version(tiny_course_notebook())})
    assert renamed["score"] == 0 and all("not written yet" in t["output"] for t in renamed["tests"])
    nothing = _gradescope(tmp_path / "c", bundle, {})
    assert nothing["score"] == 0 and "Submit your 01_tiny.ipynb" in nothing["output"]
    assert [t["max_score"] for t in nothing["tests"]] == POINTS


def test_gradescope_bundle_refuses_a_notebook_without_checks(tmp_path):
    nb = tiny_course_notebook()
    for cell in nb.cells:
        cell.metadata.pop("tags", None)
    nbformat.write(nb, tmp_path / "plain.ipynb")
    with pytest.raises(ValueError, match="no cell tagged 'check'"):
        autograders.gradescope_bundle(tmp_path / "plain.ipynb", tmp_path / "a.zip")
    with pytest.raises(ValueError, match=r"\.zip"):
        autograders.gradescope_bundle(tmp_path / "plain.ipynb", tmp_path / "a.tar")
    nbformat.write(tiny_course_notebook(), tmp_path / "tiny.ipynb")
    with pytest.raises(ValueError, match="no committed checkpoint gpt-huge"):
        autograders.gradescope_bundle(tmp_path / "tiny.ipynb", tmp_path / "a.zip", checkpoints=["gpt-huge"])
    assert not (tmp_path / "a.zip").exists()


def test_gradescope_bundle_needs_a_clone_of_the_course(tmp_path, monkeypatch):
    """Installed from a wheel there is no source tree to ship: say so instead of a broken zip."""
    nbformat.write(tiny_course_notebook(), tmp_path / "tiny.ipynb")
    monkeypatch.setattr(autograders, "_REPO", tmp_path / "site-packages")
    with pytest.raises(FileNotFoundError, match="is not a clone of the course: run this from a clone"):
        autograders.gradescope_bundle(tmp_path / "tiny.ipynb", tmp_path / "a.zip")
    assert not (tmp_path / "a.zip").exists()


def _run_step(step: dict, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    command = step.get("run") or step["with"]["command"]
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_classroom_workflow_gives_each_exercise_its_points(tmp_path, reference):
    starter = autograders.classroom_assignment(
        reference, tmp_path / "starter", hidden_seed=5, cell_timeout=30, timeout=120
    )
    workflow = yaml.safe_load((starter / ".github" / "workflows" / "classroom.yml").read_text())
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    graders = [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader")]
    assert [s["with"]["test-name"] for s in graders[1:]] == EXERCISES
    assert [s["with"]["max-score"] for s in graders[1:]] == POINTS
    reporter = steps[-1]
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    assert all(f"{s['id'].upper().replace('-', '_')}_RESULTS" in reporter["env"] for s in graders)
    assert "--nbval-lax" in graders[0]["with"]["command"]
    student = nbformat.read(starter / "01_tiny.ipynb", as_version=4)
    assert "### BEGIN SOLUTION" not in nbformat.writes(student)
    assert "### BEGIN SOLUTION" not in (starter / ".grading" / "01_tiny.ipynb").read_text()

    # run the job's commands as the runner would (the install step is what this venv already has)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    grade_step = next(s for s in steps if s.get("name") == "Grade the notebook once")
    outcomes = {}
    for name, nb in (("unsolved", student), ("solved", tiny_course_notebook())):
        nbformat.write(nb, starter / "01_tiny.ipynb")
        assert _run_step(grade_step, starter, env).returncode == 0
        outcomes[name] = [_run_step(s, starter, env).returncode for s in graders]
    assert outcomes["solved"] == [0, 0, 0, 0]
    assert outcomes["unsolved"][1:] == [1, 1, 1] and outcomes["unsolved"][0] != 0


def test_passed_explains_a_missing_or_failed_exercise(tmp_path):
    ok, message = autograders.exercise_passed(tmp_path / "grades.csv", "one_hot")
    assert not ok and "did not run" in message
    (tmp_path / "grades.csv").write_text(
        "student,notebook,file,exercise,result,check_cell,message,points,max_points\n"
        "a,n,f,one_hot,fail,ok,one_hot: values differ,0,1\n"
    )
    assert autograders.exercise_passed(tmp_path / "grades.csv", "one_hot") == (False, "fail: one_hot: values differ")
    assert not autograders.exercise_passed(tmp_path / "grades.csv", "encode")[0]
