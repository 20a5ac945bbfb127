"""The grader: crafted submissions of a tiny course notebook, each broken in one way, are graded
in real kernels; every breakage is reported and never stops the run."""

import copy
import csv
import json
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from onehot2gpt_teach import grading, sandbox
from onehot2gpt_teach.student import make_student_notebook

# Seconds. The slowest honest cell is the first `import torch` of a fresh (or restarted) kernel,
# several times slower on a busy 2-core machine (CI once graded a restarted kernel's imports
# 'timeout' with a tighter limit); this leaves room for it.
CELL_TIMEOUT = 20
REPO = Path(__file__).resolve().parents[1]
STUBBORN_LOOP = (
    "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n        pass\n"
)


def code(source, cell_id, *tags, points=None):
    cell = new_code_cell(source, id=cell_id)
    cell.metadata["tags"] = list(tags)
    if points is not None:
        cell.metadata["onehot2gpt"] = {"points": points}
    return cell


def tiny_course_notebook():
    """A course notebook with three fast exercises checked by real check functions; the last
    check relies on an import in the first cell, as notebook 10 does."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# A tiny course notebook", id="title"),
            code("import torch\nfrom onehot2gpt_exercises import check_encode", "imports"),
            code(
                "def my_one_hot(ids, vocab_size):\n    ids = torch.as_tensor(ids)\n"
                "    ### BEGIN SOLUTION\n"
                "    return torch.nn.functional.one_hot(ids, vocab_size).float()\n"
                "    ### END SOLUTION",
                "ex-one-hot",
                "exercise",
            ),
            code("from onehot2gpt_exercises import check_one_hot\ncheck_one_hot(my_one_hot)", "check-one-hot", "check"),
            new_markdown_cell("Now a mask.", id="text"),
            code(
                "def my_causal_mask(T):\n    ### BEGIN SOLUTION\n"
                "    return torch.ones(T, T, dtype=torch.bool).tril()\n    ### END SOLUTION",
                "ex-causal",
                "exercise",
            ),
            code(
                "from onehot2gpt_exercises import check_causal_mask\ncheck_causal_mask(my_causal_mask)",
                "check-causal",
                "check",
                points=2,
            ),
            code(
                "def my_encode(tokens, stoi, unk_id):\n    ### BEGIN SOLUTION\n"
                "    return [stoi.get(t, unk_id) for t in tokens]\n    ### END SOLUTION",
                "ex-encode",
                "exercise",
            ),
            code("check_encode(my_encode)", "check-encode", "check"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write_class(root, submissions: dict, reference=None):
    """Lay out a class under `root`: the course notebook `reference` (default: the tiny one) as
    reference/01_tiny.ipynb, and each {student: notebook} as subs/<student>/01_tiny.ipynb → the
    reference folder."""
    folder = root / "reference"
    folder.mkdir()
    nbformat.write(reference if reference is not None else tiny_course_notebook(), folder / "01_tiny.ipynb")
    for student, nb in submissions.items():
        (root / "subs" / student).mkdir(parents=True)
        nbformat.write(nb, root / "subs" / student / "01_tiny.ipynb")
    return folder


def cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def student_version(nb):
    student = make_student_notebook(json.loads(nbformat.writes(nb)), "01_tiny.ipynb")
    return nbformat.from_dict(student)


def crafted_submissions(solved, port=None):
    """{relative path: notebook or raw text}, one way of breaking a submission each."""
    unsolved = student_version(solved)
    subs = {"alice_01_tiny.ipynb": solved, "bob/01_tiny.ipynb": unsolved}

    if port is not None:  # reaches for a server on this machine
        net = copy.deepcopy(solved)
        cell(net, "ex-one-hot").source = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), "
            "timeout=3).close()\n" + cell(net, "ex-one-hot").source
        )
        subs["net/01_tiny.ipynb"] = net

    loop = copy.deepcopy(solved)  # the function never returns: the check times out
    cell(loop, "ex-causal").source = "def my_causal_mask(T):\n    while True:\n        pass"
    subs["loop/01_tiny.ipynb"] = loop

    stubborn = copy.deepcopy(solved)  # a cell that swallows the interrupt
    cell(stubborn, "ex-one-hot").source = STUBBORN_LOOP + cell(stubborn, "ex-one-hot").source
    subs["stubborn/01_tiny.ipynb"] = stubborn

    tampered = copy.deepcopy(unsolved)
    cell(tampered, "check-one-hot").source = 'print("✓ one_hot: matches the reference")'
    subs["tampered/01_tiny.ipynb"] = tampered

    cheat = copy.deepcopy(unsolved)  # check functions redefined or patched in the kernel
    cell(cheat, "ex-encode").source += "\n\ndef check_encode(fn):\n    print('✓ encode')"
    cell(cheat, "ex-causal").source += "\n\nimport onehot2gpt_exercises\nonehot2gpt_exercises.check_causal_mask = print"
    subs["cheat/01_tiny.ipynb"] = cheat

    deleted = copy.deepcopy(solved)  # the check must run before my_one_hot is deleted
    deleted.cells = [c for c in deleted.cells if c.get("id") != "check-one-hot"]
    deleted.cells.append(code("del my_one_hot", "student-cleanup"))
    subs["deleted/01_tiny.ipynb"] = deleted

    dead = copy.deepcopy(solved)
    cell(dead, "ex-causal").source = "import os\nos._exit(1)\n" + cell(dead, "ex-causal").source
    subs["dead/01_tiny.ipynb"] = dead

    import_error = copy.deepcopy(solved)
    cell(import_error, "imports").source = "import no_such_module_for_grading\n" + cell(import_error, "imports").source
    subs["import_error/01_tiny.ipynb"] = import_error

    # Tampering that only a verdict reached in the kernel would believe: each student function
    # is wrong and, while the check runs it, switches off the comparison, replaces the library's
    # reference by itself, or stops the recording of its answers.
    patched = copy.deepcopy(unsolved)
    cell(patched, "ex-one-hot").source = (
        "def my_one_hot(ids, vocab_size):\n"
        "    import onehot2gpt_exercises as ex\n"
        "    ex.assert_same = ex.checking.assert_same = lambda *args, **kwargs: None\n"
        "    return torch.zeros(len(ids), vocab_size)"
    )
    cell(patched, "ex-causal").source = (
        "def my_causal_mask(T):\n"
        "    import onehot2gpt.attention\n"
        "    onehot2gpt.attention.causal_mask = my_causal_mask\n"
        "    return torch.ones(T, T, dtype=torch.bool)"
    )
    cell(patched, "ex-encode").source = (
        "def my_encode(tokens, stoi, unk_id):\n"
        "    import onehot2gpt_exercises.checking as c\n"
        "    c.stop_recording()\n"
        "    c.assert_same = lambda *args, **kwargs: None\n"
        "    return [0] * len(tokens)"
    )
    subs["patched/01_tiny.ipynb"] = patched

    killer = copy.deepcopy(solved)  # kills the process that runs its kernel
    cell(killer, "ex-encode").source = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + cell(killer, "ex-encode").source
    )
    subs["killer/01_tiny.ipynb"] = killer

    hog = copy.deepcopy(solved)  # asks for 40 GB: refused by the memory limit
    cell(hog, "ex-one-hot").source = "big = torch.empty(10**10)\n" + cell(hog, "ex-one-hot").source
    subs["hog/01_tiny.ipynb"] = hog

    subs["dave/01_tiny.ipynb"] = solved  # a student who also left a draft in a subfolder
    subs["dave/draft/01_tiny.ipynb"] = unsolved

    subs["broken/01_tiny.ipynb"] = '{"cells": [ this is not JSON'
    subs["no_cells/01_tiny.ipynb"] = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": "none"})
    subs["carol/99_unknown.ipynb"] = solved
    return subs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade all crafted submissions with one command; the CSV rows by (file, exercise)."""
    root = tmp_path_factory.mktemp("grading")
    (root / "reference").mkdir()
    solved = tiny_course_notebook()
    nbformat.write(solved, root / "reference" / "01_tiny.ipynb")
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # the kernel's TCP handshake needs no accept()
    for name, content in crafted_submissions(solved, server.getsockname()[1]).items():
        path = root / "submissions" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            nbformat.write(content, path)
    assert (
        grading.main(
            [
                str(root / "submissions"),
                "--reference",
                str(root / "reference"),
                "--out",
                str(root / "out"),
                "--cell-timeout",
                str(CELL_TIMEOUT),
                "--timeout",
                "120",
                "--jobs",
                "2",
                "--memory-gb",
                "8",
                *([] if sandbox.available()[0] else ["--no-sandbox"]),  # which grades.md names
            ]
        )
        == 0
    )
    server.close()
    with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    markdown = (root / "out" / "grades.md").read_text(encoding="utf-8")
    return {(r["file"], r["exercise"]): r for r in rows}, rows, markdown, root / "out"


