"""`make bench` runs every script in bench/ and keeps each one's last line as bench/results/<name>.json.

The scripts themselves take minutes to hours, so `make bench` runs here with a stand-in Python that
records which script it was asked to run and prints a JSON line; the loop, the results files and
the exit status are what is tested.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))
MAKE = shutil.which("make")


def fake_python(tmp_path: Path, fail: str | None = None) -> Path:
    """A stand-in for .venv/bin/python: a bench/ script is logged and answered with one JSON line
    (exit 1 for the script named `fail`); anything else goes to the real Python."""
    log = tmp_path / "ran.txt"
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$1" in bench/*) ;; *) exec "{sys.executable}" "$@";; esac\n'
        f'echo "$1" >> "{log}"\n'
        'echo "a line of progress"\n'
        f'if [ "$(basename "$1")" = "{fail or ""}" ]; then exit 1; fi\n'
        'echo "{\\"script\\": \\"$1\\", \\"value\\": 1.5}"\n'
    )
    fake.chmod(0o755)
    return fake


def make_bench(tmp_path: Path, fake: Path) -> subprocess.CompletedProcess:
    results = tmp_path / "results"
    return subprocess.run(
        [MAKE, "--no-print-directory", "bench", f"PY={fake}", "STAMP=", f"BENCH_RESULTS={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAKEFLAGS": ""},
    )


def test_bench_holds_at_most_ten_scripts():
    assert 1 <= len(SCRIPTS) <= 10, [s.name for s in SCRIPTS]


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_bench_runs_every_script_and_keeps_its_last_line(tmp_path):
    done = make_bench(tmp_path, fake_python(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    ran = (tmp_path / "ran.txt").read_text().split()
    assert sorted(Path(r).name for r in ran) == [s.name for s in SCRIPTS]
    for script in SCRIPTS:
        record = json.loads((tmp_path / "results" / f"{script.stem}.json").read_text())
        assert record["script"] == f"bench/{script.name}" and record["value"] == 1.5
        assert record["command"] == f"python bench/{script.name}" and record["date"] and record["commit"]


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_bench_stops_at_a_failing_script(tmp_path):
    failing = SCRIPTS[0].name
    done = make_bench(tmp_path, fake_python(tmp_path, fail=failing))
    assert done.returncode != 0
    assert (tmp_path / "ran.txt").read_text().split() == [f"bench/{failing}"]
    assert not (tmp_path / "results" / f"{SCRIPTS[0].stem}.json").exists()


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_bench_refuses_a_last_line_that_is_not_json(tmp_path):
    fake = fake_python(tmp_path)
    fake.write_text(fake.read_text().replace('echo "{\\"script', 'echo "done, no JSON" # {\\"script'))
    done = make_bench(tmp_path, fake)
    assert done.returncode != 0
    assert "last line is not JSON" in done.stderr
    assert not list((tmp_path / "results").glob("*.json"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_has_a_docstring_and_a_main_guard(script):
    tree = ast.parse(script.read_text())
    assert ast.get_docstring(tree), f"{script.name}: say what it measures and how to run it"
    guards = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)
    ]
    assert guards, f"{script.name}: no `if __name__ == '__main__'` block"


def test_every_script_imports():
    """Each script's imports resolve (a renamed or removed library function breaks a benchmark that
    no test runs otherwise): all of them imported in one fresh process, without running main()."""
    code = (
        "import importlib.util, sys\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('bench_' + path.rsplit('/', 1)[-1][:-3], path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, SCRIPTS)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_notebook_benchmark_finds_a_slow_cell_that_shows_no_progress():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_notebooks", ROOT / "bench" / "notebooks.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    timing = {"iopub.execute_input": "2026-11-29T10:00:00.000Z", "shell.execute_reply": "2026-11-29T10:00:12.500Z"}
    assert bench.cell_seconds({"metadata": {"execution": timing}}) == 12.5
    assert bench.cell_seconds({"metadata": {}}) == 0.0
    line = {"output_type": "stream", "name": "stdout", "text": "probes: 4/4, 12 s\n"}
    bar = {"output_type": "display_data", "data": {bench.WIDGET_VIEW: {"model_id": "x"}, "text/plain": ""}}
    widget = {"output_type": "display_data", "data": {bench.WIDGET_VIEW: {}, "text/plain": "TokenExplorer(…)"}}
    printed = {"output_type": "stream", "name": "stdout", "text": "accuracy 0.91, 3 seeds\n"}
    assert bench.shows_progress({"outputs": [printed, line]}) and bench.shows_progress({"outputs": [bar]})
    assert not bench.shows_progress({"outputs": [printed, widget]}) and not bench.shows_progress({"outputs": []})
