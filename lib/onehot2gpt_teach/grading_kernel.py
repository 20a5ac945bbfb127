"""Grading, part 2: running one submission in a kernel of its own, cell by cell, with the
reference checks in place (:func:`grade_submission`). See :mod:`onehot2gpt_teach.grading`."""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

try:
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError
    from nbclient.util import run_sync
    from traitlets import default
except ImportError as exc:  # these come with the test extra, not with the library itself
    raise ImportError(f"grading needs nbclient, nbformat and ipykernel ({exc}): pip install -e '.[test]'") from exc

from . import sandbox as sandboxing
from .grading_checks import (
    STOP_RECORDING,
    ExerciseResult,
    ReferenceCheck,
    Step,
    Submission,
    build_rows,
    check_prelude,
    file_row,
    one_line,
    plan_cells,
    reference_checks,
    replay_check,
    unknown_notebook,
)

MAX_RESTARTS = 2  # kernel restarts per submission before the remaining checks are given up
PROBE_SECONDS = 2  # after interrupting a cell: how long the kernel may take to answer again


# --------------------------------------------------------------------------------------------
# Running one submission
# --------------------------------------------------------------------------------------------

# How this process starts kernels: a command before the kernel's own (["unshare", "-rn"] to cut
# the network), whether the kernel talks to us over Unix sockets (a kernel in a network
# namespace of its own cannot reach our TCP ports), and the sandbox's settings (None: no
# sandbox). Set by a grading process (:func:`run_worker`).
_KERNEL: dict = {"prefix": [], "ipc": False, "sandbox": None, "user": None}
_UNSHARE = ["unshare", "--user", "--map-root-user", "--net"]
_UNSHARE_AS_ROOT = ["unshare", "--net"]  # root needs no user namespace (and keeps uids to drop to)

# Run before a kernel started without a sandbox. As root ("uid" given): set the limits; where a
# path the kernel needs (this Python, the library, the data) lies below a folder others cannot pass
# (a pyenv under /root), cover that folder, in a mount namespace of the kernel's own, by a tmpfs
# holding just those paths; become the unprivileged user. Then, as any user, ask Linux to kill the
# kernel when its grading process dies (PR_SET_PDEATHSIG, which a change of user clears, so it
# comes last) and become the kernel. (No curly brackets: jupyter_client fills such templates into
# a kernel's command line.)
_LAUNCH = (
    sandboxing.LAUNCHER_PRELUDE
    + """
def closed(path):
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        folder = "/".join(parts[:i])
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None
tops = sorted(set(t for t in map(closed, spec["paths"]) if t)) if spec["uid"] is not None else []
tops = [t for t in tops if not any(t.startswith(u + "/") for u in tops)]
if tops:
    private_mounts()
    inside = [p for p in spec["paths"] if any(p == t or p.startswith(t + "/") for t in tops)]
    fds = [(p, os.open(p, os.O_PATH)) for p in inside]
    for top in tops:
        ok(libc.mount(b"tmpfs", top.encode(), b"tmpfs", 0x2 | 0x4, b"mode=0755,size=1m"), "a tmpfs on " + top)
    for path, fd in fds:
        bind(fd, path)
if spec["uid"] is not None:
    for name, value in spec["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    become(spec["uid"])
libc.prctl(1, 9, 0, 0, 0)
os.execvp(sys.argv[2], sys.argv[2:])
"""
)


def isolate_kernels() -> None:
    """From now on, start this process's kernels without network, talking over Unix sockets (see
    :func:`network_isolation_available`)."""
    _KERNEL.update(prefix=list(_UNSHARE_AS_ROOT if os.geteuid() == 0 else _UNSHARE), ipc=True)


def unprivileged_kernels(limits: sandboxing.Limits) -> None:
    """From now on, start this process's kernels (this process runs as root, without a sandbox: in
    Gradescope's container, say) as the unprivileged :data:`~onehot2gpt_teach.sandbox.SANDBOX_UID`,
    with `limits` set before they start and :class:`~onehot2gpt_teach.sandbox.Watch` over their
    tree: such a kernel can write nothing root owns (the results, the course, the library), only
    its own working folder, HOME and the run's private folder, which are given to it."""
    if not isinstance(limits, sandboxing.Limits):
        raise ValueError(f"limits {limits!r}: pass a sandbox.Limits(...)")
    if os.geteuid() != 0:
        raise PermissionError("unprivileged_kernels: only root can start kernels as another user; run as root")
    _KERNEL.update(user={"uid": sandboxing.SANDBOX_UID, "limits": limits})


