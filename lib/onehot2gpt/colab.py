"""The course on Google Colab: clone the repository, install the library, open the notebooks folder.

Every notebook's first code cell (written by ``onehot2gpt-prepare``) fetches this file and runs it
when the notebook runs in Colab, before the library exists: standard library only. :func:`setup`
clones ``ONEHOT2GPT_REPO`` at ``ONEHOT2GPT_REF`` into ``ONEHOT2GPT_HOME`` and installs it
(``pip install -e <clone>[hf]``), each once, puts its ``lib`` on ``sys.path`` and changes to its
``notebooks`` folder. A failing command raises RuntimeError with its output and what to do; git
never waits for a password. See docs/colab.md.
"""

import os
import subprocess
import sys

# Where the course lives, in one place: the GitHub repository and the release (a branch or tag) that
# the badges open, the set-up cell fetches this file from, and this file installs. A fork changes
# these two lines and runs `onehot2gpt-prepare notebooks/[0-9][0-9]_*.ipynb`.
REPOSITORY = "one-hot-to-gpt/one-hot-to-gpt"
RELEASE = "main"
REPOSITORY_URL = f"https://github.com/{REPOSITORY}"
# This file's address in the repository at the release: what the set-up cell fetches and runs.
SETUP_URL = f"{REPOSITORY_URL}/raw/{RELEASE}/lib/onehot2gpt/colab.py"


def _run(command: list[str], repo: str, ref: str) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ, GIT_TERMINAL_PROMPT="0")
    )  # never ask for a password
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(
            f"the course set-up failed running:\n  {' '.join(command)}\n{tail}\n"
            f"Check the address {repo} (branch or tag {ref!r}) and the network, then run this cell "
            f"again (Runtime → Restart session first if it installed half)."
        )


def setup() -> str:
    """Clone and install the course (once), put its library on ``sys.path`` and change to its
    notebooks folder; return the clone's folder. Settings come from the environment variables
    ``ONEHOT2GPT_REPO``, ``ONEHOT2GPT_REF`` and ``ONEHOT2GPT_HOME`` (see the module's docstring)."""
    repo = os.environ.get("ONEHOT2GPT_REPO", REPOSITORY_URL)
    ref = os.environ.get("ONEHOT2GPT_REF", RELEASE)
    home = os.path.abspath(os.environ.get("ONEHOT2GPT_HOME", "one-hot-to-gpt"))
    if not os.path.isdir(os.path.join(home, ".git")):
        if os.path.exists(home):
            raise RuntimeError(
                f"{home} exists but is not a clone of the course: delete it "
                "(or set ONEHOT2GPT_HOME) and run this cell again"
            )
        branch = ["--branch", ref] if ref else []
        _run(["git", "clone", "--quiet", "--depth", "1", *branch, repo, home], repo, ref)
    marker = os.path.join(home, ".installed")
    if not os.path.exists(marker):
        _run([sys.executable, "-m", "pip", "install", "--progress-bar", "off", "-e", home + "[hf]"], repo, ref)
        open(marker, "w").close()
    lib = os.path.join(home, "lib")
    if lib not in sys.path:
        sys.path.insert(0, lib)  # this kernel started before the install
    os.chdir(os.path.join(home, "notebooks"))
    return home


if __name__ == "__main__":  # the set-up cell runs this file in the notebook's namespace
    setup()
