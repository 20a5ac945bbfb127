"""What tests/test_browser.py needs to drive JupyterLab as a student would: a JupyterLab server on
127.0.0.1 with a token, Debian's Chromium under Playwright, and a page object for one notebook
(run all cells, find a widget's controls by their descriptions, wait for the kernel's answer).

ipywidgets 8 renders each control as ``.widget-<kind>`` with its description in a
``.widget-label``; the locators below rely on that, and on JupyterLab 4's class names
(``.jp-CodeCell``, ``.jp-InputPrompt``, ``.jp-OutputArea-output``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from one_run import is_solved_copy, one_run_notebook
from onehot2gpt_teach.student import cell_tags

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "tests" / "screenshots"
CHROMIUM = os.environ.get("ONEHOT2GPT_CHROMIUM", "/usr/bin/chromium")
# Flags that work as root in a container (and keep Chromium from calling home).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]
# Where bertviz's own pages load their scripts from. Every request outside 127.0.0.1 is blocked, these
# too: the course's views, bertviz_view's pages among them (onehot2gpt.vendor), need no network.
BERTVIZ_SCRIPTS = (
    "https://cdnjs.cloudflare.com/ajax/libs/require.js/",
    "https://cdnjs.cloudflare.com/ajax/libs/d3/",
    "https://cdnjs.cloudflare.com/ajax/libs/jquery/",
)
# JupyterLab settings for a test: every cell in the DOM (no virtual scrolling), never save the
# notebook, no pop-ups asking about news or updates, no extension manager searching PyPI.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/extensionmanager-extension/plugin": {"enabled": False},
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(ok: bool, reason: str) -> None:
    """Stop the test when a browser prerequisite is missing: a failure under CI, a skip elsewhere."""
    if ok:
        return
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the browser test must run in CI)", pytrace=False)
    pytest.skip(reason)


def wait_until(check, timeout: float, what, interval: float = 0.25):
    """Poll `check()` until it returns something truthy (returned) or `timeout` seconds pass; then
    fail saying `what` (a string, or a function giving one then) was awaited and what `check` last
    returned or raised."""
    deadline, last = time.monotonic() + timeout, None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as exc:  # a page still rendering: try again until the deadline
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            what = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def exact(text: str) -> re.Pattern:
    """A pattern matching an element whose whole text is `text` (for has_text=)."""
    return re.compile(rf"^\s*{re.escape(text)}\s*$")


# -- the server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """``jupyter lab`` on 127.0.0.1 with a random token, serving `root`; its log goes to `log`."""

    def __init__(self, root: Path, home: Path):
        self.root, self.home = root, home
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.log = home / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path}{sep}token={self.token}"

    def start(self, timeout: float = 120):
        settings = self.home / "user-settings"
        for name, values in LAB_SETTINGS.items():
            target = settings / f"{name}.jupyterlab-settings"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        env = dict(os.environ)
        env.update(
            {
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "JUPYTER_CONFIG_DIR": str(self.home / "config"),  # ignore the user's Jupyter config
                "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
                "JUPYTER_DATA_DIR": str(self.home / "data"),  # the notebook-signing key goes here
                "HF_HUB_OFFLINE": "1",  # the kernels never download models
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.setdefault("OMP_NUM_THREADS", "2")
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--allow-root",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

        def ready():
            if self.process.poll() is not None:
                raise AssertionError(
                    f"jupyter lab exited with code {self.process.returncode}:\n{self.log_text()[-3000:]}"
                )
            try:
                return self.api("GET", "api/status")
            except (urllib.error.URLError, ConnectionError, OSError):
                return None

        try:
            wait_until(ready, timeout, f"JupyterLab to answer on port {self.port}", interval=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- jupyterlab.log ---\n{self.log_text()[-3000:]}") from None

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def api(self, method: str, path: str):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else {}

    def session(self, path: str) -> dict | None:
        """The server's session for the notebook at `path` (relative to root), with its kernel."""
        for session in self.api("GET", "api/sessions"):
            if session.get("path") == path:
                return session
        return None

    def shut_down(self, path: str):
        session = self.session(path)
        if session:
            self.api("DELETE", f"api/sessions/{session['id']}")


