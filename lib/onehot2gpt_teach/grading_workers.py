"""Grading, part 3: a class's submissions, one process each, several at a time, with a journal
to resume from (:func:`grade`). See :mod:`onehot2gpt_teach.grading`."""

from __future__ import annotations

import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import sandbox as sandboxing
from .grading_checks import (
    MESSAGE_CHARS,
    RESULTS,
    ExerciseResult,
    ReferenceCheck,
    Submission,
    build_rows,
    file_row,
    find_submissions,
    unknown_notebook,
)
from .grading_kernel import (
    course_checks,
    isolate_kernels,
    network_isolation_available,
    run_checks,
    sandbox_kernels,
    unprivileged_kernels,
)
from .reference_use import mark_reference_use

# --------------------------------------------------------------------------------------------
# A class: one process per submission, several at a time, a journal to resume from
# --------------------------------------------------------------------------------------------

WORKER_GRACE = 120  # seconds a submission's process may take beyond --timeout (start-up, replays)
MEMORY_GB = 8.0  # address space for a submission's process and its kernel (RLIMIT_AS)
JOURNAL = "results.jsonl"
CPU_MARGIN = 0.5  # CPUs a sandbox may use beyond its --jobs share of threads (ipykernel's own threads)
QUARANTINE_STARTS = 2  # a submission started this often, the grader dying each time, is not run again


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _all_rows(submission: Submission, checks: list[ReferenceCheck], result: str, message: str) -> list[ExerciseResult]:
    """Every exercise of the submission's course notebook with one result (or one file row)."""
    if not checks:
        return [file_row(submission, result, message)]
    return build_rows(submission, checks, {}, None, (result, message))


def _limit_resources(memory_gb: float | None) -> list[str]:
    """Limit this process (and the kernel it starts) to `memory_gb` of address space; → what was
    limited, for the report."""
    done = []
    try:
        import resource

        if memory_gb:
            limit = int(memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            done.append(f"{memory_gb:g} GB of memory")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # not POSIX, or the limit is above the hard one
        pass
    return done


def _die_with_parent(parent: int | None) -> None:
    """Ask Linux to SIGKILL this process when the thread that started it exits (PR_SET_PDEATHSIG,
    through ctypes), so that a grader killed with SIGKILL leaves no worker behind; exit now if
    `parent` is already gone. Elsewhere (not Linux, no libc) nothing is asked."""
    import os
    import signal

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:  # the grader died before the prctl
        os._exit(1)


def _import_checks() -> None:
    """Import every module of :mod:`onehot2gpt_exercises` (and through them the library's
    references) now, before any student code runs: a file changed on disk later is not read."""
    import importlib
    import pkgutil

    import onehot2gpt_exercises

    for module in pkgutil.walk_packages(onehot2gpt_exercises.__path__, "onehot2gpt_exercises."):
        importlib.import_module(module.name)


def run_worker(spec_path: str) -> int:
    """``python -m onehot2gpt_teach.grading --worker SPEC``: grade one submission in this process (its
    kernel a child of it) against the reference checks the spec holds, and send the grader one
    JSON line per verdict, as each is decided, on this process's standard output (a pipe only the
    grader reads; every other output of this process goes to /dev/null). The process is killed
    when the grader that started it dies (:func:`_die_with_parent`)."""
    import json
    import os
    import shutil

    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the grader's pipe, not inherited
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)

    def send(entry: dict) -> None:
        channel.write(json.dumps(entry) + "\n")
        channel.flush()

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    _die_with_parent(spec.get("parent"))
    _import_checks()
    _limit_resources(spec.get("memory_gb"))
    if spec.get("sandbox"):
        threads = spec.get("threads")
        limits = sandboxing.Limits(
            memory_gb=spec.get("memory_gb"),
            cpu_seconds=int(spec["timeout"] * (os.cpu_count() or 1)) + 600,
            cores=threads + CPU_MARGIN if threads else None,  # its share beside the other --jobs
        )
        sandbox_kernels(limits, network=spec.get("network", False))
    else:
        if not spec.get("network", True) and network_isolation_available():
            isolate_kernels()
        if os.geteuid() == 0:  # no sandbox but the platform's container: the kernel runs as nobody
            threads = spec.get("threads")
            unprivileged_kernels(
                sandboxing.Limits(memory_gb=spec.get("memory_gb"), cores=threads + CPU_MARGIN if threads else None)
            )
    home = tempfile.mkdtemp(prefix="onehot2gpt-home-")  # a private HOME for the kernel
    if os.geteuid() == 0:
        os.chown(home, sandboxing.SANDBOX_UID, -1)
    os.environ.update(
        HOME=home,
        IPYTHONDIR=str(Path(home) / ".ipython"),
        MPLCONFIGDIR=str(Path(home) / ".matplotlib"),
        **spec.get("env", {}),
    )
    checks = [
        ReferenceCheck(c["name"], c["source"], c["cell_id"], tuple(tuple(a) for a in c["anchors"]), c["points"])
        for c in spec["checks"]
    ]
    try:
        run_checks(
            Path(spec["submission"]),
            checks,
            cell_timeout=spec["cell_timeout"],
            timeout=spec["timeout"],
            hidden_seeds=spec["hidden_seeds"],
            on_plan=lambda status: send({"plan": status}),
            on_verdict=lambda k, result, message: send({"check": k, "result": result, "message": message}),
        )
        send({"done": True})
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


