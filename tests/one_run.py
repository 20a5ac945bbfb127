"""Each notebook runs once in the suite, and that one run tests both of its versions.

The notebook that runs (in JupyterLab, tests/test_browser.py; with nbclient where there is no
browser, tests/test_notebooks.py) is the student version with, after each of its check cells, the
course notebook's exercise cell and that check again: a student who meets the unsolved check, then
writes the solution and runs the check once more. So in one kernel, in order,
* every cell of the student version runs: its checks must fail saying the exercise is not written
  yet, and no other cell may fail (`student_run_problems`);
* every cell of the course notebook runs too, its solutions in place for the cells after them, and
  each one's outputs must equal the stored ones as strict nbval compares them: nbval's own
  comparison, its cell tags (``nbval-ignore-output``) and tests/sanitize.cfg (`course_run_problems`).

What this single run does not execute, where two runs did: the cells after an exercise without its
solution. `solution_names_used_later` checks statically that those cells reach an exercise's
names only through the check or `yours_or`/`yours_if_solved`, which stand the library's version in,
and tests/test_notebooks.py runs each of those stand-ins against its exercise's check.
"""

from __future__ import annotations

import ast
import copy
import difflib
import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
from nbval.plugin import (
    IPyNbCell,
    _trim_base64,
    coalesce_streams,
    find_comment_markers,
    find_metadata_tags,
    get_sanitize_patterns,
    nocolors,
)
from onehot2gpt_teach.student import cell_tags

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "sanitize.cfg"
# The keys nbval leaves out of a comparison (nbval.plugin.IPyNbFile.__init__, without --nbdime).
SKIP_COMPARE = (
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
)
SOLVED = "-solved"  # the id suffix of a solution cell, or a check run again, added to a run
WRAPPERS = ("yours_or", "yours_if_solved")


def source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def is_solved_copy(cell) -> bool:
    return str(cell.get("id", "")).endswith(SOLVED)


def one_run_notebook(course: dict, student: dict) -> dict:
    """The notebook that runs once for both versions (nbformat JSON): `student` with, after each
    check cell, a copy of the course's exercise cell before that check and of the check itself
    (cell ids ending in "-solved", outputs cleared)."""
    ids = [c.get("id") for c in course["cells"]]
    bad = [i for i in ids if not i or str(i).endswith(SOLVED)] + [i for i in set(ids) if ids.count(i) > 1]
    assert not bad, f"cell ids must be present, unique and not end in {SOLVED!r}: {bad}"
    by_id = {c.get("id"): c for c in course["cells"]}
    run = copy.deepcopy(student)
    cells = []
    for cell in run["cells"]:
        cells.append(cell)
        if cell["cell_type"] != "code" or "check" not in cell_tags(cell):
            continue
        check = by_id.get(cell.get("id"))
        assert check is not None, f"the student version's check cell {cell.get('id')} is not in the course notebook"
        before = [c for c in course["cells"][: ids.index(cell.get("id"))] if c["cell_type"] == "code"]
        assert before and "exercise" in cell_tags(before[-1]), (
            f"the code cell before check {cell.get('id')} in the course notebook is not an exercise"
        )
        for original in (before[-1], check):
            solved = copy.deepcopy(original)
            solved["id"] = f"{original.get('id')}{SOLVED}"
            solved["outputs"], solved["execution_count"] = [], None
            cells.append(solved)
    run["cells"] = cells
    return run


def student_run_problems(notebook: dict, name: str) -> list[str]:
    """What is wrong with the student version's cells in an executed run (nbformat JSON): every
    check cell must fail with the AssertionError that says the exercise is not written yet, and no
    other cell may fail (the rest of the notebook runs without the solutions). The solved copies
    are `course_run_problems`'s. Empty when all is right."""
    problems = []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or is_solved_copy(cell):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if "check" in cell_tags(cell):
            if not errors or errors[0]["ename"] != "AssertionError":
                problems.append(
                    f"{name} cell {i}: an unsolved exercise's check must fail with AssertionError, "
                    f"got {errors[0]['ename'] if errors else 'no error'}"
                )
            elif "not written yet" not in errors[0]["evalue"]:
                problems.append(
                    f"{name} cell {i}: the check's message should say the exercise is not "
                    f"written yet: {errors[0]['evalue'][:200]!r}"
                )
        elif errors:
            problems.append(
                f"{name} cell {i} fails in the student version: {errors[0]['ename']}: {errors[0]['evalue'][:300]}"
            )
    return problems


class _Comparison:
    """nbval's comparison of one cell's outputs (IPyNbCell.compare_outputs and its sanitizing),
    outside a pytest item: the same functions, fed what they read from an item."""

    colors = nocolors
    compare_outputs = IPyNbCell.compare_outputs
    sanitize = IPyNbCell.sanitize

    def __init__(self, patterns):
        self.parent = SimpleNamespace(skip_compare=SKIP_COMPARE, sanitize_patterns=patterns)
        self.comparison_traceback = []

    def format_output_compare(self, key, left, right):
        """The differing output as a diff (nbval's own asks pytest's assertion rewriting)."""
        self.comparison_traceback.append(f'mismatch "{key}", stored (-) and this run (+):')
        self.comparison_traceback.extend(
            list(
                difflib.unified_diff(
                    _trim_base64(str(left)).splitlines(), _trim_base64(str(right)).splitlines(), lineterm="", n=1
                )
            )[2:]
        )


def nbval_options(cell) -> dict:
    """The nbval options of a course cell (strict mode): from its tags, then its comment markers."""
    options = dict(find_metadata_tags(cell.get("metadata", {})))
    options.update(find_comment_markers(source(cell)))
    options.setdefault("check", True)
    return options


