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
    named = [d for d in env["dependencies"] if isinstance(d, str)] + [
        p for p in pip if not p.startswith("-")]
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
