"""Answers that use the reference instead of reimplementing it: a scan of each exercise's
solution in a submission's source (its AST, in the grading process; the student's code never runs
here), so that an answer which calls or aliases the library function it was asked to write scores
0, with the reason in the feedback ("uses the library's own `one_hot`").

What is an exercise's solution: the function (or class, or lambda) that the reference check cell
passes to its check (``check_one_hot(my_one_hot)`` → the last top-level definition of
``my_one_hot`` before that check in the submission), plus every top-level function or class of
the notebook it uses by name, transitively. Names are resolved through the notebook's top-level
imports and assignments made before the check, and through the imports inside the solution.

What is forbidden, per exercise (:func:`forbidden_names`):

- the library names that the check's reference uses (derived from the check's own source, see
  :func:`default_forbidden`), unless the reference check cell's metadata
  ``{"onehot2gpt": {"forbid": ["onehot2gpt.vocab.one_hot", "torch.nn.functional.one_hot"]}}``
  lists the names itself (``[]``: none);
- always: the course's checking code (anything under ``onehot2gpt_exercises``), and reaching
  into the grader's frames or memory (``sys._getframe``, ``inspect``, ``gc``, ``ctypes``,
  ``f_back``/``f_locals``/``f_globals``, ``__globals__``, ``globals()``, ``eval``/``exec``, …).

A library name (``onehot2gpt.…``) matches wherever the library exports it (``onehot2gpt.one_hot``
and ``onehot2gpt.vocab.one_hot`` alike); any other name matches exactly, or anything under it.
Caught: direct calls and references, ``import m as a`` / ``from m import f as g``, assignments
``g = onehot2gpt.vocab.f`` (at top level or inside the solution), attribute access through module
aliases, ``getattr(module, "f")`` with a constant name, ``importlib.import_module("…")`` and
``__import__("…")`` with a constant name. Not caught: methods reached through an object
(``vocab.encode(…)`` on a library ``Vocab`` instance: the scan does not know types), names built at
run time (``getattr(m, "one_" + "hot")``), code the solution receives as data or runs from a file,
and library functions that reimplement the exercise under another name than the reference's.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
from collections.abc import Iterable

LIBRARY = "onehot2gpt"
CHECKS_PACKAGE = "onehot2gpt_exercises"
# Reaching into the grader's frames, memory or modules: never part of an exercise's answer.
INTROSPECTION_NAMES = (
    "sys._getframe",
    "sys._current_frames",
    "sys.modules",
    "sys.last_traceback",
    "sys.last_value",
    "sys.last_exc",
    "inspect",
    "gc",
    "ctypes",
    "builtins",
    "importlib",
)
INTROSPECTION_ATTRIBUTES = frozenset(
    "f_back f_locals f_globals f_builtins tb_frame gi_frame cr_frame ag_frame __globals__ __closure__ "
    "cell_contents __builtins__ __traceback__".split()
)
DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "globals", "vars", "__import__"})

_CHECK_CALL = re.compile(r"\bcheck_\w+")


# --------------------------------------------------------------------------------------------
# What each exercise forbids
# --------------------------------------------------------------------------------------------


def _imports(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """Local name → dotted name for every import among `nodes` (walked), e.g.
    ``from onehot2gpt.vocab import one_hot as oh`` → ``{"oh": "onehot2gpt.vocab.one_hot"}``."""
    found = {}
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        found[alias.asname] = alias.name
                    else:
                        found[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def default_forbidden(check_name: str) -> tuple[str, ...]:
    """The library names a check's reference uses: in the check function's source
    (:mod:`onehot2gpt_exercises`), the reference argument of its ``check_function`` call, followed
    into the local and module-level functions it names, resolved through their imports; only names
    of the library (``onehot2gpt.…``) are kept, with those the check's module declares in its
    ``LIBRARY_REFERENCES`` ({check name: names}: a reference loaded at run time, such as a
    checkpoint's model, names no class in the source), sorted.

    Example: ``default_forbidden("check_one_hot") == ("onehot2gpt.vocab.one_hot",)``
    """
    import onehot2gpt_exercises as exercises

    check = getattr(exercises, check_name, None)
    if not check_name.startswith("check_") or not callable(check):
        raise ValueError(f"check_name must name a check of onehot2gpt_exercises (check_…), got {check_name!r}")
    module = inspect.getmodule(check)
    # a check whose reference is a model loaded at run time names the library classes it stands for
    declared = tuple(getattr(module, "LIBRARY_REFERENCES", {}).get(check_name, ()))
    tree = ast.parse(inspect.getsource(module))
    functions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    check_def = functions.get(check_name)
    if check_def is None:  # defined elsewhere (re-exported): no source to follow
        return tuple(sorted(declared))
    module_imports = _imports(node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))
    local_defs = {
        node.name: node
        for node in ast.walk(check_def)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not check_def
    }
    reference = None
    for node in ast.walk(check_def):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check_function":
            keywords = {k.arg: k.value for k in node.keywords}
            reference = node.args[1] if len(node.args) > 1 else keywords.get("reference_fn")
            break
    if reference is None:
        return tuple(sorted(declared))
    names, seen, todo = set(), set(), [(reference, check_def)]
    while todo:
        expression, scope = todo.pop()
        imports = {**module_imports, **_imports([scope])}
        for node in ast.walk(expression):
            if not isinstance(node, ast.Name) or node.id in seen:
                continue
            seen.add(node.id)
            if node.id in local_defs:
                todo.append((local_defs[node.id], check_def))
            elif node.id in functions and node.id != check_name:
                todo.append((functions[node.id], functions[node.id]))
            elif node.id in imports and imports[node.id].startswith(LIBRARY + "."):
                names.add(imports[node.id])
    return tuple(sorted(names | set(declared)))


def forbidden_names(check_source: str, metadata: dict | None = None) -> tuple[str, ...]:
    """The library names an exercise's answer must not use: the check cell's metadata
    ``{"onehot2gpt": {"forbid": [...]}}`` (the cell's ``metadata`` dict) when given, else
    :func:`default_forbidden` of every check the cell calls. Raises ValueError for a ``forbid`` that
    is not a list of dotted names."""
    meta = (metadata or {}).get("onehot2gpt", {})
    if isinstance(meta, dict) and "forbid" in meta:
        forbid = meta["forbid"]
        if not isinstance(forbid, list) or not all(
            isinstance(n, str) and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", n) for n in forbid
        ):
            raise ValueError(
                f"metadata onehot2gpt.forbid must be a list of dotted names such as "
                f'["onehot2gpt.vocab.one_hot", "torch.nn.functional.one_hot"], got {forbid!r}'
            )
        return tuple(forbid)
    import onehot2gpt_exercises as exercises

    names = [n for n in dict.fromkeys(_CHECK_CALL.findall(check_source)) if callable(getattr(exercises, n, None))]
    return tuple(sorted({name for check in names for name in default_forbidden(check)}))


# --------------------------------------------------------------------------------------------
# The scan
# --------------------------------------------------------------------------------------------


def _matches(used: str, forbidden: str) -> bool:
    if used == forbidden or used.startswith(forbidden + "."):
        return True
    root = forbidden.split(".")[0]  # a library name, wherever the library exports it
    if root == LIBRARY and used.split(".")[0] == root:
        return used.split(".")[-1] == forbidden.split(".")[-1]
    return False


def _reason(used: str, forbidden: Iterable[str]) -> tuple[str, str] | None:
    """(why `used` is not allowed, the rule it breaks), or None."""
    short = used.split(".")[-1]
    if used == CHECKS_PACKAGE or used.startswith(CHECKS_PACKAGE + "."):
        return f"uses the course's checking code (`{used}`)", CHECKS_PACKAGE
    for name in forbidden:
        if _matches(used, name):
            whose = "the library's own" if name.split(".")[0] == LIBRARY else "the forbidden"
            return f"uses {whose} `{short}` (`{used}`)", name
    for name in INTROSPECTION_NAMES:
        if used == name or used.startswith(name + "."):
            return f"reaches into the grader's frames or modules (`{used}`)", name
    return None


def _locals(function: ast.AST) -> set[str]:
    """Names bound inside a function or lambda (its parameters and assignments, nested scopes
    included): they shadow the notebook's top-level names."""
    bound = set()
    for node in ast.walk(function):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
            bound.add(node.name)
    return bound


class _Resolver:
    """Dotted names of expressions, through the notebook's top-level aliases and a solution's own
    imports (its other local names resolve to nothing)."""

    def __init__(self, aliases: dict[str, str], imports: dict[str, str], local: set[str]):
        self.aliases, self.imports, self.local = aliases, imports, local

    def __call__(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return self.imports[node.id]
            if node.id in self.local:
                return None
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and node.args:
            func, first = self(node.func), node.args[0]
            constant = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            if isinstance(node.func, ast.Name) and node.func.id == "getattr" and func is None and len(node.args) > 1:
                name = node.args[1]
                base = self(first)
                if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return f"{base}.{name.value}"
            if constant and (func == "importlib.import_module" or _is_builtin(node.func, "__import__", self)):
                return constant
        return None


def _is_builtin(node: ast.AST, name: str, resolve: _Resolver) -> bool:
    return isinstance(node, ast.Name) and node.id == name and resolve(node) is None and node.id not in resolve.local


def _uses(region: list[ast.AST], aliases: dict[str, str], forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(reason, rule) for each thing `region` uses that it must not, first occurrence only."""
    found: list[tuple[str, str]] = []

    def add(hit: tuple[str, str] | None) -> None:
        if hit and hit not in found:
            found.append(hit)

    for top in region:
        resolve = _Resolver(aliases, _imports([top]), _locals(top))
        for node in ast.walk(top):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in [*_imports([node]).values(), *names]:
                    add(_reason(name, forbidden))
            elif isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
                if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRIBUTES:
                    add((f"reaches into the grader's frames or modules (`.{node.attr}`)", node.attr))
                if isinstance(node, ast.Name) and node.id == "__builtins__":
                    add(("reaches into the grader's frames or modules (`__builtins__`)", node.id))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id in DYNAMIC_BUILTINS and _is_builtin(node.func, node.func.id, resolve):
                        if not (node.func.id == "__import__" and resolve(node)):
                            add((f"runs or looks up code by name at run time (`{node.func.id}()`)", node.func.id))
                used = resolve(node)
                if used:
                    add(_reason(used, forbidden))
    return found


def _statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """A cell's top-level statements, including those inside if/for/while/with/try blocks (not
    those inside functions or classes)."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, block, None) or [])
        for handler in getattr(statement, "handlers", None) or []:
            yield from _statements(handler.body)


class _Notebook:
    """The top-level definitions and aliases of a submission's cells, read in execution order."""

    def __init__(self):
        self.definitions: dict[str, ast.AST] = {}
        self.aliases: dict[str, str] = {}

    def read(self, source: str) -> None:
        try:
            tree = ast.parse(_without_magics(source))
        except SyntaxError:
            return
        for statement in _statements(tree.body):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definitions[statement.name] = statement
                self.aliases.pop(statement.name, None)
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                for alias in statement.names:  # each name bound to its own import, for region()
                    one = copy.copy(statement)
                    one.names = [alias]
                    bound = _imports([one])
                    self.aliases.update(bound)
                    self.definitions.update(dict.fromkeys(bound, one))
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                resolved = _Resolver(self.aliases, {}, set())(statement.value)
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.definitions[target.id] = statement.value
                        if resolved:
                            self.aliases[target.id] = resolved
                        else:
                            self.aliases.pop(target.id, None)

    def region(self, names: Iterable[str]) -> list[ast.AST]:
        """The definitions of `names` and of every top-level definition they use, transitively."""
        todo, seen, region = list(names), set(), []
        while todo:
            name = todo.pop()
            if name in seen or name not in self.definitions:
                continue
            seen.add(name)
            node = self.definitions[name]
            region.append(node)
            local = _locals(node)
            todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in local]
        return region


def _without_magics(source: str) -> str:
    """IPython magics and shell lines (``%time``, ``!pip``) blanked so that the cell parses."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def passed_names(check_source: str) -> list[str]:
    """The names a check cell passes to its checks: ``check_one_hot(my_one_hot)`` → ``["my_one_hot"]``."""
    try:
        tree = ast.parse(check_source)
    except SyntaxError:
        return []
    return [
        arg.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")
        for arg in node.args
        if isinstance(arg, ast.Name)
    ]


def _scan(notebook, checks, forbidden) -> dict[int, list[tuple[str, str]]]:
    from .grading_checks import plan_cells

    if len(forbidden) != len(checks):
        raise ValueError(f"forbidden must give one tuple of names per check ({len(checks)}), got {len(forbidden)}")
    steps, _ = plan_cells(notebook, checks)
    cells, found = _Notebook(), {}
    for step in steps:
        if step.check is None:
            cells.read(step.source)
        elif step.check not in found:
            hits = _uses(cells.region(passed_names(step.source)), cells.aliases, tuple(forbidden[step.check]))
            if hits:
                found[step.check] = hits
    return found


def scan_submission(notebook, checks, forbidden: list[tuple[str, ...]] | None = None) -> dict[int, str]:
    """For a submission (an nbformat notebook) and its course notebook's checks (a list of
    :class:`~onehot2gpt_teach.grading_checks.ReferenceCheck`), the exercises whose answer uses
    what it must not → {check index: the reasons, for the feedback}. `forbidden` gives each
    check's forbidden names (:func:`reference_rules`; default: :func:`forbidden_names` of each
    check's source)."""
    if forbidden is None:
        forbidden = [forbidden_names(check.source) for check in checks]
    return {k: "; ".join(reason for reason, _ in hits) for k, hits in _scan(notebook, checks, forbidden).items()}


def reference_rules(reference_notebook, checks) -> list[tuple[str, ...]]:
    """Each check's forbidden names: the course notebook's check cell's metadata
    ``onehot2gpt.forbid`` (the cell found by id) when present; else those :func:`forbidden_names`
    derives, less settings classes (``…Config``: they compute nothing) and less the names the
    course notebook's own solution of that exercise uses (a helper such as ``causal_mask`` that the
    reference needs but the exercise does not ask for). Raises ValueError naming the check for a
    malformed ``forbid``."""
    by_id = {cell.get("id"): cell for cell in reference_notebook.cells if cell.get("id")}
    rules, derived = [], []
    for check in checks:
        cell = by_id.get(check.cell_id) if check.cell_id else None
        metadata = cell.get("metadata", {}) if cell else {}
        try:
            rules.append(forbidden_names(check.source, metadata))
        except ValueError as exc:
            raise ValueError(f"check {check.name!r} of the course notebook: {exc}") from None
        meta = metadata.get("onehot2gpt", {})
        derived.append(not (isinstance(meta, dict) and "forbid" in meta))
    used = _scan(reference_notebook, checks, rules)
    return [
        tuple(n for n in rule if not n.endswith("Config") and n not in {name for _, name in used.get(k, [])})
        if derived[k]
        else rule
        for k, rule in enumerate(rules)
    ]


_RULES: dict = {}  # (course notebook path, its mtime) → (checks, rules)


def mark_reference_use(submission, rows: list) -> list:
    """`rows` (one submission's ExerciseResults) with every exercise whose answer uses what it must
    not (:func:`scan_submission` against the rules of :func:`reference_rules`) scored 0: a pass
    becomes a fail, and the reason leads the message, so the student's feedback and the lecturer's
    report both say it. A submission or course notebook that cannot be read is left as graded
    (its rows already say so)."""
    import dataclasses

    from .grading_checks import reference_checks
    from .grading_kernel import read_notebook

    if submission.reference is None:
        return rows
    try:
        key = (str(submission.reference), submission.reference.stat().st_mtime_ns)
        if key not in _RULES:
            reference = read_notebook(submission.reference)
            checks = reference_checks(reference)
            _RULES[key] = (checks, reference_rules(reference, checks))
        checks, rules = _RULES[key]
        flagged = scan_submission(read_notebook(submission.path), checks, rules)
    except (OSError, ValueError):
        return rows
    reasons = {checks[k].name: reason for k, reason in flagged.items()}
    marked = []
    for row in rows:
        reason = reasons.get(row.exercise)
        if reason:
            message = f"{reason}: the exercise asks for your own code, so it scores 0"
            if row.result != "pass" and row.message:
                message += f"; {row.message}"
            result = "fail" if row.result == "pass" else row.result
            row = dataclasses.replace(row, result=result, message=message, points=0.0)
        marked.append(row)
    return marked


__all__ = [
    "mark_reference_use",
    "default_forbidden",
    "forbidden_names",
    "passed_names",
    "reference_rules",
    "scan_submission",
]
