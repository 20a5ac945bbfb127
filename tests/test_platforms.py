"""Each platform tried through the files the generators write, the way the platform uses them.

GitHub Classroom: the generated workflow's steps run in a starter repository in a temporary folder;
each ``autograding-command-grader`` step is run as that action runs it (its command through
``/bin/sh`` with only ``PATH``, ``HOME``, ``FORCE_COLOR`` and the .NET variables, its timeout in
minutes, its result: ``{"version": 1, "status", "max_score", "tests": [{"score", …}]}``, base64),
and the points are summed as ``autograding-grading-reporter`` sums them (for each id of
``runners``, the variable ``<ID in capitals>_RESULTS``, base64 JSON; points of the results whose
``max_score`` is not 0). The contract is written out here from the two actions' code
(command-grader ``src/main.js``, reporter ``src/main.js`` and ``src/notify-classroom.js``), not
taken from the generator.

Gradescope: the zip unpacked into ``<tmp>/autograder/source``; the generated ``setup.sh`` run with
stand-ins for what needs the network (``apt-get`` does nothing; the venv sees this environment's
packages through a ``.pth`` line; ``pip`` installs offline and without dependencies, and skips
torch, which that environment has), so that the course is installed from the zip, not editable, as
on Gradescope, and ``gradescope-setup`` fetches the datasets from the offline mirror; then the
generated ``run_autograder`` on ``<tmp>/autograder/submission``, and the score read from
``results/results.json`` as Gradescope's specification says (the top-level ``score`` overrides
the tests' total).

Canvas: resubmissions (``name-1.ipynb``) belong to the notebook and the student of the file they
replace, and the newest counts.
"""

import base64
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml
from onehot2gpt_teach import autograders, grading
from test_grading import CELL_TIMEOUT, EXERCISES, cell, student_version, tiny_course_notebook

POINTS = [1, 2, 1]  # the tiny notebook's mask check is worth 2
SEED = 987654321
# nbval's kernel imports torch in its first cell with no warm-up: on a busy 2-core machine that took
# more than test_grading's CELL_TIMEOUT
NBVAL_CELL_TIMEOUT = 90
VENV_BIN = Path(sys.executable).parent


def _solved_and_unsolved():
    solved = tiny_course_notebook()
    return {"solved": solved, "unsolved": student_version(solved)}


# --------------------------------------------------------------------------------------------
# GitHub Classroom
# --------------------------------------------------------------------------------------------


def command_grader(inputs: dict, cwd: Path, home: Path) -> str:
    """classroom-resources/autograding-command-grader@v1 on one step's `with` → its `result` output."""
    env = {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "FORCE_COLOR": "true", "HOME": str(home)}
    env.update(DOTNET_CLI_HOME="/tmp", DOTNET_NOLOGO="true")
    max_score = int(str(inputs.get("max-score") or 0).split(".")[0])  # parseInt
    minutes = float(inputs.get("timeout") or 10)
    try:
        run = subprocess.run(["/bin/sh", "-c", inputs["command"]], cwd=cwd, env=env, timeout=minutes * 60)
        status = "pass" if run.returncode == 0 else "fail"
    except subprocess.TimeoutExpired:
        status = "error"
    test = {"name": inputs["test-name"], "status": status, "score": max_score if status == "pass" else 0}
    result = {"version": 1, "status": status, "max_score": max_score, "tests": [test]}
    return base64.b64encode(json.dumps(result).encode()).decode()