def results(graded, file):
    by_key = graded[0]
    return {exercise: by_key[(f, exercise)] for (f, exercise) in by_key if f == file}


EXERCISES = ["one_hot", "causal_mask", "encode"]


def test_one_row_per_exercise_in_notebook_order(graded):
    _, rows, _, _ = graded
    assert list(rows[0]) == list(grading.CSV_COLUMNS)
    for file in ("alice_01_tiny.ipynb", "bob/01_tiny.ipynb", "broken/01_tiny.ipynb"):
        assert [r["exercise"] for r in rows if r["file"] == file] == EXERCISES
    assert all(r["result"] in grading.RESULTS for r in rows)


def test_solved_notebook_passes_and_flat_file_names_the_student(graded):
    got = results(graded, "alice_01_tiny.ipynb")
    assert {r["result"] for r in got.values()} == {"pass"}
    assert {(r["student"], r["notebook"], r["check_cell"]) for r in got.values()} == {("alice", "01_tiny.ipynb", "ok")}


def test_student_version_fails_with_the_check_message(graded):
    got = results(graded, "bob/01_tiny.ipynb")
    for exercise, row in got.items():
        assert row["student"] == "bob"
        assert row["result"] == "fail"
        assert row["message"].startswith(f"{exercise}: not written yet")
        # nothing is given away before a first attempt: no hint for an empty answer
        assert "Hint: " not in row["message"] and "\n" not in row["message"]


