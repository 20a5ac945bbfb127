"""References out of reach, and their use detected (issue 46, item 3).

- While grading, a student's function runs where no frame above it holds the check's reference:
  the attacks that walk the call stack (``sys._getframe``, ``inspect.stack()``, every frame's
  ``f_locals`` and ``f_globals``, closures, ``gc.get_referrers`` on the inputs) find it under a
  naive caller and find nothing under the recording.
- An answer that calls or aliases the library function it reimplements, uses the checking code
  or reaches into the grader's frames is flagged from its source, with the reason; an honest
  answer is not; a course notebook's metadata overrides what an exercise forbids.
"""

import copy
import gc
import importlib
import inspect
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook
from onehot2gpt_teach import reference_use
from onehot2gpt_teach.grading_checks import ExerciseResult, Submission, reference_checks, replay_check

REPO = Path(__file__).resolve().parents[1]


# ---- the attacks ----------------------------------------------------------------------------


def _contents(obj) -> list:
    """What one step from `obj` reaches: a frame's locals and globals, a dict's values, a
    container's items, a function's closure cells and defaults."""
    if inspect.isframe(obj):
        return [*obj.f_locals.values(), *obj.f_globals.values()]
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if inspect.isfunction(obj):
        cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
        return [*cells, *(obj.__defaults__ or ())]
    return []


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def harvest(args) -> list:
    """Everything a student's function can reach from where it is called, as the attacks of
    issue 46 do: every frame up the chain (sys._getframe and inspect.stack()) with its locals,
    globals and the closures of the functions found there; the referrers of each input
    (gc.get_referrers) two steps up, and what they hold."""
    here = sys._getframe()
    frames, frame = [], sys._getframe(2)  # the caller of the student's function, then up
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames += [info.frame for info in inspect.stack(0)[2:]]
    objects = [a for a in args if not isinstance(a, (int, float, str, bytes, type(None)))]  # not shared
    first = [r for a in objects for r in gc.get_referrers(a) if r is not here]
    ours = {id(frames), id(first), id(here)}
    containers = [f for f in first if isinstance(f, (tuple, list, dict))]  # frames: walked above
    second = [r for f in containers for r in gc.get_referrers(f) if id(r) not in ours]
    found = [*frames, *first, *second]
    found += [x for obj in found for x in _contents(obj)]
    found += [cell for obj in found if inspect.isfunction(obj) for cell in _contents(obj)]
    return found


def holds(found: list, targets: list) -> bool:
    return any(obj is target for obj in found for target in targets)


def naive_record(student_fn, reference_fn, make_inputs, seed=0):
    """How the recording called the student's function before: from inside the check, its
    frame holding the reference."""
    gen = torch.Generator().manual_seed(seed)
    args = make_inputs(gen)
    return student_fn(*copy.deepcopy(args)), reference_fn(*args)


def test_the_stack_attacks_find_the_reference_under_a_naive_caller():
    from onehot2gpt.vocab import one_hot
    from onehot2gpt_exercises.checking import random_ids

    found = []

    def attacker(*args):
        found.append(holds(harvest(args), [one_hot]))

    naive_record(attacker, one_hot, random_ids)
    assert found == [True]

    def four_lines(ids, vocab_size):  # the attack of issue 46, verbatim
        import sys

        return sys._getframe(1).f_locals["reference_fn"](ids, vocab_size)

    got, expected = naive_record(four_lines, one_hot, random_ids)
    assert torch.equal(got, expected)


def _spy_references(monkeypatch) -> list:
    """Patch every check module's check_function so that it notes the reference it is given (the
    checking helpers that compute what an exercise asks for, attention_variant and block_variant,
    are looked for too)."""
    from onehot2gpt_exercises import checking

    references, real = [], checking.check_function

    def spy(student_fn, reference_fn, *args, **kwargs):
        references.append(reference_fn)
        return real(student_fn, reference_fn, *args, **kwargs)

    for number in range(1, 12):
        monkeypatch.setattr(importlib.import_module(f"onehot2gpt_exercises.nb{number:02d}"), "check_function", spy)
    return references