def reporter_points(runners: str, env: dict) -> tuple[float, float]:
    """classroom-resources/autograding-grading-reporter@v1: (points, max points) it sends Classroom."""
    total = most = 0
    for runner in runners.split(","):
        results = json.loads(base64.b64decode(env[f"{runner.strip().upper()}_RESULTS"]))
        if not results.get("max_score"):
            continue
        most += results["max_score"]
        total += sum(t["score"] for t in results["tests"])
    return total, most


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    folder = tmp_path_factory.mktemp("classroom")
    nbformat.write(tiny_course_notebook(), folder / "01_tiny.ipynb")
    out = autograders.classroom_assignment(
        folder / "01_tiny.ipynb", folder / "starter", hidden_seed=0, cell_timeout=NBVAL_CELL_TIMEOUT, timeout=180
    )
    workflow = yaml.safe_load((out / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8"))
    return out, workflow


def test_classroom_workflow_is_named_and_wired_as_the_actions_document(starter):
    _, workflow = starter
    assert workflow["name"] == "Autograding Tests"
    assert list(workflow["jobs"]) == ["run-autograding-tests"]
    assert set(workflow["on"]) == {"push", "workflow_dispatch"}
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    graders = [s for s in steps if s.get("uses") == "classroom-resources/autograding-command-grader@v1"]
    (reporter,) = [s for s in steps if s.get("uses") == "classroom-resources/autograding-grading-reporter@v1"]
    assert steps[-1] is reporter
    runners = reporter["with"]["runners"].split(",")
    assert runners == [s["id"] for s in graders]
    # the reporter's error message accepts letters and digits only; then <ID>_RESULTS has one spelling
    assert all(re.fullmatch(r"[a-zA-Z0-9]+", r) for r in runners), runners
    assert set(reporter["env"]) == {f"{r.upper()}_RESULTS" for r in runners}
    for runner in runners:
        assert reporter["env"][f"{runner.upper()}_RESULTS"] == f"${{{{steps.{runner}.outputs.result}}}}"
    exercises = [s for s in graders if s["with"]["max-score"]]
    assert [s["with"]["test-name"] for s in exercises] == EXERCISES
    assert [s["with"]["max-score"] for s in exercises] == POINTS
    assert all(isinstance(s["with"]["max-score"], int) for s in graders)  # the action reads it with parseInt
    (runs,) = [s for s in graders if not s["with"]["max-score"]]
    assert "--nbval-lax" in runs["with"]["command"]
    assert runs["with"]["timeout"] == math.ceil(180 / 60)  # minutes
    grade_step = next(s for s in steps if s.get("name") == "Grade the notebook once")
    assert "--hidden-seed 0 " in grade_step["run"], "seed 0 must stay 0"


@pytest.mark.parametrize("kind", ["solved", "unsolved"])
def test_classroom_shows_full_points_for_solved_and_none_for_unsolved(starter, tmp_path, kind):
    template, workflow = starter
    repo = tmp_path / "repo"
    shutil.copytree(template, repo)  # the student's repository, made from the template
    nbformat.write(_solved_and_unsolved()[kind], repo / "01_tiny.ipynb")
    home = tmp_path / "home"
    home.mkdir()
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    outputs, env = {}, {}
    for step in steps:
        if step.get("name") in ("Install the course",) or step.get("uses", "").startswith("actions/"):
            continue  # this environment has the course installed; the checkout is `repo`
        if "run" in step:
            path = f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"
            run = subprocess.run(
                ["bash", "-e", "-c", step["run"]], cwd=repo, env=dict(os.environ, PATH=path, HOME=str(home))
            )
            assert run.returncode == 0, step["name"]
        elif step["uses"].startswith("classroom-resources/autograding-command-grader"):
            outputs[step["id"]] = command_grader(step["with"], repo, home)
        else:  # the reporter: its env refers to the steps' outputs
            for name, value in step["env"].items():
                ref = re.fullmatch(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.result\s*\}\}", value)
                env[name] = outputs[ref.group(1)]
            points, most = reporter_points(step["with"]["runners"], env)
    assert most == sum(POINTS)
    assert points == (sum(POINTS) if kind == "solved" else 0)
    runs = json.loads(base64.b64decode(outputs["notebookruns"]))
    assert runs["status"] == ("pass" if kind == "solved" else "fail")


def test_classroom_refuses_fractional_points_and_bad_limits(tmp_path):
    nb = tiny_course_notebook()
    cell(nb, "check-causal").metadata["onehot2gpt"] = {"points": 1.5}
    nbformat.write(nb, tmp_path / "01_tiny.ipynb")
    with pytest.raises(ValueError, match=r"causal_mask is worth 1\.5 points.*whole"):
        autograders.classroom_assignment(tmp_path / "01_tiny.ipynb", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# Gradescope
# --------------------------------------------------------------------------------------------

_PYTHON3 = """#!/usr/bin/env bash
# python3 -m venv DIR: a venv without pip that sees the test environment's packages after its own
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  "{python}" -m venv --without-pip "$3"
  purelib=$("$3/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "{purelib}" > "$purelib/main_env.pth"
  printf '#!/usr/bin/env bash\\nexec "{bin}/pip-standin" "%s" "$@"\\n' "$3/bin/python" > "$3/bin/pip"
  chmod +x "$3/bin/pip"
  exit 0
fi
exec "{python}" "$@"
"""

_PIP = """#!/usr/bin/env bash
# pip install ...: offline, no dependencies (the test environment has them); torch and pip skipped
target="$1"; shift
case " $* " in *" torch "*|*" --upgrade pip "*) exit 0;; esac
args=()
for a in "$@"; do [ "$a" != install ] && [ "$a" != -q ] && args+=("$a"); done
exec "{python}" -m pip --python "$target" install -q --no-deps --no-index --no-build-isolation "${{args[@]}}"
"""


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory):
    """The bundle unpacked as Gradescope unpacks it and setup.sh run → (root, bundle)."""
    mirror = os.environ.get("ONEHOT2GPT_DATA_MIRROR")
    if not mirror:
        pytest.fail("set ONEHOT2GPT_DATA_MIRROR to the offline data mirror (see docs/install.md)")
    tmp = tmp_path_factory.mktemp("gradescope")
    nbformat.write(tiny_course_notebook(), tmp / "01_tiny.ipynb")
    bundle = autograders.gradescope_bundle(
        tmp / "01_tiny.ipynb",
        tmp / "autograder.zip",
        hidden_seed=SEED,
        cell_timeout=CELL_TIMEOUT,
        timeout=120,
        checkpoints=["gpt-char-shakespeare"],
    )
    root = tmp / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in z.infolist()}
    for script in ("setup.sh", "run_autograder"):  # at the zip's root, executable
        assert modes[script] & stat.S_IXUSR, script
        (root / "source" / script).chmod(0o755)
    standins = tmp / "standins"
    standins.mkdir()
    purelib = sysconfig.get_paths()["purelib"]
    for name, text in (("apt-get", "#!/bin/sh\nexit 0\n"), ("python3", _PYTHON3), ("pip-standin", _PIP)):
        (standins / name).write_text(text.format(python=sys.executable, purelib=purelib, bin=standins))
        (standins / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEHOT2GPT_") and k != "VIRTUAL_ENV"}
    env.update(
        PATH=f"{standins}{os.pathsep}{os.environ['PATH']}",
        AUTOGRADER_ROOT=str(root),
        HOME=str(tmp / "home"),
        ONEHOT2GPT_DATA_MIRROR=mirror,
    )
    setup = subprocess.run(
        ["bash", root / "source" / "setup.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    return root, bundle, env, json.loads(setup.stdout[setup.stdout.index("{") :])


def _run_autograder(root: Path, env: dict, notebooks: dict) -> dict:
    """A fresh submission folder, the generated run_autograder run in /autograder → results.json and
    the points Gradescope shows (the top-level score overrides the tests' total)."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "submission").mkdir()
    for name, nb in notebooks.items():
        nbformat.write(nb, root / "submission" / name)
    run = subprocess.run(
        [root / "source" / "run_autograder"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    shown = results["score"] if "score" in results else sum(t["score"] for t in results["tests"])
    return results, shown


def test_gradescope_setup_installs_the_course_so_its_data_and_checkpoints_are_found(gradescope):
    root, bundle, _, answer = gradescope
    site = Path(answer["library"])
    assert (root / "venv") in site.parents, f"the library comes from {site}, not from the installed venv"
    assert not site.is_relative_to(root / "source") and not site.is_relative_to(Path(autograders.__file__).parents[2])
    assert Path(answer["registry"]) == site / "assets" / "registry.json"
    assert answer["checkpoints"] == ["gpt-char-shakespeare"]
    assert Path(answer["cache"]) == root / "cache"
    assert "tinyshakespeare" in answer["datasets"] and (root / "cache" / "tinyshakespeare" / "input.txt").is_file()
    setup = (root / "source" / "setup.sh").read_text()
    assert re.search(r'pip" install -q "\$ROOT/source/course\[test,hf\]"', setup) and " -e " not in setup


@pytest.mark.parametrize("kind", ["solved", "unsolved"])
def test_gradescope_shows_full_points_for_solved_and_none_for_unsolved(gradescope, kind):
    root, _, env, _ = gradescope
    results, shown = _run_autograder(root, env, {"01_tiny.ipynb": _solved_and_unsolved()[kind]})
    assert [t["name"] for t in results["tests"]] == EXERCISES
    assert [t["max_score"] for t in results["tests"]] == POINTS
    assert shown == (sum(POINTS) if kind == "solved" else 0)
    assert {t["status"] for t in results["tests"]} == ({"passed"} if kind == "solved" else {"failed"})
    assert all(t["visibility"] == "visible" for t in results["tests"]) and results["output_format"] == "text"
    if kind == "unsolved":
        assert all("not written yet" in t["output"] for t in results["tests"])


def test_gradescope_keeps_the_seed_and_paths_out_of_what_students_see(gradescope):
    """A submission that found the seed and paths and puts them in an error message."""
    root, _, env, _ = gradescope
    nb = tiny_course_notebook()
    cell(nb, "ex-encode").source = (
        "import os, sys\n"
        f"raise ValueError('seed {SEED} cwd ' + os.getcwd() + ' python ' + sys.executable + ' home ' + os.environ['HOME'])"
    )
    results, shown = _run_autograder(root, env, {"renamed by the student.ipynb": nb})
    assert shown == sum(POINTS) - 1  # encode fails, the rest passes
    encode = next(t for t in results["tests"] if t["name"] == "encode")
    assert "ValueError: seed …" in encode["output"], encode["output"]
    text = json.dumps(results, ensure_ascii=False)
    assert str(SEED) not in text and str(root) not in text and sys.executable not in text
    assert not re.search(r"(?<![\w.…])/(?:[^\s/\"]+/)+", text), text


def test_gradescope_without_the_notebook_gives_zero_and_says_what_to_submit(gradescope):
    root, _, env, _ = gradescope
    results, shown = _run_autograder(root, env, {})
    assert shown == 0 and [t["max_score"] for t in results["tests"]] == POINTS
    assert "Submit your 01_tiny.ipynb" in results["output"]


# --------------------------------------------------------------------------------------------
# Canvas: resubmissions
# --------------------------------------------------------------------------------------------


def test_resubmission_suffixes_map_to_the_notebook_and_the_student():
    assert grading.resubmission("alice_01_tiny-2.ipynb") == ("alice_01_tiny.ipynb", 2)
    assert grading.resubmission("alice_01_tiny.ipynb") == ("alice_01_tiny.ipynb", 0)
    refs = ["01_tiny.ipynb", "02_other.ipynb"]
    for name in ("01_tiny.ipynb", "01_tiny-1.ipynb", "alice_01_tiny-1.ipynb", "alice_01_tiny-12.ipynb"):
        assert grading.match_reference(name, refs) == "01_tiny.ipynb", name
    assert grading.match_reference("alice_03_none-1.ipynb", refs) is None


def test_the_newest_resubmission_counts_in_one_student_row(tmp_path):
    (tmp_path / "subs").mkdir()
    (tmp_path / "ref").mkdir()
    nbformat.write(tiny_course_notebook(), tmp_path / "ref" / "01_tiny.ipynb")
    for name in ("alice_01_tiny.ipynb", "alice_01_tiny-1.ipynb", "alice_01_tiny-2.ipynb", "01_tiny-1.ipynb"):
        nbformat.write(tiny_course_notebook(), tmp_path / "subs" / name)
    found = {
        s.file: (s.student, s.reference.name) for s in grading.find_submissions(tmp_path / "subs", tmp_path / "ref")
    }
    assert found == {
        "alice_01_tiny.ipynb": ("alice", "01_tiny.ipynb"),
        "alice_01_tiny-1.ipynb": ("alice", "01_tiny.ipynb"),
        "alice_01_tiny-2.ipynb": ("alice", "01_tiny.ipynb"),
        "01_tiny-1.ipynb": ("01_tiny", "01_tiny.ipynb"),
    }

    def rows(file, passed):  # the older files scored better: the newest counts all the same
        return [
            grading.ExerciseResult("alice", "01_tiny.ipynb", file, e, "pass" if ok else "fail", "ok", "", p * ok, p)
            for e, p, ok in zip(EXERCISES, map(float, POINTS), passed)
        ]

    results = (
        rows("alice_01_tiny.ipynb", [1, 1, 1])
        + rows("alice_01_tiny-2.ipynb", [1, 0, 0])
        + rows("alice_01_tiny-1.ipynb", [1, 1, 0])
    )
    assert grading.duplicates(results) == {
        ("alice", "01_tiny.ipynb"): ["alice_01_tiny-2.ipynb", "alice_01_tiny-1.ipynb", "alice_01_tiny.ipynb"]
    }
    grading.write_wide_csv(results, tmp_path / "wide.csv")
    lines = (tmp_path / "wide.csv").read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith("alice,1,4,1,0,0,alice_01_tiny-2.ipynb,")


def test_feedback_keeps_the_whole_diagnosis_and_no_seed_environment_or_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURER_TOKEN", "s3cret-token-value")
    message = (
        "one_hot (hidden test 1 of 3): expected shape (4, 5), got (4, 6); on input tensor([0, 2]); "
        "Looks like: one column too many; Think about: the vocabulary size; Hint: use vocab_size; "
        f"seed {SEED} s3cret-token-value /home/lecturer/course/x.py"
    )
    result = grading.ExerciseResult("bob", "01_tiny.ipynb", "bob/01_tiny.ipynb", "one_hot", "fail", "ok", message, 0, 1)
    grading.write_feedback([result], tmp_path / "feedback", hidden_seeds=[SEED])
    text = (tmp_path / "feedback" / "bob.md").read_text()
    for part in ("on input tensor([0, 2])", "Looks like: one column too many", "Think about:", "Hint: use vocab_size"):
        assert part in text
    assert str(SEED) not in text and "s3cret-token-value" not in text and "/home/lecturer" not in text
    assert "…/x.py" in text
