"""The architecture figures: well-formed SVG, written deterministically, committed copies up to
date, and markdown cells that embed them (and notice when an embedded copy is stale)."""

import base64
import hashlib
import re
import struct
import xml.etree.ElementTree as ET

import nbformat
import pytest
from onehot2gpt_teach import figures

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_figure_is_well_formed_svg_with_size(name):
    root = ET.fromstring(figures.render(name))
    assert root.tag == SVG + "svg"
    width, height = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert width > 0 and height > 0
    assert root.find(SVG + "title").text
    # Every drawn box and text lies inside the canvas.
    for el in root.iter():
        for attr, limit in (("x", width), ("y", height)):
            if el.get(attr) is not None and el.tag in (SVG + "rect", SVG + "text"):
                assert -1 <= float(el.get(attr)) <= limit + 1, (name, el.tag, el.attrib)


def test_the_command_writes_the_same_bytes_twice(tmp_path):
    figures.main(["--out", str(tmp_path / "a"), "--svg-only"])
    figures.main(["--out", str(tmp_path / "b"), "--svg-only"])
    for name in figures.FIGURES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_committed_figures_are_what_the_code_writes():
    for name in figures.FIGURES:
        path = figures.DEFAULT_OUT / name
        assert path.exists(), f"{path} is missing: run onehot2gpt-figures"
        assert path.read_bytes() == figures.render(name), f"{path} is out of date: run onehot2gpt-figures"


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_each_png_copy_was_drawn_from_the_current_svg(name):
    png = figures.DEFAULT_OUT / figures.png_name(name)
    assert png.exists(), f"{png} is missing: run onehot2gpt-figures"
    data = png.read_bytes()
    assert figures.png_source_sha256(data) == hashlib.sha256(figures.render(name)).hexdigest(), (
        f"{png} was drawn from another version of {name}: run onehot2gpt-figures"
    )
    width, height = struct.unpack(">II", data[16:24])  # IHDR: the PNG's pixel size
    root = ET.fromstring(figures.render(name))
    assert (width, height) == tuple(round(figures.PNG_SCALE * float(root.get(k))) for k in ("width", "height"))


def test_a_png_is_not_redrawn_while_its_svg_is_unchanged(tmp_path, monkeypatch):
    for name in figures.FIGURES:  # the committed, current copies
        (tmp_path / name).write_bytes((figures.DEFAULT_OUT / name).read_bytes())
        png = figures.png_name(name)
        (tmp_path / png).write_bytes((figures.DEFAULT_OUT / png).read_bytes())

    def no_rasteriser(svg, scale=figures.PNG_SCALE):
        raise AssertionError("a current PNG was drawn again")

    monkeypatch.setattr(figures, "rasterize", no_rasteriser)
    figures.write_all(tmp_path)  # needs no rasteriser


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 05 · Attention", id="title"),
        nbformat.v4.new_code_cell("x = 1", id="code-1"),
    ]
    return nb


def test_embed_figure_inserts_a_valid_cell_holding_the_file():
    nb = _notebook()
    cell = figures.embed_figure(nb, "title", "attention", "Scaled dot-product attention.", width=800)
    assert [c["id"] for c in nb.cells] == ["title", "figure-attention", "code-1"]
    nbformat.validate(nbformat.from_dict(nb))
    src = re.search(r'src="data:image/png;base64,([^"]+)"', cell["source"]).group(1)
    assert base64.b64decode(src) == (figures.DEFAULT_OUT / "attention.png").read_bytes()
    assert 'width="800"' in cell["source"] and "*Scaled dot-product attention.*" in cell["source"]
    assert figures.stale_figures(nb) == []
    # Embedding again refreshes the cell instead of adding a second one.
    figures.embed_figure(nb, "code-1", "attention.svg", "Attention.")
    assert [c["id"] for c in nb.cells] == ["title", "code-1", "figure-attention"]


def test_a_stale_embedded_copy_is_detected(tmp_path):
    nb = _notebook()
    figures.embed_figure(nb, "title", "gpt_decoder", "GPT.", figures_dir=figures.DEFAULT_OUT)
    changed = tmp_path / "gpt_decoder.svg"  # the SVG changed, the PNG did not
    changed.write_bytes(figures.render("gpt_decoder").replace(b"softmax", b"soft-max"))
    (tmp_path / "gpt_decoder.png").write_bytes((figures.DEFAULT_OUT / "gpt_decoder.png").read_bytes())
    assert figures.stale_figures(nb, tmp_path) == ["gpt_decoder.svg"]
    assert figures.stale_figures(nb) == []
    with pytest.raises(ValueError, match="another version"):  # and it cannot be embedded so
        figures.embed_figure(nb, "title", "gpt_decoder", "GPT.", figures_dir=tmp_path)


def test_bad_input_is_a_clear_error():
    nb = _notebook()
    with pytest.raises(KeyError, match="unknown figure 'resnet.svg'.*attention.svg"):
        figures.embed_figure(nb, "title", "resnet", "No such figure.")
    with pytest.raises(KeyError, match="no cell with id 'nope'"):
        figures.embed_figure(nb, "nope", "attention", "Attention.")
    with pytest.raises(KeyError, match="unknown figure"):
        figures.render("nope.svg")


def test_labels_use_sub_and_superscripts():
    svg = figures.render("attention").decode()
    assert ">Q K<tspan" in svg and "font-size" in svg  # K^T drawn as a superscript
    assert "\\u2212" not in svg and "_{" not in svg and "^{" not in svg


@pytest.mark.parametrize("exporter", ["HTMLExporter", "SlidesExporter"])
def test_nbconvert_html_and_slides_keep_the_embedded_figure(exporter):
    import nbconvert

    nb = _notebook()
    figures.embed_figure(nb, "title", "bert_input", "BERT's input.")
    html, _ = getattr(nbconvert, exporter)().from_notebook_node(nbformat.from_dict(nb))
    data = base64.b64encode((figures.DEFAULT_OUT / "bert_input.png").read_bytes()).decode()
    assert f'src="data:image/png;base64,{data}"' in html
