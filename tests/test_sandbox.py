"""The grader's sandbox (onehot2gpt_teach.sandbox), attacked with real bwrap: each test runs a
probe inside a sandbox and the same probe without one, which must show the opposite (so each
test can fail). Without bwrap the module is skipped, except under CI=true, where it fails."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from onehot2gpt_teach import sandbox

OK, WHY = sandbox.available()
if not OK:
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        raise RuntimeError(f"tests/test_sandbox.py needs bubblewrap under CI: {WHY}")
    pytest.skip(f"no sandbox here: {WHY}", allow_module_level=True)

LIBRARY = Path(sandbox.__file__).resolve().parents[1] / "onehot2gpt"
SITE = next(Path(sys.prefix).glob("lib/python3*/site-packages"))


def probe(code: str, *, sandboxed: bool = True, timeout: float = 60, **kwargs) -> dict:
    """Run `code` (which prints one JSON line last) in a sandbox, or as a plain child → that JSON."""
    argv = [sys.executable if not sandboxed else "python", "-c", textwrap.dedent(code)]
    options = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sandboxed:
        proc = sandbox.popen(argv, **options, **kwargs)
    else:
        cwd = kwargs.pop("cwd", None)
        proc = subprocess.Popen(argv, cwd=cwd, **options)
    out, err = proc.communicate(timeout=timeout)
    assert out.strip(), f"probe printed nothing (exit {proc.returncode}): {err[-2000:]}"
    return json.loads(out.strip().splitlines()[-1])


def host_pids_with(token: str) -> list[int]:
    """Processes on the host whose command line holds `token`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def gone(token: str, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not host_pids_with(token):
            return True
        time.sleep(0.1)
    return False


def test_no_network_but_own_loopback():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    code = f"""
    import json, socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=5).close(); reached = True
    except OSError:
        reached = False
    print(json.dumps({{"reached": reached, "interfaces": [n for _, n in socket.if_nameindex()]}}))
    """
    try:
        inside, outside = probe(code), probe(code, sandboxed=False)
        shared = probe(code, network=True)  # the grader's --network
    finally:
        server.close()
    assert outside["reached"] and not inside["reached"] and shared["reached"]
    assert inside["interfaces"] == ["lo"] and outside["interfaces"] != ["lo"]


def test_host_processes_are_invisible():
    token = secrets.token_hex(8)
    marker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", token])
    code = f"""
    import json, os
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    seen = []
    for p in pids:
        try:
            seen.append("{token[::-1]}"[::-1] in open(f"/proc/{{p}}/cmdline").read())
        except OSError:
            pass
    print(json.dumps({{"pids": len(pids), "marker": any(seen)}}))
    """
    try:
        inside, outside = probe(code), probe(code, sandboxed=False)
    finally:
        marker.kill()
        marker.wait()
    assert outside["marker"] and not inside["marker"]
    assert inside["pids"] <= 4 < outside["pids"]  # bwrap's init, the limits launcher become the probe


WRITE = """
import json, os, sys
def attempt(path):
    try:
        if os.path.isdir(path):  # a new file in the folder (a .pth in site-packages, say)
            new = os.path.join(path, "zz_sandbox_probe.pth")
            open(new, "x").close()
            os.remove(new)
        else:
            open(path, "a").close()  # opened for writing, nothing written
        return "written"
    except OSError as exc:
        return type(exc).__name__
print(json.dumps({p: attempt(p) for p in sys.argv[1:]}))
"""


def test_library_venv_and_reference_are_read_only(tmp_path):
    reference = tmp_path / "notebooks"
    reference.mkdir()
    (reference / "01_onehot.ipynb").write_text("{}")
    targets = [
        str(LIBRARY / "__init__.py"),
        str(LIBRARY),
        str(SITE),
        str(reference),
        str(reference / "01_onehot.ipynb"),
    ]
    before = {p: Path(p).stat().st_mtime_ns for p in targets}
    proc = sandbox.popen(
        ["python", "-c", WRITE, *targets], read_only=[reference], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate(timeout=60)
    inside = json.loads(out)
    assert all(v in ("OSError", "PermissionError") for v in inside.values()), (inside, err)
    assert {p: Path(p).stat().st_mtime_ns for p in targets} == before
    # the same probe, run without the sandbox, writes the reference folder
    outside = json.loads(subprocess.run([sys.executable, "-c", WRITE, str(reference)], capture_output=True).stdout)
    assert outside == {str(reference): "written"}


def test_classmates_and_output_folder_are_out_of_sight(tmp_path):
    for student in ("alice", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / "01_onehot.ipynb").write_text(f'{{"by": "{student}"}}')
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "grades.csv").write_text("alice,4\n")
    code = f"""
    import json, os
    def read(path):
        try:
            return open(path).read()
        except OSError as exc:
            return type(exc).__name__
    print(json.dumps({{
        "classmate": read("{tmp_path}/class/alice/01_onehot.ipynb"),
        "output": read("{tmp_path}/out/grades.csv"),
        "here": sorted(os.listdir(".")),
        "own": read("01_onehot.ipynb"),
    }}))
    """
    inside = probe(code, submission=tmp_path / "class" / "bob" / "01_onehot.ipynb")
    outside = probe(code, sandboxed=False, cwd=tmp_path / "class" / "bob")
    assert inside == {
        "classmate": "FileNotFoundError",
        "output": "FileNotFoundError",
        "here": ["01_onehot.ipynb"],
        "own": '{"by": "bob"}',
    }
    assert outside["classmate"] == '{"by": "alice"}' and outside["output"] == "alice,4\n"


def test_unix_sockets_outside_are_unreachable(tmp_path):
    path = str(tmp_path / "grader.sock")
    abstract = "\0onehot2gpt-test-" + secrets.token_hex(6)
    servers = []
    for address in (path, abstract):
        server = socket.socket(socket.AF_UNIX)
        server.bind(address)
        server.listen()
        servers.append(server)
    code = f"""
    import json, socket
    def reach(address):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(address); return True
        except OSError:
            return False
    print(json.dumps([reach({path!r}), reach({abstract!r})]))
    """
    try:
        inside, outside = probe(code), probe(code, sandboxed=False)
    finally:
        for server in servers:
            server.close()
    assert outside == [True, True] and inside == [False, False]


def test_environment_is_an_allow_list(monkeypatch):
    secret = secrets.token_hex(8)
    monkeypatch.setenv("ONEHOT2GPT_LECTURER_SECRET", secret)
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    inside, outside = probe(code), probe(code, sandboxed=False)
    assert secret in outside.values() and secret not in inside.values()
    own = {"PATH", "HOME", "TMPDIR", "MPLCONFIGDIR", "IPYTHONDIR", "PYTHONDONTWRITEBYTECODE", "PWD"}
    assert set(inside) <= own | set(sandbox.ALLOWED_ENV), set(inside) - own - set(sandbox.ALLOWED_ENV)


def test_home_and_tmp_are_private():
    token = secrets.token_hex(8)
    host_file = Path("/tmp") / f"onehot2gpt-host-{token}"
    host_file.write_text("lecturer")
    code = f"""
    import json, os
    open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "onehot2gpt-inside-{token}"), "w").write("x")
    print(json.dumps({{"host_file": os.path.exists("{host_file}"), "home": os.listdir(os.path.expanduser("~"))}}))
    """
    try:
        inside, outside = probe(code), probe(code, sandboxed=False)
    finally:
        host_file.unlink()
        Path(f"/tmp/onehot2gpt-inside-{token}").unlink(missing_ok=True)
    assert outside["host_file"] and not inside["host_file"]
    assert inside["home"] == []


def test_channel_is_an_inherited_pipe():
    read, write = os.pipe()
    proc = sandbox.popen(["python", "-c", f"import os; os.write({write}, b'rows')"], pass_fds=[write])
    os.close(write)
    with os.fdopen(read, "rb") as channel:
        assert channel.read() == b"rows"
    assert proc.wait(timeout=60) == 0


ESCAPE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "{token}"], start_new_session=True)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sandboxed", [True, False])
def test_escaped_session_dies_with_the_sandbox(sandboxed):
    token = secrets.token_hex(8)
    argv = ["python" if sandboxed else sys.executable, "-c", ESCAPE.format(token=token)]
    start = sandbox.popen if sandboxed else subprocess.Popen
    proc = start(argv, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        assert host_pids_with(token), "the probe's escaped process was not found on the host"
        proc.kill()  # SIGKILL: nothing of the parent runs after it
        proc.wait()
        assert gone(token, within=10 if sandboxed else 2) == sandboxed
    finally:
        for pid in host_pids_with(token):  # only the unsandboxed probe leaves one: ours to end
            os.kill(pid, signal.SIGKILL)


def test_escaped_session_dies_with_the_grader():
    """SIGKILL of the process that started the sandbox (the grader) ends it (--die-with-parent)."""
    token = secrets.token_hex(8)
    runner = f"""
    import subprocess, sys
    from onehot2gpt_teach import sandbox
    proc = sandbox.popen(["python", "-c", {ESCAPE.format(token=token)!r}], stdout=sys.stdout)
    proc.wait()
    """
    grader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(runner)], stdout=subprocess.PIPE)
    try:
        assert grader.stdout.readline().strip() == b"ready"
        assert host_pids_with(token)
        grader.kill()
        grader.wait()
        assert gone(token)
    finally:
        for pid in host_pids_with(token):
            os.kill(pid, signal.SIGKILL)