def test_endless_function_times_out_and_the_rest_is_graded(graded):
    got = results(graded, "loop/01_tiny.ipynb")
    assert got["causal_mask"]["result"] == "timeout"
    assert f"timed out after {CELL_TIMEOUT} s" in got["causal_mask"]["message"]
    assert got["one_hot"]["result"] == got["encode"]["result"] == "pass"


def test_cell_ignoring_the_interrupt_restarts_the_kernel_and_the_rest_is_graded(graded):
    got = results(graded, "stubborn/01_tiny.ipynb")
    assert got["one_hot"]["result"] == "timeout"
    assert "ignored the interrupt" in got["one_hot"]["message"]
    # after the restart the earlier cells (imports) were run again, so these still pass
    assert got["causal_mask"]["result"] == got["encode"]["result"] == "pass"


def test_tampered_check_cell_is_reported_and_the_reference_check_runs(graded):
    got = results(graded, "tampered/01_tiny.ipynb")
    assert got["one_hot"]["check_cell"] == "modified"
    assert got["one_hot"]["result"] == "fail"
    assert "check cell modified" in got["one_hot"]["message"]
    assert "not written yet" in got["one_hot"]["message"]
    assert got["encode"]["check_cell"] == "ok"


def test_redefined_or_patched_check_functions_do_not_pass(graded):
    got = results(graded, "cheat/01_tiny.ipynb")
    for exercise in ("causal_mask", "encode"):
        assert got[exercise]["check_cell"] == "ok"
        assert got[exercise]["result"] == "fail"
        assert "not written yet" in got[exercise]["message"]


