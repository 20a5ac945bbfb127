"""The reproducible environment: requirements.txt is the one source of versions, environment.yml
installs it, and the running environment matches it."""

import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COURSE_PACKAGES = {"jupyterlab", "torch", "matplotlib", "ipywidgets", "bertviz", "nbval"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)", line)
        assert match, f"requirements.txt: {line!r} is not an exact pin (name==version)"
        pins[_norm(match[1])] = match[2]
    return pins


def pip_section(env: dict) -> list[str]:
    for dep in env["dependencies"]:
        if isinstance(dep, dict) and "pip" in dep:
            return dep["pip"]
    raise AssertionError("environment.yml has no pip: section")


def test_requirements_are_exact_pins_and_name_the_course_packages():
    pins = read_requirements(ROOT / "requirements.txt")
    missing = COURSE_PACKAGES - set(pins)
    assert not missing, f"requirements.txt lacks course packages {sorted(missing)}"
    assert pins["torch"] == "2.13.0", "pin torch==2.13.0 (the local CPU wheel)"


def test_environment_yml_installs_requirements_and_agrees_with_it():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = pip_section(env)
    assert "-r requirements.txt" in pip, "environment.yml must install requirements.txt via pip:"
    pins = read_requirements(ROOT / "requirements.txt")
    # Anything environment.yml names itself (conda or pip) must not contradict requirements.txt.
    named = [d for d in env["dependencies"] if isinstance(d, str)] + [p for p in pip if not p.startswith("-")]
    for spec in named:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*=?=\s*([^\s]+)", spec)
        if match and _norm(match[1]) in pins:
            assert pins[_norm(match[1])] == match[2], f"{spec} disagrees with requirements.txt"
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python, "environment.yml must name a Python version"


def test_installed_versions_match_the_pins():
    pins = read_requirements(ROOT / "requirements.txt")
    wrong = {}
    for name, version in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong[name] = (version, "not installed")
            continue
        if installed.split("+")[0] != version:
            wrong[name] = (version, installed)
    assert not wrong, f"installed versions differ from requirements.txt (pinned, installed): {wrong}"


def test_library_requirement_on_torch_stays_loose():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"torch>=2\.\d+"', text), "pyproject must keep torch loose (torch>=2.4) for Colab"
    assert "torch==" not in text


@pytest.mark.parametrize("command", ["make lab", "make test"])
def test_readme_states_the_two_commands(command):
    assert command in (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command_with_the_mirror():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export ONEHOT2GPT_DATA_MIRROR=" in ci and "shared/data" in ci
    assert ci.strip().splitlines()[-1].strip() == "make test"


# -- requirements-lock.txt: the whole environment pinned, installed in two halves at once -----------


def _lock():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lock", ROOT / "tools" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lock_agrees_with_requirements_and_the_running_environment():
    lock = _lock()
    first, second = lock.read_lock()
    pins = {_norm(line.split("==")[0]): line.split("==")[1] for line in first + second}
    wanted = read_requirements(ROOT / "requirements.txt")
    differ = {
        name: (version, pins.get(name, "missing")) for name, version in wanted.items() if pins.get(name) != version
    }
    assert not differ, (
        f"requirements-lock.txt disagrees with requirements.txt (wanted, locked): {differ}; run `make lock`"
    )
    # The lock describes this environment: every package in it is installed at its version.
    wrong = {}
    for name, version in pins.items():
        try:
            installed = metadata.version(name).split("+")[0]
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != version:
            wrong[name] = (version, installed)
    assert not wrong, f"installed versions differ from requirements-lock.txt (locked, installed): {wrong}"
    assert "pip" not in pins and "onehot2gpt" not in pins


def test_lock_halves_are_balanced_by_the_greedy_rule():
    lock = _lock()
    first, second = lock.split_in_two({"torch": 100, "scipy": 40, "numpy": 35, "six": 1, "tqdm": 2})
    assert first == ["torch"] and second == ["numpy", "scipy", "six", "tqdm"]
    assert lock.split_in_two({"a": 5, "b": 5}) == (["a"], ["b"])


@pytest.mark.parametrize(
    "text, message",
    [
        ("a==1\nb==2\n", "two non-empty halves"),
        (f"a==1\n{'# -- second half: installed at the same time as the first --'}\n", "two non-empty halves"),
        ("a>=1\n# -- second half: installed at the same time as the first --\nb==2\n", "not an exact pin"),
        ("a==1\n# -- second half: installed at the same time as the first --\nA==2\n", "more than once"),
    ],
)
def test_a_broken_lock_is_refused_with_what_to_do(tmp_path, text, message):
    lock = _lock()
    path = tmp_path / "requirements-lock.txt"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message):
        lock.read_lock(path)
    with pytest.raises(SystemExit, match="is missing"):
        lock.read_lock(tmp_path / "nothing.txt")