def sandbox_kernels(limits: sandboxing.Limits, network: bool = False) -> None:
    """From now on, start this process's kernels each in a bubblewrap sandbox of its own
    (:mod:`onehot2gpt_teach.sandbox`) with `limits`, talking over Unix sockets in the run's
    private folder, the only host folder the kernel may write; interrupts travel as messages (a
    signal to bwrap would not reach the kernel's session)."""
    if not isinstance(limits, sandboxing.Limits):
        raise ValueError(f"limits {limits!r}: pass a sandbox.Limits(...)")
    _KERNEL.update(prefix=[], ipc=True, sandbox={"limits": limits, "network": bool(network)})


def network_isolation_available() -> bool:
    """Whether kernels can be started without network here: Linux user and network namespaces
    (``unshare --user --map-root-user --net``, as an ordinary user)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    try:
        command = _UNSHARE_AS_ROOT if os.geteuid() == 0 else _UNSHARE
        return subprocess.run([*command, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class _CurrentEnvSpecs(KernelSpecManager):
    """Always the ipykernel of this Python, whatever kernel the submission names."""

    def get_kernel_spec(self, kernel_name):
        import ipykernel.kernelspec

        spec = self.kernel_spec_class(
            resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
        )
        user = _KERNEL["user"]
        launch = []
        if _KERNEL["sandbox"] is None:  # the sandbox dies with its parent on its own
            setting = {"uid": None, "rlimits": {}, "paths": []}
            if user is not None:
                setting = {
                    "uid": user["uid"],
                    "rlimits": user["limits"].rlimits(),
                    "paths": [str(p) for p in sandboxing.read_only_paths(())],
                }
            launch = [sys.executable, "-I", "-S", "-c", _LAUNCH, json.dumps(setting)]
        spec.argv = [*_KERNEL["prefix"], *launch, *spec.argv]
        if _KERNEL["sandbox"] is not None:
            spec.interrupt_mode = "message"
        return spec


class _CurrentEnvKernelManager(AsyncKernelManager):
    sandbox_folder = ""  # with a sandbox: the run's folder for sockets, connection file and answers

    @default("kernel_spec_manager")
    def _current_env_specs(self):
        return _CurrentEnvSpecs(data_dir=self.data_dir)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        box = _KERNEL["sandbox"]
        if box is None:
            return cmd
        return sandboxing.command(cmd, writable=[self.sandbox_folder], limits=box["limits"], network=box["network"])

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if (_KERNEL["sandbox"] is not None or _KERNEL["user"] is not None) and os.geteuid() == 0:  # its user reads it
            os.chown(self.connection_file, sandboxing.SANDBOX_UID, -1)


class _Client(NotebookClient):
    """A NotebookClient that keeps only error outputs (a cell printing forever costs no memory)."""

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "error":
            return super().output(outs, msg, display_id, cell_index)
        return None


@dataclass
class _Outcome:
    status: str  # "ok", "error", "timeout" or "dead"
    message: str = ""


class _Run:
    """One submission's steps in one kernel, restarting it when it hangs or dies."""

    def __init__(
        self,
        steps: list[Step],
        n_checks: int,
        workdir: str,
        cell_timeout: float,
        timeout: float,
        answers_dir: str | None = None,
        hidden_seeds=(),
        on_verdict=None,
    ):
        self.steps, self.workdir = steps, workdir
        self.on_verdict = on_verdict  # called (check index, result, message) once per check, when decided
        self.answers_dir, self.hidden_seeds = answers_dir or workdir, tuple(hidden_seeds)
        self.cell_timeout, self.timeout = cell_timeout, timeout
        self.results: list[tuple[str, str] | None] = [None] * n_checks
        self.deadline = time.monotonic() + timeout
        self.timeout_name = f"GradingTimeout_{secrets.token_hex(4)}"  # no student cell raises it
        self.replay: list[Step] = []  # cells that ran cleanly: re-run after a restart
        self.problems: list[tuple[int, str, str]] = []  # (step position, status, "cell 5 …")
        self.restarts = 0
        self.client: _Client | None = None
        self.watch: sandboxing.Watch | None = None  # the sandbox's tree limits, per kernel

    def finish(self, result: str, message: str) -> None:
        """Give every check that has no result yet this (result, message)."""
        for k, verdict in enumerate(self.results):
            if verdict is None:
                self._decide(k, (result, message))

    def _decide(self, k: int, verdict: tuple[str, str]) -> None:
        """Check `k`'s verdict, final: kept and passed on at once (a later crash cannot take it)."""
        if self.results[k] is not None:
            return
        self.results[k] = verdict
        if self.on_verdict is not None:
            self.on_verdict(k, *verdict)

    async def _start(self) -> _Client:
        client = _Client(
            nbformat.v4.new_notebook(),
            kernel_manager_class=_CurrentEnvKernelManager,
            kernel_name="python3",
            interrupt_on_timeout=True,
            force_raise_errors=True,
            error_on_timeout={"ename": self.timeout_name, "evalue": "", "traceback": []},
            shutdown_kernel="immediate",
            startup_timeout=120,
        )
        self.client = client
        client.km = client.create_kernel_manager()
        if _KERNEL["ipc"]:  # Unix sockets in our private folder: they cross network namespaces
            client.km.transport = "ipc"
            client.km.ip = str(Path(self.answers_dir) / f"kernel-{secrets.token_hex(3)}")
        if _KERNEL["user"] is not None:  # the unprivileged kernel's own folders, and no others
            for folder in (self.workdir, self.answers_dir):
                os.chown(folder, _KERNEL["user"]["uid"], -1)
        if _KERNEL["sandbox"] is not None:  # the one host folder the sandboxed kernel sees
            client.km.sandbox_folder = self.answers_dir
            client.km.connection_file = str(Path(self.answers_dir) / f"kernel-{secrets.token_hex(3)}.json")
        # the kernel's own stdout/stderr (C-level prints, ipykernel warnings) are not wanted
        await client.async_start_new_kernel(cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await client.async_start_new_kernel_client()
        pid = getattr(client.km.provisioner, "pid", None)
        box = _KERNEL["sandbox"] or _KERNEL["user"]
        if box is not None and isinstance(pid, int):  # memory, disk and CPUs of the whole tree
            self.watch = sandboxing.Watch(pid, box["limits"], writable=[self.answers_dir])
        return client

    async def stop(self) -> None:
        """Shut the kernel down (at once) if one is running."""
        client, self.client = self.client, None
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.stop()
        if client is not None and client.km is not None:
            await client._async_cleanup_kernel()

    async def _execute(self, client: _Client, source: str, limit: float) -> _Outcome:
        cell = nbformat.v4.new_code_cell(source)
        client.nb.cells = [cell]
        client.timeout = max(1, math.ceil(limit))
        try:
            await client.async_execute_cell(cell, 0)
        except CellExecutionError as err:
            if err.ename == self.timeout_name:
                return _Outcome("timeout")
            return _Outcome("error", one_line(err.ename, err.evalue))
        except DeadKernelError:
            return _Outcome("dead")
        return _Outcome("ok")

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _out_of_time(self, where: str) -> None:
        self.finish("not run", f"the notebook's time limit of {self.timeout:g} s ran out {where}")

    async def run(self) -> None:
        """Run every step, restarting the kernel at most MAX_RESTARTS times; fills
        self.results with (result, message) per reference check."""
        position = 0
        try:
            while position < len(self.steps):
                client = await self._start()
                if self.restarts and not await self._replay(client):
                    return
                position, restart = await self._run_from(client, position)
                await self.stop()
                if not restart:
                    break
                self.restarts += 1
                if self.restarts > MAX_RESTARTS:
                    self.finish(
                        "not run",
                        f"the kernel was restarted {MAX_RESTARTS} times, the "
                        f"last time after {self.steps[position - 1].label}; gave up",
                    )
                    return
        finally:
            await self.stop()
        self.finish("not run", "the notebook ended before this check")

    async def _replay(self, client: _Client) -> bool:
        for step in self.replay:
            if self._left() <= 0:
                self._out_of_time("while re-running cells after a kernel restart")
                return False
            outcome = await self._execute(client, step.source, min(self.cell_timeout, self._left()))
            if outcome.status in ("timeout", "dead"):
                self.finish(
                    "not run",
                    f"{step.label} did not run again after a kernel restart "
                    f"({'timed out' if outcome.status == 'timeout' else 'kernel died'})",
                )
                return False
        return True

    async def _run_from(self, client: _Client, position: int) -> tuple[int, bool]:
        """Run steps from `position` on; return where to go on and whether to restart."""
        while position < len(self.steps):
            step, left = self.steps[position], self._left()
            if left <= 0:
                self._out_of_time(f"before {step.label}")
                return len(self.steps), False
            limit = min(self.cell_timeout, left)
            source, answers = step.source, None
            if step.check is not None:
                answers = Path(self.answers_dir) / f"answers-{position}-{secrets.token_hex(4)}.pt"
                source = check_prelude(source, answers, self.hidden_seeds) + source
            outcome = await self._execute(client, source, limit)
            if answers is not None and outcome.status in ("ok", "error"):
                # the student's functions run here (the check only queued their inputs), under the
                # check's limit: their timeout or crash is the check's
                stop_limit = min(self.cell_timeout, self._left())
                stopped = await self._execute(client, STOP_RECORDING, stop_limit)
                if stopped.status in ("timeout", "dead"):
                    outcome, limit = stopped, stop_limit
            self._record(position, step, outcome, limit, answers)
            position += 1
            if outcome.status == "dead":
                return position, True
            if outcome.status == "timeout":
                if limit < self.cell_timeout:  # the whole notebook ran out of time
                    self._out_of_time(f"in {step.label}")
                    return len(self.steps), False
                if not await self._answers(client):  # the interrupt was ignored: start afresh
                    if self.problems and self.problems[-1][0] == position - 1:
                        at, status, text = self.problems[-1]
                        self.problems[-1] = (
                            at,
                            status,
                            text.replace("and was interrupted", "and ignored the interrupt; kernel restarted"),
                        )
                    return position, True
        return position, False

    async def _answers(self, client: _Client) -> bool:
        """Whether the kernel runs code again after an interrupt. nbclient has already waited
        `iopub_timeout` seconds for the interrupted cell to end, so a short probe suffices."""
        saved, client.iopub_timeout = client.iopub_timeout, 1
        try:
            return (await self._execute(client, "pass", PROBE_SECONDS)).status == "ok"
        finally:
            client.iopub_timeout = saved

    def _context(self, position: int, undefined: bool) -> tuple[str, str]:
        """The (status, text) of the problem before a check that most likely explains its
        failure: the last one since the previous check, else, when the check met an undefined
        name, the first one in the notebook (a failed import cell, say)."""
        previous = max((p for p, s in enumerate(self.steps[:position]) if s.check is not None), default=-1)
        section = [(status, text) for p, status, text in self.problems if previous < p < position]
        earlier = [(status, text) for p, status, text in self.problems if p < position]
        if section:
            return section[-1]
        return earlier[0] if earlier and undefined else ("", "")

    def _record(self, position: int, step: Step, outcome: _Outcome, limit: float, answers: Path | None = None) -> None:
        what = step.label if step.check is None else "the check"
        if limit >= self.cell_timeout:
            timed_out = f"{what} timed out after {limit:g} s and was interrupted"
        else:
            timed_out = f"{what} was stopped when the notebook's time limit of {self.timeout:g} s ran out"
        exceeded = self.watch.exceeded if self.watch is not None else ""
        texts = {
            "timeout": timed_out,
            "dead": f"the kernel was stopped in {what}: {exceeded}; restarted"
            if exceeded
            else f"the kernel died in {what} (os._exit, a crash or running out of memory?) and was restarted",
            "error": f"{step.label} raised {outcome.message}",
        }
        if step.check is None:
            if outcome.status == "ok":
                self.replay.append(step)
            else:
                self.problems.append((position, outcome.status, texts[outcome.status]))
            return
        if outcome.status in ("timeout", "dead"):
            self._decide(step.check, (_RESULT_OF[outcome.status], texts[outcome.status]))
            return
        # The verdict: the recorded answers judged here, never what the kernel printed or raised.
        verdict = replay_check(step.source, answers, self.hidden_seeds) if answers else ("fail", "")
        if verdict[0] == "pass":
            self._decide(step.check, verdict)
            return
        # the check did not get to the answers (say why), or judged them wrong; either way the
        # problem just before it (a cell that failed, timed out or crashed) may explain it
        message = outcome.message if outcome.status == "error" else verdict[1]
        status, context = self._context(position, "NameError" in message)
        message = f"{context}; then {message}" if context else message
        self._decide(step.check, (_RESULT_OF.get(status, "fail"), message))


_RESULT_OF = {"timeout": "timeout", "dead": "crash"}  # a check's result after such a problem


def read_notebook(path: Path):
    """nbformat's reading plus the structure the grader relies on; raises ValueError."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook, unreadable: all one answer
        raise ValueError(f"not a valid notebook: {one_line(type(exc).__name__, str(exc))}") from exc
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(
        isinstance(c, dict) and isinstance(c.get("cell_type"), str) and isinstance(c.get("source", ""), (str, list))
        for c in cells
    ):
        raise ValueError("not a valid notebook: it has no list of cells with a type and a source")
    return notebook


def course_checks(reference: Path, assignment: str | None = None) -> tuple[list[ReferenceCheck], str]:
    """The check cells of a course notebook → (checks, "") or ([], why no submission can be graded
    against it: unreadable, no check cell, or no such `assignment`). With `assignment` (a name in
    the notebook's metadata ``onehot2gpt.assignments``), only that assignment's exercises."""
    from .student import assignments

    try:
        notebook = read_notebook(reference)
        checks = reference_checks(notebook)
        if assignment is not None:
            defined = assignments(notebook)
            if assignment not in defined:
                return [], (
                    f"reference {reference.name} has no assignment {assignment!r} (its metadata "
                    f"onehot2gpt.assignments names {sorted(defined) or 'none'})"
                )
            checks = [c for c in checks if c.name in set(defined[assignment])]
    except ValueError as exc:
        return [], f"reference {reference.name}: {exc}"
    if not checks:
        return [], f"reference {reference.name} has no cell tagged 'check'"
    return checks, ""


def run_checks(
    path: Path,
    checks: list[ReferenceCheck],
    *,
    cell_timeout: float,
    timeout: float,
    hidden_seeds=(),
    on_plan=None,
    on_verdict=None,
) -> None:
    """Run the submission at `path` in a fresh kernel with the reference `checks` in place: calls
    `on_plan(status)` once (per check ``"ok"``, ``"modified"`` or ``"missing"``), then
    `on_verdict(k, result, message)` once per check, as each is decided. Never raises for a
    broken submission: a grader failure is every undecided check's ``error``."""
    decided: set[int] = set()

    def verdict(k, result, message):
        decided.add(k)
        if on_verdict is not None:
            on_verdict(k, result, message)

    try:
        notebook = read_notebook(path)
    except ValueError as exc:
        for k in range(len(checks)):
            verdict(k, "error", str(exc))
        return
    steps, status = plan_cells(notebook, checks)
    if on_plan is not None:
        on_plan(status)
    with (
        tempfile.TemporaryDirectory(prefix="onehot2gpt-grading-") as workdir,
        tempfile.TemporaryDirectory(prefix="onehot2gpt-answers-") as answers_dir,
    ):
        run = _Run(steps, len(checks), workdir, cell_timeout, timeout, answers_dir, hidden_seeds, verdict)
        try:
            run_sync(run.run)()
        except Exception as exc:  # the kernel would not start, or a grader bug: report, go on
            run.finish("error", f"grader error: {one_line(type(exc).__name__, str(exc))}")
        finally:
            if run.client is not None:  # interrupted (Ctrl-C) or failed mid-way
                try:
                    run_sync(run.stop)()
                except Exception:
                    pass


def grade_submission(
    submission: Submission, *, cell_timeout: float = 300, timeout: float = 1800, hidden_seeds=()
) -> list[ExerciseResult]:
    """Run one submission in a fresh kernel and grade it: one ExerciseResult per check cell of
    its course notebook (one row with result ``error`` when there is no course notebook or it
    cannot be read). The checks also run on the inputs of `hidden_seeds`. Never raises for a
    broken submission. (This runs the kernel as a child of this process: :func:`grade` runs each
    submission in a process of its own.)"""
    if submission.reference is None:
        return [unknown_notebook(submission)]
    checks, why = course_checks(submission.reference)
    if not checks:
        return [file_row(submission, "error", why)]
    plan: list[list[str]] = []
    verdicts: dict[int, tuple[str, str]] = {}
    try:
        run_checks(
            submission.path,
            checks,
            cell_timeout=cell_timeout,
            timeout=timeout,
            hidden_seeds=tuple(hidden_seeds),
            on_plan=plan.append,
            on_verdict=lambda k, result, message: verdicts.setdefault(k, (result, message)),
        )
    except Exception as exc:  # a grader bug must not end the run for everyone else
        return [file_row(submission, "error", f"grader error: {one_line(type(exc).__name__, str(exc))}")]
    return build_rows(submission, checks, verdicts, plan[0] if plan else None, ("error", "grader error: no verdict"))