def read_channel(out: bytes, n_checks: int) -> tuple[list[str] | None, dict[int, tuple[str, str]], bool]:
    """What a grading process sent (:func:`run_worker`) → (the plan, {check index: (result,
    message)}, whether it said it was done), read as plain data: a line that is not one of those
    entries, an index out of range, a result not in RESULTS or a second verdict on a check is
    ignored; messages are cut to MESSAGE_CHARS."""
    import json

    plan, verdicts, done = None, {}, False
    for line in out.splitlines()[: 2 * n_checks + 8]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if "plan" in entry and plan is None:
            status = entry["plan"]
            if isinstance(status, list) and len(status) == n_checks:
                if all(state in ("ok", "modified", "missing") for state in status):
                    plan = list(status)
        elif "check" in entry:
            k, result, message = entry.get("check"), entry.get("result"), entry.get("message")
            if type(k) is int and 0 <= k < n_checks and result in RESULTS and isinstance(message, str):
                verdicts.setdefault(k, (result, message[:MESSAGE_CHARS]))
        elif entry.get("done") is True:
            done = True
    return plan, verdicts, done


class _Stopped(Exception):
    """The grader is stopping (Ctrl-C, SIGTERM): this submission's process was killed by it."""


class _Workers:
    """Starts one grading process per submission, each in a session of its own (so that a
    submission killing its process group reaches no one else), and kills what is left of it."""

    def __init__(self):
        import threading

        self.running: set = set()
        self.lock = threading.Lock()
        self.stopping = False

    def run(
        self,
        submission: Submission,
        checks: list[ReferenceCheck],
        *,
        cell_timeout: float,
        timeout: float,
        hidden_seeds,
        memory_gb: float | None,
        threads: int | None,
        network: bool = True,
        sandbox: bool = False,
    ) -> list[ExerciseResult]:
        """Grade `submission` in a process of its own → its rows, built here from `checks` (read by
        the grader before any student code ran) and the verdicts the process sent over its pipe;
        the checks it did not decide (it died, was killed or ran out of time) are ``crash`` or
        ``timeout``. Nothing the process writes elsewhere is read."""
        import json
        import os
        import signal

        from onehot2gpt.data import cache_dir

        with tempfile.TemporaryDirectory(prefix="onehot2gpt-worker-") as tmp:
            env = {"ONEHOT2GPT_CACHE": str(cache_dir())}
            if threads:
                # torch, BLAS and the tokenizers' Rust threads: the kernel keeps to its share of the CPUs
                env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
            spec = {
                "submission": str(submission.path),
                "checks": [
                    {"name": c.name, "source": c.source, "cell_id": c.cell_id, "anchors": c.anchors, "points": c.points}
                    for c in checks
                ],
                "cell_timeout": cell_timeout,
                "timeout": timeout,
                "hidden_seeds": list(hidden_seeds),
                "memory_gb": memory_gb,
                "threads": threads,
                "env": env,
                "network": network,
                "sandbox": sandbox,
                "parent": os.getpid(),
            }
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps(spec), encoding="utf-8")
            proc = subprocess.Popen(
                [sys.executable, "-m", "onehot2gpt_teach.grading", "--worker", str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            with self.lock:
                self.running.add(proc)
                if self.stopping:  # stop_all ran between the Popen and here
                    self._kill(proc)
            timed_out = False
            try:
                out, _ = proc.communicate(timeout=timeout + WORKER_GRACE)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._kill(proc)
                out, _ = proc.communicate()
            finally:
                self._kill(proc)
                with self.lock:
                    self.running.discard(proc)
        if self.stopping:  # killed by the grader's stop, not by the submission: no grade
            raise _Stopped(submission.file)
        plan, verdicts, done = read_channel(out or b"", len(checks))
        code = proc.returncode
        if timed_out:
            missing = (
                "timeout",
                f"grading this submission took longer than {timeout + WORKER_GRACE:g} s "
                f"(--timeout plus {WORKER_GRACE} s) and was stopped",
            )
        elif code == 0 and done:
            missing = ("error", "grader error: the grading process sent no verdict on this check")
        else:
            how = (
                f"was killed by signal {signal.Signals(-code).name}"
                if code is not None and code < 0
                else f"ended with exit code {code}"
            )
            missing = (
                "crash",
                f"the process grading this submission {how} before it finished this check "
                "(did the submission kill its kernel's parent, or run out of memory?)",
            )
        return build_rows(submission, checks, verdicts, plan, missing)

    def _kill(self, proc) -> None:
        """Kill the process's whole session: the grading process and its kernel."""
        import os
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def stop_all(self) -> None:
        """Start no more grading processes and kill the running ones; :meth:`run` then raises
        :class:`_Stopped` for theirs instead of reporting a crash."""
        with self.lock:
            self.stopping = True
            running = list(self.running)
        for proc in running:
            self._kill(proc)


def _journal_lines(path: Path):
    """The journal's entries as dicts, lines that are not JSON objects (a half-written last line
    of a killed run) left out."""
    import json

    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def read_journal(path: str | Path) -> tuple[tuple[int, ...] | None, dict[tuple[str, str], list[ExerciseResult]]]:
    """A journal written by :func:`grade` → (its hidden seeds, {(file, sha256): rows}) of the
    finished submissions. Lines that cannot be read (a run killed mid-write) are skipped: those
    submissions are graded again. The ``started`` and ``stopped`` lines are read by
    :func:`unfinished_starts`."""
    seeds, done = None, {}
    for entry in _journal_lines(Path(path)):
        try:
            if "hidden_seeds" in entry and "file" not in entry:
                seeds = tuple(int(x) for x in entry["hidden_seeds"])
            elif "file" in entry:  # a finished submission (the only kind of line before "started")
                done[(entry["file"], entry["sha256"])] = [ExerciseResult.from_row(r) for r in entry["rows"]]
        except (ValueError, KeyError, TypeError):
            continue
    return seeds, done


def _journal_assignment(path: Path) -> str | None:
    """The assignment a journal's grades are for (its first line; None: whole notebooks)."""
    for entry in _journal_lines(path):
        if "hidden_seeds" in entry and "file" not in entry:
            value = entry.get("assignment")
            return value if isinstance(value, str) else None
    return None


def unfinished_starts(path: str | Path) -> dict[tuple[str, str], int]:
    """{(file, sha256): n} for the submissions of a journal that were started n times since they
    last finished, the grader dying each time before it could finish or stop them (a ``stopped``
    line, written on Ctrl-C or SIGTERM, takes back the start it follows)."""
    starts: dict[tuple[str, str], int] = {}
    for entry in _journal_lines(Path(path)):
        try:
            if "started" in entry:
                key = (str(entry["started"]), str(entry["sha256"]))
                starts[key] = starts.get(key, 0) + 1
            elif "stopped" in entry:
                key = (str(entry["stopped"]), str(entry["sha256"]))
                starts[key] = max(0, starts.get(key, 0) - 1)
            elif "file" in entry and "rows" in entry:
                starts.pop((str(entry["file"]), str(entry["sha256"])), None)
        except (KeyError, TypeError):
            continue
    return {key: n for key, n in starts.items() if n}


def _append(path: Path, entry: dict) -> None:
    import json
    import os

    with path.open("a+", encoding="utf-8") as f:
        f.seek(0, 2)
        if f.tell():  # a run killed mid-line left no line break: start a new line
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                f.write("\n")
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def grade(
    submissions_dir: str | Path,
    reference_dir: str | Path = "notebooks",
    *,
    cell_timeout: float = 300,
    timeout: float = 1800,
    log=None,
    jobs: int = 1,
    hidden_seeds=None,
    journal: str | Path | None = None,
    memory_gb: float | None = MEMORY_GB,
    network: bool = False,
    on_result=None,
    sandbox: bool = True,
    assignment: str | None = None,
) -> list[ExerciseResult]:
    """Grade every notebook under `submissions_dir` against the course notebooks in
    `reference_dir` → all ExerciseResults, in submission order.

    Each submission runs in a process of its own (its kernel a child of it, in a session of its
    own, limited to `memory_gb` of memory, with a private HOME and, unless `network`, no network
    where the OS allows it (:func:`network_isolation_available`)), `jobs` at a time. A submission
    that kills its process or its kernel is reported as a ``crash``; one that outlives
    `timeout` plus :data:`WORKER_GRACE` as a ``timeout``; the run goes on. The checks also run on
    the inputs of `hidden_seeds` (default: one random seed, or the journal's). With `journal`
    (a ``.jsonl`` file), each submission is appended as ``started`` before its process starts and
    with its rows once done, and a run that finds the file takes the submissions graded before
    (same file, same contents) from it: an interrupted run resumes. Ctrl-C (KeyboardInterrupt) or
    SIGTERM (when `grade` runs in the main thread) kills the grading processes, journals the
    submissions in flight as ``stopped`` (no grade) and raises KeyboardInterrupt; a resumed run
    grades them. A submission started :data:`QUARANTINE_STARTS` times without finishing or being
    stopped (the whole grader died each time) is quarantined: not run again, reported as a
    ``crash`` whose message says so. `log(text)` hears one line per submission;
    `on_result(results)` is called with the results so far after each one.

    With `sandbox` (the default), each kernel runs in a bubblewrap sandbox of its own
    (:mod:`onehot2gpt_teach.sandbox`: read-only library and Python, no network unless `network`,
    no view of the class, limits on processes, memory and CPU); where none can be built here
    this raises :class:`~onehot2gpt_teach.sandbox.SandboxUnavailable` before grading anything.
    ``sandbox=False`` runs the kernels with your permissions. With `assignment` (a name in the
    course notebooks' metadata ``onehot2gpt.assignments``, see :mod:`onehot2gpt_teach.student`)
    only that assignment's exercises are graded; a course notebook with submissions that does not
    define it raises ValueError before anything runs."""
    import concurrent.futures
    import os

    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number ≥ 1, got {jobs!r}")
    if sandbox:
        ok, why = sandboxing.available()
        if not ok:
            raise sandboxing.SandboxUnavailable(
                f"no sandbox for the submissions' kernels: {why}. Student code would run with your "
                "permissions; to grade anyway, pass --no-sandbox (grade(..., sandbox=False))"
            )
    submissions = find_submissions(submissions_dir, reference_dir)
    # the course notebooks' checks, read once, before any student code runs: rows are built from these
    course = {s.reference: course_checks(s.reference, assignment) for s in submissions if s.reference is not None}
    if assignment is not None:
        lacking = sorted(ref.name for ref, (checks, _) in course.items() if not checks)
        if lacking:
            raise ValueError(
                f"assignment {assignment!r} is not defined in {', '.join(lacking)}: add it to the metadata "
                "onehot2gpt.assignments of those course notebooks, or grade their submissions without --assignment"
            )
    done: dict = {}
    starts: dict = {}
    if journal is not None:
        journal = Path(journal)
        recorded, done = read_journal(journal)
        starts = unfinished_starts(journal)
        graded_for = _journal_assignment(journal)
        if done and graded_for != assignment:
            raise ValueError(
                f"{journal} holds grades of {f'assignment {graded_for!r}' if graded_for else 'the whole notebooks'}: "
                f"grade with {f'--assignment {graded_for}' if graded_for else 'no --assignment'}, or with --fresh to start afresh"
            )
        if hidden_seeds is None:
            hidden_seeds = recorded
        elif recorded is not None and done and tuple(hidden_seeds) != recorded:
            raise ValueError(
                f"{journal} holds grades made with other hidden seeds {list(recorded)}: "
                f"grade with the same --hidden-seed, or delete the file to start afresh"
            )
    if hidden_seeds is None:
        hidden_seeds = (secrets.randbelow(2**31 - 2) + 1,)
    hidden_seeds = tuple(int(x) for x in hidden_seeds)
    if journal is not None and not journal.exists():
        journal.parent.mkdir(parents=True, exist_ok=True)
        _append(journal, {"hidden_seeds": list(hidden_seeds), "assignment": assignment})
    threads = max(1, (os.cpu_count() or 1) // jobs)
    results: dict[int, list[ExerciseResult]] = {}
    todo = []
    for i, submission in enumerate(submissions):
        key = (submission.file, _sha256(submission.path))
        if key in done:
            results[i] = done[key]
            if log:
                log(f"{submission.file}: graded before ({journal.name}), not run again")
        elif starts.get(key, 0) >= QUARANTINE_STARTS:
            n = starts[key]
            results[i] = _all_rows(
                submission,
                course.get(submission.reference, ([], ""))[0],
                "crash",
                f"quarantined: grading this notebook was started {n} times and each time the whole "
                "grader died before it finished, so it was not run again; it needs a look by hand",
            )
            _append(journal, {"file": key[0], "sha256": key[1], "rows": [r.row() for r in results[i]]})
            if log:
                log(
                    f"{submission.file}: QUARANTINED, not run: started {n} times in {journal.name}, the grader "
                    "dying each time before it finished (delete its lines there to grade it again)"
                )
        else:
            todo.append((i, submission, key))
    workers = _Workers()
    import signal
    import threading

    lock = threading.Lock()
    in_flight: set = set()

    def one(item):
        i, submission, key = item
        start = time.monotonic()
        with lock:
            if workers.stopping:
                return
            in_flight.add(key)
            if journal is not None:
                _append(journal, {"started": key[0], "sha256": key[1]})
        checks, why = course.get(submission.reference, ([], ""))
        try:
            if submission.reference is None:
                rows = [unknown_notebook(submission)]
            elif not checks:
                rows = [file_row(submission, "error", why)]
            else:
                rows = workers.run(
                    submission,
                    checks,
                    cell_timeout=cell_timeout,
                    timeout=timeout,
                    hidden_seeds=hidden_seeds,
                    memory_gb=memory_gb,
                    threads=threads,
                    network=network,
                    sandbox=sandbox,
                )
        except _Stopped:
            return  # journaled as stopped by the main thread: graded on resume
        rows = mark_reference_use(submission, rows)  # from the source, here: no kernel's word
        with lock:
            if workers.stopping:
                return
            in_flight.discard(key)
            results[i] = rows
            if journal is not None:
                _append(journal, {"file": key[0], "sha256": key[1], "rows": [r.row() for r in rows]})
            if log:
                passed = sum(r.result == "pass" for r in rows)
                total = sum(1 for r in rows if r.exercise)
                summary = f"{passed}/{total} passed" if total else f"{rows[0].result}: {rows[0].message}"
                log(f"{submission.file}: {summary} ({time.monotonic() - start:.1f} s)")
            if on_result:
                on_result([r for k in sorted(results) for r in results[k]])

    def terminate(signum, frame):
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    installed = threading.current_thread() is threading.main_thread()
    if installed:
        previous = signal.signal(signal.SIGTERM, terminate)  # SIGTERM stops like Ctrl-C
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    except BaseException:  # Ctrl-C, SIGTERM: stop every grading process, keep the journal
        with lock:  # from here no thread journals a grade, and none starts a process
            workers.stopping = True
            if journal is not None:
                for key in sorted(in_flight):
                    _append(journal, {"stopped": key[0], "sha256": key[1]})
        workers.stop_all()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)
    pool.shutdown()
    return [r for i in sorted(results) for r in results[i]]
