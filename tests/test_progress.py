"""The course's progress bars (onehot2gpt.progress): in a notebook a finished bar leaves one readable
line ("SST-2: 50/50, 5 s"), never tqdm's saved "0%", and the seconds are masked for nbval."""

import io
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbval.plugin import get_sanitize_patterns
from onehot2gpt.progress import progress_bar

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def quiet(**kwargs):
    return progress_bar(file=io.StringIO(), **kwargs)


def test_the_closing_line_says_how_far_it_got_and_how_long_it_took():
    bar = quiet(total=150, desc="SST-2")
    bar.update(150)
    assert re.fullmatch(r"SST-2: 150/150, \d\.\d s", bar.closing_line())
    bar.close()
    cut = quiet(total=50, desc="SNLI")
    cut.update(20)
    assert re.fullmatch(r"SNLI: stopped at 20/50, \d\.\d s", cut.closing_line())
    cut.close()
    endless = quiet(desc="pages")
    endless.update(7)
    assert re.fullmatch(r"pages: 7, \d\.\d s", endless.closing_line())
    endless.close()
    download = quiet(total=3_000_000, unit="B", unit_scale=True, desc="wikitext")
    download.update(1_500_000)
    assert re.fullmatch(r"wikitext: stopped at 1\.50MB/3\.00MB, \d\.\d s", download.closing_line())
    download.close()
    nameless = quiet(total=2)
    nameless.update(2)
    assert re.fullmatch(r"2/2, \d\.\d s", nameless.closing_line())
    nameless.close()


def test_outside_a_notebook_it_prints_no_extra_line(capsys):
    with quiet(total=3, desc="steps") as bar:
        bar.update(3)
    assert capsys.readouterr().out == ""


def test_nbval_masks_the_seconds_of_every_closing_line():
    patterns = get_sanitize_patterns((ROOT / "tests" / "sanitize.cfg").read_text(encoding="utf-8"))

    def sanitized(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    for a, b in [
        ("SST-2: 50/50, 5.2 s\n", "SST-2: 50/50, 41 s\n"),
        ("x: stopped at 20/50, 3.0 s\n", "x: stopped at 20/50, 12 s\n"),
        ("wikitext: 1.50MB/3.00MB, 0.4 s", "wikitext: 1.50MB/3.00MB, 9.9 s"),
    ]:
        assert sanitized(a) == sanitized(b) and sanitized(a) != a
    assert sanitized("accuracy 0.91, 3 seeds") == "accuracy 0.91, 3 seeds"  # only the bar's line


def test_in_a_kernel_the_saved_outputs_show_the_line_not_the_bar(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from onehot2gpt.progress import IN_NOTEBOOK, progress_bar\n"
            "assert IN_NOTEBOOK\n"
            "for _ in progress_bar(range(3), desc='steps'):\n    pass"
        ),
        nbformat.v4.new_code_cell(
            "try:\n"
            "    with progress_bar(total=5, desc='cut') as bar:\n"
            "        bar.update(2)\n"
            "        raise KeyboardInterrupt\n"
            "except KeyboardInterrupt:\n"
            "    pass"
        ),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute(cwd=str(tmp_path))
    for cell, line in zip(nb.cells, (r"steps: 3/3, \d+\.\d s\n", r"cut: stopped at 2/5, \d+\.\d s\n")):
        widgets = [o for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
        assert len(widgets) == 1 and widgets[0]["data"]["text/plain"] == "", cell.outputs
        text = "".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")
        assert re.fullmatch(line, text), text
        assert "0%" not in str(cell.outputs)
