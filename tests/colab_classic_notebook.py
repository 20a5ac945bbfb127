"""`make test-colab`'s browser step: the widget notebooks on the classic Notebook 6.5 front end with
ipywidgets 7.7.1, the closest thing to Colab's renderer that runs here (Colab's own front end is
not available offline).

Run by the Colab-pinned environment (``.venv-colab/bin/python -m pytest tests/colab_classic_notebook.py``);
`make test` does not collect it (its name does not start with ``test_``), because the main
environment has JupyterLab 4 and ipywidgets 8. For every course notebook that shows a widget: open
it in ``jupyter notebook`` on 127.0.0.1 (every request outside is blocked), run all cells from the
Cell menu, wait until none is running, then check that no cell shows a traceback, that the kernel is
alive, and that every widget the stored notebook displays is drawn (a ``.widget-vbox`` view, not
"Loading widget…" or "Error displaying widget"). In notebook 01 it also types a sentence into the
token explorer and waits for the kernel's answer, so a message from the browser to the kernel and
back is seen to work on ipywidgets 7. Screenshots go to tests/screenshots/classic-*.png.
"""

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    SCREENSHOTS,
    block_the_internet,
    copy_notebooks,
    free_port,
    type_text,
    wait_until,
)
from playwright.sync_api import sync_playwright

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NOTEBOOKS = sorted(
    p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if WIDGET_MIME in p.read_text(encoding="utf-8")
)
RUN_ALL_S = 900
CLASSES = "() => Array.from(document.querySelectorAll('.output_subarea'), e => e.className).slice(0, 40)"


def widget_cells(path: Path) -> int:
    """How many code cells of the stored notebook display a widget that stays (a progress bar's widget,
    saved with an empty text, closes when its loop ends: onehot2gpt.progress)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(
        any(WIDGET_MIME in o.get("data", {}) and "".join(o["data"].get("text/plain", "")) for o in c.get("outputs", []))
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import ipywidgets
    import notebook

    assert notebook.__version__.startswith("6.5") and ipywidgets.__version__ == "7.7.1", (
        "run this in the Colab-pinned environment: make test-colab"
    )
    home = tmp_path_factory.mktemp("classic")
    root = copy_notebooks(home)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        HF_HUB_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env.setdefault("OMP_NUM_THREADS", "2")
    log = open(home / "notebook.log", "wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "notebook",
            "--allow-root",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--NotebookApp.token={token}",
            "--NotebookApp.port_retries=0",
            f"--NotebookApp.notebook_dir={root}",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )

    def up():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5):
                return True
        except OSError:
            return process.poll() is not None and (_ for _ in ()).throw(
                AssertionError((home / "notebook.log").read_text(errors="replace")[-3000:])
            )

    wait_until(up, 120, "the classic notebook server to answer")
    yield f"http://127.0.0.1:{port}", token
    process.terminate()
    process.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def prompts(page) -> list[str]:
    return [t.strip() for t in page.locator(".code_cell .input_prompt").all_inner_texts()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_widget_notebook_runs_and_draws_its_widgets_in_classic_notebook(server, browser, path):
    base, token = server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    block_the_internet(context)
    page = context.new_page()
    page.goto(f"{base}/notebooks/{path.name}?token={token}")
    page.locator("#kernel_indicator_icon.kernel_idle_icon").wait_for(timeout=120_000)
    page.locator("#celllink").click()
    page.locator("#run_all_cells").click()
    wait_until(lambda: any("*" in p for p in prompts(page)), 30, "the cells to be queued after Run All")
    start = time.monotonic()
    wait_until(
        lambda: not any("*" in p for p in prompts(page)), RUN_ALL_S, f"all cells of {path.name} to run", interval=1.0
    )
    page.locator("#kernel_indicator_icon.kernel_idle_icon").wait_for(timeout=60_000)
    errors = page.locator(".output_error").all_inner_texts()
    assert not errors, f"{path.name}: a cell failed in the classic notebook:\n{errors[0][-2500:]}"
    expected = widget_cells(path)  # widgets and tqdm's progress bars (ipywidgets HBoxes)
    views = page.locator(".output_area:has(.output_subarea .jupyter-widgets)")
    wait_until(
        lambda: views.count() >= expected,
        60,
        lambda: (
            f"{expected} outputs with a drawn widget in {path.name} (found {views.count()}; "
            f"output classes {page.evaluate(CLASSES)})"
        ),
    )
    text = page.locator("#notebook-container").inner_text()
    assert "Error displaying widget" not in text and "Loading widget..." not in text, text[-2000:]
    if path.stem == "01_onehot":  # one round trip browser → kernel → browser
        root = page.locator(".output_subarea .widget-vbox").first
        type_text(root, "Sentence", "The quokka paid the bank.")
        wait_until(lambda: "quokka" in root.inner_text(), 60, "the token explorer's answer")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"classic-{path.stem}.png"), full_page=False)
    print(f"{path.name}: {expected} widget cells drawn, {time.monotonic() - start:.0f} s")
    context.close()
