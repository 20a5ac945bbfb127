"""The course notebooks' shared furniture: the Colab set-up cell, the "Open in Colab" badge and the
slide layout.

Every notebook starts with a title cell carrying a badge that opens it in Colab, then
:data:`COLAB_CELL`, three lines that install the course when it runs in Colab (by running
``onehot2gpt/colab.py``) and do nothing anywhere else. Cells carry ``slideshow`` metadata: each
``#``/``##`` heading starts a slide, each ``###`` heading a sub-slide, the set-up cell is left out
(``onehot2gpt-slides`` makes the lecture deck, see :mod:`onehot2gpt_teach.slides`).
``onehot2gpt-prepare notebooks/[0-9][0-9]_*.ipynb`` applies all three
(idempotent: a notebook that is already prepared is left byte for byte as it was); a test checks
that every notebook is prepared.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from onehot2gpt.colab import RELEASE, REPOSITORY, SETUP_URL
from onehot2gpt.colab import REPOSITORY_URL as REPOSITORY_URL

from ._cli import input_file, input_folder

# Where the course lives (the repository and the release that the badges open and the set-up cell
# installs) is written once, in onehot2gpt.colab: a fork changes REPOSITORY and RELEASE there and runs
# `onehot2gpt-prepare notebooks/[0-9][0-9]_*.ipynb`.
COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP_TAG = "colab-setup"

# The first code cell of every notebook, three lines that ruff leaves as they are. On Colab it fetches
# onehot2gpt/colab.py from the repository at the release and runs it in the notebook's namespace (it
# clones and installs the course, puts its library on sys.path and opens its notebooks folder);
# anywhere else it does nothing. No import statement: ruff's formatter would add a blank line after it.
COLAB_CELL = f"""\
if "google.colab" in __import__("sys").modules:  # Colab set-up (docs/colab.md); elsewhere this cell does nothing
    url = "{SETUP_URL}"
    exec(__import__("urllib.request").request.urlopen(url).read())  # clone, install, open the notebooks"""


def badge_url(path: str) -> str:
    """The Colab address of a notebook of the repository, e.g. ``notebooks/01_onehot.ipynb``."""
    return f"https://colab.research.google.com/github/{REPOSITORY}/blob/{RELEASE}/{path}"


def badge(path: str) -> str:
    """Markdown for the "Open in Colab" badge of the notebook at `path` (relative to the repository)."""
    return f"[![Open in Colab]({COLAB_BADGE_IMAGE})]({badge_url(path)})"


_BADGE_RE = re.compile(r"\[!\[Open in Colab\]\([^)]*\)\]\(([^)]*)\)")


def badge_targets(text: str) -> list[str]:
    """The repository paths that the Colab badges in `text` open (README or a notebook cell)."""
    prefix = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{RELEASE}/"
    out = []
    for url in _BADGE_RE.findall(text):
        if not url.startswith(prefix):
            raise ValueError(f"a Colab badge points outside {REPOSITORY}@{RELEASE}: {url}")
        out.append(url[len(prefix) :])
    return out


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _without_badge(text: str) -> str:
    """`text` without a Colab badge on its first line (and the blank lines after it)."""
    first, _, rest = text.lstrip("\n").partition("\n")
    return rest.lstrip("\n") if _BADGE_RE.fullmatch(first.strip()) else text.lstrip("\n")


def slide_type(cell: dict) -> str:
    """``slide`` for a cell opening with a ``#``/``##`` heading, ``subslide`` for ``###``, ``skip``
    for the Colab set-up cell, ``-`` (same slide) for the rest."""
    if SETUP_TAG in _tags(cell):
        return "skip"
    if cell["cell_type"] == "markdown":
        first = _without_badge(_source(cell)).split("\n", 1)[0]
        if re.match(r"#{1,2} ", first):
            return "slide"
        if first.startswith("### "):
            return "subslide"
    return "-"


def prepare(notebook: dict, path: str) -> dict:
    """Give `notebook` (nbformat JSON; `path` relative to the repository, e.g.
    ``notebooks/01_onehot.ipynb``) its badge, its Colab cell and slide metadata, in place.

    The badge goes on the first line of the first (title) cell; the set-up cell right after the
    title cell, replacing an older version. A newly inserted set-up cell is recorded as having run
    first (execution count 1, no output: what it prints outside Colab) and later counts move up
    by one, so the stored outputs stay those of a top-to-bottom run.
    """
    cells = notebook["cells"]
    if not cells or cells[0]["cell_type"] != "markdown" or not _without_badge(_source(cells[0])).startswith("# "):
        raise ValueError(f"{path}: the first cell must be the markdown title ('# NN · Topic')")
    cells[0]["source"] = badge(path) + "\n\n" + _without_badge(_source(cells[0]))

    existing = [i for i, c in enumerate(cells) if SETUP_TAG in _tags(c)]
    if existing:
        cells[existing[0]]["source"] = COLAB_CELL
    else:
        setup = {
            "cell_type": "code",
            "execution_count": 1,
            "id": "colab-setup",
            "metadata": {"tags": [SETUP_TAG]},
            "outputs": [],
            "source": COLAB_CELL,
        }
        for c in cells:
            if c["cell_type"] == "code" and c.get("execution_count") is not None:
                c["execution_count"] += 1
        cells.insert(1, setup)
    for c in cells:
        c.setdefault("metadata", {})["slideshow"] = {"slide_type": slide_type(c)}
    drop_saved_view_widget_state(notebook)
    return notebook


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SNAPSHOT_CLASS = "onehot2gpt-snapshot"


def drop_saved_view_widget_state(notebook: dict) -> list[str]:
    """Remove from the notebook's saved widget state every course widget that stores its own
    picture (``text/html`` with the ``onehot2gpt-snapshot`` view, see ``onehot2gpt.widgets._base.SavedView``), and
    the models only it refers to; return the model ids removed.

    A reader without a kernel (nbconvert's HTML and slides, nbviewer, GitHub) draws a widget from
    the saved state when it finds its model there, which needs the widget manager's scripts from a
    CDN, and falls back to the next output (the picture) when it does not. The pictures then show
    offline; a live kernel draws the widget anew when the cell runs."""
    state = notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state")
    if not state:
        return []
    roots = [
        o["data"][WIDGET_VIEW].get("model_id")
        for c in notebook["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if WIDGET_VIEW in o.get("data", {}) and SNAPSHOT_CLASS in "".join(o["data"].get("text/html", ""))
    ]
    removed, stack = [], [r for r in roots if r]
    while stack:
        model = stack.pop()
        if model in removed or model not in state:
            continue
        removed.append(model)
        stack.extend(re.findall(r"IPY_MODEL_(\w+)", json.dumps(state[model])))
    for model in removed:
        del state[model]
    return removed


def prepare_file(path: Path, root: Path) -> bool:
    """Prepare the notebook file at `path` in place; True if it changed."""
    text = path.read_text(encoding="utf-8")
    notebook = json.loads(text)
    prepare(notebook, path.resolve().relative_to(root.resolve()).as_posix())
    new = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="onehot2gpt-prepare",
        description="Add the Colab badge and set-up cell and the slide layout to "
        "course notebooks (in place, idempotent).",
    )
    p.add_argument("notebooks", nargs="+", type=Path, help="e.g. notebooks/[0-9][0-9]_*.ipynb")
    p.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: .)")
    args = p.parse_args(argv)
    input_folder(p, "--root", args.root)
    paths = [input_file(p, "notebook", path) for path in args.notebooks]  # all found before any is changed
    for path in paths:
        print(f"{path}: {'updated' if prepare_file(path, args.root) else 'already prepared'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
