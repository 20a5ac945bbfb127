"""The course's architecture figures, drawn by code as plain SVG, and the helpers that embed them
in the notebooks' markdown.

One function per figure (``word2vec_skipgram_cbow`` for notebook 02, ``lstm_lm`` for 03,
``elmo_bilm`` for 04, ``attention`` for 05, ``transformer_encoder_decoder`` for 06, ``bert_input``
for 07, ``bert_finetuning`` for 08, ``gpt_decoder`` and ``gpt1_input_transformations`` for 09),
each following its paper's figure (Mikolov et al. 2013; Peters et al. 2018; Vaswani et al. 2017;
Devlin et al. 2019; Radford et al. 2018) in one shared style: sans-serif text, one colour per
kind of part (embeddings blue, recurrence green, attention orange, feed-forward purple, norms
yellow, outputs pink), the same arrows. The SVGs in ``notebooks/figures/`` are the source of
truth; rewrite them, byte for byte the same on every run, with::

    onehot2gpt-figures [--out notebooks/figures]

Beside each SVG the command writes a PNG at twice its size (``rsvg-convert`` from Debian's
``librsvg2-bin``, or ``cairosvg`` from PyPI), with the sha256 of the SVG it was drawn from in a
``tEXt`` chunk; a PNG whose SVG has not changed is left alone, so re-running needs no rasteriser.

A notebook shows a figure through a markdown cell that carries the PNG as a base64 ``data:`` URI
in an ``<img>`` tag (``embed_figure``): that renders offline in JupyterLab, Notebook 7, VS Code,
nbconvert HTML and slides, on GitHub and in Colab. (An SVG data URI would be sharper, but Colab
sanitises SVG out of markdown images, colabtools #2092; cell attachments are not shown by GitHub,
and JupyterLab does not show SVG attachments.) ``stale_figures`` finds embedded copies that differ
from the files, or PNGs drawn from an older SVG.

The drawing kit is in ``figures_canvas``, the figures themselves in ``figures_drawings``; this
module writes and embeds them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from ._cli import output_folder
from .figures_canvas import Box, Canvas, escape, text_width
from .figures_drawings import (
    FIGURES,
    attention,
    bert_finetuning,
    bert_input,
    elmo_bilm,
    gpt1_input_transformations,
    gpt_decoder,
    lstm_lm,
    transformer_encoder_decoder,
    word2vec_skipgram_cbow,
)

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "notebooks" / "figures"
FIGURE_METADATA_KEY = "onehot2gpt"

__all__ = [
    "DEFAULT_OUT",
    "FIGURES",
    "FIGURE_METADATA_KEY",
    "PNG_SCALE",
    "Box",
    "Canvas",
    "text_width",
    "attention",
    "bert_finetuning",
    "bert_input",
    "elmo_bilm",
    "gpt1_input_transformations",
    "gpt_decoder",
    "lstm_lm",
    "transformer_encoder_decoder",
    "word2vec_skipgram_cbow",
    "render",
    "rasterize",
    "png_name",
    "png_source_sha256",
    "write_all",
    "data_uri",
    "figure_markdown",
    "embedded_figures",
    "stale_figures",
    "embed_figure",
    "main",
]


def _check_name(name: str) -> str:
    name = name if name.endswith(".svg") else name + ".svg"
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; the figures are: {', '.join(FIGURES)}")
    return name


def render(name: str) -> bytes:
    """The SVG bytes of figure `name` (``"attention.svg"`` or ``"attention"``)."""
    return FIGURES[_check_name(name)]().encode("utf-8")


PNG_SCALE = 2  # PNG pixels per SVG unit: sharp on high-density screens
_PNG_KEY = b"svg-sha256"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _png_chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    chunks, at = [], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return chunks


def png_source_sha256(png: bytes) -> str | None:
    """The sha256 of the SVG a PNG written by this module was drawn from (None if unrecorded)."""
    for kind, data in _png_chunks(png):
        if kind == b"tEXt" and data.startswith(_PNG_KEY + b"\0"):
            return data[len(_PNG_KEY) + 1 :].decode("ascii")
    return None


def _with_text(png: bytes, key: bytes, value: str) -> bytes:
    """`png` with one tEXt chunk key=value right after IHDR (the first chunk)."""
    data = key + b"\0" + value.encode("ascii")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    ihdr_end = 8 + 12 + struct.unpack(">I", png[8:12])[0]
    return png[:ihdr_end] + chunk + png[ihdr_end:]


def rasterize(svg: bytes, scale: float = PNG_SCALE) -> bytes:
    """PNG bytes of an SVG drawn at `scale`, recording the SVG's sha256 inside the PNG."""
    if shutil.which("rsvg-convert"):
        png = subprocess.run(
            ["rsvg-convert", "-z", str(scale), "-f", "png"], input=svg, capture_output=True, check=True
        ).stdout
    else:
        try:
            import cairosvg
        except ImportError:
            raise RuntimeError(
                "drawing the PNG copies needs a rasteriser: apt-get install "
                "librsvg2-bin (rsvg-convert), or pip install cairosvg"
            ) from None
        png = cairosvg.svg2png(bytestring=svg, scale=scale)
    return _with_text(_palette(png), _PNG_KEY, _sha256(svg))


