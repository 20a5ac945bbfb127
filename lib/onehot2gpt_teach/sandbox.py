"""A sandbox for one submission's code, built from bubblewrap (``bwrap``, Debian's ``bubblewrap``).

:func:`popen` starts a command inside a fresh sandbox:

- **File system.** A root of its own holding only: the system folders (``/usr``, ``/etc`` and the
  ``/bin``, ``/lib*``, ``/sbin`` links or folders), this Python (``sys.prefix``,
  ``sys.base_prefix`` and the folders a fresh ``python -I`` imports from, such as a ``.pth``
  file's), the course library (the folder holding ``onehot2gpt``), the data mirror,
  cache and checkpoints named by the environment, and the `read_only` paths (the reference
  notebooks) — all read-only. ``/tmp`` is a private tmpfs of ``limits.file_mb`` MiB holding HOME
  (``/tmp/home``) and the working folder (``/tmp/work``, the current folder), which holds only a
  copy of the submission, when one is given. Nothing the sandbox writes reaches the host's disk but in the
  `writable` folders a caller names (the grader: its kernel's sockets folder): results come back
  over a channel the caller opens (stdout, a pipe passed in `pass_fds`, which bwrap keeps, or
  that folder, whose contents the caller must treat as hostile data).
- **Namespaces.** New user, PID, network, IPC, UTS and cgroup namespaces; no further user
  namespaces inside (``--disable-userns``); ``--new-session``; ``--die-with-parent``. The
  sandbox's ``/proc`` shows only its own processes, it has no network but its own loopback, and
  it sees no host path that is not listed above (no class folder, output folder, ``/run``,
  ``/home``, or Unix socket; abstract Unix sockets belong to the network namespace).
- **Environment.** Cleared; then :data:`ALLOWED_ENV` copied from ours where set, ``PATH``,
  ``HOME``, ``TMPDIR``, ``MPLCONFIGDIR``, ``IPYTHONDIR`` and ``PYTHONDONTWRITEBYTECODE`` set by
  this module, and the caller's `env`.
- **Identity.** Run as root, a launcher stages the bound paths in a private mount namespace
  (so that paths under a private ``/root`` can be bound) and starts bwrap as the unprivileged
  :data:`SANDBOX_UID` (``nobody``); run as another user, bwrap runs as that user. Either way the
  sandbox's processes belong to a user other than root, which is what makes ``RLIMIT_NPROC``
  apply (the kernel exempts root).
- **Limits** (:class:`Limits`), set inside the sandbox's user namespace just before the command
  starts, so they are inherited by every process it forks: ``RLIMIT_NPROC`` (tasks, threads
  included, of the sandbox's user *in its own user namespace*: a count per sandbox, which a
  fork cannot escape), ``RLIMIT_AS`` per process, ``RLIMIT_CPU`` per process, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE`` and ``RLIMIT_CORE`` 0. These alone bound the whole tree's memory by
  ``processes × memory_gb``; :class:`Watch` (which the grader runs on every kernel) bounds the
  tree's memory together by ``memory_gb`` and what it writes to the `writable` folders by
  ``file_mb``, by looking ten times a second and killing the whole tree when over. cgroups are
  not used (this module creates or joins none: they are not delegated everywhere, cgroups v1
  here), so a burst between two looks can overshoot (``tests/test_sandbox.py`` measures both
  bounds).

:func:`available` says whether all this works here, and why not. ``tests/test_sandbox.py``
attacks each promise above, and runs each probe without the sandbox to show it can fail.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALLOWED_ENV",
    "LAUNCHER_PRELUDE",
    "SANDBOX_UID",
    "Limits",
    "SandboxUnavailable",
    "Watch",
    "available",
    "command",
    "popen",
    "process_tree",
    "read_only_paths",
]

SANDBOX_UID = 65534  # "nobody": the user bwrap runs as when the grader runs as root
ALLOWED_ENV = (
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "ONEHOT2GPT_DATA_MIRROR",
    "ONEHOT2GPT_CACHE",
    "ONEHOT2GPT_CHECKPOINTS",
    "ONEHOT2GPT_REGISTRY",
    "ONEHOT2GPT_DEVICE",
)
_PATH_ENV = ("ONEHOT2GPT_DATA_MIRROR", "ONEHOT2GPT_CACHE", "ONEHOT2GPT_CHECKPOINTS", "ONEHOT2GPT_REGISTRY")
_SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
TMP, HOME, WORK = "/tmp", "/tmp/home", "/tmp/work"
_STAGE = "/tmp/onehot2gpt-stage"  # in the root launcher's private mount namespace only
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
    "or grade with --no-sandbox to run submissions with your own permissions"
)


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot create its namespaces here; the message says which and what to do."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (see the module's docstring for what each bounds).

    `processes` counts threads too (ipykernel runs about ten, torch one per OMP thread)."""

    memory_gb: float | None = 8.0  # RLIMIT_AS, per process (None: not limited)
    processes: int = 128  # RLIMIT_NPROC, the sandbox's tasks together
    cpu_seconds: int = 3600  # RLIMIT_CPU, per process
    file_mb: int = 1024  # RLIMIT_FSIZE, and the size of the sandbox's tmpfs
    open_files: int = 1024  # RLIMIT_NOFILE, per process
    cores: float | None = None  # the tree's share of the CPUs over CPU_WINDOW seconds (Watch; None: any)

    def __post_init__(self):
        for name, low in (
            ("memory_gb", 0.01),
            ("processes", 2),
            ("cpu_seconds", 1),
            ("file_mb", 1),
            ("open_files", 16),
            ("cores", 0.1),
        ):
            value = getattr(self, name)
            if name in ("memory_gb", "cores") and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
                raise ValueError(f"Limits({name}={value!r}): must be a number ≥ {low}; pass a larger {name}")
        for name in ("processes", "cpu_seconds", "file_mb", "open_files"):
            if not isinstance(getattr(self, name), int):
                raise ValueError(f"Limits({name}={getattr(self, name)!r}): must be a whole number")

    def rlimits(self) -> dict[str, int]:
        """{resource name: limit} as set inside the sandbox."""
        limits = {
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_mb * 2**20,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_CORE": 0,
        }
        if self.memory_gb is not None:
            limits["RLIMIT_AS"] = int(self.memory_gb * 2**30)
        return limits


