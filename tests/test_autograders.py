"""The Gradescope bundle and the GitHub Classroom assignment as files: what the zip holds, what
the generators refuse, what a results.json and a Classroom test say. Each platform running them on a
solved and an unsolved notebook: tests/test_platforms.py."""

import json
import stat
import zipfile

import nbformat
import pytest
from onehot2gpt_teach import autograders
from test_grading import tiny_course_notebook

POINTS = [1, 2, 1]  # the tiny notebook's mask check is worth 2


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    nbformat.write(tiny_course_notebook(), folder / "01_tiny.ipynb")
    return folder / "01_tiny.ipynb"


def test_gradescope_bundle_holds_the_scripts_the_course_and_the_settings(tmp_path, reference):
    bundle = autograders.gradescope_bundle(
        reference,
        tmp_path / "autograder.zip",
        hidden_seed=0,
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
    assert settings["hidden_seeds"] == [0], "seed 0 must stay 0"
    assert [e["points"] for e in settings["exercises"]] == POINTS
    assert settings["checkpoints"] == ["gpt-char-shakespeare"]
    assert (settings["cell_timeout"], settings["timeout"]) == (30, 120)
    modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zipfile.ZipFile(bundle).infolist()}
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("timeout", -5, r"--timeout=-5 must be a finite number above 0"),
        ("cell_timeout", 0, r"--cell-timeout=0 must be a finite number above 0"),
        ("timeout", float("nan"), r"--timeout=nan must be a finite number"),
        ("hidden_seed", -1, r"--hidden-seed=-1 must be in \[0, "),
    ],
)
@pytest.mark.parametrize("make", ["gradescope_bundle", "classroom_assignment"])
def test_generators_refuse_bad_limits_and_seeds_naming_the_option(tmp_path, reference, make, option, value, message):
    out = tmp_path / ("a.zip" if make == "gradescope_bundle" else "starter")
    with pytest.raises(ValueError, match=message):
        getattr(autograders, make)(reference, out, **{option: value})
    assert not out.exists()


def test_the_command_line_names_a_bad_option_and_keeps_seed_zero(tmp_path, reference, capsys):
    for args in (["--timeout", "-5"], ["--cell-timeout", "0"]):
        with pytest.raises(SystemExit) as stop:
            autograders.main(["classroom", str(reference), "--out", str(tmp_path / "s"), *args])
        assert stop.value.code == 2
        assert f"{args[0]}={args[1]} must be a finite number above 0" in capsys.readouterr().err
    autograders.main(["classroom", str(reference), "--out", str(tmp_path / "s"), "--hidden-seed", "0"])
    assert "--hidden-seed 0 " in (tmp_path / "s" / ".github" / "workflows" / "classroom.yml").read_text()


def test_results_json_follows_gradescopes_format_and_redacts(monkeypatch):
    from onehot2gpt_teach.grading import ExerciseResult

    monkeypatch.setenv("LECTURER_SECRET", "lecturer-secret-value")
    rows = [
        ExerciseResult("s", "01_tiny.ipynb", "s/01_tiny.ipynb", "one_hot", "pass", "ok", "", 1.0, 1.0),
        ExerciseResult(
            "s", "01_tiny.ipynb", "s/01_tiny.ipynb", "causal_mask", "fail", "ok",
            "causal_mask: wrong; Hint: tril; seed 424242 in /srv/lecturer/x.py lecturer-secret-value", 0.0, 2.0,
        ),
    ]  # fmt: skip
    report = autograders.gradescope_results(rows, None, [424242])
    assert report["score"] == 1.0 and report["output_format"] == "text"
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in report["tests"]] == [
        ("one_hot", 1.0, 1.0, "passed"),
        ("causal_mask", 0.0, 2.0, "failed"),
    ]
    allowed = {"hidden", "after_due_date", "after_published", "visible"}
    assert report["visibility"] in allowed and report["stdout_visibility"] in allowed
    output = report["tests"][1]["output"]
    assert output.startswith("fail: causal_mask: wrong; Hint: tril")
    assert "424242" not in output and "/srv/lecturer" not in output and "lecturer-secret-value" not in output


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


def test_passed_explains_a_missing_or_failed_exercise(tmp_path):
    ok, message = autograders.exercise_passed(tmp_path / "grades.csv", "one_hot")
    assert not ok and "did not run" in message
    (tmp_path / "grades.csv").write_text(
        "student,notebook,file,exercise,result,check_cell,message,points,max_points\n"
        "a,n,f,one_hot,fail,ok,one_hot: values differ,0,1\n"
    )
    assert autograders.exercise_passed(tmp_path / "grades.csv", "one_hot") == (False, "fail: one_hot: values differ")
    assert not autograders.exercise_passed(tmp_path / "grades.csv", "encode")[0]
