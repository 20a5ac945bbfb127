"""What a student sees when a check fails (issue 47, item 2): IPython shows the check's message and,
when the student's own code raised, that code's frames, but never the check's source lines (which
hold the reference code and the hints); the first failure holds no hint. Every check of
onehot2gpt_exercises is tried, and one failure is rendered by a real kernel."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import onehot2gpt_exercises as ex
import pytest
import torch
from nbclient import NotebookClient
from onehot2gpt_exercises import checking

PACKAGE = Path(ex.__file__).resolve().parent
CHECKS = sorted(n for n in dir(ex) if n.startswith("check_") and n != "check_function" and callable(getattr(ex, n)))
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _hints() -> dict[str, list[str]]:
    """{module file: the hint texts it passes to checks} (string constants of ``hint=`` arguments)."""
    found = {}
    for path in PACKAGE.glob("*.py"):
        texts = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "hint":
                for part in ast.walk(node.value):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str) and len(part.value) >= 15:
                        texts.append(part.value)
        found[path.name] = texts
    return found


HINTS = [text for texts in _hints().values() for text in texts]


def _stub(*args, **kwargs):
    raise NotImplementedError


def _none(*args, **kwargs):
    return None


def _failure(check, fn) -> AssertionError:
    checking.reset_attempts()
    with pytest.raises(AssertionError) as info:
        getattr(ex, check)(fn)
    return info.value


def test_there_are_hints_to_keep_back():
    assert len(HINTS) > 20  # the extraction finds what the checks pass


@pytest.mark.parametrize("check", CHECKS)
def test_an_unwritten_exercise_shows_the_message_alone(check):
    failure = _failure(check, _stub)
    shown = failure._render_traceback_()
    first, *rest = str(failure).split("\n")
    assert shown == [f"AssertionError: {first}", *rest]  # no frame, so no source line of the check
    assert "not written yet" in first


@pytest.mark.parametrize("check", CHECKS)
def test_the_first_wrong_answer_shows_no_hint_and_no_check_source(check):
    failure = _failure(check, _none)
    shown = "\n".join(failure._render_traceback_())
    leaked = [hint for hint in HINTS if hint in shown]
    assert leaked == [], f"{check}'s first failure shows a hint: {leaked}"
    assert str(PACKAGE) not in shown


def test_the_students_own_frames_are_shown_and_the_checks_are_not():
    def my_one_hot(ids, vocab_size):
        scale = 1 / 0  # the student's bug
        return scale

    failure = _failure("check_one_hot", my_one_hot)
    shown = "\n".join(failure._render_traceback_())
    assert "scale = 1 / 0" in shown and "ZeroDivisionError: division by zero" in shown
    assert str(PACKAGE) not in shown
    assert shown.rstrip().endswith(str(failure).split("\n")[-1])


def test_a_real_kernel_renders_the_short_traceback(tmp_path):
    """IPython calls ``_render_traceback_``: the error output holds the message and the student's
    frame, and none of the check's source."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import torch\nfrom onehot2gpt_exercises import check_one_hot\n"
            "def my_one_hot(ids, vocab_size):\n    return torch.zeros(len(ids), vocab_size + 1)"
        ),
        nbformat.v4.new_code_cell("check_one_hot(my_one_hot)"),
        nbformat.v4.new_code_cell("def my_one_hot(ids, vocab_size):\n    return [][0]\ncheck_one_hot(my_one_hot)"),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute(cwd=str(tmp_path))
    source_lines = {
        line.strip() for path in PACKAGE.glob("*.py") for line in path.read_text(encoding="utf-8").splitlines()
    }
    source_lines = {line for line in source_lines if len(line) >= 20 and not line.startswith(('"', "'", "f'", 'f"'))}
    for cell, expected in ((nb.cells[1], "expected shape"), (nb.cells[2], "IndexError: list index out of range")):
        (error,) = [o for o in cell.outputs if o.output_type == "error"]
        assert error.ename == "AssertionError"
        shown = [ANSI.sub("", line) for line in error.traceback]
        text = "\n".join(shown)
        assert expected in text
        assert not [line for line in source_lines if line in text], "a line of the checks' source is shown"
        assert str(PACKAGE) not in text
    assert "return [][0]" in "\n".join(ANSI.sub("", line) for line in nb.cells[2].outputs[0].traceback)