def block_the_internet(context):
    """Abort every request a page makes outside 127.0.0.1."""

    def handle(route):
        url = route.request.url
        if urlparse(url).hostname in ("127.0.0.1", None):
            route.continue_()
        else:
            route.abort("blockedbyclient")

    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), handle)


def browser_available() -> bool:
    """Whether this machine has what the browser test needs (Playwright and Chromium)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists()


# JupyterLab's cell tag for "this cell is expected to raise": Run All Cells goes on past its error.
RAISES = "raises-exception"


def copy_notebooks(dest: Path) -> Path:
    """Copy the course notebooks to `dest`/notebooks and, to `dest`/notebooks/student, what the
    browser runs for each: its student version with the course's solutions added after its checks
    (tests/one_run.py), so that one run tests both versions. A run in the browser never writes to
    the repository's notebooks, whatever JupyterLab saves. The student version's own check cells
    also get the tag ``raises-exception``, so that Run All Cells runs the whole notebook although
    they fail (a student meets them one by one; the test wants every cell's outcome in one run)."""
    target = dest / "notebooks"
    (target / "student").mkdir(parents=True)
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy2(path, target / path.name)
        course = json.loads(path.read_text(encoding="utf-8"))
        student = json.loads((ROOT / "notebooks" / "student" / path.name).read_text(encoding="utf-8"))
        notebook = one_run_notebook(course, student)
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code" and "check" in cell_tags(cell) and not is_solved_copy(cell):
                cell.setdefault("metadata", {})["tags"] = [*cell_tags(cell), RAISES]
        (target / "student" / path.name).write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return target


# -- one notebook in the browser ----------------------------------------------------------------


class LabPage:
    """One browser tab with JupyterLab loaded once, in its own workspace; the notebooks open and
    close in it one after another as a student's do (File → Open from Path…, File → Close All
    Tabs), so the app is not loaded again for each notebook (about 3 s of Chromium's time less per
    notebook on 2 cores). When closing leaves anything behind, the app is loaded afresh."""

    def __init__(self, context, lab: JupyterLab, name: str):
        self.context, self.lab, self.name = context, lab, name
        self.page = None

    def load(self, timeout: float = 120):
        if self.page is None or self.page.is_closed():
            self.page = self.context.new_page()
        self.page.goto(self.lab.url(f"lab/workspaces/{self.name}?reset"))
        self.page.locator(".jp-LabShell").wait_for(timeout=timeout * 1000)
        self.page.locator(".jp-DirListing").first.wait_for(timeout=timeout * 1000)

    def menu(self, menu: str, item: str):
        """Choose `item` (the start of its label) from the menu bar's `menu`."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=exact(menu)).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^\s*{re.escape(item)}")).click()

    def open(self, path: str):
        self.menu("File", "Open from Path")
        box = self.page.locator(".jp-Dialog input")
        box.fill(path)
        box.press("Enter")

    def clear(self, timeout: float = 30):
        """Close every tab (a notebook with unsaved changes: Discard); reload if that fails."""
        try:
            self.menu("File", "Close All Tabs")
            for _ in range(10):
                dialog = self.page.locator(".jp-Dialog")
                try:
                    dialog.first.wait_for(timeout=1000)
                except Exception:  # Playwright's timeout: no (more) dialog
                    break
                discard = dialog.locator(".jp-Dialog-button", has_text=exact("Discard"))
                (discard if discard.count() else dialog.locator(".jp-Dialog-button.jp-mod-accept")).first.click()
            left = ".jp-NotebookPanel, .jp-LogConsolePanel, .jp-Dialog"
            wait_until(lambda: self.page.locator(left).count() == 0, timeout, "every tab to close")
        except Exception:  # a dialog or panel left over: start from a freshly loaded app
            self.load()


STDERR = "application/vnd.jupyter.stderr"  # how JupyterLab renders an error output (and stderr)
_ERROR_LINE = re.compile(r"^\s*(Traceback.*\(most recent call last\)|[A-Za-z_][\w.]*(Error|Exception): )")


def _shows_an_error(text: str, mime: str = STDERR) -> bool:
    return "Traceback (most recent call last)" in text or (mime == STDERR and bool(_ERROR_LINE.match(text)))


class Notebook:
    """One notebook open in the JupyterLab tab `lab_page`, until close()."""

    def __init__(self, lab_page: LabPage, lab: JupyterLab, path: str):
        self.lab_page, self.lab, self.path, self.stem = lab_page, lab, path, Path(path).stem
        if lab_page.page is None or lab_page.page.is_closed():
            lab_page.load()
        self.page = lab_page.page
        self.external: dict[str, str] = {}  # URL outside 127.0.0.1 → "pending", "ok", "failed: …"
        self.page.on("request", self._on_request)
        self.page.on("response", self._on_response)
        self.page.on("requestfailed", self._on_failed)
        self.shots = 0

    def _on_request(self, request):
        if urlparse(request.url).hostname not in ("127.0.0.1", None):
            self.external.setdefault(request.url, "pending")

    def _on_response(self, response):
        if urlparse(response.url).hostname not in ("127.0.0.1", None):
            self.external[response.url] = "ok" if response.ok else f"HTTP {response.status}"

    def _on_failed(self, request):
        if urlparse(request.url).hostname not in ("127.0.0.1", None):
            self.external[request.url] = f"failed: {request.failure}"

    def open(self, timeout: float = 120):
        self.lab_page.open(self.path)
        first_cell = self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell").first
        first_cell.wait_for(timeout=timeout * 1000)
        panels = self.page.locator(".jp-NotebookPanel").count()
        assert panels == 1, f"{self.path}: {panels} notebooks open in the tab, expected this one only"
        wait_until(
            lambda: self.kernel_state() == "idle",
            timeout,
            lambda: f"the kernel of {self.path} to start (state {self.kernel_state_or_none()!r})",
        )
        # The frontend's own view of the kernel (toolbar indicator) must be idle too.
        self.wait_frontend_idle(timeout)

    def close(self):
        try:
            for event, handler in (
                ("request", self._on_request),
                ("response", self._on_response),
                ("requestfailed", self._on_failed),
            ):
                self.page.remove_listener(event, handler)
            self.lab_page.clear()
        finally:
            self.lab.shut_down(self.path)

    # -- the kernel --------------------------------------------------------------------------

    def kernel_state_or_none(self):
        try:
            return self.kernel_state()
        except Exception as exc:
            return f"unknown ({exc})"

    def kernel_state(self) -> str | None:
        session = self.lab.session(self.path)
        return session and session["kernel"]["execution_state"]

    def wait_frontend_idle(self, timeout: float):
        indicator = self.page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator")
        wait_until(
            lambda: indicator.first.get_attribute("data-status") == "idle",
            timeout,
            "JupyterLab's kernel indicator to say idle",
        )

    def assert_kernel_alive(self, timeout: float = 60):
        """The kernel answered, is idle, and JupyterLab shows no 'kernel died/restarting' dialog."""
        dialogs = self.page.locator(".jp-Dialog")
        if dialogs.count():
            raise AssertionError(f"{self.path}: JupyterLab shows a dialog: {dialogs.first.inner_text()!r}")
        wait_until(
            lambda: self.kernel_state() == "idle",
            timeout,
            lambda: f"the kernel of {self.path} to be idle (state {self.kernel_state_or_none()!r})",
        )
        self.wait_frontend_idle(timeout)

    # -- figures -----------------------------------------------------------------------------

    def figures_shown(self) -> dict[str, bool]:
        """alt text → whether that figure's image in a rendered markdown cell decoded (has a
        natural width), for every embedded PNG figure (``onehot2gpt_teach.figures``) on the page."""
        return self.page.evaluate("""() => Object.fromEntries(
            Array.from(document.querySelectorAll('.jp-MarkdownOutput img'))
                 .filter(img => img.src.startsWith('data:image/png'))
                 .map(img => [img.alt, img.complete && img.naturalWidth > 0]))""")

    # -- cells -------------------------------------------------------------------------------

    def prompts(self) -> list[str]:
        return [t.strip() for t in self.page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]

    _PROGRESS = r"""() => {
        const cells = Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell'));
        return [cells.map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || ''),
                cells.map(c => Array.from(c.querySelectorAll('.jp-OutputArea-output'))
                     .some(o => o.textContent.includes('Traceback (most recent call last)')
                                || (o.dataset.mimeType === 'application/vnd.jupyter.stderr'
                                    && /^\s*[A-Za-z_][\w.]*(Error|Exception): /.test(o.textContent))))];
    }"""

    def run_all(self, n_code_cells: int, timeout: float, may_fail: list[bool]):
        """Run → Run All Cells from the menu bar; wait until no cell is queued or running, then
        check that every code cell ran once, in order, in this kernel. `may_fail` has one flag per
        code cell of the page, in order, True for the cells expected to fail (a student version's
        checks, tagged raises-exception; the caller examines their errors in the saved file); a
        traceback in any other cell ends the wait."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=exact("Run")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=exact("Run All Cells")).click()
        wait_until(
            lambda: any("*" in p for p in self.prompts()),
            30,
            "JupyterLab to queue the cells ([*] prompts) after Run All Cells",
        )

        def finished():
            # One call into the page every 2 s, reading textContent (no layout, unlike innerText):
            # the prompts and, for each code cell, whether an output shows a traceback.
            prompts, shown = self.page.evaluate(self._PROGRESS)
            if any("*" in p for p in prompts):
                return False
            if sum(bool(re.search(r"\[\d+\]", p)) for p in prompts) >= n_code_cells:
                return True
            # After the first failing check JupyterLab clears the [*] of the queued cells while the
            # kernel goes on running them (and the kernel's reported state is no guide: widget
            # messages flip it to idle mid-cell). The run has stopped early only if a cell that
            # may not fail shows a traceback.
            return any(tb and not allowed for tb, allowed in zip(shown, may_fail))

        try:
            wait_until(finished, timeout, f"all cells of {self.path} to run", interval=2.0)
        except AssertionError:
            running = self.page.locator(".jp-CodeCell", has=self.page.locator(".jp-InputPrompt", has_text="[*]")).first
            source = running.locator(".jp-InputArea-editor").inner_text() if running.count() else "?"
            raise AssertionError(
                f"{self.path}: cells still running after {timeout:.0f} s; the first one starts {source[:200]!r}"
            ) from None
        numbers = [int(m[1]) for p in self.prompts() if (m := re.search(r"\[(\d+)\]", p))]
        assert numbers == list(range(1, n_code_cells + 1)), (
            f"{self.path}: Run All Cells should run its {n_code_cells} code cells once each, in order, "
            f"in a fresh kernel; the prompts read {self.prompts()}; the last traceback in the page: "
            f"{(self.tracebacks() or ['none'])[-1][-1500:]}"
        )
        self.assert_kernel_alive()

    def cell(self, source: str):
        """The code cell whose source contains `source` (exactly one)."""
        cells = self.page.locator(".jp-CodeCell").filter(has=self.page.locator(".jp-InputArea-editor", has_text=source))
        assert cells.count() == 1, f"{self.path}: {cells.count()} code cells contain {source!r}"
        return cells.first

    def widget(self, source: str, timeout: float = 30):
        """The root view of the widget displayed by the cell containing `source`."""
        root = self.cell(source).locator(".jp-OutputArea-output .jupyter-widgets.widget-vbox").first
        root.wait_for(timeout=timeout * 1000)
        root.scroll_into_view_if_needed()
        return root

    # -- checks and pictures -----------------------------------------------------------------

    def log_console(self) -> str:
        """The text of JupyterLab's log console for this notebook (View → Show Log Console): where
        the output of widget callbacks goes, tracebacks included."""
        panel = self.page.locator(".jp-LogConsolePanel")
        if not panel.count():
            self.page.locator(".lm-MenuBar-itemLabel", has_text=exact("View")).click()
            self.page.locator(".lm-Menu-itemLabel", has_text=exact("Show Log Console")).click()
            panel.wait_for(timeout=30_000)
        return panel.inner_text()

    def tracebacks(self, where=None) -> list[str]:
        """The outputs inside `where` (default: the notebook) that show a Python error: a traceback,
        or, in an error output (JupyterLab renders those as stderr), the short form a failing check
        renders (its exception's line, then its message). Printed text that merely names an error
        is not one."""
        where = where or self.page.locator(".jp-Notebook")
        outputs = where.locator(".jp-OutputArea-output").evaluate_all(
            "nodes => nodes.map(n => [n.innerText, n.dataset.mimeType || ''])"
        )
        return [text for text, mime in outputs if _shows_an_error(text, mime)]

    def assert_no_traceback(self, where=None, log_console: bool = False, besides: list[str] = ()):
        """No Python traceback in the outputs inside `where` (default: the notebook) other than
        those in `besides` (a student version's failing checks), nor in the log console when
        `log_console` is true (a widget callback that raised)."""
        tracebacks = [t for t in self.tracebacks(where) if t not in besides]
        if log_console and "Traceback (most recent call last)" in (console := self.log_console()):
            tracebacks.append(console)
        assert not tracebacks, f"{self.path}: a Python traceback in the page:\n{tracebacks[0][-2500:]}"

    def save(self, timeout: float = 60) -> dict:
        """File → Save Notebook; wait until the file on disk holds this run (it changed and parses)
        and return it as nbformat JSON."""
        file = self.lab.root / self.path
        before = file.stat().st_mtime_ns
        self.page.locator(".lm-MenuBar-itemLabel", has_text=exact("File")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=exact("Save Notebook")).click()

        def saved():
            if file.stat().st_mtime_ns == before:
                return None
            try:
                return json.loads(file.read_text(encoding="utf-8"))
            except json.JSONDecodeError:  # caught while the server writes it
                return None

        return wait_until(saved, timeout, f"JupyterLab to save {self.path}")

    def screenshot(self, target, step: str):
        """Save `target` (a locator, or the page) as tests/screenshots/<notebook>-<n>-<step>.png."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.shots += 1
        path = SCREENSHOTS / f"{self.stem}-{self.shots:02d}-{step}.png"
        target.screenshot(path=str(path))
        return path


# -- controls inside one widget, found by their descriptions -------------------------------------


def control(root, kind: str, label: str):
    """The ``.widget-<kind>`` control inside widget `root` whose description is `label`."""
    page = root.page
    found = root.locator(f".widget-{kind}").filter(has=page.locator(".widget-label", has_text=exact(label)))
    assert found.count() == 1, f"{found.count()} {kind} controls labelled {label!r} in the widget"
    return found.first


def slider_value(root, label: str) -> str:
    return control(root, "slider", label).locator(".widget-readout").inner_text().strip()


def press_slider(root, label: str, key: str, times: int = 1) -> str:
    """Focus a slider's handle and press an arrow key, as a keyboard user moves it; returns the new
    readout. Each press is one step and (continuous_update=False) one message to the kernel."""
    handle = control(root, "slider", label).locator(".noUi-handle").first
    for _ in range(times):
        handle.focus()
        handle.press(key)
    return slider_value(root, label)


def type_text(root, label: str, text: str):
    """Type into a Text box and press Enter (a Text with continuous_update=False sends then)."""
    box = control(root, "text", label).locator("input")
    box.fill(text)
    box.press("Enter")


def type_textarea(root, label: str, text: str):
    """Type into a Textarea and leave it with Tab (it sends its value when it loses focus)."""
    box = control(root, "textarea", label).locator("textarea")
    box.fill(text)
    box.press("Tab")


def dropdown_options(root, label: str) -> list[str]:
    """A Dropdown's option texts (ipywidgets writes their spaces as no-break spaces)."""
    select = control(root, "dropdown", label).locator("select")
    return [t.replace("\xa0", " ") for t in select.evaluate("s => Array.from(s.options, o => o.text)")]


def choose(root, label: str, option: str):
    """Pick `option` from the Dropdown labelled `label`, as a click on the menu would."""
    options = dropdown_options(root, label)
    assert option in options, f"no {option!r} in the {label} menu: {options}"
    control(root, "dropdown", label).locator("select").select_option(index=options.index(option))


def dropdown_value(root, label: str) -> str:
    select = control(root, "dropdown", label).locator("select")
    text = select.evaluate("s => s.selectedIndex < 0 ? '' : s.options[s.selectedIndex].text")
    return text.replace("\xa0", " ").strip()


def image_src(image) -> str:
    """The src of an ipywidgets Image view: a fresh blob: URL each time the kernel sends a PNG."""
    return image.evaluate("img => img.complete && img.naturalWidth > 0 ? img.src : ''")