# Runs inside the sandbox (as the sandbox's user, in its user namespace): set the limits, then
# become the command. Soft and hard limits alike, so the command cannot raise them again.
_SET_LIMITS = """
import os, resource, sys
for name, value in __import__("json").loads(sys.argv[1]).items():
    kind = getattr(resource, name)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))
os.execvp(sys.argv[2], sys.argv[2:])
"""

# What both root launchers share (this module's, before bwrap; the grader's, before a kernel
# started without bwrap, onehot2gpt_teach.grading_kernel): the spec from argv[1], libc, a private
# mount namespace, binding an open path somewhere, becoming another user. (No curly brackets in
# this code: jupyter_client fills such templates into a kernel's command line.)
LAUNCHER_PRELUDE = """
import ctypes, json, os, resource, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def ok(ret, what):
    if ret != 0:
        sys.exit("onehot2gpt launcher: %s: %s" % (what, os.strerror(ctypes.get_errno())))
def private_mounts():
    ok(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    ok(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "making / private")
def bind(fd, target):
    source = "/proc/self/fd/%d" % fd
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        open(target, "a").close()
    ok(libc.mount(source.encode(), target.encode(), None, 0x1000 | 0x4000, None), "binding " + target)
    os.close(fd)
def become(uid):
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
"""