@pytest.mark.parametrize(
    "check, wrong",
    [
        ("check_next_token_pairs", lambda sentence: [(("<bos>",), sentence[0])]),
        ("check_wordpiece", lambda word, vocab: [word]),
        ("check_segment_ids", lambda tokens: [0]),
    ],
)
def test_a_wrong_list_answer_shows_the_input_the_expected_and_the_answer(check, wrong):
    message = str(_failure(check, wrong))
    assert "\n  on input " in message
    assert "\n  expected " in message and "\n  got      " in message


def test_a_hidden_tests_input_is_described_not_shown(tmp_path):
    """In the grader's replay a hidden test's failure names the input's shapes, never its values."""
    from onehot2gpt_teach.grading import replay_check

    answers = tmp_path / "answers.pt"
    checking.start_recording(answers, [424242])

    def right_on_the_visible_seed_only(ids, vocab_size):  # the visible inputs come first: 5 trials
        right_on_the_visible_seed_only.calls = getattr(right_on_the_visible_seed_only, "calls", 0) + 1
        width = vocab_size if right_on_the_visible_seed_only.calls <= 5 else vocab_size + 1
        return torch.nn.functional.one_hot(torch.as_tensor(ids), width).float()

    ex.check_one_hot(right_on_the_visible_seed_only)
    checking.stop_recording()
    result, message = replay_check("check_one_hot(my_one_hot)", answers, [424242])
    assert result == "fail" and "hidden test 1 of 5" in message
    assert "on a hidden input (tensor of shape" in message and "on input [" not in message


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(heads="view"), "without moving an axis"),
        (dict(mask_after=True), "applied after the softmax"),
        (dict(scale=1.0), "the scores are not scaled"),
        (dict(scale="D"), "divided by √D"),
        (dict(heads="round-robin"), "every H-th feature"),
        (dict(use_mask=False), "the mask is ignored"),
        (dict(out_proj=False), "never mixed"),
    ],
)
def test_each_planted_attention_mistake_is_diagnosed(change, words):
    def planted(x, w_qkv, b_qkv, w_o, b_o, n_heads, mask=None):
        return checking.attention_variant(x, w_qkv, b_qkv, w_o, b_o, n_heads, mask, **change)

    message = str(_failure("check_multi_head_attention", planted))
    assert "Looks like: " in message and words in message.split("Looks like: ", 1)[1], message


# --------------------------------------------------------------------------------------------
# Hints that teach (issue 47, item 2): what a check shows never contains its solution's code
# --------------------------------------------------------------------------------------------

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
FRAGMENT = 14  # characters of code (whitespace removed) that count as a piece of the solution
SOLUTION_LINE = 12  # a solution line shorter than this (whitespace and comments removed) is not compared


def _code(text: str) -> str:
    """`text` without whitespace: code and prose compare alike however they are spaced."""
    return re.sub(r"\s+", "", text)


def _solution_lines(solution: str) -> list[str]:
    """The lines of a solution as compared: comments and whitespace removed, the short ones left out."""
    lines = (_code(re.sub(r"#.*", "", line)) for line in solution.splitlines())
    return [line for line in lines if len(line) >= SOLUTION_LINE]


def _shared_code(shown: str, solution: str) -> list[str]:
    """The solution lines that share a FRAGMENT-character piece (the whole line when it is shorter)
    with the text `shown`, whitespace ignored."""
    text = _code(shown)
    return [
        line
        for line in _solution_lines(solution)
        if any(line[k : k + FRAGMENT] in text for k in range(max(1, len(line) - FRAGMENT + 1)))
    ]


def _exercises() -> list:
    """(notebook, exercise name, its solution) for every exercise of every course notebook."""
    import json

    from onehot2gpt_teach.student import BEGIN, END, exercise_names

    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        for index, name in exercise_names(notebook).items():
            source = "".join(notebook["cells"][index]["source"])
            solution = source.split(BEGIN, 1)[1].split(END, 1)[0] if BEGIN in source else ""
            found.append(pytest.param(path.stem, name, solution, id=f"{path.stem[:2]}-{name}"))
    return found


EXERCISES = _exercises()


