"""Install the course's environment from requirements-lock.txt, two pip processes at once.

requirements.txt pins what the course imports; requirements-lock.txt pins everything that set
needs (about 150 packages, from ``pip freeze``), in two halves of about equal installed size.
Every package being pinned, pip has nothing to resolve, so each half is installed with
``--no-deps`` by its own pip process and the two run in parallel: about 70 s instead of about
160 s for ``pip install -r requirements.txt`` on the 2-core machine (see the README). They write
disjoint packages, so running them together is safe; afterwards ``pip install -r
requirements.txt`` adds whatever this platform needs that the lock does not list (PyPI's Linux
torch wheel, for instance, pulls NVIDIA libraries that the CPU wheel does not) and is a no-op
otherwise, and ``pip check`` confirms that the result is consistent.

The halves are installed with ``--no-compile``: pip would otherwise byte-compile every module of
every package (torch alone has thousands), half of the install's time, while the course imports
a fraction of them. Python compiles a module the first time it is imported and keeps the .pyc in
the venv, so `make lab` and `make test` run Python with bytecode writing on
(``env -u PYTHONDONTWRITEBYTECODE``) even where the shell switches it off.

    python tools/lock.py install     # what `make lab` and `make test` run (with the venv's python)
    python tools/lock.py write       # regenerate the lock from the running environment

Only the standard library: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"
REQUIREMENTS = ROOT / "requirements.txt"
SECOND_HALF = "# -- second half: installed at the same time as the first --"
HEADER = """\
# Every package of the course's environment, pinned (pip freeze --all of the venv that
# requirements.txt gives, without pip itself and the course's own editable package). Written by
# `python tools/lock.py write`; read by `python tools/lock.py install`, which `make lab` and
# `make test` run: each half by its own `pip install --no-deps`, both at once, then
# `pip install -r requirements.txt` and `pip check`. requirements.txt stays the place where the
# course's own versions are chosen; a test checks that this file agrees with it.
"""
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)==([^\s;#]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path = LOCK) -> tuple[list[str], list[str]]:
    """The two halves of the lock, as lists of ``name==version`` lines."""
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: restore it from git (git checkout -- {path.name}) "
            f"or write it with `python tools/lock.py write` from a working environment"
        )
    halves: list[list[str]] = [[]]
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if line == SECOND_HALF:
            halves.append([])
            continue
        if not line or line.startswith("#"):
            continue
        if not PIN.fullmatch(line):
            raise SystemExit(
                f"{path.name}, line {number}: {line!r} is not an exact pin (name==version); "
                f"fix the line or rewrite the file with `python tools/lock.py write`"
            )
        halves[-1].append(line)
    if len(halves) != 2 or not all(halves):
        raise SystemExit(
            f"{path.name} must hold two non-empty halves separated by the line "
            f"{SECOND_HALF!r}; rewrite it with `python tools/lock.py write`"
        )
    names = [norm(PIN.fullmatch(line)[1]) for line in halves[0] + halves[1]]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SystemExit(f"{path.name} pins {', '.join(twice)} more than once; keep one line each")
    return halves[0], halves[1]


def split_in_two(weights: dict[str, int]) -> tuple[list[str], list[str]]:
    """Two lists of the keys of `weights` with sums as equal as the greedy rule makes them
    (heaviest first, each into the lighter half); each list sorted by name."""
    halves: tuple[list[str], list[str]] = ([], [])
    totals = [0, 0]
    for key in sorted(weights, key=lambda k: (-weights[k], k)):
        lighter = totals.index(min(totals))
        halves[lighter].append(key)
        totals[lighter] += weights[key]
    return sorted(halves[0], key=str.lower), sorted(halves[1], key=str.lower)


def installed_weight(dist: metadata.Distribution) -> int:
    """Bytes a distribution puts on disk plus 20 kB per file (writing many small files costs too)."""
    files = dist.files or []
    size = 0
    for f in files:
        try:
            size += Path(f.locate()).stat().st_size
        except OSError:
            pass
    return size + 20_000 * len(files)


def write(path: Path = LOCK) -> None:
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    weights_by_name = {norm(d.metadata["Name"]): installed_weight(d) for d in metadata.distributions()}
    weights = {}
    for line in frozen:
        match = PIN.fullmatch(line.strip())
        if not match or norm(match[1]) in ("pip", "onehot2gpt"):
            continue
        name, version = match[1], match[2].split("+")[0]  # torch==2.13.0, not the local +cpu label
        weights[f"{name}=={version}"] = weights_by_name.get(norm(name), 0)
    first, second = split_in_two(weights)
    path.write_text(HEADER + "\n".join(first) + f"\n{SECOND_HALF}\n" + "\n".join(second) + "\n", encoding="utf-8")
    print(f"wrote {path.name}: {len(first)} + {len(second)} packages")


def pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", *args]


# Each half: exact pins, nothing to resolve, no byte-compiling (above), and no copy of every wheel
# in pip's cache (where wheels come over HTTP, that copy would double the disk the install needs).
HALF = ("install", "--quiet", "--no-deps", "--no-compile", "--no-cache-dir", "-r")


def install(path: Path = LOCK, requirements: Path = REQUIREMENTS) -> None:
    """Both halves at once; a half that fails is tried once more on its own after the other has
    finished (a transient failure, or a disk that two installs at once filled, often clears), and
    only then does the install stop, saying which half and what to do."""
    halves = read_lock(path)
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for k, half in enumerate(halves):
            parts.append(Path(tmp) / f"half{k + 1}.txt")
            parts[-1].write_text("\n".join(half) + "\n", encoding="utf-8")
        processes = [subprocess.Popen(pip(*HALF, str(part))) for part in parts]
        failed = [k for k, p in enumerate(processes) if p.wait() != 0]
        if failed:
            print(
                f"pip could not install half {', '.join(str(k + 1) for k in failed)} of {path.name} "
                f"(its message is above); trying again, one half at a time",
                file=sys.stderr,
                flush=True,
            )
            failed = [k for k in failed if subprocess.run(pip(*HALF, str(parts[k]))).returncode != 0]
    if failed:
        raise SystemExit(
            f"pip could not install half {failed[0] + 1} of {path.name}, twice (its message is "
            f"above); fix that, then run the command again (a package pip did install stays "
            f"installed). 'No space left on device': the environment needs about 2 GB free "
            f"where .venv is (and pip's temporary files some more, in $TMPDIR)"
        )
    subprocess.run(pip("install", "--quiet", "--no-compile", "--no-cache-dir", "-r", str(requirements)), check=True)
    check = subprocess.run(pip("check"), capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(
            f"the installed packages do not fit together (pip check):\n{check.stdout}"
            f"rewrite {path.name} from a working environment with `python tools/lock.py write`"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["install", "write"])
    args = parser.parse_args(argv)
    install() if args.command == "install" else write()


if __name__ == "__main__":
    main()
