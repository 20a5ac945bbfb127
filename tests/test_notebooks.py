"""Every course notebook is stored with outputs (so nbval compares something), has checked
exercises, and has a student version that is in sync and fails exactly its check cells."""

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from browser_helpers import browser_available, in_ci
from nbclient import NotebookClient
from nbval.plugin import find_comment_markers
from one_run import (
    SOLVED,
    WRAPPERS,
    course_run_problems,
    is_solved_copy,
    one_run_notebook,
    python_code,
    solution_names_used_later,
    source,
    student_run_problems,
)
from onehot2gpt.vocab import Vocab
from onehot2gpt_teach.student import cell_tags, make_student_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDENT_DIR = ROOT / "notebooks" / "student"
# nbval's cell tags (nbval.plugin.metadata_tags) that stop it comparing a cell's outputs.
IGNORE_TAGS = ("nbval-ignore-output", "nbval-skip", "nbval-raises-exception", "raises-exception")
ids = [p.name for p in NOTEBOOKS]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and source(c).strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_topic.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_stored_with_outputs(path):
    cells = code_cells(load(path))
    not_run = [source(c).splitlines()[0] for c in cells if c.get("execution_count") is None]
    assert not not_run, f"{path.name}: cells saved without running them: {not_run[:3]}"
    assert sum(bool(c["outputs"]) for c in cells) >= len(cells) / 3, (
        f"{path.name}: too few cells have stored outputs for nbval to compare"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_at_most_a_fifth_of_code_cells_ignore_their_output(path):
    cells = code_cells(load(path))
    skipped = [c for c in cells if "nbval-skip" in cell_tags(c)]
    assert not skipped, f"{path.name}: the nbval-skip tag hides a cell from the tests; don't use it"
    ignored = [c for c in cells if set(IGNORE_TAGS) & set(cell_tags(c))]
    assert len(ignored) <= 0.2 * len(cells), (
        f"{path.name}: {len(ignored)} of {len(cells)} code cells ignore their output (max 20%)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_nbval_options_are_cell_tags_not_comments(path):
    """A reader sees no test-harness comment in a teaching cell: nbval's options are cell tags
    (`nbval-ignore-output`, ...), never its comment markers (`# NBVAL_IGNORE_OUTPUT`, ...)."""
    marked = [
        source(c).strip().splitlines()[0][:60] for c in code_cells(load(path)) if dict(find_comment_markers(source(c)))
    ]
    assert not marked, (
        f"{path.name}: cells carry nbval comment markers; tag them instead "
        f"(e.g. nbval-ignore-output in the cell's metadata tags): {marked}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_exercises_are_each_followed_by_a_check(path):
    cells = load(path)["cells"]
    exercises = [i for i, c in enumerate(cells) if "exercise" in cell_tags(c)]
    assert len(exercises) >= 3, f"{path.name}: at least 3 exercises, found {len(exercises)}"
    for i in exercises:
        following = [c for c in cells[i + 1 :] if c["cell_type"] == "code"][:1]
        assert following and "check" in cell_tags(following[0]), (
            f"{path.name}: exercise cell {i} must be followed by a code cell tagged 'check'"
        )
        assert "check_" in source(following[0])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_student_notebook_is_in_sync(path):
    student = STUDENT_DIR / path.name
    assert student.exists(), f"missing {student.relative_to(ROOT)}: run `make student`"
    expected = make_student_notebook(load(path), path.name)
    got = load(student)
    assert [source(c) for c in got["cells"]] == [source(c) for c in expected["cells"]], (
        f"{student.relative_to(ROOT)} is out of date: run `make student` and commit it"
    )


# Each notebook is executed once in the suite: in JupyterLab by tests/test_browser.py, its student
# version with the course's solutions added after its checks (tests/one_run.py), which tests both
# versions from the saved notebook and then uses its widgets. Only where that test cannot run (no
# Chromium or Playwright, outside CI, where it is skipped) does this one make the same run.
# (Not collected at all where the browser test runs them: no test is skipped.)
if not (browser_available() or in_ci()):

    @pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
    def test_student_version_fails_exactly_its_checks_and_course_outputs_match(path):
        run = nbformat.reads(json.dumps(one_run_notebook(load(path), load(STUDENT_DIR / path.name))), as_version=4)
        NotebookClient(
            run,
            timeout=900,
            allow_errors=True,
            kernel_name="python3",
            resources={"metadata": {"path": str(STUDENT_DIR)}},
        ).execute()
        saved = json.loads(nbformat.writes(run))
        problems = student_run_problems(saved, f"student/{path.name}") + course_run_problems(
            saved, load(path), f"notebooks/{path.name}"
        )
        assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_cells_after_an_exercise_run_without_its_solution(path):
    """The one run executes the cells after each exercise with its solution in place, so that they
    give the course's stored outputs; that they also run without it (the student version) rests on
    this: they reach the exercise's names only through yours_or/yours_if_solved."""
    problems = solution_names_used_later(load(path), load(STUDENT_DIR / path.name), path.name)
    assert not problems, "\n".join(problems)


def test_nbval_lax_passes_a_solved_student_notebook_and_fails_an_unsolved_one_at_its_checks(tmp_path):
    """What "nbval-tested assignments" means to a lecturer, with the command a student or a CI
    runs: `pytest --nbval-lax` on the student version of notebook 01 fails at its check cells and
    nowhere else; with the solutions filled in (the course notebook's exercise cells) it passes."""
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    path = notebook("01")
    course, student = load(path), load(STUDENT_DIR / path.name)
    solved = json.loads(json.dumps(student))
    answers = {c.get("id"): c["source"] for c in course["cells"]}
    for mine in solved["cells"]:
        if "exercise" in cell_tags(mine):
            mine["source"] = answers[mine.get("id")]
    checks = [i for i, c in enumerate(student["cells"]) if c["cell_type"] == "code" and "check" in cell_tags(c)]
    results = {}
    for name, nb in (("unsolved", student), ("solved", solved)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / path.name).write_text(json.dumps(nb), encoding="utf-8")
        report = folder / "report.xml"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--nbval-lax",
                f"--junitxml={report}",
                "--rootdir",
                str(folder),
                str(folder / path.name),
            ],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=600,
        )
        failed = [
            case.get("name")
            for case in ET.parse(report).iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        ]
        results[name] = (run.returncode, failed, run.stdout[-2000:])
    code, failed, out = results["solved"]
    assert code == 0 and failed == [], out
    code, failed, out = results["unsolved"]
    assert code == 1, out
    # nbval names an item by its position among the code cells: "Cell 3"
    code_positions = [i for i, c in enumerate(student["cells"]) if c["cell_type"] == "code"]
    assert sorted(int(re.search(r"\d+", f).group()) for f in failed) == [code_positions.index(i) for i in checks], out


# -- the course builds its models (issue 14) ----------------------------------------------------


def notebook(number: str) -> Path:
    found = [p for p in NOTEBOOKS if p.name.startswith(number + "_")]
    assert found, f"no notebook {number}_*.ipynb"
    return found[0]


def all_code(path: Path) -> str:
    return "\n".join(source(c) for c in code_cells(load(path)))


@pytest.mark.parametrize("number", ["03", "04", "07", "09"])
def test_model_notebooks_build_their_model_and_prove_it_equal_to_the_library(number):
    code = all_code(notebook(number))
    assert re.search(r"^class \w+\((torch\.)?nn\.Module\)", code, re.M), (
        f"notebook {number} must build its model as nn.Module classes in code cells"
    )
    assert "assert_close(" in code, f"notebook {number} must prove its model equal to the library's (assert_close)"
    assert "show_source(" in code or re.search(r"^\w+\?\?", code, re.M), (
        f"notebook {number} must show the library's class after building its own"
    )


@pytest.mark.parametrize("number", ["02", "03", "07", "08", "09"])
def test_training_loops_are_written_in_the_notebook(number):
    cells = [source(c) for c in code_cells(load(notebook(number)))]
    loops = [
        c for c in cells if ".backward()" in c and re.search(r"\.step\(", c) and re.search(r"^\s*for .+:", c, re.M)
    ]
    assert loops, (
        f"notebook {number} must write a training loop (a for loop with backward() "
        f"and an optimizer step) in a code cell"
    )


def solution_lines(cell_source: str) -> int:
    """Lines of code between BEGIN SOLUTION and END SOLUTION (no blanks, no comments)."""
    counted, inside = 0, False
    for line in cell_source.splitlines():
        text = line.strip()
        if text.startswith("### BEGIN SOLUTION"):
            inside = True
        elif text.startswith("### END SOLUTION"):
            inside = False
        elif inside and text and not text.startswith("#"):
            counted += 1
    return counted


@pytest.mark.parametrize("number", ["02", "03", "04", "05", "06", "07", "08", "09"])
def test_model_notebooks_have_four_checked_exercises_one_of_them_substantial(number):
    cells = load(notebook(number))["cells"]
    exercises = [c for c in cells if "exercise" in cell_tags(c)]
    checks = [c for c in cells if "check" in cell_tags(c)]
    assert len(exercises) >= 4 and len(checks) >= 4, (
        f"notebook {number}: {len(exercises)} exercises and {len(checks)} checks (at least 4 each)"
    )
    longest = max(solution_lines(source(c)) for c in exercises)
    assert longest >= 8, (
        f"notebook {number}: the longest solution has {longest} lines; at least "
        f"one exercise must assemble something real (8 lines or more)"
    )


def test_no_check_is_asked_twice_in_the_course():
    asked = {}
    for path in NOTEBOOKS:
        for c in load(path)["cells"]:
            if "check" in cell_tags(c):
                for name in re.findall(r"\b(check_\w+)\(", source(c)):
                    assert name not in asked or asked[name] == path.name, (
                        f"{name} is an exercise in both {asked[name]} and {path.name}"
                    )
                    asked[name] = path.name


# -- architecture figures (issue 15) ------------------------------------------------------------


@pytest.mark.parametrize("number", ["02", "03", "04", "05", "06", "07", "08", "09"])
def test_model_notebooks_show_an_architecture_figure_that_is_up_to_date(number):
    from onehot2gpt_teach.figures import embedded_figures, stale_figures

    nb = load(notebook(number))
    assert embedded_figures(nb), f"notebook {number} shows no architecture figure"
    assert stale_figures(nb) == [], (
        f"notebook {number} embeds an old copy of {stale_figures(nb)}: "
        f"embed it again with onehot2gpt_teach.figures.embed_figure"
    )


def test_student_run_problems_names_each_wrong_outcome():
    """The rule both student runs apply (the browser's and the nbclient fallback's): a check that
    fails as unsolved is right; a check that passes or fails otherwise, and any other failing cell,
    are each reported."""

    def cell(tags, error=None):
        outputs = [{"output_type": "error", "ename": error[0], "evalue": error[1], "traceback": []}] if error else []
        return {"cell_type": "code", "metadata": {"tags": tags}, "source": "", "outputs": outputs}

    unsolved = ("AssertionError", "my_f is not written yet: replace the raise line")
    right = {
        "cells": [cell([]), cell(["exercise"]), cell(["check"], unsolved), {"cell_type": "markdown", "source": ""}]
    }
    assert student_run_problems(right, "nb") == []
    cases = {
        "check passes": (cell(["check"]), "must fail with AssertionError, got no error"),
        "check fails otherwise": (cell(["check"], ("NameError", "name 'x' is not defined")), "got NameError"),
        "check's message": (cell(["check"], ("AssertionError", "wrong shape")), "not written yet"),
        "another cell fails": (cell([], ("ValueError", "bad")), "cell 4 fails in the student version: ValueError"),
    }
    for what, (bad, message) in cases.items():
        problems = student_run_problems({"cells": right["cells"] + [bad]}, "nb")
        assert len(problems) == 1 and message in problems[0], (what, problems)


def test_the_suites_schedule_names_existing_notebooks_and_modules():
    """conftest.py's schedule for `make test` names notebooks and test files that exist: a renamed
    notebook would silently fall into the browser test's first half, a renamed module lose its place
    at the head of the queue."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_schedule", ROOT / "conftest.py")
    schedule = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(schedule)
    stems = {p.stem for p in NOTEBOOKS}
    assert schedule.BROWSER_HALF_B <= stems, f"not notebooks: {sorted(schedule.BROWSER_HALF_B - stems)}"
    assert stems - schedule.BROWSER_HALF_B, "the browser test's half A would be empty"
    for group in schedule.EXPECTED_SECONDS:
        assert (ROOT / group.split(" (")[0]).exists(), f"conftest.py times a group that is gone: {group}"
    assert f"def {schedule.STUDENT_RUN.split('::')[1]}(" in Path(__file__).read_text(encoding="utf-8"), (
        f"conftest.py schedules a test that is gone: {schedule.STUDENT_RUN}"
    )
    for prefix in schedule.STUDENT_SECONDS:
        assert any(p.name.startswith(prefix) for p in NOTEBOOKS), f"no notebook {prefix}*"

    for stem in stems:
        item = SimpleNamespace(
            nodeid=f"{schedule.BROWSER}::test_student_version_runs_and_its_widgets_answer_in_the_browser[{stem}]"
        )
        half = "B" if stem in schedule.BROWSER_HALF_B else "A"
        assert schedule._group(item) == f"{schedule.BROWSER} (half {half})"


# -- the one run of each notebook (tests/one_run.py) --------------------------------------------


def _as_run(course: dict, student: dict) -> dict:
    """A run of one_run_notebook that went as it should: every cell of the course notebook (solved
    copies included) with its stored outputs, each unsolved check failing as unsolved."""
    run = one_run_notebook(course, student)
    stored = {c.get("id"): c for c in course["cells"]}
    for cell in run["cells"]:
        if cell["cell_type"] != "code":
            continue
        original = stored.get(str(cell.get("id")).removesuffix(SOLVED))
        if "check" in cell_tags(cell) and not is_solved_copy(cell):
            cell["outputs"] = [
                {
                    "output_type": "error",
                    "ename": "AssertionError",
                    "evalue": "my_f is not written yet: replace the raise line",
                    "traceback": [],
                }
            ]
        elif original is not None:
            cell["outputs"] = json.loads(json.dumps(original["outputs"]))
    return run


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_one_run_adds_each_solution_and_its_check_after_the_unsolved_check(path):
    course, student = load(path), load(STUDENT_DIR / path.name)
    run = one_run_notebook(course, student)
    checks = [c for c in student["cells"] if "check" in cell_tags(c)]
    assert len(run["cells"]) == len(student["cells"]) + 2 * len(checks)
    by_id = {c["id"]: c for c in course["cells"]}
    ids = [c["id"] for c in run["cells"]]
    for check in checks:
        at = ids.index(check["id"])
        exercise, again = run["cells"][at + 1], run["cells"][at + 2]
        assert "exercise" in cell_tags(exercise) and is_solved_copy(exercise)
        assert source(exercise) == source(by_id[exercise["id"].removesuffix(SOLVED)])  # the solution
        assert "BEGIN SOLUTION" in source(exercise) and source(again) == source(check)
    assert len(set(ids)) == len(ids), "cell ids must stay unique"
    nbformat.validate(nbformat.reads(json.dumps(run), as_version=4))


def test_course_run_problems_is_strict_nbvals_verdict():
    path = notebook("01")
    course, student = load(path), load(STUDENT_DIR / path.name)
    assert course_run_problems(_as_run(course, student), course, "01") == []
    assert student_run_problems(_as_run(course, student), "01") == []

    def first(run, pred):
        return next(c for c in run["cells"] if c["cell_type"] == "code" and pred(c))

    def printing(c):
        return (
            any(o.get("output_type") == "stream" for o in c["outputs"])
            and "check" not in cell_tags(c)
            and not set(IGNORE_TAGS) & set(cell_tags(c))
        )

    run = _as_run(course, student)  # one printed character differs
    cell = first(run, printing)
    stream = next(o for o in cell["outputs"] if o["output_type"] == "stream")
    text = "".join(stream["text"])
    stream["text"] = text[:-2] + ("X" if text[-2] != "X" else "Y") + text[-1:]
    problems = course_run_problems(run, course, "01")
    assert len(problems) == 1 and "outputs differ from the stored ones" in problems[0], problems

    run = _as_run(course, student)  # a solved check that fails
    solved = first(run, lambda c: is_solved_copy(c) and "check" in cell_tags(c))
    solved["outputs"] = [{"output_type": "error", "ename": "AssertionError", "evalue": "wrong", "traceback": []}]
    problems = course_run_problems(run, course, "01")
    assert len(problems) == 1 and "fails: AssertionError: wrong" in problems[0], problems

    run = _as_run(course, student)  # a cell missing from the run
    run["cells"] = [c for c in run["cells"] if c is not first(run, printing)]
    assert any("not in the run" in p for p in course_run_problems(run, course, "01"))

    run = _as_run(course, student)  # sanitized: a memory address, a widget's model id
    cell = first(run, printing)
    next(o for o in cell["outputs"] if o["output_type"] == "stream")["text"] += "at 0x7f3a2b1c9d80\n"
    reference = json.loads(json.dumps(course))
    twin = next(c for c in reference["cells"] if c["id"] == cell["id"])
    next(o for o in twin["outputs"] if o["output_type"] == "stream")["text"] += "at 0x55d0c0ffee00\n"
    assert course_run_problems(run, reference, "01") == []


def test_course_run_problems_honours_nbvals_ignore_tag():
    course = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "id": "a",
                "metadata": {"tags": ["nbval-ignore-output"]},
                "execution_count": 1,
                "source": "print(time.time())",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "1.0\n"}],
            },
            {
                "cell_type": "code",
                "id": "b",
                "metadata": {},
                "execution_count": 2,
                "source": "print(2)",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "2\n"}],
            },
        ],
    }
    run = json.loads(json.dumps(course))
    run["cells"][0]["outputs"][0]["text"] = "9.0\n"
    assert course_run_problems(run, course, "x") == []
    run["cells"][1]["outputs"][0]["text"] = "3\n"
    assert len(course_run_problems(run, course, "x")) == 1
    untagged = json.loads(json.dumps(course))  # without the tag, the first cell is compared too
    untagged["cells"][0]["metadata"] = {}
    assert len(course_run_problems(run, untagged, "x")) == 2


def test_solution_names_used_later_names_a_cell_that_needs_the_solution():
    def nb(*cells):
        return {
            "cells": [
                {"cell_type": "code", "id": f"c{i}", "metadata": {"tags": tags}, "source": src, "outputs": []}
                for i, (src, tags) in enumerate(cells)
            ]
        }

    exercise = "data = [1, 2]\ndef my_f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\nhelper = 3"
    stub = "data = [1, 2]\ndef my_f(x):\n    raise NotImplementedError('replace this line')"
    check = ("check_f(my_f)", ["check"])
    fine = ("f = yours_or(my_f, lib_f)\nprint(f(data))", [])
    for later, bad in (
        (fine, []),
        (("print(my_f(1))", []), ["my_f"]),
        (("print(helper)", []), ["helper"]),
        (("def my_f(x):\n    return 0\nprint(my_f(1))", []), []),
    ):
        course = nb((exercise, ["exercise"]), check, later)
        student = nb((stub, ["exercise"]), check, later)
        problems = solution_names_used_later(course, student, "nb")
        assert (problems == []) == (bad == []), (later, problems)
        for name in bad:
            assert f"'{name}'" in problems[0] and "yours_or" in problems[0]


# -- the library's stand-ins, which the one run never calls ---------------------------------------


def stand_in_sites():
    """Every yours_or(my_f, stand_in) and yours_if_solved(my_f, check, stand_in) in the course
    notebooks: (notebook, cell index, the exercise's function, its check's name, the stand-in's
    source)."""
    sites = []
    for path in NOTEBOOKS:
        cells = load(path)["cells"]
        checks = {}  # the exercise function a check cell checks → the check's name
        for cell in cells:
            if "check" in cell_tags(cell):
                for call in ast.walk(ast.parse(python_code(source(cell)))):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Name)
                        and call.func.id.startswith("check_")
                    ):
                        checks[ast.unparse(call.args[0])] = call.func.id
        for i, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            for call in ast.walk(ast.parse(python_code(source(cell)))):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in WRAPPERS:
                    fn = ast.unparse(call.args[0])
                    check = ast.unparse(call.args[1]) if call.func.id == "yours_if_solved" else checks.get(fn)
                    stand_in = ast.unparse(call.args[2 if call.func.id == "yours_if_solved" else 1])
                    sites.append((path, i, fn, check, stand_in))
    return sites


STAND_INS = stand_in_sites()
# What a stand-in reads from the notebook's run besides imports, functions and classes: 02's works on
# the ids of the trained model's vocabulary (`quick`); the check's vectors get a vocabulary of their own.
CONTEXT = {("02", "my_analogy"): lambda: {"quick": SimpleNamespace(vocab=Vocab([f"w{i}" for i in range(26)]))}}


def test_every_stand_in_is_found():
    assert len(STAND_INS) >= 20 and all(check for *_, check, _ in STAND_INS), STAND_INS


@pytest.mark.parametrize(
    "path, index, fn, check, stand_in", STAND_INS, ids=[f"{p.stem[:2]}-{fn}" for p, _, fn, _, _ in STAND_INS]
)
def test_the_librarys_stand_in_passes_the_exercises_check(path, index, fn, check, stand_in):
    """What a student who skips an exercise gets in the cells after it: the library's version,
    passed in by yours_or/yours_if_solved. The one run has the solutions in place, so it never calls
    these; here each must pass the check the student's solution must pass. Its names come from the
    notebook's imports, functions and classes above it (run here; not its other statements)."""
    from contextlib import redirect_stdout
    from io import StringIO

    namespace = {"__name__": "__main__"}
    cells = load(path)["cells"][: index + 1]
    for cell in cells:
        if cell["cell_type"] != "code" or {"exercise", "check"} & set(cell_tags(cell)):
            continue
        tree = ast.parse(python_code(source(cell)))
        tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
        exec(compile(tree, f"{path.name} cell", "exec"), namespace)
    namespace.update(CONTEXT.get((path.stem[:2], fn), dict)())
    exec(f"from onehot2gpt_exercises import {check}", namespace)
    with redirect_stdout(StringIO()) as printed:
        namespace[check](eval(stand_in, namespace))
    assert "✓" in printed.getvalue(), f"{check} printed no success: {printed.getvalue()!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_cell_replaces_its_outputs_while_it_runs(path):
    """The one run compares the outputs JupyterLab saves; strict nbval compared the kernel's messages.
    They are the same as long as no cell clears or updates what it displayed (clear_output, a display
    handle's update): then nbval would see both versions and the saved notebook only the last."""
    for cell in code_cells(load(path)):
        found = re.findall(r"\bclear_output\s*\(|\bdisplay_id\s*=|\bupdate_display\s*\(", source(cell))
        assert not found, (
            f"{path.name}: a cell uses {found[0]!r}; tests/one_run.py compares saved outputs, "
            f"which keep only what is left at the end: compare it another way first"
        )