def _cell(source: str, namespace: dict) -> None:
    """Run `source` as a kernel runs a cell: module-level code in the notebook's namespace."""
    exec(compile(source, "<cell>", "exec"), namespace)


def test_the_recording_leaves_no_check_reference_within_reach(tmp_path, monkeypatch):
    import onehot2gpt_exercises as exercises
    from onehot2gpt_exercises import checking

    references = _spy_references(monkeypatch)
    names = sorted(n for n in dir(exercises) if n.startswith("check_") and n != "check_function")
    assert len(names) > 40
    leaks, attacked = [], []
    for name in names:
        before = len(references)

        def attacker(*args, name=name, before=before):
            # the references this check was given (noted by the spy before the call), by id only:
            # an int held here is not a way to the reference
            targets = {id(r) for r in [*references[before:], checking.attention_variant, checking.block_variant]}
            found = harvest(args)
            attacked.append(name)
            if any(id(obj) in targets for obj in found):
                leaks.append(name)
            del found
            raise NotImplementedError

        namespace = {"__name__": "__main__", name: getattr(exercises, name), "attacker": attacker}
        checking.start_recording(tmp_path / f"{name}.pt", [424242])
        try:
            _cell(f"{name}(attacker)", namespace)  # the check cell: it only queues the inputs
        finally:
            _cell("import onehot2gpt_exercises.checking as c\nc.stop_recording()\ndel c", namespace)
        assert len(references) > before and attacked[-1:] == [name], name  # the check ran, then the attack
    assert leaks == []


def test_the_four_line_attack_gets_no_marks(tmp_path):
    from onehot2gpt_exercises import check_one_hot, checking

    def four_lines(ids, vocab_size):
        frame = sys._getframe(1)
        while frame is not None:
            if "reference_fn" in frame.f_locals:
                return frame.f_locals["reference_fn"](ids, vocab_size)
            frame = frame.f_back
        return torch.zeros(len(ids), vocab_size)  # nothing found: a wrong answer

    path = tmp_path / "answers.pt"
    checking.start_recording(path, [424242])
    check_one_hot(four_lines)
    checking.stop_recording()
    result, message = replay_check("check_one_hot(my_one_hot)", path, [424242])
    assert result == "fail" and "values differ" in message


def test_a_student_stopping_the_recording_keeps_the_answers(tmp_path):
    from onehot2gpt_exercises import check_one_hot, checking

    def sneaky(ids, vocab_size):
        checking.stop_recording()  # from inside the recording: changes nothing recorded
        return torch.nn.functional.one_hot(torch.as_tensor(ids), vocab_size).float()

    path = tmp_path / "answers.pt"
    checking.start_recording(path)
    check_one_hot(sneaky)
    checking.stop_recording()
    assert replay_check("check_one_hot(my_one_hot)", path) == ("pass", "")


# ---- the source scan ------------------------------------------------------------------------


def code(source, cell_id, *tags, **meta):
    cell = new_code_cell(source, id=cell_id)
    cell.metadata["tags"] = list(tags)
    if meta:
        cell.metadata["onehot2gpt"] = meta
    return cell


HONEST = (
    "def my_one_hot(ids, vocab_size):\n    ids = torch.as_tensor(ids)\n"
    "    out = torch.zeros(len(ids), vocab_size)\n    out[torch.arange(len(ids)), ids] = 1.0\n    return out"
)


def course(**meta):
    """A course notebook: a demo that uses the library's one_hot, the exercise, its check."""
    return new_notebook(
        cells=[
            code("import torch\nfrom onehot2gpt.vocab import one_hot\nprint(one_hot(torch.tensor([1]), 3))", "demo"),
            code(HONEST, "ex-one-hot", "exercise"),
            code("from onehot2gpt_exercises import check_one_hot\ncheck_one_hot(my_one_hot)", "check", "check", **meta),
        ]
    )