class _Finished:
    def __init__(self, returncode):
        self.returncode = returncode

    def wait(self):
        return self.returncode


@pytest.mark.parametrize("retry_works", [True, False])
def test_a_failed_half_is_installed_again_alone_before_the_install_stops(tmp_path, monkeypatch, retry_works):
    """CI once ran out of disk with both halves installing at once: the failed half gets one more
    try on its own; if that fails too, the install stops naming the half, before anything else."""
    import subprocess

    lock = _lock()
    path = tmp_path / "requirements-lock.txt"
    path.write_text(f"a==1\n{lock.SECOND_HALF}\nb==2\n")
    calls = []

    def popen(cmd, **kwargs):
        calls.append(("together", Path(cmd[-1]).read_text().split()))
        return _Finished(1 if "a==1" in Path(cmd[-1]).read_text() else 0)

    def run(cmd, **kwargs):
        if cmd[-1].endswith(("half1.txt", "half2.txt")):
            calls.append(("alone", Path(cmd[-1]).read_text().split()))
            assert "--no-cache-dir" in cmd and "--no-deps" in cmd
            return subprocess.CompletedProcess(cmd, 0 if retry_works else 1)
        calls.append(("then", cmd[3:]))
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(subprocess, "run", run)
    if retry_works:
        lock.install(path, tmp_path / "requirements.txt")
        assert calls[2:] == [
            ("alone", ["a==1"]),
            (
                "then",
                ["install", "--quiet", "--no-compile", "--no-cache-dir", "-r", str(tmp_path / "requirements.txt")],
            ),
            ("then", ["check"]),
        ]
    else:
        with pytest.raises(SystemExit, match="half 1 of requirements-lock.txt, twice.*No space left on device"):
            lock.install(path, tmp_path / "requirements.txt")
        assert calls[2:] == [("alone", ["a==1"])], "nothing else may run after a half failed twice"
    assert sorted(calls[:2]) == [("together", ["a==1"]), ("together", ["b==2"])]


def test_make_installs_from_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert "requirements-lock.txt" in makefile.split("$(STAMP):")[1].splitlines()[0]
    assert "tools/lock.py install" in makefile


def test_an_install_without_bytecode_runs_with_bytecode_writing_on():
    """tools/lock.py installs without byte-compiling (half the install's time); Python then compiles
    what is imported and keeps it only if it may write bytecode, so the commands that run the
    course make sure it may, even where the shell sets PYTHONDONTWRITEBYTECODE."""
    source = (ROOT / "tools" / "lock.py").read_text(encoding="utf-8")
    assert source.count('"--no-compile"') == 2, "both pip steps of tools/lock.py install should skip byte-compiling"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("lab", "test"):
        recipe = makefile.split(f"\n{target}: $(STAMP)\n")[1].split("\n\n")[0]
        assert recipe.strip().startswith("env -u PYTHONDONTWRITEBYTECODE "), (
            f"make {target} should run Python with bytecode writing on: {recipe.strip()!r}"
        )


def test_make_lab_starts_jupyterlab_as_whoever_runs_it(tmp_path):
    """`make lab` starts JupyterLab also as root (a container, a lab machine), where Jupyter
    refuses to start without --allow-root; it is stopped as soon as it says it is running."""
    import os
    import shutil
    import signal
    import socket
    import subprocess
    import time

    if not (ROOT / ".venv" / ".installed").exists() or shutil.which("make") is None:
        pytest.fail("make lab needs the installed .venv and make: run `make test`, which installs it")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token=t"
    lab = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_ARGS={args}"],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    seen, deadline = [], time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = lab.stdout.readline()
            if not line:
                break
            seen.append(line)
            if f":{port}/" in line and "lab" in line:
                break
        running = any(f":{port}/" in line for line in seen)
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
    assert running, f"make lab (uid {os.getuid()}) did not start JupyterLab:\n{''.join(seen[-20:])}"
