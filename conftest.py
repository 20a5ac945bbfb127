"""How the suite runs on several workers (pytest-xdist, ``make test``: ``-n 3 --dist loadgroup``).

Each worker is its own process, so tests that must share one process stay together in an
``xdist_group``:
* the tests of one module of tests/, which share module-scoped fixtures (the graded submissions,
  the trained models) that would otherwise be built once per worker;
* the cells of one notebook, where nbval is asked to run notebooks/ (they run in order in one
  kernel; `make test` itself runs each notebook once, in the browser test, see tests/one_run.py);
* the examples in the docstrings of lib/ (``--doctest-modules``), all in one group;
except the notebook runs of tests/test_notebooks.py (made only where no browser can), each a whole
notebook on its own, and the browser test, in two halves that each start their own JupyterLab and
Chromium.
The groups are queued longest first (from ``--durations`` of a full run on 2 cores), so that the
long ones do not start last while the other worker idles. Without ``--dist loadgroup`` this file
changes nothing, and plain ``pytest`` runs everything in one process, in file order.
"""

from __future__ import annotations

import os

import pytest

# One torch thread per process. `make test` runs three workers on 2 cores, two of them mostly the
# browser test's kernels: torch thread pools of 2 threads each would busy-wait against each other
# (2.5× slower with two workers, measured), one thread each does not. The
# kernels inherit this, and the notebooks' `set_threads()` reads ONEHOT2GPT_THREADS, so the stored
# outputs that nbval compares were made with one thread too. Set before any test imports torch.
os.environ.setdefault("ONEHOT2GPT_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Progress bars in the kernels redraw at most once a second (tqdm reads TQDM_MININTERVAL; the
# library's own bars ask for 1–2 s anyway). tqdm's default, ten redraws a second, each a widget
# message through the kernel, the server and Chromium, cost notebook 11 alone about 10 s of kernel
# and 8 s of Chromium time in the browser test. The bars and the stored outputs are unchanged.
os.environ.setdefault("TQDM_MININTERVAL", "1")

# The browser test runs every student version in JupyterLab, about as long as all the rest of the
# suite together, so it is split in two halves of about equal time (tests/screenshots/timings.json),
# one per worker, each with its own JupyterLab server and Chromium; the other groups fill in after.
BROWSER = "tests/test_browser.py"
BROWSER_HALF_B = {
    "09_gpt",
    "04_elmo",
    "06_transformer",
    "11_beyond",
    "07_bert_pretraining",
    "05_attention",
    "01_onehot",
}

DOCTESTS = "lib/ (doctests)"
# Seconds each group took on one thread per process (measured with 2 workers on 2 cores; the heaviest; every other
# group counts 1). The two browser halves start first, one on each worker.
EXPECTED_SECONDS = {
    f"{BROWSER} (half A)": 330,
    f"{BROWSER} (half B)": 330,
    "tests/test_grading.py": 80,
    "tests/test_autograders.py": 27,
    # Modules with one long test: queued before the one-second groups, so that none of them is left
    # for the end while the other worker has nothing to do (test_notebooks.py: the nbval-lax run of
    # notebook 01, about 30 s; test_course.py: the Colab cell's fresh environment, about 10 s).
    "tests/test_notebooks.py": 40,
    "tests/test_course.py": 15,
    "tests/test_bert_pretraining.py": 15,
    "tests/test_subword.py": 12,
    # Not yet from a full run: from single-file runs while other jobs ran. The install test builds
    # the wheel, installs it in a fresh venv and loads every checkpoint from it; the docstring
    # examples load a few committed checkpoints (BERT, MiniLM, the GPTs).
    "tests/test_install.py": 50,
    DOCTESTS: 30,
}
STUDENT_RUN = "tests/test_notebooks.py::test_student_version_fails_exactly_its_checks_and_course_outputs_match"
# The fallback runs (no browser): seconds of the same run in the browser on the slow 2-core machine.
STUDENT_SECONDS = {
    "08_": 191,
    "09_": 145,
    "02_": 122,
    "10_": 115,
    "04_": 85,
    "11_": 75,
    "06_": 70,
    "03_": 69,
    "07_": 62,
}


def _group(item: pytest.Item) -> str | None:
    """The xdist group of a test: its notebook or module, one group for all the docstring examples
    of lib/ (``--doctest-modules``: short, and each worker would otherwise import every module);
    None for a student-version run."""
    if item.nodeid.startswith(STUDENT_RUN):
        return None
    module = item.nodeid.split("::")[0]
    if isinstance(item, pytest.DoctestItem):
        return DOCTESTS
    if module == BROWSER:
        stem = item.nodeid.partition("[")[2].rstrip("]")
        return f"{BROWSER} (half {'B' if stem in BROWSER_HALF_B else 'A'})"
    return module


def _seconds(item: pytest.Item) -> float:
    if item.nodeid.startswith(STUDENT_RUN):
        return next((s for k, s in STUDENT_SECONDS.items() if f"[{k}" in item.nodeid), 5)
    return EXPECTED_SECONDS.get(_group(item), 1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The workers collect; xdist tells them the mode by this flag (as its own hook reads it).
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # Longest first; a stable sort keeps every notebook's cells in their order.
    items.sort(key=lambda item: -_seconds(item))


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    if config.getoption("dist", "no") != "loadgroup":
        raise pytest.UsageError(
            "with -n, pass --dist loadgroup: a notebook's cells must run in one kernel, in order (make test does this)"
        )
    # The groups' queue order is the collection order set above, not xdist's "largest group first"
    # (which counts tests, not seconds).
    config.option.loadscopereorder = False