# Runs as root before bwrap (see the module's docstring): bind each host path into a private
# tmpfs that the unprivileged user can traverse, then drop to that user and exec bwrap.
_ROOT_LAUNCHER = (
    LAUNCHER_PRELUDE
    + """
private_mounts()
fds = [os.open(p, os.O_PATH) for p in spec["sources"]]  # in this namespace, before /tmp is covered
ok(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0x2 | 0x4, b"mode=0755,size=1m"), "a tmpfs on /tmp")
os.mkdir(spec["stage"], 0o755)
for i, fd in enumerate(fds):
    bind(fd, os.path.join(spec["stage"], str(i)))
become(spec["uid"])
os.execvp(spec["argv"][0], spec["argv"])
"""
)


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _library_roots() -> list[Path]:
    """The folders that hold the course's packages (lib/ in a clone; site-packages otherwise)."""
    roots = []
    for name in ("onehot2gpt", "onehot2gpt_teach", "onehot2gpt_exercises"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            roots.append(Path(spec.origin).resolve().parent.parent)
    return roots


@functools.lru_cache(maxsize=1)
def _python_paths() -> tuple[Path, ...]:
    """The folders this Python imports from in a fresh isolated run (``python -I``): the standard
    library, site-packages and what their ``.pth`` files add; not the current folder, PYTHONPATH
    or the user's site-packages."""
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        paths = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    return tuple(Path(p).resolve() for p in paths if p and os.path.isdir(p) and Path(p).resolve() != Path("/"))


def read_only_paths(extra) -> list[Path]:
    """Every host path the sandbox sees, read-only: outermost first, none inside another."""
    paths = [Path(p) for p in _SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    paths += [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), *_python_paths(), *_library_roots()]
    paths += [Path(os.environ[k]).resolve() for k in _PATH_ENV if os.environ.get(k) and Path(os.environ[k]).exists()]
    for p in extra:
        path = Path(p)
        if not path.exists():
            raise ValueError(f"read_only path {str(p)!r} does not exist; pass existing files or folders")
        paths.append(path.resolve())
    out: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if path == Path("/"):
            raise ValueError("read_only path '/' would show the sandbox the whole host; pass the folders it needs")
        if not any(path.is_relative_to(kept) for kept in out):
            out.append(path)
    return out


def _environment(env) -> dict[str, str]:
    out = {k: os.environ[k] for k in ALLOWED_ENV if k in os.environ}
    out.update(
        PATH=f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        HOME=HOME,
        TMPDIR=TMP,
        MPLCONFIGDIR=f"{HOME}/.matplotlib",
        IPYTHONDIR=f"{HOME}/.ipython",
        PYTHONDONTWRITEBYTECODE="1",
    )
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key:
            raise ValueError(f"env entry {key!r}: {value!r}: names and values must be strings (names without '=')")
        out[key] = value
    return out


def command(
    argv,
    *,
    submission_fd: int | None = None,
    submission_name: str = "submission.ipynb",
    read_only=(),
    writable=(),
    env=None,
    limits: Limits = Limits(),
    network: bool = False,
) -> list[str]:
    """The full command line that runs `argv` in a sandbox (see the module's docstring); run it
    with ``pass_fds`` holding `submission_fd` and the caller's channel. Most callers want
    :func:`popen`, which opens the submission and passes the descriptors.

    `writable` folders are bound read-write at the same path (a kernel's sockets folder: the
    sandbox may put anything there, so the caller trusts nothing it finds in them); as root they
    are given to :data:`SANDBOX_UID`. `network` keeps the host's network (``--share-net``)."""
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv {argv!r}: pass a non-empty list of strings (the command and its arguments)")
    if not isinstance(limits, Limits):
        raise ValueError(f"limits {limits!r}: pass a sandbox.Limits(...)")
    if "/" in submission_name or submission_name in ("", ".", ".."):
        raise ValueError(f"submission_name {submission_name!r}: pass a plain file name")
    bwrap = _bwrap()
    if bwrap is None:
        raise SandboxUnavailable(f"bwrap is not on PATH: {INSTALL_HINT}")
    as_root = os.geteuid() == 0
    sources = read_only_paths(read_only)
    shared = []
    for p in writable:
        path = Path(p)
        if not path.is_dir() or path.resolve() == Path("/"):
            raise ValueError(f"writable path {str(p)!r} is not a folder; pass an existing folder made for the sandbox")
        shared.append(path.resolve())
        if as_root:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    args += ["--share-net"] if network else []
    args += ["--hostname", "sandbox", "--dev", "/dev", "--proc", "/proc"]
    args += ["--size", str(limits.file_mb * 2**20), "--tmpfs", TMP, "--dir", HOME, "--dir", WORK]
    for i, path in enumerate(sources + shared):  # after the tmpfs, which would hide those under /tmp
        bind = "--ro-bind" if i < len(sources) else "--bind"
        args += [bind, f"{_STAGE}/{i}" if as_root else str(path), str(path)]
    for link in _SYSTEM:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
    if submission_fd is not None:
        args += ["--perms", "0644", "--file", str(submission_fd), f"{WORK}/{submission_name}"]
    args += ["--remount-ro", "/", "--chdir", WORK, "--clearenv"]
    for key, value in _environment(env).items():
        args += ["--setenv", key, value]
    inner = [sys.executable, "-I", "-S", "-c", _SET_LIMITS, json.dumps(limits.rlimits())]
    args += ["--", *inner, *argv]
    if not as_root:
        return args
    spec = {"sources": [str(p) for p in sources + shared], "stage": _STAGE, "uid": SANDBOX_UID, "argv": args}
    return [sys.executable, "-I", "-S", "-c", _ROOT_LAUNCHER, json.dumps(spec)]


def popen(
    argv,
    *,
    submission: str | Path | None = None,
    read_only=(),
    writable=(),
    env=None,
    limits: Limits = Limits(),
    network: bool = False,
    pass_fds=(),
    **kwargs,
) -> subprocess.Popen:
    """Start `argv` in a fresh sandbox holding a copy of `submission` (in its working folder,
    under the same name) → the Popen of bwrap. `read_only` adds host paths the sandbox may read
    (the reference notebooks); `writable`, `network` and `env` are :func:`command`'s; `pass_fds` are the caller's
    channel (say the write end of a pipe); other keyword arguments go to :class:`subprocess.Popen`
    (``stdout=subprocess.PIPE``, ``start_new_session=True``…). Killing that process (SIGKILL
    included) ends every process of the sandbox; so does the end of the thread that called this
    (``--die-with-parent``), so call it from a thread that outlives the sandbox. Raises
    :class:`SandboxUnavailable` when bwrap is missing."""
    fd = None
    name = "submission.ipynb"
    if submission is not None:
        path = Path(submission)
        if not path.is_file():
            raise ValueError(f"submission {str(submission)!r} is not a file; pass the submitted notebook's path")
        fd, name = os.open(path, os.O_RDONLY), path.name
    try:
        args = command(
            argv,
            submission_fd=fd,
            submission_name=name,
            read_only=read_only,
            writable=writable,
            env=env,
            limits=limits,
            network=network,
        )
        fds = (*pass_fds, *(() if fd is None else (fd,)))
        kwargs.setdefault("env", {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return subprocess.Popen(args, pass_fds=fds, **kwargs)
    finally:
        if fd is not None:
            os.close(fd)


def _children() -> dict[int, list[int]]:
    """{pid: its children's pids}, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    return children


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (an orphan of the sandbox is adopted by the sandbox's
    first process, so it stays below bwrap)."""
    children, found, todo = _children(), [pid], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _memory(pid: int) -> int:
    """Bytes of memory `pid` holds: its proportional set size (shared pages divided among the
    processes sharing them, so a fork's copy-on-write pages count once), else its resident size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds `pid` has used (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


CPU_WINDOW = 5.0  # seconds over which a tree's CPU use is compared with Limits.cores


def _disk(folders) -> int:
    total = 0
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    pass
    return total


class Watch:
    """Bounds for a sandbox's whole process tree, which a fork cannot multiply: a thread that, every
    `interval` seconds while the process `pid` lives, sums the memory of every process below it
    (:func:`_memory`) and the bytes in its `writable` folders, and SIGKILLs the whole tree when the
    sum passes ``limits.memory_gb`` or ``limits.file_mb``, or when the tree has used more than
    ``limits.cores`` CPUs on average over the last :data:`CPU_WINDOW` seconds (a fork bomb
    spinning at the process limit would otherwise starve the submissions graded beside it).
    :attr:`exceeded` then says what happened, in a sentence for the report. Between two looks a
    tree may overshoot by what it allocates in `interval` (each process stays under ``RLIMIT_AS``
    meanwhile)."""

    def __init__(self, pid: int, limits: Limits, writable=(), interval: float = 0.1):
        import threading

        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            raise ValueError(f"pid {pid!r}: pass the process id of the sandbox's first process")
        if not isinstance(limits, Limits):
            raise ValueError(f"limits {limits!r}: pass a sandbox.Limits(...)")
        self.pid, self.limits, self.writable, self.interval = pid, limits, [str(w) for w in writable], interval
        self.exceeded = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sandbox-watch-{pid}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat", encoding="utf-8", errors="replace") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    def _kill(self, tree: list[int]) -> None:
        import signal

        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _cpu(self, tree: list[int], seen: dict[int, float], history: list) -> str:
        """Add this look's CPU time of the tree to `history`; → why the tree is over its share, or ""."""
        import time

        spent = 0.0
        for pid in tree:
            now = _cpu_seconds(pid)
            spent += max(0.0, now - seen.get(pid, 0.0 if history else now))  # the first look: a baseline
            seen[pid] = now
        when = time.monotonic()
        total = (history[-1][1] if history else 0.0) + spent
        history.append((when, total))
        while history and when - history[0][0] > CPU_WINDOW:
            history.pop(0)
        span = when - history[0][0]
        if self.limits.cores is None or span < 0.8 * CPU_WINDOW:
            return ""
        used = (total - history[0][1]) / span
        if used <= self.limits.cores:
            return ""
        return (
            f"its {len(tree)} processes used {used:.1f} CPUs for {span:.0f} s, over this submission's share "
            f"of {self.limits.cores:g}, and were stopped"
        )

    def _run(self) -> None:
        memory = None if self.limits.memory_gb is None else self.limits.memory_gb * 2**30
        disk = self.limits.file_mb * 2**20
        seen: dict[int, float] = {}
        history: list[tuple[float, float]] = []
        while not self._stop.wait(self.interval) and self._alive():
            tree = process_tree(self.pid)
            if cpu := self._cpu(tree, seen, history):
                self.exceeded = cpu
            used = sum(_memory(pid) for pid in tree) if memory is not None else 0
            if self.exceeded:
                pass
            elif memory is not None and used > memory:
                self.exceeded = (
                    f"its {len(tree)} processes held {used / 2**30:.1f} GB of memory together, over the "
                    f"limit of {self.limits.memory_gb:g} GB, and were stopped"
                )
            elif self.writable and (written := _disk(self.writable)) > disk:
                self.exceeded = (
                    f"it wrote {written / 2**20:.0f} MiB, over the limit of {self.limits.file_mb} MiB, and was stopped"
                )
            if self.exceeded:
                self._kill(tree)
                return


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(True, "") when a sandbox starts here, else (False, why and what to do). Cached."""
    if _bwrap() is None:
        return False, f"bwrap is not on PATH: {INSTALL_HINT}"
    try:
        proc = popen(["true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bwrap did not start: {exc}"
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return False, (
            f"bwrap cannot build a sandbox here ({why[0]}); user namespaces may be disabled "
            "(sysctl kernel.unprivileged_userns_clone=1, or user.max_user_namespaces > 0)"
        )
    return True, ""
