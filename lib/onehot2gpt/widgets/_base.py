"""What every course widget shares: the saved static view (for GitHub, nbviewer and nbconvert),
the error line a failed update shows, and small HTML helpers."""

from __future__ import annotations

import base64
import functools
import html
import io

import ipywidgets as W

ERROR_STYLE = "color:#b00020"
# ipywidgets gives a control's description a fixed width that cuts anything longer than about 8
# characters ("Temperat…"); controls with a longer description take this style: their own width.
WIDE_LABEL = {"description_width": "initial"}
NOTICE_STYLE = "color:#8a5a00"


def error_html(exc: Exception) -> str:
    return f"<span style='{ERROR_STYLE}'>⚠ {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>"


def notice_html(notice: str) -> str:
    return f"<span style='{NOTICE_STYLE}'>ℹ {html.escape(notice)}</span>" if notice else ""


def safe_update(update):
    """Run a widget update; show any exception in ``.status`` instead of raising in the kernel, else
    the notice the update returns (or nothing).

    The views and the attributes code reads stay as the last good update left them: an update
    sets them together, at its end."""

    @functools.wraps(update)
    def wrapper(self, *_):
        try:
            notice = update(self)
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            self.status.value = error_html(exc)
            return
        self.status.value = notice_html(notice)

    return wrapper


class TokenTexts:
    """``token_text(i)``: token i alone as ``self.decode`` writes it, decoded once (``<i>`` for a
    special or partial token the tokenizer cannot show alone)."""

    def token_text(self, i: int) -> str:
        cache = self.__dict__.setdefault("_token_texts", {})
        if i not in cache:
            try:
                cache[i] = self.decode([i])
            except Exception:
                cache[i] = f"<{i}>"
        return cache[i]


# -- a saved picture of every widget ---------------------------------------------------------------

_SNAPSHOT_NOTE = (
    "<div style='font-size:smaller;color:#666'>A saved view of an interactive widget, as "
    "it was when the cell ran: run the notebook to use it.</div>"
)


def _control_html(widget) -> str:
    """A control as static text: its description and the value it shows."""
    label = html.escape(getattr(widget, "description", "") or "")
    if isinstance(widget, W.Button):
        return f"<button disabled>{label}</button>"
    if isinstance(widget, (W.Dropdown, W.ToggleButtons, W.RadioButtons, W.Select)):
        value = widget.label
    elif isinstance(widget, W.SelectMultiple):
        value = ", ".join(widget.label) or "(none)"
    elif isinstance(widget, (W.Checkbox, W.ToggleButton)):
        value = "☑" if widget.value else "☐"
    else:
        value = widget.value
    value = html.escape(str(value)).replace("\n", "<br>")
    return (
        f"<span style='margin-right:12px'><b>{label}</b> <code>{value}</code></span>"
        if label
        else f"<code>{value}</code>"
    )


def snapshot_html(widget) -> str:
    """The widget as static HTML: its texts, tables and pictures as they are now, its controls as
    text. What GitHub, nbviewer and nbconvert's HTML and slides show, where no kernel draws it."""
    layout = getattr(widget, "layout", None)
    if layout is not None and layout.display == "none":
        return ""
    if isinstance(widget, W.Box):
        inner = "".join(snapshot_html(c) for c in widget.children)
        direction = "row" if isinstance(widget, W.HBox) else "column"
        wrap = "flex-wrap:wrap;" if direction == "row" else ""
        return f"<div style='display:flex;flex-direction:{direction};{wrap}gap:6px'>{inner}</div>"
    if isinstance(widget, W.Image):
        if not widget.value:
            return ""
        data = base64.b64encode(bytes(widget.value)).decode("ascii")
        width = f"max-width:{widget.layout.max_width};" if widget.layout.max_width else "max-width:100%;"
        return f"<img style='{width}' src='data:image/{widget.format};base64,{data}'>"
    if isinstance(widget, (W.HTML, W.HTMLMath)):
        return f"<div>{widget.value}</div>"
    if isinstance(widget, W.Label):
        return f"<span>{html.escape(widget.value)}</span>"
    if isinstance(widget, (W.ValueWidget, W.Button)):
        return _control_html(widget)
    return ""


class SavedView:
    """Displays the widget with a static picture of its state beside it (``text/html``): a
    notebook saved after running then reads on GitHub, nbviewer and in nbconvert's HTML and slides
    (which cannot draw a widget without a kernel), while JupyterLab, Notebook and Colab draw the
    live widget, which they prefer. :meth:`snapshot` gives the same picture of the current state."""

    def snapshot(self):
        from IPython.display import HTML

        return HTML(self.saved_view())

    def saved_view(self) -> str:
        return f"<div class='onehot2gpt-snapshot'>{_SNAPSHOT_NOTE}{snapshot_html(self)}</div>"

    def _repr_mimebundle_(self, **kwargs):
        parent = getattr(super(), "_repr_mimebundle_", None)
        if parent is not None:
            data = dict(parent(**kwargs) or {})
        else:  # ipywidgets 7 displays through _ipython_display_
            view = {"version_major": 2, "version_minor": 0, "model_id": self._model_id}
            data = {"text/plain": repr(self)[:110], "application/vnd.jupyter.widget-view+json": view}
        try:
            data["text/html"] = self.saved_view()
        except Exception:  # the live widget matters more than its picture
            pass
        return data

    if int(W.__version__.split(".")[0]) < 8:

        def _ipython_display_(self, **kwargs):
            from IPython.display import display

            display(self._repr_mimebundle_(), raw=True)
            self._handle_displayed(**kwargs)


def text_box(value: str, description: str, *, area: bool = False, width: str = "90%", height=None, **kwargs):
    """A text box (a Textarea when `area`) that reports its value when the student presses Enter
    or leaves it, not at every key (`kwargs`: placeholder, rows, …)."""
    box = W.Textarea if area else W.Text
    layout = W.Layout(width=width, height=height)
    return box(value=value, description=description, continuous_update=False, layout=layout, **kwargs)


def html_table(rows: list[list[str]], header: list[str] | None = None) -> str:
    cell = "border:1px solid #ccc;padding:2px 6px;text-align:center;font-family:monospace"
    head = "<tr>" + "".join(f"<th style='{cell}'>{h}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td style='{cell}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table style='border-collapse:collapse'>{head}{body}</table>"


def figure_to_png(fig) -> bytes:
    """Render a matplotlib figure to PNG bytes (for an ``ipywidgets.Image``) and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def visible_token(token: str) -> str:
    """A token's text for a table cell: spaces, newlines and tabs made visible, HTML escaped once
    for a text node (&, <, >; a quote stays a quote: an entity such as &quot; showed as such
    wherever the text was escaped again or read as text)."""
    return html.escape(token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥"), quote=False) or "∅"


def format_number(x: float) -> str:
    """A number for a small table: 3 significant digits, −∞ for a masked score."""
    return "−∞" if x == float("-inf") else f"{x:.3g}".replace("-", "−")


def heat_style(p: float) -> str:
    """A cell background for a probability or weight in [0, 1]."""
    p = max(0.0, min(1.0, float(p)))
    return f"background:rgba(33,150,243,{0.08 + 0.8 * p:.2f})"
