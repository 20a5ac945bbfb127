"""Lecture decks: a course notebook as a reveal.js slide show of 1280 × 720 that needs no network.

``onehot2gpt-slides notebooks/05_attention.ipynb --out decks/05`` writes a folder that presents
offline, opened from the disk (``decks/05/index.html``) or copied anywhere:

- ``index.html``: the notebook's cells and stored outputs (no kernel), a slide for each ``#``/``##``
  heading and a sub-slide (below it) for each ``###``, as ``onehot2gpt-prepare`` lays them out
  (:func:`onehot2gpt_teach.course.slide_type`); the Colab set-up cell and the Colab badge left out;
- ``deck.js`` and ``deck.css``: reveal.js started at 1280 × 720, the formulas typeset, and every slide
  whose content is taller than 720 px followed by continuation slides that take the cells that do not
  fit, in order; a single cell taller than a slide scrolls;
- ``vendor/``: reveal.js and MathJax as published on npm, unmodified, with their licences
  (``static/vendor/MANIFEST.json`` records versions, origins and sha256; they are checked here).

Widgets show what a reader without a kernel sees: the course's widgets their stored picture, the
others their text (their saved state is left out, as it needs a widget manager from a CDN).
``tests/test_browser.py`` opens a deck in Chromium with every non-file request refused and checks that
reveal.js starts and that no slide is taller than 720 px.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

from . import course

HERE = Path(__file__).resolve().parent
VENDOR_DIR = HERE / "static" / "vendor"
DECK_DIR = HERE / "static" / "deck"
TEMPLATES = HERE / "templates"
TEMPLATE = "onehot2gpt_slides"
WIDTH, HEIGHT = 1280, 720

# An address the browser would fetch: a script, style sheet, image, frame or font outside the deck.
_EXTERNAL = re.compile(r"""(?:\bsrc=|\bhref=|@import\s+url\(|\burl\()\s*["']?((?:https?:)?//[^"')\s>]+)""", re.I)
# Links a reader clicks are not fetched: <a href="https://..."> is allowed.
_ANCHOR = re.compile(r"<a\s[^>]*>", re.I)


def manifest() -> dict:
    """The libraries a deck ships (``static/vendor/MANIFEST.json``): name → version, folder, licence,
    origin and the sha256 of each file."""
    return json.loads((VENDOR_DIR / "MANIFEST.json").read_text(encoding="utf-8"))["libraries"]


def vendor_files() -> list[Path]:
    """Every shipped file a deck copies, each checked against the sha256 in the manifest, relative to
    ``static/vendor``."""
    out = []
    for name, entry in manifest().items():
        for relative, digest in entry["files"].items():
            path = Path(entry["folder"]) / relative
            data = (VENDOR_DIR / path).read_bytes()
            if hashlib.sha256(data).hexdigest() != digest:
                raise RuntimeError(
                    f"{VENDOR_DIR / path} ({name}) does not have the sha256 the manifest records: "
                    "the shipped file was changed; restore it from git"
                )
            out.append(path)
    return out


_HEADING = re.compile(r"#{1,3} ")


def split_at_headings(cell: dict) -> list[dict]:
    """A markdown cell cut before each ``#``/``##``/``###`` heading that is not its first line (outside
    fenced code), so that every such heading can start a slide; other cells as they are."""
    if cell["cell_type"] != "markdown":
        return [cell]
    parts, fenced = [[]], False
    for line in course._source(cell).split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and _HEADING.match(line) and any(x.strip() for x in parts[-1]):
            parts.append([])
        parts[-1].append(line)
    if len(parts) == 1:
        return [cell]
    out = []
    for n, lines in enumerate(parts):
        part = copy.deepcopy(cell)
        part["source"] = "\n".join(lines).strip("\n")
        if "id" in part:
            part["id"] = f"{cell['id']}-{n}" if n else cell["id"]
        out.append(part)
    return out


def deck_notebook(notebook: dict) -> dict:
    """A copy of `notebook` (nbformat JSON) laid out as a deck: markdown cells cut at their headings,
    slide types from the headings, the Colab badge and set-up cell out, the saved widget state out."""
    nb = copy.deepcopy(notebook)
    cells = nb.get("cells")
    if not cells:
        raise ValueError("the notebook has no cells: give a course notebook such as notebooks/05_attention.ipynb")
    if cells[0]["cell_type"] == "markdown":
        cells[0]["source"] = course._without_badge(course._source(cells[0]))
    cells[:] = [part for cell in cells for part in split_at_headings(cell)]
    for cell in cells:
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": course.slide_type(cell)}
    nb.get("metadata", {}).pop("widgets", None)
    return nb


def external_addresses(html: str) -> list[str]:
    """The addresses outside the deck that `html` would make a browser fetch (links are not fetched)."""
    return sorted(set(_EXTERNAL.findall(_ANCHOR.sub("", html))))


def build_deck(notebook: Path | str, out: Path | str, *, fit: bool = True) -> Path:
    """Write the deck of the notebook at `notebook` into the folder `out` (created if missing; the
    deck's own files in it are replaced); return the path of its ``index.html``. With ``fit=False``
    the slides are not split: a slide may then be taller than 720 px (what the browser test shows
    it can see)."""
    import nbformat
    from nbconvert import SlidesExporter

    notebook, out = Path(notebook), Path(out)
    if notebook.suffix != ".ipynb" or not notebook.is_file():
        raise FileNotFoundError(
            f"notebook={str(notebook)!r} is not a notebook file: give one such as notebooks/05_attention.ipynb"
        )
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"out={str(out)!r} is a file: give a folder for the deck, e.g. decks/05")
    nb = nbformat.reads(json.dumps(deck_notebook(json.loads(notebook.read_text(encoding="utf-8")))), as_version=4)
    files = vendor_files()
    reveal = manifest()["reveal.js"]
    mathjax = manifest()["mathjax"]
    exporter = SlidesExporter(
        template_name=TEMPLATE,
        extra_template_basedirs=[str(TEMPLATES)],
        reveal_url_prefix=f"vendor/{reveal['folder']}",
        reveal_theme="white",
    )
    deck = {
        "mathjax": f"vendor/{mathjax['folder']}/es5/tex-svg-full.js",
        "settings": {"width": WIDTH, "height": HEIGHT, "fit": bool(fit)},
    }
    html, _ = exporter.from_notebook_node(nb, resources={"deck": deck, "metadata": {"name": notebook.stem}})
    outside = external_addresses(html)
    if outside:
        raise RuntimeError(
            f"the deck of {notebook} would load {len(outside)} address(es) from the network: "
            f"{', '.join(outside[:5])}; put the file in the notebook (an attachment or data: URI) instead"
        )
    out.mkdir(parents=True, exist_ok=True)
    for relative in files:
        target = out / "vendor" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(VENDOR_DIR / relative, target)
    for name in ("deck.js", "deck.css"):
        shutil.copyfile(DECK_DIR / name, out / name)
    index = out / "index.html"
    index.write_text(html, encoding="utf-8")
    return index


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="onehot2gpt-slides",
        description="Write a notebook's lecture deck (reveal.js, 1280 x 720, no network needed) into a folder.",
    )
    p.add_argument("notebook", type=Path, help="e.g. notebooks/05_attention.ipynb")
    p.add_argument("--out", type=Path, required=True, help="the deck's folder, e.g. decks/05 (open its index.html)")
    p.add_argument(
        "--no-fit", action="store_true", help="do not split slides taller than 720 px (to see what the split does)"
    )
    args = p.parse_args(argv)
    try:
        index = build_deck(args.notebook, args.out, fit=not args.no_fit)
    except (FileNotFoundError, NotADirectoryError, ValueError) as e:
        p.error(str(e))
    print(f"{index} (open it in a browser; the folder {args.out} is the whole deck)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