def test_deleted_check_cell_is_reported_and_runs_after_its_exercise(graded):
    got = results(graded, "deleted/01_tiny.ipynb")
    assert got["one_hot"]["check_cell"] == "missing"
    assert "check cell missing" in got["one_hot"]["message"]
    assert got["one_hot"]["result"] == "pass"  # before the student's `del my_one_hot`
    assert got["encode"]["check_cell"] == "ok"


def test_kernel_death_is_reported_and_the_rest_is_graded(graded):
    got = results(graded, "dead/01_tiny.ipynb")
    assert got["causal_mask"]["result"] == "crash"
    assert "kernel died" in got["causal_mask"]["message"]
    assert got["one_hot"]["result"] == got["encode"]["result"] == "pass"


def test_failed_import_cell_is_named_in_every_failure(graded):
    got = results(graded, "import_error/01_tiny.ipynb")
    for exercise in ("one_hot", "causal_mask"):  # both need torch from cell 2
        assert got[exercise]["result"] == "fail"
        assert "no_such_module_for_grading" in got[exercise]["message"]
    assert got["encode"]["result"] == "pass"  # needs no import: its check name is bound anyway


@pytest.mark.parametrize("file", ["broken/01_tiny.ipynb", "no_cells/01_tiny.ipynb"])
def test_invalid_file_reports_every_exercise(graded, file):
    got = results(graded, file)
    assert list(got) == EXERCISES
    for row in got.values():
        assert row["result"] == "error"
        assert row["message"].startswith("not a valid notebook")


def test_unknown_notebook_name_is_reported(graded):
    got = results(graded, "carol/99_unknown.ipynb")
    assert list(got) == [""]
    assert got[""]["result"] == "error"
    assert "unknown notebook '99_unknown.ipynb'" in got[""]["message"]