FORKS = """
import json, os
read, write = os.pipe()
children, error = [], ""
for _ in range({n}):
    try:
        pid = os.fork()
    except OSError as exc:
        error = type(exc).__name__
        break
    if pid == 0:
        os.close(write)
        os.read(read, 1)  # wait for the parent to let go
        os._exit(0)
    children.append(pid)
os.close(write)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({{"forked": len(children), "error": error}}))
"""


def test_fork_bomb_is_stopped_by_the_process_limit():
    n, limits = 40, sandbox.Limits(processes=10)
    inside = probe(FORKS.format(n=n), limits=limits)
    outside = probe(FORKS.format(n=n), sandboxed=False)
    assert outside == {"forked": n, "error": ""}
    assert inside["error"] == "BlockingIOError" and inside["forked"] < limits.processes


MEMORY = """
import json, os
def allocate(mb):
    try:
        block = bytearray(mb * 2**20)
        block[:: 4096] = b"x" * len(block[:: 4096])  # touched, not just reserved
        return True
    except MemoryError:
        return False
big = allocate({big})
read, write = os.pipe()
children = []
for _ in range({n}):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.write(write, b"1" if allocate({each}) else b"0")
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
os.close(write)
got = os.read(read, 4096)
print(json.dumps({{"big": big, "allocated": got.count(b"1")}}))
"""


