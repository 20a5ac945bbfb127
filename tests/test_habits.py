"""The house habits, checked by the suite (CONTRIBUTING.md): ruff's lint and format are clean, one
ruff version everywhere (requirements.txt, the lock, .pre-commit-config.yaml), the pre-commit hooks
cover the library and the course notebooks, and the docstring examples of lib/ are collected and
run (none skipped)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    """The ruff of this environment (requirements.txt pins it)."""
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.is_file():
        return str(ruff)
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: pip install -r requirements.txt (it pins ruff)")
    return found


def _pinned_ruff(path: Path) -> str:
    pins = re.findall(r"(?im)^ruff==([^\s#]+)", path.read_text(encoding="utf-8"))
    assert len(pins) == 1, f"{path.name} should pin ruff exactly once (ruff==x.y.z), found {pins}"
    return pins[0]


def test_ruff_check_is_clean():
    run = subprocess.run([_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"`ruff check .` found problems (ruff check --fix fixes many):\n{run.stdout[-6000:]}"


def test_ruff_format_is_clean():
    run = subprocess.run([_ruff(), "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"`ruff format --check .` would reformat (run `ruff format .`):\n{run.stdout[-6000:]}"


def test_one_ruff_version_everywhere():
    version = _pinned_ruff(ROOT / "requirements.txt")
    assert _pinned_ruff(ROOT / "requirements-lock.txt") == version, "run `make lock` after changing ruff's pin"
    installed = subprocess.run([_ruff(), "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
    assert installed == version, f"ruff {installed} is installed, requirements.txt pins {version}"
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))["repos"]
    by_repo = {repo["repo"]: repo for repo in hooks}
    ruff_hooks = by_repo["https://github.com/astral-sh/ruff-pre-commit"]
    assert ruff_hooks["rev"] == f"v{version}", "the ruff-pre-commit rev must be requirements.txt's ruff"
    nbqa = by_repo["https://github.com/nbQA-dev/nbQA"]
    for hook in nbqa["hooks"]:
        assert f"ruff=={version}" in hook.get("additional_dependencies", []), (hook["id"], version)


def test_pre_commit_runs_ruff_on_python_and_nbqa_ruff_on_the_course_notebooks():
    repos = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))["repos"]
    for repo in repos:
        # A tag, not a branch: the same hooks for everyone until someone moves the pin.
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", str(repo["rev"])), f"{repo['repo']}: pin rev to a release tag"
    ids = {hook["id"]: hook for repo in repos for hook in repo["hooks"]}
    assert {"ruff-check", "ruff-format", "nbqa-ruff-check", "nbqa-ruff-format"} <= set(ids)
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert notebooks
    for hook_id in ("nbqa-ruff-check", "nbqa-ruff-format"):
        pattern = re.compile(ids[hook_id]["files"])
        assert all(pattern.search(nb) for nb in notebooks), f"{hook_id} misses a course notebook"
        assert not pattern.search("notebooks/student/01_onehot.ipynb"), "the student notebooks are generated"
    # The notebook rules of pyproject.toml reach nbQA's temporary .py files through the hook's args.
    line = re.search(r'(?m)^"\*\.ipynb" = \[(.*)\]', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    notebook_rules = set(re.findall(r'"([A-Z]+[0-9]+)"', line[1])) if line else set()
    args = " ".join(ids["nbqa-ruff-check"].get("args", []))
    assert all(rule in args for rule in notebook_rules), (notebook_rules, args)


def test_the_suite_collects_the_library_doctests():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    testpaths = re.search(r"(?m)^testpaths = \[(.*)\]", pyproject)
    addopts = re.search(r'(?m)^addopts = "(.*)"', pyproject)
    assert testpaths and '"lib"' in testpaths[1], "pyproject.toml: testpaths should hold lib"
    assert addopts and "--doctest-modules" in addopts[1].split(), (
        "pyproject.toml: addopts should hold --doctest-modules"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "lib"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doctests = [line for line in run.stdout.splitlines() if line.startswith("lib/") and "::" in line]
    assert len(doctests) >= 50, f"only {len(doctests)} doctest items collected from lib/"


def test_no_docstring_example_is_skipped():
    """Every `>>>` example in lib/ runs (CONTRIBUTING.md: an example that cannot run here is not an
    example; show it with its output in prose instead)."""
    skipped = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "lib").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"doctest:\s*\+SKIP", line)
    ]
    assert not skipped, f"skipped docstring examples (make them run): {skipped}"


# -- layering: who may import whom (CONTRIBUTING.md, "One audience per place") ---------------------

RECIPE_HELPERS = {p.stem for p in (ROOT / "recipes").glob("_*.py")}
# What a student's library must never reach for: the lecturer's package, the maintainers' scripts,
# the tests, or a command line. Nor its exercise checks, which sit beside it and import it.
NOT_IN_EXERCISES = {"onehot2gpt_teach", "recipes", "bench", "tests", "argparse"} | RECIPE_HELPERS
NOT_IN_LIBRARY = NOT_IN_EXERCISES | {"onehot2gpt_exercises"}
NOT_IN_TEACH = {"recipes", "bench", "tests"} | RECIPE_HELPERS
MODEL_MODULES = ["word2vec", "glove", "fasttext", "rnn_lm", "elmo", "attention", "transformer", "bert", "gpt"]
# A model module never imports training, plots, widgets or tasks (nor the exercises: no module of
# the library does, see NOT_IN_LIBRARY).
NOT_IN_MODELS = ("training", "gpt_training", "bert_pretraining", "plots", "widgets", "lookinside", "probing")


def _imports(path: Path) -> set[str]:
    """The modules one file imports, anywhere in it: absolute names as written, relative ones as
    ``onehot2gpt.<name>`` (resolved against the file's package)."""
    package = path.relative_to(ROOT / "lib").with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
                found |= {name} if node.module else {f"{name}.{alias.name}" for alias in node.names}
            else:
                found.add(node.module)
    return found


def _top(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize(
    "package, forbidden",
    [("onehot2gpt", NOT_IN_LIBRARY), ("onehot2gpt_exercises", NOT_IN_EXERCISES), ("onehot2gpt_teach", NOT_IN_TEACH)],
    ids=[
        "the library imports only itself and third-party packages",
        "the exercise checks import the library but no lecturer, recipe, bench or test code",
        "the lecturer's package no recipe, bench or test code",
    ],
)
def test_a_package_imports_nothing_from_the_layers_above_it(package, forbidden):
    wrong = {
        str(path.relative_to(ROOT)): sorted(_top(_imports(path)) & forbidden)
        for path in sorted((ROOT / "lib" / package).rglob("*.py"))
    }
    wrong = {k: v for k, v in wrong.items() if v}
    assert not wrong, f"lib/{package} imports what CONTRIBUTING.md's layering forbids: {wrong}"


@pytest.mark.parametrize("module", MODEL_MODULES)
def test_a_model_module_imports_no_training_plots_widgets_or_tasks(module):
    path = ROOT / "lib" / "onehot2gpt" / f"{module}.py"
    assert path.is_file(), f"{path} is gone: update MODEL_MODULES in tests/test_habits.py"
    library = {name.split(".")[1] for name in _imports(path) if name.startswith("onehot2gpt.")}
    wrong = sorted(n for n in library if n.startswith(NOT_IN_MODELS) or n.endswith("_tasks"))
    assert not wrong, f"{module}.py imports {wrong}: move what it needs below the models"


def test_the_notebooks_import_only_the_library():
    statement = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)")
    wrong = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            names = {m[1] for line in text.splitlines() if (m := statement.match(line))}
            if names & (NOT_IN_TEACH | {"onehot2gpt_teach"}):
                wrong.setdefault(path.name, set()).update(names & (NOT_IN_TEACH | {"onehot2gpt_teach"}))
    assert not wrong, f"notebooks import more than the library: {wrong}"


LIBRARY = ROOT / "lib" / "onehot2gpt"


def test_the_library_stays_small_enough_to_read():
    """Issue 45's bounds on what a student reads: lib/onehot2gpt holds at most 14,000 lines of Python
    (every line, as ``wc -l`` counts them), no file over 700 lines."""
    lines = {p.relative_to(ROOT): len(p.read_text(encoding="utf-8").splitlines()) for p in LIBRARY.rglob("*.py")}
    too_long = {str(p): n for p, n in lines.items() if n > 700}
    assert not too_long, f"files over 700 lines (split them, or move what no notebook needs out): {too_long}"
    assert sum(lines.values()) <= 14_000, (
        f"lib/onehot2gpt holds {sum(lines.values()):,} lines of Python, over 14,000: move what no notebook or "
        f"check imports to onehot2gpt_teach, recipes/ or bench/ (CONTRIBUTING.md, 'One audience per place')"
    )
