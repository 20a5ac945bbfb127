"""Copy detection across a class (onehot2gpt_teach.similarity): a planted copy is flagged, two
independent correct solutions are not, bad input is refused. Hand-built notebooks, no kernels."""

import csv
import subprocess
import sys

import nbformat
import pytest
from onehot2gpt_teach import grading
from onehot2gpt_teach.similarity import THRESHOLD, compare_cells, find_copies, main, report_copies

HEAD = "def my_skipgram_pairs(ids, window):\n    pairs = []\n"
TAIL = "    return pairs\n"
REFERENCE = (
    HEAD + "    ### BEGIN SOLUTION\n"
    "    for i in range(len(ids)):\n"
    "        for j in range(max(0, i - window), min(len(ids), i + window + 1)):\n"
    "            if j != i:\n"
    "                pairs.append((ids[i], ids[j]))\n"
    "    ### END SOLUTION\n" + TAIL
)
STUB = HEAD + '    raise NotImplementedError("Your turn: replace this line with your code")\n' + TAIL
# alice's own solution; carol copied it, renaming every variable and rewriting the comments
ALICE = (
    HEAD + "    n = len(ids)\n"
    "    for c in range(n):\n"
    "        # the window around the centre word\n"
    "        lo = max(0, c - window)\n"
    "        hi = min(n - 1, c + window)\n"
    "        for o in range(lo, hi + 1):\n"
    "            if o == c:\n"
    "                continue\n"
    "            pairs.append((ids[c], ids[o]))\n" + TAIL
)
CAROL = (
    HEAD + "    length = len(ids)\n"
    "    for center in range(length):\n"
    "        # clip the bounds to the sentence\n"
    "        start = max(0, center - window)\n"
    "        stop = min(length - 1, center + window)\n"
    "        for other in range(start, stop + 1):\n"
    "            if other == center:\n"
    "                continue  # skip the word itself\n"
    "            pairs.append((ids[center], ids[other]))\n" + TAIL
)
# bob's independent solution: offsets instead of bounds
BOB = (
    HEAD + "    for i, center in enumerate(ids):\n"
    "        for d in range(-window, window + 1):\n"
    "            j = i + d\n"
    "            if d != 0 and 0 <= j < len(ids):\n"
    "                pairs.append((center, ids[j]))\n" + TAIL
)
# dave's independent solution: a list of all pairs filtered by distance
DAVE = (
    HEAD + "    positions = range(len(ids))\n"
    "    pairs.extend((ids[a], ids[b]) for a in positions for b in positions if a != b and abs(a - b) <= window)\n"
    + TAIL
)


def skipgram_pairs(source, ids, window):
    namespace = {}
    exec(source, namespace)
    return sorted(namespace["my_skipgram_pairs"](ids, window))


@pytest.mark.parametrize("source", [REFERENCE, ALICE, CAROL, BOB, DAVE])
def test_every_planted_solution_is_correct(source):
    ids, window = [5, 6, 7, 8, 9], 2
    assert skipgram_pairs(source, ids, window) == skipgram_pairs(REFERENCE, ids, window)