def test_memory_over_forks_is_bounded_by_processes_times_memory():
    """The documented bound with rlimits alone: each process ≤ memory_gb, the tree ≤ processes ×
    memory_gb (not memory_gb: the gap cgroups would close)."""
    limits = sandbox.Limits(memory_gb=0.125, processes=6)
    code = MEMORY.format(big=256, each=48, n=12)
    inside, outside = probe(code, limits=limits), probe(code, sandboxed=False)
    assert outside == {"big": True, "allocated": 12}
    assert not inside["big"]
    assert 1 <= inside["allocated"] < limits.processes
    assert inside["allocated"] * 48 <= limits.processes * limits.memory_gb * 1024


def test_bad_arguments_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="argv"):
        sandbox.command("python -c 1")
    with pytest.raises(ValueError, match="processes"):
        sandbox.Limits(processes=0)
    with pytest.raises(ValueError, match="does not exist"):
        sandbox.command(["true"], read_only=[tmp_path / "missing"])
    with pytest.raises(ValueError, match="submission"):
        sandbox.popen(["true"], submission=tmp_path)
    with pytest.raises(ValueError, match="env entry"):
        sandbox.command(["true"], env={"A": 1})


def test_missing_bwrap_is_named(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.command(["true"])


def test_no_further_user_namespaces():
    """A new user namespace inside would start a fresh process count (--disable-userns)."""
    code = "import json, subprocess; print(json.dumps(subprocess.run(['unshare', '--user', 'true']).returncode))"
    assert probe(code, sandboxed=False) == 0 and probe(code) != 0


def test_a_writable_folder_is_the_only_host_folder_written(tmp_path):
    shared = tmp_path / "sockets"
    shared.mkdir()
    code = "import sys\nfor folder in sys.argv[1:]:\n    open(folder + '/planted', 'w').write('x')"
    proc = sandbox.popen(["python", "-c", code, str(shared), str(tmp_path)], writable=[shared])
    assert proc.wait(timeout=60) == 0  # the second write lands in the sandbox's own tmpfs
    assert (shared / "planted").exists() and not (tmp_path / "planted").exists()
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)  # unsandboxed: it lands
    assert (tmp_path / "planted").exists()