def _palette(png: bytes, colours: int = 64) -> bytes:
    """The PNG reduced to a palette of `colours` (flat-coloured diagrams lose nothing visible,
    and the file the notebooks embed gets several times smaller). Pillow comes with matplotlib."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    small = image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_name(name: str) -> str:
    return _check_name(name)[:-4] + ".png"


def write_all(out: Path = DEFAULT_OUT, png: bool = True) -> list[Path]:
    """(Re)write every figure into `out` as SVG and, with `png`, as PNG (only where the PNG is
    missing or was drawn from another SVG); returns the paths of the SVGs and PNGs."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in FIGURES:
        path = out / name
        svg = render(name)
        path.write_bytes(svg)
        paths.append(path)
        if png:
            png_path = out / png_name(name)
            if not png_path.exists() or png_source_sha256(png_path.read_bytes()) != _sha256(svg):
                png_path.write_bytes(rasterize(svg))
            paths.append(png_path)
    return paths


# --------------------------------------------------------------------------- notebook embedding


def data_uri(image: bytes, mime: str = "image/png") -> str:
    """``data:<mime>;base64,...`` for the image bytes (base64: '#' and Unicode stay safe)."""
    return f"data:{mime};base64," + base64.b64encode(image).decode("ascii")


def _svg_width(svg: bytes) -> int:
    m = re.search(rb'<svg[^>]*\swidth="([0-9.]+)"', svg)
    if m is None:
        raise ValueError("the SVG has no width")
    return round(float(m.group(1)))


def figure_markdown(
    name: str, alt: str, caption: str = "", width: int | None = None, figures_dir: Path = DEFAULT_OUT
) -> dict:
    """A markdown cell (nbformat 4.5 JSON) showing figure `name` from `figures_dir` (its PNG),
    `width` pixels wide (the SVG's own width if None), with an optional italic caption below."""
    name = _check_name(name)
    folder = Path(figures_dir)
    svg, png = (folder / name).read_bytes(), (folder / png_name(name)).read_bytes()
    if png_source_sha256(png) != _sha256(svg):
        raise ValueError(
            f"{folder / png_name(name)} was drawn from another version of {name}: run onehot2gpt-figures first"
        )
    source = f'<img src="{data_uri(png)}" alt="{escape(alt)}" width="{width or _svg_width(svg)}"/>'
    if caption:
        source += f"\n\n*{caption}*"
    return {
        "cell_type": "markdown",
        "id": "figure-" + name[:-4].replace("_", "-"),
        "metadata": {"slideshow": {"slide_type": "-"}, FIGURE_METADATA_KEY: {"figure": name}},
        "source": source,
    }


_IMG_SRC = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def embedded_figures(notebook: dict) -> dict[str, bytes]:
    """The figures embedded in `notebook` (nbformat JSON) by ``embed_figure``: name -> PNG bytes."""
    found = {}
    for cell in notebook["cells"]:
        name = cell.get("metadata", {}).get(FIGURE_METADATA_KEY, {}).get("figure")
        if name:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            m = _IMG_SRC.search(source)
            if m is None:
                raise ValueError(f"cell {cell.get('id')!r} is marked as figure {name!r} but holds no PNG data URI")
            found[name] = base64.b64decode(m.group(1))
    return found


def stale_figures(notebook: dict, figures_dir: Path = DEFAULT_OUT) -> list[str]:
    """The names of the figures embedded in `notebook` whose copy differs from the PNG file, or
    was drawn from an SVG other than the one in `figures_dir`."""
    folder, stale = Path(figures_dir), []
    for name, png in embedded_figures(notebook).items():
        svg_path, png_path = folder / name, folder / png_name(name)
        if (
            not svg_path.exists()
            or not png_path.exists()
            or png_path.read_bytes() != png
            or png_source_sha256(png) != _sha256(svg_path.read_bytes())
        ):
            stale.append(name)
    return stale


def embed_figure(
    notebook: dict,
    after_cell_id: str,
    name: str,
    caption: str,
    alt: str = "",
    width: int | None = None,
    figures_dir: Path = DEFAULT_OUT,
) -> dict:
    """Insert (or refresh, if already there) the markdown cell of figure `name` right after the
    cell whose id is `after_cell_id`, in place; returns the new cell.

    Example: ``embed_figure(nb, "a1b2c3", "attention", "Scaled dot-product and multi-head
    attention.", width=800)``
    """
    cells = notebook["cells"]
    cell = figure_markdown(name, alt or caption or name, caption, width, figures_dir)
    ids = [c.get("id") for c in cells]
    if after_cell_id not in ids:
        raise KeyError(f"no cell with id {after_cell_id!r} in this notebook")
    if cell["id"] in ids:
        cells.pop(ids.index(cell["id"]))
        ids = [c.get("id") for c in cells]
        if after_cell_id not in ids:
            raise ValueError(f"cell {after_cell_id!r} is the figure cell itself")
    cells.insert(ids.index(after_cell_id) + 1, cell)
    return cell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="onehot2gpt-figures", description="Write the course's architecture figures as SVG and PNG."
    )
    parser.add_argument("--out", type=Path, help="folder for the .svg and .png files (default: notebooks/figures)")
    parser.add_argument("--svg-only", action="store_true", help="write no PNG (needs no rasteriser)")
    args = parser.parse_args(argv)
    if args.out is None and not (DEFAULT_OUT.parents[1] / "pyproject.toml").is_file():
        parser.error(f"--out: {DEFAULT_OUT.parents[1]} is not a clone of the course; give --out DIR")
    out = output_folder(parser, "--out", args.out or DEFAULT_OUT)
    for path in write_all(out, png=not args.svg_only):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