def flagged(answer: str, reference=None, before: str = "") -> str | None:
    """The scan's reason for a submission of `reference` whose exercise cell is `answer` (with an
    extra cell `before` it), or None."""
    reference = reference or course()
    submission = copy.deepcopy(reference)
    submission.cells[1].source = answer
    if before:
        submission.cells.insert(1, code(before, "extra"))
    checks = reference_checks(reference)
    return reference_use.scan_submission(submission, checks, reference_use.reference_rules(reference, checks)).get(0)


def test_the_default_rule_comes_from_the_checks_reference():
    assert reference_use.default_forbidden("check_one_hot") == ("onehot2gpt.vocab.one_hot",)
    with pytest.raises(ValueError, match="check_name"):
        reference_use.default_forbidden("one_hot")


def test_an_honest_answer_is_not_flagged():
    assert flagged(HONEST) is None
    # a local variable named like the library function it may not use is the student's own
    assert (
        flagged("def my_one_hot(ids, vocab_size):\n    one_hot = torch.eye(vocab_size)\n    return one_hot[ids]")
        is None
    )


@pytest.mark.parametrize(
    "answer, before",
    [
        ("def my_one_hot(ids, vocab_size):\n    return one_hot(ids, vocab_size)", ""),  # the demo's import
        ("def my_one_hot(ids, v):\n    from onehot2gpt.vocab import one_hot as oh\n    return oh(ids, v)", ""),
        ("import onehot2gpt.vocab as voc\ndef my_one_hot(ids, v):\n    return voc.one_hot(ids, v)", ""),
        ("def my_one_hot(ids, v):\n    return g(ids, v)", "import onehot2gpt\ng = onehot2gpt.vocab.one_hot"),
        ("import onehot2gpt\nmy_one_hot = onehot2gpt.one_hot", ""),  # re-exported name, aliased
        ("def my_one_hot(ids, v):\n    import onehot2gpt.vocab as m\n    return getattr(m, 'one_hot')(ids, v)", ""),
        (
            "def my_one_hot(ids, v):\n    import importlib\n"
            "    return importlib.import_module('onehot2gpt.vocab').one_hot(ids, v)",
            "",
        ),
        ("def my_one_hot(ids, v):\n    return __import__('onehot2gpt.vocab').vocab.one_hot(ids, v)", ""),
        ("def helper(ids, v):\n    return one_hot(ids, v)\ndef my_one_hot(ids, v):\n    return helper(ids, v)", ""),
    ],
)
def test_calling_or_aliasing_the_library_function_is_flagged(answer, before):
    reason = flagged(answer, before=before)
    assert reason is not None and "uses the library's own `one_hot`" in reason


@pytest.mark.parametrize(
    "answer, why",
    [
        (
            "def my_one_hot(ids, v):\n    import sys\n    return sys._getframe(1).f_locals['reference_fn'](ids, v)",
            "_getframe",
        ),
        ("def my_one_hot(ids, v):\n    import inspect\n    return inspect.stack()[1].frame", "inspect"),
        ("def my_one_hot(ids, v):\n    import gc\n    return gc.get_referrers(ids)", "gc"),
        ("def my_one_hot(ids, v):\n    return globals()['one_' + 'hot'](ids, v)", "globals()"),
        ("def my_one_hot(ids, v):\n    return eval('one_hot')(ids, v)", "eval()"),
    ],
)
def test_reaching_into_the_graders_frames_is_flagged(answer, why):
    reason = flagged(answer)
    assert reason is not None and why in reason


def test_the_checking_code_is_flagged():
    answer = "def my_one_hot(ids, v):\n    from onehot2gpt_exercises import nb01\n    return nb01._reference_encode"
    assert "uses the course's checking code" in flagged(answer)