def test_the_grader_refuses_without_a_sandbox(tmp_path, monkeypatch, capsys):
    from onehot2gpt_teach import grading

    (tmp_path / "subs").mkdir()
    (tmp_path / "01_tiny.ipynb").write_text("{}")
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to be found
    sandbox.available.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="--no-sandbox"):
            grading.grade(tmp_path / "subs", tmp_path)
        with pytest.raises(SystemExit):
            grading.main([str(tmp_path / "subs"), "--reference", str(tmp_path), "--out", str(tmp_path / "out")])
        assert "bwrap is not on PATH" in capsys.readouterr().err
        with pytest.raises(ValueError, match="no .ipynb files"):  # sandbox=False goes on to the submissions
            grading.grade(tmp_path / "subs", tmp_path, sandbox=False)
    finally:
        sandbox.available.cache_clear()


@pytest.mark.parametrize(
    "flag, named", [([], "sandbox: bubblewrap"), (["--no-sandbox"], "sandbox: NONE (--no-sandbox)")]
)
def test_the_report_names_the_sandbox(tmp_path, flag, named):
    from onehot2gpt_teach import grading

    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "01_tiny.ipynb").write_text("{}")
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice_01_tiny.ipynb").write_text("not a notebook")  # graded without a kernel
    args = [str(tmp_path / "subs"), "--reference", str(tmp_path / "ref"), "--out", str(tmp_path / "out")]
    assert grading.main(args + flag) == 0
    assert named in (tmp_path / "out" / "grades.md").read_text(encoding="utf-8")


# ---- the watch over the whole tree ----------------------------------------------------------

HOLDERS = """
import os, sys, time
for _ in range({n}):
    if os.fork() == 0:
        block = b"x" * ({each} * 2**20)  # written: resident, not just reserved
        time.sleep({hold})
        os._exit(0)
for _ in range({n}):
    os.wait()
"""


def watched(code: str, limits: sandbox.Limits, watch: bool, writable=(), within: float = 60):
    """Run `code` in a sandbox with `limits`, under a Watch or not → (exit code, why it was stopped)."""
    proc = sandbox.popen(["python", "-c", code], limits=limits, writable=writable, stdin=subprocess.DEVNULL)
    guard = sandbox.Watch(proc.pid, limits, writable=writable) if watch else None
    try:
        code = proc.wait(timeout=within)
    finally:
        proc.kill()
        if guard is not None:
            guard.stop()
    return code, guard.exceeded if guard is not None else ""


def test_the_watch_bounds_the_memory_of_the_whole_tree():
    """Six processes of 96 MB each, each under the per-process limit: 576 MB together."""
    limits = sandbox.Limits(memory_gb=0.25, processes=32)
    code = HOLDERS.format(n=6, each=96, hold=6)
    assert watched(code, limits, watch=False) == (0, "")  # the rlimits alone let it through
    exit_code, why = watched(code, limits, watch=True)
    assert exit_code != 0 and "held" in why and "over the limit of 0.25 GB" in why, (exit_code, why)


def test_the_watch_bounds_the_cpus_of_the_whole_tree():
    limits = sandbox.Limits(cores=0.5, processes=32)
    code = (
        "import os, time\nfor _ in range(2):\n    os.fork()\nend = time.time() + 9\nwhile time.time() < end:\n    pass"
    )
    assert watched(code, limits, watch=False)[1] == ""
    exit_code, why = watched(code, limits, watch=True)
    assert exit_code != 0 and "CPUs" in why and "share of 0.5" in why, (exit_code, why)


def test_the_watch_bounds_what_the_tree_writes_to_its_folder(tmp_path):
    shared = tmp_path / "sockets"
    shared.mkdir()
    limits = sandbox.Limits(file_mb=2)
    code = (
        f"import time\nfor i in range(4):\n    open({str(shared)!r} + f'/f{{i}}', 'wb').write(b'x' * 2**20)\n"
        "time.sleep(5)"
    )
    assert watched(code, limits, watch=False, writable=[shared]) == (0, "")
    for f in shared.iterdir():
        f.unlink()
    exit_code, why = watched(code, limits, watch=True, writable=[shared])
    assert exit_code != 0 and "over the limit of 2 MiB" in why, (exit_code, why)


def test_the_watch_refuses_bad_arguments():
    with pytest.raises(ValueError, match="pid"):
        sandbox.Watch(0, sandbox.Limits())
    with pytest.raises(ValueError, match="limits"):
        sandbox.Watch(os.getpid(), {"memory_gb": 1})
    with pytest.raises(ValueError, match="cores"):
        sandbox.Limits(cores=0)
