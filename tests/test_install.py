"""The course installs as a package: a wheel, installed without ``-e`` in a fresh virtual
environment, finds its dataset registry, loads every committed checkpoint by name, imports the
exercise checks (``onehot2gpt_exercises``) and has the lecturer's console scripts (issue 45, part 4;
docs/install.md).

Offline and quick: the wheel is built from a copy of the files a fresh clone has (git's tracked and
untracked-but-not-ignored files, so a stale ``build/`` folder cannot leak into it) with
``--no-build-isolation``; the fresh environment sees the main environment's packages (torch, numpy,
…) through a ``.pth`` line, so nothing but the course's own wheel is installed, with ``--no-deps``
and ``--no-index``. A ``.pth`` line adds a folder to ``sys.path`` without running the ``.pth``
files in it, so the main environment's editable install (``__editable__.onehot2gpt-….pth``) stays
out of the fresh one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "lib" / "onehot2gpt" / "assets"
# The lecturer's tools (docs/grading.md): each a console script of the lecturer package.
LECTURER_SCRIPTS = {
    "onehot2gpt-grade",
    "onehot2gpt-autograder",
    "onehot2gpt-student",
    "onehot2gpt-prepare",
    "onehot2gpt-figures",
}

# Run by the fresh environment's Python from a folder outside the repository.
PROBE = """
import json, os, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
import onehot2gpt
import onehot2gpt_exercises
from onehot2gpt import checkpoints, data
loaded = {}
for name in checkpoints.list_checkpoints():
    result = checkpoints.load(name)
    model = result.model if hasattr(result, "model") else result[0]
    loaded[name] = type(model).__name__
path = data.fetch("word-benchmarks", "wordsim353.tsv")
print(json.dumps({
    "module": onehot2gpt.__file__,
    "exercises": onehot2gpt_exercises.__file__,
    "checks": sorted(n for n in dir(onehot2gpt_exercises) if n.startswith("check_")),
    "registry": str(data.REGISTRY_PATH),
    "checkpoints_dir": str(checkpoints.checkpoints_dir()),
    "loaded": loaded,
    "fetched": str(path),
    "cache": str(data.cache_dir()),
    "first_pair": list(data.read_wordsim353()[0]),
    "sys_path": sys.path,
}))
"""


def _clone_files() -> list[str]:
    """The files a fresh clone of this working tree has: tracked and untracked-but-not-ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [f for f in listed.split("\0") if f and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """Build the wheel, install it into a fresh venv, run PROBE there; its answer and the paths."""
    mirror = os.environ.get("ONEHOT2GPT_DATA_MIRROR")
    if not mirror:
        pytest.fail("set ONEHOT2GPT_DATA_MIRROR to the offline data mirror (see docs/install.md)")
    tmp = tmp_path_factory.mktemp("install")
    clone = tmp / "clone"
    for name in _clone_files():
        if name.startswith(("lib/", "pyproject.toml", "README.md", "LICENSE")):
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(clone), "--no-deps", "--no-build-isolation", "-q", "-w", wheels],
        check=True,
        env=dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    (wheel,) = wheels.glob("onehot2gpt-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The main environment's packages, after the fresh environment's own (which win).
    (purelib / "main_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
        check=True,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    outside = tmp / "elsewhere"
    outside.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ONEHOT2GPT_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env.update(
        ONEHOT2GPT_DATA_MIRROR=mirror,
        ONEHOT2GPT_THREADS="1",
        OMP_NUM_THREADS="1",
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
        HOME=str(tmp / "home"),
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    probe = subprocess.run([python, "-c", PROBE], cwd=outside, env=env, capture_output=True, text=True, timeout=600)
    assert probe.returncode == 0, probe.stderr[-4000:]
    answer = json.loads(probe.stdout.strip().splitlines()[-1])
    return {"answer": answer, "venv": venv, "purelib": purelib, "wheel": wheel, "tmp": tmp, "env": env}


def test_the_wheel_ships_the_registry_every_checkpoint_and_the_ablation_record(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    committed = {f"onehot2gpt/{p.relative_to(ASSETS.parent).as_posix()}" for p in ASSETS.rglob("*") if p.is_file()}
    assert committed, f"no assets under {ASSETS}"
    assert "onehot2gpt/assets/registry.json" in committed
    assert "onehot2gpt/assets/results/ulmfit-ablation.json" in committed
    missing = sorted(committed - names)
    assert not missing, f"the wheel lacks {missing}: add them to [tool.setuptools.package-data]"
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in names)


def test_the_installed_library_is_the_wheel_not_the_repository(installed):
    answer, purelib = installed["answer"], installed["purelib"]
    module = Path(answer["module"])
    assert module.is_relative_to(purelib), f"onehot2gpt imported from {module}, not from the fresh venv {purelib}"
    assert not module.is_relative_to(ROOT)
    assert str(ROOT / "lib") not in answer["sys_path"], "the editable install leaked into the fresh venv"
    exercises = Path(answer["exercises"])
    assert exercises == purelib / "onehot2gpt_exercises" / "__init__.py", f"onehot2gpt_exercises from {exercises}"
    assert "check_one_hot" in answer["checks"], "the installed onehot2gpt_exercises lacks its checks"
    for key in ("registry", "checkpoints_dir"):
        assert Path(answer[key]).is_relative_to(purelib / "onehot2gpt" / "assets"), (key, answer[key])


def test_every_committed_checkpoint_loads_by_name_from_the_wheel(installed):
    committed = sorted(p.parent.name for p in (ASSETS / "checkpoints").glob("*/config.json"))
    assert len(committed) >= 12, committed
    loaded = installed["answer"]["loaded"]
    assert sorted(loaded) == committed, f"loaded {sorted(loaded)}, committed {committed}"
    assert all(isinstance(model, str) and model for model in loaded.values())


def test_a_dataset_comes_through_the_registry_and_the_mirror_into_the_user_cache(installed):
    answer, tmp = installed["answer"], installed["tmp"]
    cache = tmp / "xdg-cache" / "onehot2gpt"
    assert Path(answer["cache"]) == cache, "installed, the cache is $XDG_CACHE_HOME/onehot2gpt"
    fetched = Path(answer["fetched"])
    assert fetched == cache / "word-benchmarks" / "wordsim353.tsv" and fetched.is_file()
    assert not fetched.is_relative_to(installed["purelib"]), "the cache must not be inside site-packages"
    word1, word2, score = answer["first_pair"]
    assert isinstance(word1, str) and isinstance(word2, str) and 0 <= score <= 10


def test_the_lecturer_console_scripts_are_installed_and_answer_help(installed):
    wheel = zipfile.ZipFile(installed["wheel"])
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    section = text.split("[console_scripts]", 1)[1].split("\n[", 1)[0] if "[console_scripts]" in text else ""
    scripts = {line.split("=")[0].strip() for line in section.splitlines() if "=" in line}
    assert LECTURER_SCRIPTS <= scripts, f"the wheel lacks the console scripts {sorted(LECTURER_SCRIPTS - scripts)}"
    for script in sorted(scripts):
        path = installed["venv"] / "bin" / script
        assert path.is_file(), f"{script} is not installed by the wheel"
        run = subprocess.run(
            [path, "--help"], cwd=installed["tmp"], env=installed["env"], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0 and run.stdout.startswith(f"usage: {script}"), (script, run.stderr[-1500:])