def _guidance(check: str) -> str:
    """What a check shows a student besides the failure itself, at its most: the "Think about:"
    line and the hint of a second wrong answer (a function that returns None)."""
    checking.reset_attempts()
    for _ in range(checking.HINT_AFTER):
        with pytest.raises(AssertionError) as info:
            getattr(ex, check)(_none)
    checking.reset_attempts()
    text = str(info.value)
    assert "\nHint: " in text, f"{check}'s second wrong answer shows no hint"
    concept = [line for line in text.split("\n") if line.startswith("Think about: ")]
    return "\n".join([*concept, text.split("\nHint: ", 1)[1]])


def test_every_course_exercise_is_compared_with_its_check():
    assert len(EXERCISES) > 40
    for param in EXERCISES:
        notebook, name, solution = param.values
        assert f"check_{name}" in CHECKS, f"{notebook}: no check for the exercise {name}"
        assert _solution_lines(solution), f"{notebook}: the exercise {name} has no solution to compare"


def test_shared_code_finds_a_solution_written_into_a_hint():
    solution = (
        "    B, T, D = x.shape\n    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, hs)\n"
    )
    assert _shared_code("view it: x.view(B, T, n_heads, D // n_heads), then swap", solution)
    assert _shared_code("then swap the axes with .transpose( 1, 2 ) and return", solution)
    assert not _shared_code(
        "cut the last axis into H groups of hs features: (B, T, H, hs), then (B, H, T, hs)", solution
    )


@pytest.mark.parametrize("notebook, name, solution", EXERCISES)
def test_the_hint_and_the_concept_hold_no_code_of_the_solution(notebook, name, solution):
    """The concept and the hint teach (a question, the equation, the shapes to reach) and never
    give the solution away: neither shares a piece of FRAGMENT characters of code (whitespace and
    comments removed) with the solution of the notebook's exercise. What is compared is what the
    check shows a student on a second wrong answer, wherever the check takes its texts from."""
    shown = _guidance(f"check_{name}")
    leaked = _shared_code(shown, solution)
    assert leaked == [], f"{notebook}: check_{name} shows code of its solution: {leaked}\n{shown}"


def test_every_checks_first_failure_in_a_real_kernel_shows_the_input_and_no_solution(tmp_path):
    """Issue 47, done-when: each exercise's check is run on a wrong answer in a real kernel. What
    the kernel displays (the error's rendered traceback) shows the failing input, and holds no line
    of the exercise's solution code and no hint (the first failure names the concept only)."""
    params = [p.values for p in EXERCISES]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("def _wrong(*args, **kwargs):\n    return None")]
    nb.cells += [
        nbformat.v4.new_code_cell(f"from onehot2gpt_exercises import check_{name}\ncheck_{name}(_wrong)")
        for _, name, _ in params
    ]
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute(cwd=str(tmp_path))
    problems = []
    for (notebook, name, solution), cell in zip(params, nb.cells[1:]):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if len(errors) != 1 or errors[0].ename != "AssertionError":
            problems.append(f"{notebook} {name}: no AssertionError shown ({[o.output_type for o in cell.outputs]})")
            continue
        shown = "\n".join(ANSI.sub("", line) for line in errors[0].traceback)
        if "on input" not in shown and "on a hidden input" not in shown:
            problems.append(f"{notebook} {name}: the failing input is not shown:\n{shown}")
        # The failing input, the expected and the given answer are data (a dict of weights shows its
        # parameter names, as the solution indexes them): the words around them are compared.
        words = re.sub(r"\n  on (a hidden )?input.*?(?=\n  Looks like|\nThink about|\n\(Fix|\Z)", "", shown, flags=re.S)
        leaked = _shared_code(words, solution)
        if leaked:
            problems.append(f"{notebook} {name}: shows code of its solution {leaked}")
        hints = [hint for hint in HINTS if hint in shown]
        if hints or "\nHint: " in shown:
            problems.append(f"{notebook} {name}: the first failure shows a hint")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "make, words",
    [(lambda t: t.to_sparse(), "sparse_coo tensor"), (lambda t: torch.empty_like(t, device="meta"), "meta device")],
)
def test_a_sparse_or_meta_answer_gets_a_clear_message_not_a_torch_error(make, words):
    """Issue 48: a sparse or meta tensor used to end in a raw torch error inside the comparison."""

    def answer(ids, vocab_size):
        return make(torch.nn.functional.one_hot(torch.as_tensor(ids), vocab_size).float())

    message = str(_failure("check_one_hot", answer))
    assert words in message and "one_hot" in message
