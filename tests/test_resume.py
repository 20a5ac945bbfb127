"""Nothing lost (issue 46, item 5): a class interrupted by Ctrl-C, SIGTERM or SIGKILL of the
grader resumes with every student graded exactly once, the submissions in flight graded (not
blamed), no grading process left behind; one that killed the grader twice is quarantined."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from onehot2gpt_teach import grading
from onehot2gpt_teach.grading_workers import _sha256, unfinished_starts
from test_grading import code, tiny_course_notebook, write_class

SLOW_SECONDS = 9  # the slow student's extra cell: long enough to be caught in flight (5 s after a_fast)


def _class(tmp_path):
    """A reference folder and a class of three solved submissions, the middle one slow."""
    solved = tiny_course_notebook()
    slow = tiny_course_notebook()
    slow.cells.insert(1, code(f"import time\ntime.sleep({SLOW_SECONDS})", "slow"))
    return write_class(tmp_path, {"a_fast": solved, "b_slow": slow, "c_after": solved})


def _grader(tmp_path, reference, *extra):
    """The grader's command line in a process of its own, one submission at a time."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onehot2gpt_teach.grading",
            str(tmp_path / "subs"),
            "--reference",
            str(reference),
            "--out",
            str(tmp_path / "out"),
            "--cell-timeout",
            "60",
            "--timeout",
            "300",
            "--hidden-seed",
            "7",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal starts it: pytest-xdist's workers ignore SIGINT, and a child inherits that
        # (Python then installs no KeyboardInterrupt handler), so Ctrl-C would never reach it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _entries(journal):
    return [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines() if line.strip()]


def _wait_until_in_flight(proc, journal, limit=180):
    """Wait until a_fast is graded (journaled), then 5 s: b_slow is in its sleep."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if journal.exists() and any(e.get("file") == "a_fast/01_tiny.ipynb" for e in _entries(journal)):
            time.sleep(5)
            assert not any(e.get("file") == "b_slow/01_tiny.ipynb" for e in _entries(journal))
            return
        time.sleep(0.2)
    pytest.fail(f"a_fast was not graded within {limit} s")


def _descendants(pid):
    """Process ids below `pid` (its children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _resume_and_check(tmp_path, reference):
    """Resume in this process: every student graded exactly once, all passing."""
    journal = tmp_path / "out" / grading.JOURNAL
    heard = []
    results = grading.grade(
        tmp_path / "subs", reference, cell_timeout=60, timeout=300, journal=journal, log=heard.append
    )
    assert {(r.student, r.result) for r in results} == {(s, "pass") for s in ("a_fast", "b_slow", "c_after")}
    assert len(results) == 9  # three exercises each, no student twice
    finished = [e["file"] for e in _entries(journal) if "rows" in e]
    assert sorted(finished) == ["a_fast/01_tiny.ipynb", "b_slow/01_tiny.ipynb", "c_after/01_tiny.ipynb"]
    assert unfinished_starts(journal) == {}
    return heard


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_class_resumes_and_grades_the_submission_in_flight(tmp_path, signum):
    reference = _class(tmp_path)
    journal = tmp_path / "out" / grading.JOURNAL
    proc = _grader(tmp_path, reference)
    try:
        _wait_until_in_flight(proc, journal)
        below = _descendants(proc.pid)
        assert below, "no grading process was running"
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 130
        assert "run the same command again" in proc.stderr.read()
    finally:
        proc.kill()
    time.sleep(1)
    assert [pid for pid in below if _alive(pid)] == []
    slow = [e for e in _entries(journal) if "b_slow" in json.dumps(e)]
    assert [list(e)[0] for e in slow] == ["started", "stopped"]  # no grade, no crash
    heard = _resume_and_check(tmp_path, reference)
    assert [line.split(":")[0] for line in heard if "graded before" in line] == ["a_fast/01_tiny.ipynb"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("extra", [(), ("--no-sandbox",)], ids=["sandbox", "no-sandbox"])
def test_a_killed_grader_leaves_no_process_and_the_class_resumes(tmp_path, extra):
    """Also without the sandbox: the kernel then dies with its grading process by PR_SET_PDEATHSIG."""
    reference = _class(tmp_path)
    journal = tmp_path / "out" / grading.JOURNAL
    proc = _grader(tmp_path, reference, *extra)
    try:
        _wait_until_in_flight(proc, journal)
        below = _descendants(proc.pid)
        assert len(below) >= 2, "no worker with a kernel (or its sandbox) was running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    deadline = time.monotonic() + 5  # both ways of dying with the grader are immediate
    while [pid for pid in below if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in below if _alive(pid)] == []
    slow = tmp_path / "subs" / "b_slow" / "01_tiny.ipynb"
    assert unfinished_starts(journal) == {("b_slow/01_tiny.ipynb", _sha256(slow)): 1}
    heard = _resume_and_check(tmp_path, reference)
    assert not any("QUARANTINED" in line for line in heard)


def test_a_submission_that_killed_the_grader_twice_is_quarantined_and_the_rest_graded(tmp_path):
    solved = tiny_course_notebook()
    reference = write_class(tmp_path, {"a_fast": solved, "b_killer": solved})
    journal = tmp_path / "out" / grading.JOURNAL
    journal.parent.mkdir()
    started = {"started": "b_killer/01_tiny.ipynb", "sha256": _sha256(tmp_path / "subs" / "b_killer" / "01_tiny.ipynb")}
    journal.write_text("".join(json.dumps(e) + "\n" for e in [{"hidden_seeds": [7]}, started, started]))
    heard = []
    results = grading.grade(
        tmp_path / "subs", reference, cell_timeout=60, timeout=300, journal=journal, log=heard.append
    )
    assert [r.result for r in results if r.student == "a_fast"] == ["pass"] * 3
    killer = [r for r in results if r.student == "b_killer"]
    assert [r.result for r in killer] == ["crash"] * 3
    assert all(r.message.startswith("quarantined: ") and "started 2 times" in r.message for r in killer)
    assert [line.split(":")[0] for line in heard if "QUARANTINED" in line] == ["b_killer/01_tiny.ipynb"]
    # it never ran: its only journal lines are the two starts and the quarantine
    assert [list(e)[0] for e in _entries(journal) if "b_killer" in json.dumps(e)] == ["started", "started", "file"]
    # the next resume takes it from the journal like any graded submission
    again = []
    grading.grade(tmp_path / "subs", reference, journal=journal, log=again.append)
    assert len([line for line in again if "graded before" in line]) == 2
