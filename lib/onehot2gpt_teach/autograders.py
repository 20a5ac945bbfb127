"""The grader on the platforms lecturers already use: a Gradescope autograder bundle and a GitHub
Classroom assignment, each made by one command from a course notebook, each laid out as its platform
documents it.

``onehot2gpt-autograder gradescope notebooks/10_zero_shot.ipynb --out autograder.zip`` writes the
zip to upload as a Gradescope "programming assignment" autograder (Gradescope's autograder
specifications, https://gradescope-autograders.readthedocs.io/en/latest/specs/): at its root
``setup.sh``, which Gradescope runs once when it builds the image (installs Python, CPU PyTorch and
the course from the copy inside the zip, not editable, so that the library's registry and
checkpoints are its package data; fetches every dataset of the registry into ``/autograder/cache``;
then ``gradescope-setup`` checks that the installed library finds its registry, the datasets and
each shipped checkpoint) and ``run_autograder``, which Gradescope runs for every submission (grades
``/autograder/submission/*.ipynb`` with :mod:`onehot2gpt_teach.grading`, the kernels without
network, each in the bubblewrap sandbox where it can start in Gradescope's container, else with the
container as the only sandbox (the log, which only instructors see, says which), and writes
``/autograder/results/results.json``: one test per exercise with ``name``, ``score``,
``max_score``, ``status``, ``output`` and ``visibility``). The hidden seed is drawn once
(or given) and kept inside the zip; no hidden seed, environment value or path outside the
submission reaches ``results.json`` (:func:`onehot2gpt_teach.grading_reports.redact`).

``onehot2gpt-autograder classroom notebooks/10_zero_shot.ipynb --out starter/`` writes a
starter repository for a GitHub Classroom assignment: the student version of the notebook, the
check cells the grader runs (``.grading/``), and ``.github/workflows/classroom.yml``, wired as
``classroom-resources/autograding-command-grader`` and ``autograding-grading-reporter`` document:
the workflow ``Autograding Tests``, its job ``run-autograding-tests``; a step grades the notebook
once (``--no-sandbox``: the runner is fresh, in the student's own repository); then one
command-grader step per exercise (id ``exercise1``, ``exercise2``, …, its points as ``max-score``,
its ``timeout`` in minutes) runs ``python -m onehot2gpt_teach.autograders passed``, and a step
``notebookruns`` (0 points) runs ``pytest --nbval-lax`` on the notebook; the reporter gets
``runners: notebookruns,exercise1,…`` and, for each id, the step's ``result`` output in the
environment variable the reporter reads, the id in capitals followed by ``_RESULTS``
(``EXERCISE1_RESULTS``). The ids are letters and digits only, so that this name has one spelling.
Classroom runs in the student's own repository: a student can read the hidden seed and edit the
workflow, so mark ``.github/`` and ``.grading/`` as protected paths in the assignment, and use
Gradescope (or the grading command on your machine) where marks must not depend on that.

Both are tried in ``tests/test_platforms.py``: each platform's folders laid out in a temporary
directory, the generated commands run there on a solved and an unsolved notebook, and the points
computed the way the platform computes them.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import secrets
import shlex
import shutil
import sys
import time
import zipfile
from pathlib import Path

if __name__ == "__main__":  # as a command, skip the IRI grammar nbformat never needs (see .grading)
    sys.modules.setdefault("rfc3987_syntax", None)

from ._cli import input_file, output_file, output_folder
from .grading import RESULTS, grade, redact, reference_checks, write_reports

__all__ = [
    "gradescope_bundle",
    "gradescope_results",
    "run_gradescope",
    "setup_gradescope",
    "classroom_assignment",
    "classroom_results_variable",
    "exercise_passed",
    "main",
]

_REPO = Path(__file__).resolve().parents[2]
SETTINGS = "onehot2gpt-autograder.json"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# The workflow and job names of the workflow GitHub Classroom writes, which the reporter's README
# (classroom-resources/autograding-grading-reporter) shows too.
CLASSROOM_WORKFLOW = "Autograding Tests"
CLASSROOM_JOB = "run-autograding-tests"


def _limits(cell_timeout, timeout, hidden_seed) -> tuple[float, float, int]:
    """The generators' settings checked → (cell_timeout, timeout, hidden seed); a seed of None
    is drawn at random (a seed of 0 is kept)."""
    from onehot2gpt.utils import check_int, check_number

    cell_timeout = check_number(
        cell_timeout, "--cell-timeout", 0, low_open=True, fix="give the seconds one cell may run, e.g. 300"
    )
    timeout = check_number(timeout, "--timeout", 0, low_open=True, fix="give the seconds a notebook may run, e.g. 1800")
    if hidden_seed is None:
        return cell_timeout, timeout, secrets.randbelow(2**31 - 2) + 1
    seed = check_int(
        hidden_seed, "--hidden-seed", 0, 2**63 - 1, fix="give a whole number, or leave it out for a random one"
    )
    return cell_timeout, timeout, seed


def _reference(notebook: str | Path):
    import nbformat

    path = Path(notebook)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}: pass a course notebook, e.g. notebooks/01_onehot.ipynb")
    nb = nbformat.read(path, as_version=4)
    checks = reference_checks(nb)
    if not checks:
        raise ValueError(f"{path} has no cell tagged 'check': nothing to grade")
    return path, nb, checks


def _checkpoints(names=None) -> list[str]:
    """The committed checkpoints to ship: all of them (a notebook may load one through a library
    function that names it), or `names`."""
    from onehot2gpt.checkpoints import list_checkpoints

    known = list_checkpoints()
    if names is None:
        return known
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"no committed checkpoint {', '.join(unknown)}; the course has {', '.join(known)}")
    return list(names)


# --------------------------------------------------------------------------------------------
# Gradescope
# --------------------------------------------------------------------------------------------

_SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image, with this zip unpacked
# in /autograder/source. AUTOGRADER_ROOT exists for tests.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
apt-get update -qq
# bubblewrap: the grader's sandbox around each kernel (onehot2gpt_teach.sandbox)
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap > /dev/null
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install -q --upgrade pip
"$ROOT/venv/bin/pip" install -q torch --index-url {torch_index}
# The course as a package, not editable: the registry and the checkpoints are its package data.
"$ROOT/venv/bin/pip" install -q "$ROOT/source/course[test,hf]"
# Every dataset into $ROOT/cache (the students' kernels get no network), then a check that the
# installed library finds its registry, the datasets and each shipped checkpoint.
ONEHOT2GPT_CACHE="$ROOT/cache" "$ROOT/venv/bin/python" -m onehot2gpt_teach.autograders gradescope-setup --root "$ROOT"
"""

_RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in /autograder. AUTOGRADER_ROOT exists for tests.
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
export ONEHOT2GPT_CACHE="$ROOT/cache"
exec "$ROOT/venv/bin/python" -m onehot2gpt_teach.autograders gradescope-run --root "$ROOT"
"""


def gradescope_bundle(
    notebook: str | Path,
    out: str | Path,
    *,
    hidden_seed: int | None = None,
    cell_timeout: float = 300,
    timeout: float = 1800,
    checkpoints=None,
) -> Path:
    """Write the Gradescope autograder zip for one course notebook → its path. `checkpoints`
    (names) limits the committed checkpoints shipped with it; by default all are. `hidden_seed`
    None draws one at random; `cell_timeout` and `timeout` are seconds, above 0."""
    cell_timeout, timeout, seed = _limits(cell_timeout, timeout, hidden_seed)
    out = Path(out)
    if out.suffix != ".zip":
        raise ValueError(f"--out must name a .zip file (what Gradescope uploads), got {out}")
    if not (_REPO / "pyproject.toml").is_file():  # an installed wheel has no source tree to ship
        raise FileNotFoundError(
            f"the bundle ships the course's source tree, and {_REPO} is not a clone of the course: "
            "run this from a clone installed with pip install -e ."
        )
    path, nb, checks = _reference(notebook)
    shipped = _checkpoints(checkpoints)
    settings = {
        "notebook": path.name,
        "hidden_seeds": [seed],
        "cell_timeout": cell_timeout,
        "timeout": timeout,
        "checkpoints": shipped,
        "exercises": [{"name": c.name, "points": c.points} for c in checks],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:

        def add_text(name: str, text: str, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)

        add_text("setup.sh", _SETUP_SH.format(torch_index=TORCH_CPU_INDEX), 0o755)
        add_text("run_autograder", _RUN_AUTOGRADER.format(), 0o755)
        add_text(SETTINGS, json.dumps(settings, indent=2))
        add_text("course/notebooks/" + path.name, path.read_text(encoding="utf-8"))
        for file in ("pyproject.toml", "README.md", "LICENSE"):
            if (_REPO / file).exists():
                z.write(_REPO / file, "course/" + file)
        for file in _library_files():
            z.write(file, "course/" + file.relative_to(_REPO).as_posix())
        for name in shipped:
            for file in sorted((_REPO / "lib" / "onehot2gpt" / "assets" / "checkpoints" / name).iterdir()):
                z.write(file, f"course/lib/onehot2gpt/assets/checkpoints/{name}/{file.name}")
    tmp.replace(out)
    return out


def _library_files() -> list[Path]:
    """What the bundle's non-editable install needs of lib/: the library with its package data (the
    registry, the recorded results, the JavaScript of bertviz's views) but not the checkpoints,
    which are shipped by name; of the exercise checks (which the grader imports) and of the lecturer's
    tools the Python alone."""
    library = _REPO / "lib" / "onehot2gpt"
    files = [
        f
        for f in library.rglob("*")
        if f.is_file()
        and "__pycache__" not in f.parts
        and not f.relative_to(library).as_posix().startswith("assets/checkpoints/")
    ]
    python = [
        f for package in ("onehot2gpt_exercises", "onehot2gpt_teach") for f in (_REPO / "lib" / package).rglob("*.py")
    ]
    return sorted(files + python)


def gradescope_results(results, settings: dict | None = None, hidden_seeds=()) -> dict:
    """ExerciseResults of one submission → Gradescope's results.json: ``score``, one test per
    exercise (``name``, ``score``, ``max_score``, ``status``, ``output``, ``visibility``), ``output``
    and its format (plain text: a student's text is never rendered as HTML). Every text goes
    through :func:`~onehot2gpt_teach.grading_reports.redact`."""
    tests, problems = [], []
    for r in results:
        if not r.exercise:
            problems.append(redact(f"{r.file}: {r.message}", hidden_seeds))
            continue
        verdict = "passed" if r.result == "pass" else r.result
        tests.append(
            {
                "name": r.exercise,
                "score": r.points,
                "max_score": r.max_points,
                "status": "passed" if r.result == "pass" else "failed",
                "output": redact(verdict if not r.message else f"{verdict}: {r.message}", hidden_seeds),
                "visibility": "visible",
            }
        )
    if not tests and settings:  # nothing could be graded: every exercise scores 0
        tests = [
            {
                "name": e["name"],
                "score": 0.0,
                "max_score": e["points"],
                "status": "failed",
                "output": "; ".join(problems) or "no notebook graded",
                "visibility": "visible",
            }
            for e in settings["exercises"]
        ]
    return {
        "score": sum(t["score"] for t in tests),
        "tests": tests,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "output": "\n".join(problems),
        "output_format": "text",
    }


def setup_gradescope(root: str | Path = "/autograder") -> dict:
    """What ``setup.sh`` does after installing the course: fetch every dataset of the registry into
    the cache (``$ONEHOT2GPT_CACHE``; ``setup.sh`` sets ``<root>/cache``), load each checkpoint the
    bundle ships by name, and check that the library in use is the installed package, not the copy
    in ``<root>/source`` → {"library", "registry", "cache", "datasets", "checkpoints"}. Raises
    RuntimeError naming what is missing."""
    import onehot2gpt
    from onehot2gpt import checkpoints, data

    root = Path(root)
    settings = json.loads((root / "source" / SETTINGS).read_text(encoding="utf-8"))
    library = Path(onehot2gpt.__file__).resolve().parent
    if (root / "source").resolve() in library.parents:
        raise RuntimeError(
            f"the library in use is {library}, the copy in {root / 'source'}: install the course "
            "(pip install <root>/source/course) and run this with the installed Python"
        )
    if not data.REGISTRY_PATH.is_file():
        raise RuntimeError(f"the installed library has no dataset registry at {data.REGISTRY_PATH}")
    datasets = data.list_datasets()
    for name in datasets:
        data.fetch_all(name, progress=False)
    missing = sorted(set(settings.get("checkpoints", [])) - set(checkpoints.list_checkpoints()))
    if missing:
        raise RuntimeError(
            f"the installed library finds no checkpoint {', '.join(missing)} in {checkpoints.checkpoints_dir()}"
        )
    for name in settings.get("checkpoints", []):
        checkpoints.load(name)
    return {
        "library": str(library),
        "registry": str(data.REGISTRY_PATH),
        "cache": str(data.cache_dir()),
        "datasets": datasets,
        "checkpoints": settings.get("checkpoints", []),
    }


def run_gradescope(root: str | Path = "/autograder") -> dict:
    """What ``run_autograder`` does: grade the submitted notebook(s) in ``<root>/submission``
    against the course notebook in ``<root>/source`` and write ``<root>/results/results.json``
    (also when grading itself fails: then every exercise scores 0 and ``output`` says why)."""
    started = time.monotonic()
    root = Path(root)
    source = root / "source"
    settings = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    seeds = settings["hidden_seeds"]
    reference_dir = source / "course" / "notebooks"
    work = root / "work"
    if work.exists():
        shutil.rmtree(work)
    student_dir = work / "submissions" / "student"
    student_dir.mkdir(parents=True)
    submitted = sorted(p for p in (root / "submission").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    # the notebook named like the course's, else the only one: Gradescope keeps the student's file name
    chosen = [p for p in submitted if p.name == settings["notebook"]] or (submitted if len(submitted) == 1 else [])
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)

    def nothing_graded(why: str) -> dict:
        report = gradescope_results([], settings)
        report["output"] = why
        for test in report["tests"]:
            test["output"] = why
        return report

    if not chosen:
        names = ", ".join(p.name for p in submitted) or "none"
        report = nothing_graded(f"Submit your {settings['notebook']} (found: {names}).")
    else:
        shutil.copy(chosen[0], student_dir / settings["notebook"])
        from . import sandbox

        # Gradescope's container, one per submission, is the sandbox where bubblewrap cannot start
        boxed, why = sandbox.available()
        print(f"sandbox: {'bubblewrap' if boxed else f'none ({why}): the container alone'}")
        try:  # the datasets are in the cache setup.sh filled: the kernels need no network
            results = grade(
                work / "submissions",
                reference_dir,
                cell_timeout=settings["cell_timeout"],
                timeout=settings["timeout"],
                hidden_seeds=seeds,
                network=False,
                sandbox=boxed,
            )
            write_reports(results, work / "grades", hidden_seeds=seeds)
            report = gradescope_results(results, settings, seeds)
        except Exception as exc:  # Gradescope shows nothing without results.json: write one anyway
            print(f"grading failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            report = nothing_graded(
                redact(f"The autograder could not grade this submission ({type(exc).__name__}: {exc}).", seeds)
            )
    report["execution_time"] = round(time.monotonic() - started)
    (out / "results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


# --------------------------------------------------------------------------------------------
# GitHub Classroom
# --------------------------------------------------------------------------------------------


def classroom_assignment(
    notebook: str | Path,
    out: str | Path,
    *,
    course_repo: str = "https://github.com/one-hot-to-gpt/one-hot-to-gpt",
    hidden_seed: int | None = None,
    cell_timeout: float = 300,
    timeout: float = 1800,
    python: str = "3.11",
) -> Path:
    """Write a GitHub Classroom starter repository for one course notebook into `out` → `out`.
    `hidden_seed` None draws one at random; `cell_timeout` and `timeout` are seconds, above 0;
    every check's points must be whole (the command grader reads ``max-score`` as an integer)."""
    from .student import make_student_notebook

    cell_timeout, timeout, seed = _limits(cell_timeout, timeout, hidden_seed)
    path, nb, checks = _reference(notebook)
    for check in checks:
        if check.points != int(check.points):
            raise ValueError(
                f"exercise {check.name} is worth {check.points:g} points, and GitHub Classroom's command "
                "grader counts whole points only: give it a whole number in the check cell's metadata "
                '("onehot2gpt": {"points": 1})'
            )
    out = Path(out)
    (out / ".grading").mkdir(parents=True, exist_ok=True)
    student = make_student_notebook(json.loads(path.read_text(encoding="utf-8")), path.name)
    text = json.dumps(student, indent=1, ensure_ascii=False) + "\n"
    (out / path.name).write_text(text, encoding="utf-8")
    # The grader needs only the check cells, which the student version holds unchanged: no solutions.
    (out / ".grading" / path.name).write_text(text, encoding="utf-8")
    notebook_arg = shlex.quote(path.name)
    steps = [
        {"name": "Check out the assignment", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": python}},
        {
            "name": "Install the course",
            "run": f"pip install -q torch --index-url {TORCH_CPU_INDEX}\n"
            f"pip install -q {shlex.quote(f'onehot2gpt[test,hf] @ git+{course_repo}')}",
        },
        # --no-sandbox: the job runs in a fresh runner in the student's own repository, where the
        # student can edit this workflow; a sandbox would protect nothing the student cannot change
        {
            "name": "Grade the notebook once",  # the grader finds the notebook under submission/
            "run": (
                f"mkdir -p submission && cp {notebook_arg} submission/\n"
                f"python -m onehot2gpt_teach.grading submission --reference .grading --out .grading/out "
                f"--hidden-seed {seed} --cell-timeout {cell_timeout:g} --timeout {timeout:g} --network "
                "--no-sandbox || true"
            ),
        },
        {
            "name": "The notebook runs top to bottom (nbval-lax)",
            "id": "notebookruns",
            "uses": "classroom-resources/autograding-command-grader@v1",
            "with": {
                "test-name": "notebook runs (pytest --nbval-lax)",
                "command": f"pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout {cell_timeout:g} "
                f"{notebook_arg}",
                "timeout": math.ceil(timeout / 60),  # minutes, as the command grader reads it
                "max-score": 0,
            },
        },
    ]
    runners = ["notebookruns"]
    for k, check in enumerate(checks, 1):
        runners.append(f"exercise{k}")
        steps.append(
            {
                "name": f"Exercise {check.name}",
                "id": runners[-1],
                "uses": "classroom-resources/autograding-command-grader@v1",
                "with": {
                    "test-name": check.name,
                    "command": "python -m onehot2gpt_teach.autograders passed .grading/out/grades.csv "
                    + shlex.quote(check.name),
                    "timeout": 1,
                    "max-score": int(check.points),
                },
            }
        )
    steps.append(
        {
            "name": "Autograding Reporter",
            "uses": "classroom-resources/autograding-grading-reporter@v1",
            "env": {classroom_results_variable(r): f"${{{{steps.{r}.outputs.result}}}}" for r in runners},
            "with": {"runners": ",".join(runners)},
        }
    )
    workflow = {
        "name": CLASSROOM_WORKFLOW,
        "on": ["push", "workflow_dispatch"],
        "permissions": {"checks": "write", "actions": "read", "contents": "read"},
        "jobs": {
            CLASSROOM_JOB: {"runs-on": "ubuntu-latest", "if": "github.actor != 'github-classroom[bot]'", "steps": steps}
        },
    }
    (out / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    (out / ".github" / "workflows" / "classroom.yml").write_text(_yaml(workflow), encoding="utf-8")
    (out / "README.md").write_text(
        f"# {path.stem}\n\nWork in `{path.name}`: replace each `raise NotImplementedError` with your code and "
        f"run the check cell after it. Every push is graded (Actions tab); a check cell that passes in "
        f"your notebook should pass there too.\n",
        encoding="utf-8",
    )
    return out


def classroom_results_variable(step_id: str) -> str:
    """The environment variable in which ``autograding-grading-reporter`` looks for a runner's
    result: the step id in capitals followed by ``_RESULTS`` (``exercise1`` → ``EXERCISE1_RESULTS``)."""
    return f"{step_id.strip().upper()}_RESULTS"


def _yaml(value, indent: int = 0) -> str:
    """A small YAML writer for the workflow (dicts, lists, strings, numbers; block strings for
    multi-line commands), so that no YAML library is needed to write it."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            key = json.dumps(key) if key in ("on",) else key
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 1)}")
            elif isinstance(item, str) and "\n" in item:
                body = "\n".join(pad + "  " + line for line in item.splitlines())
                lines.append(f"{pad}{key}: |\n{body}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines) + ("\n" if indent == 0 else "")
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, dict):
                inner = _yaml(item, indent + 1).splitlines()
                lines.append(f"{pad}- {inner[0].strip()}")
                lines += inner[1:]
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return "\n".join(lines)
    return pad + _scalar(value)


def _scalar(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return f"{x:g}"
    return json.dumps(str(x))


def exercise_passed(grades_csv: str | Path, exercise: str) -> tuple[bool, str]:
    """Whether `exercise` passed in a grades.csv → (passed, message): the command each Classroom
    test runs (``python -m onehot2gpt_teach.autograders passed grades.csv NAME``)."""
    path = Path(grades_csv)
    if not path.is_file():
        return False, f"{path} not found: the grading step did not run (see its log)"
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r.get("exercise") == exercise]
    if not rows:
        return False, f"no result for {exercise!r} in {path}: was the notebook submitted under its own name?"
    row = rows[0]
    if row.get("result") not in RESULTS:
        return False, f"unreadable result {row.get('result')!r}"
    return row["result"] == "pass", redact(row["result"] + (f": {row['message']}" if row.get("message") else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="onehot2gpt-autograder", description="Gradescope and GitHub Classroom autograders for a course notebook."
    )
    sub = parser.add_subparsers(dest="what", required=True)
    gs = sub.add_parser("gradescope", help="write the Gradescope autograder zip for a notebook")
    cl = sub.add_parser("classroom", help="write a GitHub Classroom starter repository for a notebook")
    for p in (gs, cl):
        p.add_argument("notebook", help="the course notebook, e.g. notebooks/10_zero_shot.ipynb")
        p.add_argument("--out", required=True, help="the .zip (gradescope) or folder (classroom) to write")
        p.add_argument("--hidden-seed", type=int, help="seed of the hidden test inputs, 0 or more (default: random)")
        p.add_argument("--cell-timeout", type=float, default=300, help="seconds one cell may run (default: 300)")
        p.add_argument("--timeout", type=float, default=1800, help="seconds a notebook may run (default: 1800)")
    gs.add_argument("--checkpoints", help="comma-separated checkpoints to ship (default: all committed ones)")
    cl.add_argument(
        "--course-repo",
        default="https://github.com/one-hot-to-gpt/one-hot-to-gpt",
        help="the course repository the workflow installs the library from",
    )
    setup = sub.add_parser(
        "gradescope-setup", help="(inside Gradescope, from setup.sh) fetch the datasets, check the install"
    )
    setup.add_argument("--root", default="/autograder")
    run = sub.add_parser("gradescope-run", help="(inside Gradescope) grade /autograder/submission")
    run.add_argument("--root", default="/autograder")
    passed = sub.add_parser("passed", help="(inside Classroom) exit 0 if EXERCISE passed in GRADES_CSV")
    passed.add_argument("grades_csv")
    passed.add_argument("exercise")
    args = parser.parse_args(argv)
    if args.what in ("gradescope", "classroom"):
        input_file(parser, "notebook", args.notebook)
        if args.what == "gradescope":
            output_file(parser, "--out", args.out, ".zip")
        else:
            output_folder(parser, "--out", args.out)
    try:
        if args.what == "gradescope":
            print(
                gradescope_bundle(
                    args.notebook,
                    args.out,
                    hidden_seed=args.hidden_seed,
                    cell_timeout=args.cell_timeout,
                    timeout=args.timeout,
                    checkpoints=args.checkpoints.split(",") if args.checkpoints else None,
                )
            )
        elif args.what == "classroom":
            print(
                classroom_assignment(
                    args.notebook,
                    args.out,
                    course_repo=args.course_repo,
                    hidden_seed=args.hidden_seed,
                    cell_timeout=args.cell_timeout,
                    timeout=args.timeout,
                )
            )
        elif args.what == "gradescope-setup":
            print(json.dumps(setup_gradescope(args.root), indent=2))
        elif args.what == "gradescope-run":
            report = run_gradescope(args.root)
            print(f"score {report['score']:g} of {sum(t['max_score'] for t in report['tests']):g}")
        else:
            ok, message = exercise_passed(args.grades_csv, args.exercise)
            print(message)
            return 0 if ok else 1
    except (FileNotFoundError, ValueError, TypeError, RuntimeError) as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
