"""How the suite runs on several workers (pytest-xdist, ``make test``: ``-n 2 --dist loadgroup``).

Each worker is its own process, so tests that must share one process stay together in an
``xdist_group``:
* the cells of one notebook (nbval runs them in order in one kernel);
* the tests of one module of tests/, which share module-scoped fixtures (JupyterLab and Chromium
  for the browser test, the graded submissions, the trained models) that would otherwise be built
  once per worker;
except the student-version runs of tests/test_notebooks.py, each a whole notebook on its own.
The groups are queued longest first (from ``--durations`` of a full run on 2 cores), so that the
long ones do not start last while the other worker idles. Without ``--dist loadgroup`` this file
changes nothing, and plain ``pytest`` runs everything in one process, in file order.
"""

from __future__ import annotations

import pytest

# Seconds each group took in a serial run on 2 cores (the heaviest; every other group counts 1).
EXPECTED_SECONDS = {
    "tests/test_browser.py": 420,
    "tests/test_grading.py": 110,
    "notebooks/08_bert_finetuning.ipynb": 85,
    "notebooks/09_gpt.ipynb": 60,
    "tests/test_autograders.py": 45,
    "notebooks/10_zero_shot.ipynb": 32,
    "notebooks/06_transformer.ipynb": 26,
    "notebooks/03_language_models.ipynb": 26,
    "notebooks/11_beyond.ipynb": 22,
    "notebooks/07_bert_pretraining.ipynb": 17,
    "tests/test_gpt_training.py": 30,
    "notebooks/04_elmo.ipynb": 14,
}
STUDENT_RUN = "tests/test_notebooks.py::test_student_notebook_fails_exactly_its_checks"
STUDENT_SECONDS = {"08_": 93, "09_": 65, "10_": 34, "06_": 30, "03_": 26, "11_": 23, "07_": 18, "04_": 16}


def _group(item: pytest.Item) -> str | None:
    """The xdist group of a test: its notebook or module; None for a student-version run."""
    if item.nodeid.startswith(STUDENT_RUN):
        return None
    return item.nodeid.split("::")[0]


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
        raise pytest.UsageError("with -n, pass --dist loadgroup: a notebook's cells must run in one "
                                "kernel, in order (make test does this)")
    # The groups' queue order is the collection order set above, not xdist's "largest group first"
    # (which counts tests, not seconds).
    config.option.loadscopereorder = False