def notebook(exercise_source):
    """A course-like notebook: a markdown cell, an import, the exercise, its check."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Skip-gram"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell(exercise_source, metadata={"tags": ["exercise"]}),
        nbformat.v4.new_code_cell(
            "from onehot2gpt_exercises import check_skipgram_pairs\ncheck_skipgram_pairs(my_skipgram_pairs)",
            metadata={"tags": ["check"]},
        ),
    ]
    for k, cell in enumerate(nb.cells):
        cell.id = f"cell-{k}"
    return nb


@pytest.fixture
def course(tmp_path):
    """notebooks/02_word2vec.ipynb (solved) and a class of five: alice, carol (alice's copy),
    bob and dave (independent), erin (unsolved)."""
    reference = tmp_path / "notebooks"
    reference.mkdir()
    nbformat.write(notebook(REFERENCE), reference / "02_word2vec.ipynb")
    submissions = tmp_path / "submissions"
    for student, source in [("alice", ALICE), ("carol", CAROL), ("bob", BOB), ("dave", DAVE), ("erin", STUB)]:
        (submissions / student).mkdir(parents=True)
        nb = notebook(source)
        if student == "carol":  # a copy may also lose the cell's id and tags
            nb.cells[2].id, nb.cells[2].metadata = "carols-own-id", {}
        nbformat.write(nb, submissions / student / "02_word2vec.ipynb")
    return submissions, reference


def test_the_planted_copy_is_flagged_and_independent_solutions_are_not(course):
    submissions, reference = course
    pairs, skipped = find_copies(submissions, reference)
    assert skipped == []
    assert [(p.student_a, p.student_b) for p in pairs] == [("alice", "carol")]
    (pair,) = pairs
    assert pair.notebook == "02_word2vec.ipynb" and pair.exercise == "skipgram_pairs"
    assert pair.score >= THRESHOLD
    # the overlapping lines are the solution's, not the code every student was given
    assert "pairs.append((ids[c], ids[o]))" in pair.code_a and "pairs.append((ids[center], ids[other]))" in pair.code_b
    assert "def my_skipgram_pairs" not in pair.code_a + pair.code_b


def test_lowering_the_threshold_lists_more_pairs(course):
    """The threshold is what separates them: at 0 every pair with any shared code shows."""
    submissions, reference = course
    pairs, _ = find_copies(submissions, reference, threshold=0.0)
    assert len(pairs) > 1


def test_the_student_version_is_boilerplate():
    """Two unsolved cells share all their code, and none of it counts."""
    cells = {("erin", "e.ipynb"): STUB, ("frank", "f.ipynb"): STUB}
    assert compare_cells(cells, STUB, threshold=0.0) == []
    # without the stub as boilerplate, the same cells are a perfect match
    assert compare_cells(cells, "", threshold=0.0)[0].score == pytest.approx(1.0)


def test_a_copy_of_the_course_solution_is_flagged(course):
    submissions, reference = course
    nbformat.write(notebook(REFERENCE.replace("### BEGIN SOLUTION\n", "")), submissions / "erin" / "02_word2vec.ipynb")
    pairs, _ = find_copies(submissions, reference)
    assert ("(course solution)", "erin") in [(p.student_a, p.student_b) for p in pairs]


def test_reports_list_the_pair_with_its_lines(course, tmp_path):
    submissions, reference = course
    md, table = report_copies(submissions, reference, tmp_path / "out")
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert [(r["student_a"], r["student_b"]) for r in rows] == [("alice", "carol")]
    assert rows[0]["file_b"] == "carol/02_word2vec.ipynb" and rows[0]["lines_a"]
    text = md.read_text(encoding="utf-8")
    assert "alice and carol" in text and "pairs.append((ids[center], ids[other]))" in text
    assert "bob" not in text and "dave" not in text


def test_an_unreadable_submission_is_named_and_the_rest_compared(course):
    submissions, reference = course
    (submissions / "bob" / "02_word2vec.ipynb").write_text("{not json", encoding="utf-8")
    odd = '{"cells": [5, null], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'  # JSON, but no cells
    (submissions / "dave" / "02_word2vec.ipynb").write_text(odd, encoding="utf-8")
    pairs, skipped = find_copies(submissions, reference)
    assert [reason.split(":")[0] for reason in skipped] == ["bob/02_word2vec.ipynb", "dave/02_word2vec.ipynb"]
    assert "bob/02_word2vec.ipynb: submission" in skipped[0] and "could not be read" in skipped[1]
    assert [(p.student_a, p.student_b) for p in pairs] == [("alice", "carol")]


def test_bad_input_is_refused_with_what_to_do(course, tmp_path, capsys):
    submissions, reference = course
    for threshold in (-0.1, 1.5, "0.5"):
        with pytest.raises(ValueError, match="threshold=.*between 0 and 1"):
            find_copies(submissions, reference, threshold=threshold)
    with pytest.raises(ValueError, match="guarantee=5: give a whole number ≥ noise"):
        find_copies(submissions, reference, noise=10, guarantee=5)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no .ipynb files found under"):
        find_copies(empty, reference)
    with pytest.raises(FileNotFoundError, match="submissions folder .* not found"):
        find_copies(tmp_path / "missing", reference)
    (reference / "02_word2vec.ipynb").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="course notebook .*02_word2vec.ipynb could not be read as a notebook"):
        find_copies(submissions, reference)
    with pytest.raises(SystemExit):
        main([str(submissions), "--reference", str(reference), "--threshold", "2"])
    assert "--threshold: '2': give a share between 0 and 1" in capsys.readouterr().err


def test_the_command_writes_both_files(course, tmp_path, capsys):
    submissions, reference = course
    assert main([str(submissions), "--reference", str(reference), "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["similarity.csv", "similarity.md"]


def test_the_grader_writes_the_similarity_report_after_the_grades(course, tmp_path, monkeypatch, capsys):
    """onehot2gpt-grade's own run, its grading replaced by a stand-in (no kernels): the similarity
    files come after the grade reports, at the threshold given."""
    submissions, reference = course
    monkeypatch.setattr(grading, "grade", lambda *args, **kwargs: [])
    out = tmp_path / "grades"
    argv = [str(submissions), "--reference", str(reference), "--out", str(out), "--no-sandbox"]
    assert grading.main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2:] == [str(out / "similarity.md"), str(out / "similarity.csv")]
    assert "grades.md" in " ".join(printed[:-2])
    assert [r["student_b"] for r in csv.DictReader((out / "similarity.csv").open(encoding="utf-8"))] == ["carol"]
    assert grading.main(argv + ["--copy-threshold", "0"]) == 0
    assert len(list(csv.DictReader((out / "similarity.csv").open(encoding="utf-8")))) > 1


def test_the_grader_refuses_a_bad_copy_threshold(course, capsys):
    submissions, reference = course
    with pytest.raises(SystemExit):
        grading.main([str(submissions), "--reference", str(reference), "--copy-threshold", "-1"])
    assert "--copy-threshold: '-1': give a share between 0 and 1" in capsys.readouterr().err


def test_python_dash_m_answers_help():
    run = subprocess.run(
        [sys.executable, "-m", "onehot2gpt_teach.similarity", "--help"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: python -m onehot2gpt_teach.similarity"), run.stderr


def _calibration():
    """tools/similarity_calibration.py as a module (tools/ is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "similarity_calibration.py"
    spec = importlib.util.spec_from_file_location("similarity_calibration", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_planted_cases_fall_on_either_side_of_the_default_threshold():
    # What THRESHOLD rests on (docs/grading.md, "Copies"): at the module's settings every copy and
    # every copy with one line edited reaches it, every independent solution (the course's among
    # them) stays under it.
    calibration = _calibration()
    assert all(calibration.edited(f) != calibration.CASES[f][1] for f in calibration.CASES)
    result = calibration.calibrate()
    assert set(result["exercises"]) == set(calibration.CASES)
    for function, row in result["exercises"].items():
        assert row["copy"] >= THRESHOLD and row["edited_copy"] >= THRESHOLD, (function, row)
        apart = (row["independent"], row["student_vs_course"], row["independent_vs_course"])
        assert max(apart) < THRESHOLD, (function, row)


def test_the_calibration_refuses_bad_settings_with_what_to_do(capsys):
    calibration = _calibration()
    with pytest.raises(SystemExit):
        calibration.main(["--noise", "12", "--guarantee", "11"])
    assert "--guarantee 11: give a number ≥ --noise (12)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        calibration.main(["--noise", "0"])
    assert "--noise: '0': give a whole number of characters, 1 or more" in capsys.readouterr().err
