"""`make test-colab`'s first step, run in the Colab-pinned environment: installing the course with
its dependencies (and the [hf] extra, as the Colab set-up cell does) must change none of the
packages requirements-colab.txt pins to Colab's versions. Exits 1, naming them, if it would."""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pinned() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements-colab.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--report",
                str(report),
                "-e",
                f"{ROOT}[hf]",
            ],
            check=True,
        )
        plan = json.loads(report.read_text())["install"]
    changed = {re.sub(r"[-_.]+", "-", p["metadata"]["name"]).lower(): p["metadata"]["version"] for p in plan}
    clashes = {name: (version, changed[name]) for name, version in pinned().items() if name in changed}
    if clashes:
        for name, (colab, ours) in sorted(clashes.items()):
            print(
                f"installing the course would replace Colab's {name} {colab} with {ours}: lower the bound "
                f"in pyproject.toml",
                file=sys.stderr,
            )
        return 1
    added = sorted(f"{n} {v}" for n, v in changed.items() if n != "onehot2gpt")
    print(f"installing the course keeps all {len(pinned())} Colab-pinned packages; it adds: {', '.join(added)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