def test_markdown_summary_counts_passes(graded):
    _, rows, markdown, _ = graded
    summary, points = {}, {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[1].endswith(".ipynb"):
            summary.setdefault(cells[0], cells[2])
            points.setdefault(cells[0], cells[3])
    assert summary["alice"] == "3/3" and summary["bob"] == "0/3"
    assert summary["dead"] == "2/3" and summary["carol"] == "–"
    assert points["alice"] == "4/4" and points["dead"] == "2/4"  # the mask is worth 2 points
    assert "## bob: bob/01_tiny.ipynb" in markdown


def test_points_come_from_the_check_cells_metadata(graded):
    got = results(graded, "alice_01_tiny.ipynb")
    assert [(got[e]["points"], got[e]["max_points"]) for e in EXERCISES] == [("1", "1"), ("2", "2"), ("1", "1")]
    got = results(graded, "loop/01_tiny.ipynb")
    assert (got["causal_mask"]["points"], got["causal_mask"]["max_points"]) == ("0", "2")


def test_patching_the_comparison_the_reference_or_the_recording_fails(graded):
    got = results(graded, "patched/01_tiny.ipynb")
    assert [got[e]["result"] for e in EXERCISES] == ["fail"] * 3, got
    assert "values differ" in got["one_hot"]["message"]
    assert "values differ" in got["causal_mask"]["message"]
    assert "encode (test 1 of 5)[0]: got int 0, expected" in got["encode"]["message"]


def test_a_submission_that_kills_its_kernels_parent_harms_no_one_else(graded):
    got = results(graded, "killer/01_tiny.ipynb")
    if "sandbox: bubblewrap" in graded[2]:  # its parent is the sandbox's init, out of reach of SIGKILL
        assert [got[e]["result"] for e in EXERCISES] == ["pass"] * 3  # solved: graded as it deserves
    else:  # it kills its grading process: a crash, and the run goes on
        assert [got[e]["result"] for e in EXERCISES] == ["crash"] * 3
        assert "was killed by signal SIGKILL" in got["encode"]["message"]
    assert {r["result"] for r in results(graded, "alice_01_tiny.ipynb").values()} == {"pass"}


def test_memory_beyond_the_limit_is_refused_not_fatal(graded):
    got = results(graded, "hog/01_tiny.ipynb")
    assert got["one_hot"]["result"] == "fail"
    assert "memory" in got["one_hot"]["message"].lower() or "alloc" in got["one_hot"]["message"].lower()
    assert got["causal_mask"]["result"] == got["encode"]["result"] == "pass"


def test_the_network_is_cut_where_the_os_allows_and_the_report_says_so(graded):
    got = results(graded, "net/01_tiny.ipynb")
    markdown = graded[2]
    if grading.network_isolation_available():
        assert "network: cut" in markdown
        assert got["one_hot"]["result"] == "fail"
        # unshare leaves the loopback down ("unreachable"); bwrap's sandbox has a loopback of its
        # own, where nothing listens on the grader's port ("refused")
        message = got["one_hot"]["message"]
        assert "Network is unreachable" in message or "Connection refused" in message, message
    else:  # say so, and the kernel reaches the server
        assert "network: not isolated" in markdown
        assert got["one_hot"]["result"] == "pass"
    assert got["causal_mask"]["result"] == got["encode"]["result"] == "pass"


def test_duplicates_are_reported_and_the_best_file_counts(graded):
    _, _, markdown, out = graded
    assert "## Duplicates" in markdown
    assert "dave, 01_tiny.ipynb: dave/01_tiny.ipynb counts; not counted: dave/draft/01_tiny.ipynb" in markdown
    with open(out / "grades_wide.csv", newline="", encoding="utf-8") as f:
        wide = {r["student"]: r for r in csv.DictReader(f)}
    assert (wide["dave"]["total"], wide["dave"]["max_total"]) == ("4", "4")
    assert wide["dave"]["duplicates"] == "dave/draft/01_tiny.ipynb"
    assert wide["bob"]["total"] == "0" and wide["bob"]["01_tiny.ipynb: causal_mask"] == "0"
    assert wide["alice"]["01_tiny.ipynb: causal_mask"] == "2"
    feedback = (out / "feedback" / "dave.md").read_text(encoding="utf-8")
    assert "Points: **4 of 4**" in feedback and "You handed in 2 files" in feedback
    assert "not written yet" in (out / "feedback" / "bob.md").read_text(encoding="utf-8")


def test_notebook_time_limit_stops_the_run(tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    solved = tiny_course_notebook()
    nbformat.write(solved, reference / "01_tiny.ipynb")
    slow = copy.deepcopy(solved)
    slow.cells.insert(1, code("import time\ntime.sleep(60)", "slow"))
    nbformat.write(slow, tmp_path / "01_tiny.ipynb")
    [submission] = [s for s in grading.find_submissions(tmp_path, reference) if s.file == "01_tiny.ipynb"]
    start = time.monotonic()
    rows = grading.grade_submission(submission, cell_timeout=60, timeout=4)
    assert time.monotonic() - start < 30
    assert [r.result for r in rows] == ["not run"] * 3
    assert all("time limit of 4 s" in r.message for r in rows)


@pytest.mark.skipif(
    not (REPO / "notebooks" / "student" / "01_onehot.ipynb").exists(), reason="needs the course notebooks"
)
def test_real_student_notebook_fails_every_exercise(tmp_path):
    submissions = tmp_path / "submissions" / "dana"
    submissions.mkdir(parents=True)
    (submissions / "01_onehot.ipynb").write_bytes((REPO / "notebooks" / "student" / "01_onehot.ipynb").read_bytes())
    rows = grading.grade(tmp_path / "submissions", REPO / "notebooks", cell_timeout=60, timeout=120)
    reference = nbformat.read(REPO / "notebooks" / "01_onehot.ipynb", as_version=4)
    assert [r.exercise for r in rows] == [c.name for c in grading.reference_checks(reference)]
    assert len(rows) >= 3
    for row in rows:
        assert (row.student, row.result, row.check_cell) == ("dana", "fail", "ok")
        assert "not written yet" in row.message


def test_an_interrupted_run_resumes_from_its_journal(tmp_path):
    solved = tiny_course_notebook()
    reference = write_class(tmp_path, {"erin": solved, "frank": solved})
    journal = tmp_path / "out" / grading.JOURNAL
    first = grading.grade(tmp_path / "subs", reference, cell_timeout=30, timeout=120, journal=journal)
    assert {r.result for r in first} == {"pass"}
    # a run killed while writing leaves half a line: it is skipped, not trusted
    with journal.open("a", encoding="utf-8") as f:
        f.write('{"file": "grace/01_tiny.ipynb", "sha256": "0", "rows": [{"stud')
    (tmp_path / "subs" / "grace").mkdir()
    nbformat.write(student_version(solved), tmp_path / "subs" / "grace" / "01_tiny.ipynb")
    heard = []
    again = grading.grade(tmp_path / "subs", reference, cell_timeout=30, timeout=120, journal=journal, log=heard.append)
    assert [line.split(":")[0] for line in heard if "graded before" in line] == [
        "erin/01_tiny.ipynb",
        "frank/01_tiny.ipynb",
    ]
    assert [r.result for r in again if r.student == "grace"] == ["fail"] * 3
    assert [r.row() for r in again if r.student != "grace"] == [r.row() for r in first]
    seeds, done = grading.read_journal(journal)
    assert len(done) == 3 and seeds is not None
    with pytest.raises(ValueError, match="other hidden seeds"):
        grading.grade(tmp_path / "subs", reference, journal=journal, hidden_seeds=[s + 1 for s in seeds])


# ---- no kernel needed ------------------------------------------------------------------------


def _recorded(tmp_path, check, fn, hidden=()):
    """Record `fn`'s answers to `check` as a student's kernel would, → the file."""
    from onehot2gpt_exercises import checking

    path = tmp_path / f"answers-{len(list(tmp_path.iterdir()))}.pt"
    checking.start_recording(path, hidden)
    try:
        check(fn)
    finally:
        checking.stop_recording()
    return path


def test_hidden_inputs_catch_an_answer_learned_from_the_public_ones(tmp_path):
    from onehot2gpt_exercises import check_encode
    from onehot2gpt_exercises.nb01 import _reference_encode

    seen = []

    def spy(tokens, stoi, unk_id):
        seen.append((list(tokens), dict(stoi)))
        return _reference_encode(tokens, stoi, unk_id)

    check_encode(spy)  # the public inputs, as a notebook shows them
    public = {repr(args): _reference_encode(*args, 1) for args in seen}

    def memorised(tokens, stoi, unk_id):  # right only on inputs it has seen
        return public.get(repr((list(tokens), dict(stoi))), [0])

    check_encode(memorised)  # passes the ordinary check
    assert grading.replay_check("check_encode(f)", _recorded(tmp_path, check_encode, memorised)) == ("pass", "")
    verdict, message = grading.replay_check(
        "check_encode(f)", _recorded(tmp_path, check_encode, memorised, [12345]), [12345]
    )
    assert verdict == "fail" and "hidden test" in message


class Sneaky(__import__("torch").Tensor):
    """A tensor subclass: pickled by reference to this module, so loading it could run code."""


def test_answers_that_are_not_plain_data_are_not_unpickled(tmp_path):
    import torch
    from onehot2gpt.vocab import one_hot
    from onehot2gpt_exercises import check_one_hot

    path = _recorded(tmp_path, check_one_hot, lambda ids, v: one_hot(ids, v).as_subclass(Sneaky))
    verdict, message = grading.replay_check("check_one_hot(f)", path)
    assert verdict == "fail" and "subclass of torch.Tensor" in message
    forged = tmp_path / "forged.pt"  # a file with a pickled object of any class
    torch.save({"calls": [{"name": "one_hot", "answers": [("value", Sneaky())]}]}, forged)
    verdict, message = grading.replay_check("check_one_hot(f)", forged)
    assert verdict == "fail" and "could not be read as plain data" in message
    assert grading.replay_check("check_one_hot(f)", tmp_path / "missing.pt")[1].startswith("no answers")


def test_exercise_name_comes_from_the_check_call():
    assert grading.exercise_name("check_qa_prompt(qa_prompt)") == "qa_prompt"
    assert (
        grading.exercise_name("from onehot2gpt_exercises import check_one_hot\ncheck_one_hot(my_one_hot)") == "one_hot"
    )
    assert grading.exercise_name("check_a(f)\ncheck_b(g)") == "a+b"
    assert grading.exercise_name("print('no check here')") == ""


def test_reference_checks_are_ordered_and_unique():
    nb = tiny_course_notebook()
    nb.cells.append(code("check_encode(my_encode)", "again", "check"))
    checks = grading.reference_checks(nb)
    assert [c.name for c in checks] == EXERCISES + ["encode (2)"]
    assert checks[0].anchors[0] == ("ex-one-hot", "def my_one_hot(ids, vocab_size):")


def test_match_reference_by_file_name():
    names = ["01_onehot.ipynb", "10_zero_shot.ipynb"]
    assert grading.match_reference("10_zero_shot.ipynb", names) == "10_zero_shot.ipynb"
    assert grading.match_reference("alice_10_zero_shot.ipynb", names) == "10_zero_shot.ipynb"
    assert grading.match_reference("110_zero_shot.ipynb", names) is None
    assert grading.match_reference("notes.ipynb", names) is None


def test_plan_uses_reference_checks_and_skips_stray_check_cells():
    solved = tiny_course_notebook()
    checks = grading.reference_checks(solved)
    sub = copy.deepcopy(solved)
    cell(sub, "check-causal").source = "pass"
    sub.cells = [c for c in sub.cells if c.get("id") != "check-encode"]
    sub.cells.append(code("check_encode(lambda *a: None)", "stray", "check"))
    steps, status = grading.plan_cells(sub, checks)
    assert status == ["ok", "modified", "missing"]
    assert [s.check for s in steps if s.check is not None] == [0, 1, 2]
    assert all(steps[i].source == checks[s.check].source for i, s in enumerate(steps) if s.check is not None)
    assert not any("lambda" in s.source for s in steps)
    encode_at = next(i for i, s in enumerate(steps) if s.check == 2)
    assert steps[encode_at - 1].source == cell(sub, "ex-encode").source


def test_one_line_keeps_the_whole_diagnosis():
    text = "f: wrong\n  on input x\n  Looks like: off by one\nThink about: indices\nHint: add 1"
    assert grading.one_line("AssertionError", text) == (
        "f: wrong; on input x; Looks like: off by one; Think about: indices; Hint: add 1"
    )
    assert grading.one_line("NameError", "name 'x' is not defined") == "NameError: name 'x' is not defined"
    assert len(grading.one_line("ValueError", "x" * 1000)) == grading.MESSAGE_CHARS


def test_bad_folders_say_what_to_do(tmp_path, capsys):
    with pytest.raises(SystemExit):
        grading.main([str(tmp_path / "missing"), "--reference", str(tmp_path)])
    assert "submissions folder" in capsys.readouterr().err
    (tmp_path / "ref").mkdir()
    nbformat.write(tiny_course_notebook(), tmp_path / "ref" / "01_tiny.ipynb")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .ipynb files found"):
        grading.find_submissions(tmp_path / "empty", tmp_path / "ref")
    with pytest.raises(FileNotFoundError, match="--reference"):
        grading.find_submissions(tmp_path / "ref", tmp_path / "nowhere")


RECORD_EVERY_REFERENCE = """
import sys, pathlib, importlib
import onehot2gpt_exercises as exercises
from onehot2gpt_exercises import checking
out = pathlib.Path(sys.argv[1])
real = checking.check_function
def reference_as_student(student_fn, reference_fn, *args, **kwargs):
    return real(reference_fn, reference_fn, *args, **kwargs)
for number in range(1, 12):
    importlib.import_module(f"onehot2gpt_exercises.nb{number:02d}").check_function = reference_as_student
for name in sorted(n for n in dir(exercises) if n.startswith("check_") and n != "check_function"):
    checking.start_recording(out / f"{name}.pt", [424242])
    getattr(exercises, name)(lambda *args: None)
    checking.stop_recording()
"""


def test_every_check_replays_the_answers_of_its_reference_recorded_in_another_process(tmp_path):
    """Every check's answers survive the trip (plain data, read back safely) and its inputs are the
    same in the kernel's process and the grader's: the reference, recorded as if it were a
    student's function, passes every replay, hidden seed included."""
    import subprocess
    import sys

    import onehot2gpt_exercises as exercises

    subprocess.run(
        [sys.executable, "-c", RECORD_EVERY_REFERENCE, str(tmp_path)], check=True, capture_output=True, text=True
    )
    names = sorted(n for n in dir(exercises) if n.startswith("check_") and n != "check_function")
    assert len(names) >= 40
    verdicts = {name: grading.replay_check(f"{name}(f)", tmp_path / f"{name}.pt", [424242]) for name in names}
    assert {name: v for name, v in verdicts.items() if v != ("pass", "")} == {}
    # and the same answers fail against other hidden inputs: the hidden seed matters
    verdict, message = grading.replay_check("check_one_hot(f)", tmp_path / "check_one_hot.pt", [7])
    assert verdict == "fail" and "hidden test" in message


@pytest.mark.parametrize("command", ["onehot2gpt_teach.grading", "onehot2gpt_teach.autograders"])
def test_the_grading_commands_start_without_the_iri_grammar(command):
    """Every submission is graded in a fresh `python -m onehot2gpt_teach.grading --worker` process, and the
    autograders run one `python -m onehot2gpt_teach.autograders` per exercise; their start must not pay
    for jsonschema's optional IRI checker (rfc3987_syntax compiles a grammar at import, most of
    a process's start-up), which the notebook schema never uses."""
    import subprocess
    import sys

    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['{command}', '--help']\n"
        "try:\n"
        f"    runpy.run_module('{command}', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('jsonschema' in sys.modules, sys.modules.get('rfc3987_syntax') is None)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-2:] == ["True", "True"], (
        f"after the command's imports: jsonschema loaded, rfc3987_syntax not loaded? {run.stdout[-300:]}"
    )


def test_an_assignment_is_graded_on_its_exercises_alone(tmp_path):
    """A handout of one exercise of three (onehot2gpt-student --assignment): the grader with the same
    assignment grades that exercise only, and a journal of it is not resumed as a full grading."""
    reference = tiny_course_notebook()
    reference.metadata["onehot2gpt"] = {"assignments": {"mask-only": ["causal_mask"]}}
    handout = nbformat.from_dict(
        make_student_notebook(json.loads(nbformat.writes(reference)), "01_tiny.ipynb", "mask-only")
    )
    solved = copy.deepcopy(handout)
    cell(solved, "ex-causal").source = cell(reference, "ex-causal").source
    write_class(tmp_path, {"alice": solved, "bob": handout}, reference)
    journal = tmp_path / "out" / grading.JOURNAL
    options = dict(cell_timeout=60, timeout=300, journal=journal, sandbox=sandbox.available()[0])
    rows = grading.grade(tmp_path / "subs", tmp_path / "reference", assignment="mask-only", **options)
    assert [(r.student, r.exercise, r.result) for r in rows] == [
        ("alice", "causal_mask", "pass"),
        ("bob", "causal_mask", "fail"),
    ]
    with pytest.raises(ValueError, match="holds grades of assignment 'mask-only'"):
        grading.grade(tmp_path / "subs", tmp_path / "reference", **options)
    with pytest.raises(ValueError, match="assignment 'other' is not defined in 01_tiny.ipynb"):
        grading.grade(tmp_path / "subs", tmp_path / "reference", assignment="other", **{**options, "journal": None})