def _read(notebook: dict) -> nbformat.NotebookNode:
    """nbformat JSON as nbformat.read gives it to nbval (multi-line strings joined)."""
    return nbformat.reads(json.dumps(notebook), as_version=4)


def course_run_problems(executed: dict, course: dict, name: str) -> list[str]:
    """Strict nbval's verdict on the course notebook `course`, from a run of `one_run_notebook`:
    each code cell (its solved copy for exercises and checks) must have run without an error
    (unless marked to raise) and, unless marked to ignore its output, given the stored outputs
    under tests/sanitize.cfg. One line (with nbval's diff) per wrong cell; empty when all is right."""
    patterns = dict(get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8")))
    executed, course = _read(executed), _read(course)  # fresh nodes, as nbval reads a notebook (coalescing edits them)
    ran = {c.get("id"): c for c in executed["cells"]}
    problems = []
    position = -1
    for cell in course["cells"]:
        if cell["cell_type"] != "code":
            continue
        position += 1  # nbval's "Cell N": the position among code cells
        tags = cell_tags(cell)
        key = f"{cell.get('id')}{SOLVED}" if {"exercise", "check"} & set(tags) else cell.get("id")
        where = f"{name} Cell {position} ({source(cell).strip().splitlines()[0][:60] if source(cell).strip() else 'empty'!r})"
        if key not in ran:
            problems.append(f"{where}: not in the run")
            continue
        if source(ran[key]) != source(cell):
            problems.append(
                f"{where}: the run's cell is not the course notebook's (the student version is out of date?)"
            )
            continue
        outputs = ran[key].get("outputs", [])
        options = nbval_options(cell)
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors and not options.get("check_exception"):
            problems.append(f"{where} fails: {errors[0]['ename']}: {errors[0]['evalue'][:300]}")
            continue
        if options.get("skip") or not options.get("check") or cell.get("execution_count") is None:
            continue
        comparison = _Comparison(patterns)
        if not comparison.compare_outputs(coalesce_streams(outputs), coalesce_streams(cell["outputs"])):
            diff = "\n".join(str(line) for line in comparison.comparison_traceback)
            problems.append(f"{where}: outputs differ from the stored ones\n{diff[:1500]}")
    return problems


# -- what the single run does not execute: the cells after an exercise, without its solution ---------


def _bindings(code: str) -> dict[str, set[str]]:
    """The names a cell binds in the notebook's namespace (defs, classes, imports, and assignments,
    loop and with targets at top level or in top-level blocks; not names local to its functions),
    each with the top-level statements (as ast dumps) that bind it."""
    found: dict[str, set[str]] = {}

    def add(name, statement):
        found.setdefault(name, set()).add(ast.dump(statement))

    def targets(node, statement):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                add(sub.id, statement)

    def visit(body, statement=None):
        for node in body:
            top = statement or node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(node.name, top)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    add((alias.asname or alias.name).split(".")[0], top)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    targets(target, top)
                targets(node.value, top) if node.value is not None else None  # a walrus
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target, top)
                visit(node.body + node.orelse, top)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars, top)
                visit(node.body, top)
            elif isinstance(node, (ast.If, ast.While)):
                targets(node.test, top)  # a walrus
                visit(node.body + node.orelse, top)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body], top)
            elif isinstance(node, ast.Expr):
                targets(node, top)  # a walrus

    visit(ast.parse(python_code(code)).body)
    return found


def python_code(code: str) -> str:
    """A cell's source without IPython's line magics and shell escapes (not Python)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())


def _reads_outside_wrappers(code: str, names: set[str]) -> set[str]:
    """Which of `names` a cell reads other than as the first argument of yours_or/yours_if_solved."""
    tree = ast.parse(python_code(code))
    allowed = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in WRAPPERS
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            allowed.add(id(node.args[0]))
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names and id(n) not in allowed
    }


def solution_names_used_later(course: dict, student: dict, name: str) -> list[str]:
    """The cells after each exercise that would need its solution. A name the course's exercise
    cell binds differently from the student version's (the function whose body is the stub, or a
    name only the solution binds) must not be read by a later cell (other than a check, or a later
    exercise built on it, such as a block built on the student's attention) except through
    yours_or/yours_if_solved, until a later cell binds it again. Empty when the student
    version's cells after its exercises can run without the solutions."""
    problems = []
    stubs = {c.get("id"): c for c in student["cells"]}
    cells = course["cells"]
    for i, cell in enumerate(cells):
        if "exercise" not in cell_tags(cell):
            continue
        stub = stubs.get(cell.get("id"))
        assert stub is not None, f"{name}: exercise cell {cell.get('id')} is missing from the student version"
        solution, unsolved = _bindings(source(cell)), _bindings(source(stub))
        names = {n for n, statements in solution.items() if statements != unsolved.get(n)}
        start = [c.get("id") for c in student["cells"]].index(cell.get("id"))
        for later in student["cells"][start + 1 :]:  # what runs after it in the student version
            if not names:
                break
            if later["cell_type"] != "code" or {"check", "exercise"} & set(cell_tags(later)):
                continue  # a check, or an exercise built on this one (its own check then fails)
            rebound = set(_bindings(source(later)))  # a cell that binds the name again, then reads it
            used = _reads_outside_wrappers(source(later), names - rebound)
            if used:
                first = source(later).strip().splitlines()[0][:60]
                problems.append(
                    f"{name}: the cell starting {first!r} reads {sorted(used)} from exercise "
                    f"cell {i} directly; in the student version that is the unwritten stub "
                    f"or nothing. Pass it through yours_or(...) or yours_if_solved(...)"
                )
            names -= rebound
    return problems
