"""A notebook read without a kernel (GitHub, nbviewer, nbconvert's HTML and slides) shows every
course widget as it was when the notebook ran: each widget output stored in the notebooks carries
its saved view (text/html), and nbconvert, which cannot draw a widget without its state, shows it."""

import json
from pathlib import Path

import pytest
from onehot2gpt import widgets
from onehot2gpt.widgets._base import SavedView

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
COURSE_WIDGETS = tuple(
    name for name, c in vars(widgets).items() if isinstance(c, type) and issubclass(c, SavedView) and c is not SavedView
)


def widget_outputs(path: Path) -> list[dict]:
    """The stored outputs of the course's own widgets (tqdm's bars are widgets too, with text of their own)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        o
        for c in cells
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if WIDGET_VIEW in o.get("data", {}) and "".join(o["data"].get("text/plain", "")).startswith(COURSE_WIDGETS)
    ]


def test_the_course_widgets_are_known():
    assert {
        "ForwardStepper",
        "LogitLens",
        "InterventionExplorer",
        "AllHeadsView",
        "TokenExplorer",
        "SamplingExplorer",
    } <= set(COURSE_WIDGETS)


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if widget_outputs(p)], ids=lambda p: p.stem)
def test_every_stored_widget_shows_its_saved_view_without_a_kernel(path):
    from nbconvert import HTMLExporter

    outputs = widget_outputs(path)
    for o in outputs:
        saved = "".join(o["data"].get("text/html", ""))
        assert "onehot2gpt-snapshot" in saved, (
            f"{path.name}: a widget output without its saved view; re-run the notebook to store it"
        )
    body, _ = HTMLExporter().from_filename(str(path))
    assert body.count("onehot2gpt-snapshot") == len(outputs), (
        f"{path.name}: nbconvert's HTML shows {body.count('onehot2gpt-snapshot')} of {len(outputs)} saved views"
    )
