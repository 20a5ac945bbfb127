"""Where the platform's container is the only sandbox (Gradescope runs its autograder as root, one
container per submission, and bubblewrap may not start there), the grader run as root with
``sandbox=False`` starts each kernel as the unprivileged ``nobody`` (issue 46, item 1): the
kernel can write nothing root owns (the results folder, the library, the course notebook, a
classmate's file), its memory and CPUs are watched as a tree, and the grades are right.

Only root can start a process as another user, so this runs as root (CI and the development
machine do); as another user there is nothing to drop to, and the module says so and is skipped."""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path

import nbformat
import pytest
from onehot2gpt_teach import grading
from test_grading import code, student_version, tiny_course_notebook

if os.geteuid() != 0:
    pytest.skip("the grader drops kernels to 'nobody' only when it runs as root", allow_module_level=True)

ATTACK = """
import os, onehot2gpt_exercises.checking as checking
open({probe!r} + '/uid', 'w').write(str(os.getuid()))
for target in (checking.__file__, {results!r} + '/results.json', {reference!r}, {classmate!r}):
    try:
        with open(target, 'a') as f:
            f.write(' ')
        open({probe!r} + '/wrote', 'a').write(target + '\\n')
    except OSError:
        pass
"""


def _digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


@pytest.fixture
def open_tmp():
    """A folder that others may pass (pytest's own are closed to them, which would spare the attack
    its targets); removed afterwards."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="onehot2gpt-container-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_without_bwrap_as_root_the_kernel_runs_as_nobody_and_writes_nothing_of_roots(open_tmp):
    tmp_path = open_tmp
    reference = tmp_path / "reference" / "01_tiny.ipynb"
    reference.parent.mkdir()
    solved = tiny_course_notebook()
    nbformat.write(solved, reference)
    results = tmp_path / "results"  # Gradescope's /autograder/results: root's, 0755
    results.mkdir(mode=0o755)
    (results / "results.json").write_text("{}")
    probe = tmp_path / "probe"  # the one place the test lets anyone write, to learn the uid
    probe.mkdir()
    probe.chmod(0o777)
    # the class folder must be traversable by nobody for the attack to have a target at all
    for folder in (tmp_path, tmp_path / "reference"):
        folder.chmod(0o755)
    subs = tmp_path / "subs"
    classmate = subs / "b_solved" / "01_tiny.ipynb"
    attacker = copy.deepcopy(student_version(solved))
    paths = dict(probe=str(probe), results=str(results), reference=str(reference), classmate=str(classmate))
    attacker.cells.insert(2, code(ATTACK.format(**paths), "attack"))
    for student, nb in (("a_attacker", attacker), ("b_solved", solved), ("c_unsolved", student_version(solved))):
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / "01_tiny.ipynb")
        (subs / student).chmod(0o755)
        (subs / student / "01_tiny.ipynb").chmod(0o644)
    subs.chmod(0o755)
    import onehot2gpt_exercises.checking as checking

    watched = [checking.__file__, results / "results.json", reference, classmate]
    before = _digest(watched)
    rows = grading.grade(subs, reference.parent, sandbox=False, hidden_seeds=(7,), cell_timeout=60, timeout=300)
    assert (probe / "uid").read_text() == "65534"  # the attack ran, as nobody
    assert not (probe / "wrote").exists(), (probe / "wrote").read_text()
    assert _digest(watched) == before
    got = {(r.student, r.exercise): r.result for r in rows}
    assert [got[("b_solved", e)] for e in ("one_hot", "causal_mask", "encode")] == ["pass"] * 3
    for student in ("a_attacker", "c_unsolved"):
        assert [got[(student, e)] for e in ("one_hot", "causal_mask", "encode")] == ["fail"] * 3