def test_the_metadata_overrides_what_an_exercise_forbids():
    torch_answer = "def my_one_hot(ids, v):\n    return torch.nn.functional.one_hot(torch.as_tensor(ids), v).float()"
    library_answer = "def my_one_hot(ids, v):\n    return one_hot(ids, v)"
    assert flagged(torch_answer) is None  # by default torch's own one_hot is allowed
    strict = course(forbid=["torch.nn.functional.one_hot", "onehot2gpt.vocab.one_hot"])
    assert "uses the forbidden `one_hot` (`torch.nn.functional.one_hot`)" in flagged(torch_answer, strict)
    assert "uses the library's own `one_hot`" in flagged(library_answer, strict)
    lenient = course(forbid=[])
    assert flagged(library_answer, lenient) is None
    assert "checking code" in flagged("from onehot2gpt_exercises import check_one_hot as my_one_hot", lenient)
    with pytest.raises(ValueError, match="'one_hot'.*onehot2gpt.forbid"):
        checks = reference_checks(course(forbid="one_hot"))
        reference_use.reference_rules(course(forbid="one_hot"), checks)


def test_no_course_notebooks_solution_is_flagged():
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        checks = reference_checks(nb)
        rules = reference_use.reference_rules(nb, checks)
        assert reference_use.scan_submission(nb, checks, rules) == {}, path.name


def test_a_flagged_pass_scores_zero_with_the_reason(tmp_path):
    reference = course()
    submission = copy.deepcopy(reference)
    submission.cells[1].source = "def my_one_hot(ids, v):\n    return one_hot(ids, v)"
    nbformat.write(reference, tmp_path / "01_tiny.ipynb")
    nbformat.write(submission, tmp_path / "alice_01_tiny.ipynb")
    sub = Submission(tmp_path / "alice_01_tiny.ipynb", "alice_01_tiny.ipynb", "alice", tmp_path / "01_tiny.ipynb")
    row = ExerciseResult("alice", "01_tiny.ipynb", sub.file, "one_hot", "pass", "ok", "", 1.0, 1.0)
    (marked,) = reference_use.mark_reference_use(sub, [row])
    assert (marked.result, marked.points, marked.max_points) == ("fail", 0.0, 1.0)
    assert marked.message.startswith("uses the library's own `one_hot`")
    honest = Submission(tmp_path / "01_tiny.ipynb", "01_tiny.ipynb", "bob", tmp_path / "01_tiny.ipynb")
    assert reference_use.mark_reference_use(honest, [row]) == [row]


def test_the_grader_scores_a_flagged_answer_zero_and_says_why(tmp_path):
    """Through grade() and the reports: the aliasing answer passes the check in its kernel, yet
    scores 0 with the reason in grades.md and the student's feedback; the honest one passes."""
    from onehot2gpt_teach import grading, sandbox

    reference = course()
    reference.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "ref").mkdir()
    nbformat.write(reference, tmp_path / "ref" / "01_tiny.ipynb")
    aliasing = copy.deepcopy(reference)
    aliasing.cells[1].source = "import onehot2gpt.vocab as v\nmy_one_hot = v.one_hot"
    for student, nb in {"alice": reference, "mallory": aliasing}.items():
        (tmp_path / "subs" / student).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / student / "01_tiny.ipynb")
    results = grading.grade(
        tmp_path / "subs", tmp_path / "ref", cell_timeout=60, timeout=300, sandbox=sandbox.available()[0]
    )
    got = {r.student: r for r in results}
    assert (got["alice"].result, got["alice"].points) == ("pass", 1.0)
    assert (got["mallory"].result, got["mallory"].points) == ("fail", 0.0)
    grading.write_reports(results, tmp_path / "out")
    reason = "uses the library's own `one_hot`"
    assert reason in (tmp_path / "out" / "grades.md").read_text(encoding="utf-8")
    assert reason in (tmp_path / "out" / "feedback" / "mallory.md").read_text(encoding="utf-8")
