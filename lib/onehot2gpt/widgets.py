"""Interactive views for the notebooks (ipywidgets 8, core widgets only, so they run in
JupyterLab and Colab alike).

Each widget is a ``VBox`` subclass whose controls are attributes (``.text``, ``.unit``, ...), so
tests set ``.value`` and read the result without a browser. Callbacks never raise: a bad input
shows a message in the widget's ``.status`` line and the previous state stays as it was.
"""

from __future__ import annotations

import functools
import html
import io
import warnings
from typing import TYPE_CHECKING

import ipywidgets as W

from .vocab import Vocab, one_hot, tokenize_chars, tokenize_words

if TYPE_CHECKING:
    import torch

    from .pretrained import AttentionSource

_ERROR_STYLE = "color:#b00020"


def _safe(update):
    """Run a widget update; show any exception as a message instead of raising in the kernel.

    The views and the attributes code reads stay as the last good update left them: an update
    sets them together, at its end."""

    @functools.wraps(update)
    def wrapper(self, *_):
        try:
            update(self)
            self.status.value = ""
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            self.status.value = (
                f"<span style='{_ERROR_STYLE}'>⚠ {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>"
            )

    return wrapper


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
    import base64

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
    if isinstance(widget, W.Output):
        return ""
    if isinstance(widget, W.ValueWidget) or isinstance(widget, W.Button):
        return _control_html(widget)
    return ""


class _SavedView:
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
            data = {
                "text/plain": repr(self)[:110],
                "application/vnd.jupyter.widget-view+json": {
                    "version_major": 2,
                    "version_minor": 0,
                    "model_id": self._model_id,
                },
            }
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


def _table(rows: list[list[str]], header: list[str] | None = None) -> str:
    cell = "border:1px solid #ccc;padding:2px 6px;text-align:center;font-family:monospace"
    out = ["<table style='border-collapse:collapse'>"]
    if header:
        out.append("<tr>" + "".join(f"<th style='{cell}'>{h}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td style='{cell}'>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


class TokenExplorer(_SavedView, W.VBox):
    """Type a sentence; see its tokens, their ids (<unk> for unseen ones) and one-hot rows.

    `vocabs` maps a unit name ("words", "characters") to the Vocab used for it.
    """

    TOKENIZERS = {"words": tokenize_words, "characters": lambda s: tokenize_chars(s, keep_spaces=False)}

    def __init__(self, vocabs: dict[str, Vocab], text: str = "The cat sat on the mat.", max_tokens: int = 40):
        unknown = set(vocabs) - set(self.TOKENIZERS)
        if not vocabs or unknown:
            raise ValueError(f"vocabs must map some of {sorted(self.TOKENIZERS)} to a Vocab; got keys {sorted(vocabs)}")
        self.vocabs, self.max_tokens = vocabs, max_tokens
        self.tokens: list[str] = []  # what the last update showed, for code and tests to read
        self.ids: list[int] = []
        self.text = W.Text(value=text, description="Sentence", continuous_update=False, layout=W.Layout(width="90%"))
        self.unit = W.ToggleButtons(options=list(vocabs), description="Units")
        self.summary, self.tokens_html, self.one_hot_html = W.HTML(), W.HTML(), W.HTML()
        self.status = W.HTML()
        super().__init__([self.text, self.unit, self.status, self.summary, self.tokens_html, self.one_hot_html])
        self.text.observe(self.update, names="value")
        self.unit.observe(self.update, names="value")
        self.update()

    @_safe
    def update(self):
        vocab = self.vocabs[self.unit.value]
        tokens = self.TOKENIZERS[self.unit.value](self.text.value)
        if not tokens:
            self.tokens, self.ids = [], []
            self.summary.value = "<i>Type a sentence above to see its tokens.</i>"
            self.tokens_html.value = self.one_hot_html.value = ""
            return
        shown = tokens[: self.max_tokens]
        ids = vocab.encode(shown)
        self.tokens, self.ids = tokens, ids  # set together: both describe the sentence shown
        n_unk = sum(i == vocab.unk_id for i in ids)
        more = f" (showing the first {self.max_tokens})" if len(tokens) > self.max_tokens else ""
        self.summary.value = (
            f"{len(tokens)} tokens{more}, vocabulary of {len(vocab):,}: "
            f"<b>{n_unk}</b> unseen → <code>&lt;unk&gt;</code>"
        )
        unk = f"style='{_ERROR_STYLE}'"
        self.tokens_html.value = _table(
            [
                ["token"] + [html.escape(t) for t in shown],
                ["id"] + [f"<span {unk}>{i}</span>" if i == vocab.unk_id else str(i) for i in ids],
            ]
        )
        columns = sorted(set(ids))
        matrix = one_hot(ids, len(vocab))[:, columns]  # (T, number of distinct ids)
        header = ["token \\ id"] + [f"{c}<br>{html.escape(vocab.itos[c])}" for c in columns]
        rows = [
            [html.escape(t)] + ["<b>1</b>" if v else "0" for v in row] for t, row in zip(shown, matrix.int().tolist())
        ]
        self.one_hot_html.value = (
            f"<p>One-hot rows have {len(vocab):,} entries each; only the "
            f"{len(columns)} columns that hold a 1 are shown.</p>" + _table(rows, header)
        )


def figure_to_png(fig) -> bytes:
    """Render a matplotlib figure to PNG bytes (for an ``ipywidgets.Image``) and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


class EmbeddingExplorer(_SavedView, W.VBox):
    """Pick words; see them and their nearest neighbours in a 2-D PCA projection of the embedding.

    `word_vectors` needs `most_similar(word, k)`, `__getitem__(word)` and `__contains__(word)`
    (a :class:`onehot2gpt.word2vec.WordVectors`).
    """

    def __init__(self, word_vectors, words: str = "king, queen, man, woman", neighbours: int = 3):
        self.wv = word_vectors
        self.words = W.Text(
            value=words,
            description="Words",
            continuous_update=False,
            placeholder="comma-separated words, e.g. paris, france, london",
            layout=W.Layout(width="90%"),
        )
        self.neighbours = W.IntSlider(
            value=neighbours, min=0, max=10, description="Neighbours", continuous_update=False
        )
        self.status, self.table = W.HTML(), W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="560px"))
        self.labels: list[str] = []  # the words in the current picture, for code and tests
        super().__init__([self.words, self.neighbours, self.status, W.HBox([self.image, self.table])])
        self.words.observe(self.update, names="value")
        self.neighbours.observe(self.update, names="value")
        self.update()

    def update(self, *_):
        try:
            self._redraw()
        except Exception as exc:  # keep the last picture and the student's input
            self.status.value = (
                f"<span style='{_ERROR_STYLE}'>⚠ {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>"
            )

    def _redraw(self):
        import matplotlib.pyplot as plt
        import torch

        from .plots import plot_projection

        asked = [w.strip().lower() for w in self.words.value.split(",") if w.strip()]
        known = [w for w in dict.fromkeys(asked) if w in self.wv]
        unknown = [w for w in asked if w not in self.wv]
        notes = []
        if unknown:
            notes.append(
                f"not in the vocabulary (try another spelling or a more common word): {html.escape(', '.join(unknown))}"
            )
        labels, groups, rows = [], [], []
        for g, word in enumerate(known):
            labels.append(word)
            groups.append(g)
            near = self.wv.most_similar(word, k=self.neighbours.value) if self.neighbours.value else []
            rows.append(
                f"<tr><td><b>{html.escape(word)}</b></td><td>"
                + ", ".join(f"{html.escape(n)} ({s:.2f})" for n, s in near)
                + "</td></tr>"
            )
            for n, _ in near:
                if n not in labels:
                    labels.append(n)
                    groups.append(g)
        if len(labels) < 2:
            self.status.value = (
                f"<span style='{_ERROR_STYLE}'>Pick at least two known words "
                f"(or one word and some neighbours).</span>" + (f"<br>{notes[0]}" if notes else "")
            )
            return
        vectors = torch.stack([torch.as_tensor(self.wv[w], dtype=torch.float32) for w in labels])
        fig, ax = plt.subplots(figsize=(6, 5))
        plot_projection(
            vectors, labels, groups=groups, ax=ax, title="PCA projection (colour = picked word and its neighbours)"
        )
        self.image.value = figure_to_png(fig)
        self.table.value = (
            "<table><tr><th>word</th><th>nearest neighbours (cosine)</th></tr>" + "".join(rows) + "</table>"
        )
        self.labels = labels
        self.status.value = f"<span style='{_ERROR_STYLE}'>{notes[0]}</span>" if notes else ""


class LayerWeightExplorer(_SavedView, W.VBox):
    """Pick a task and λ; see the layer weights a probe learns (trained on first use, then cached).

    `train(task, l2_lambda)` must return a :class:`onehot2gpt.probing.ProbeResult`.
    """

    def __init__(
        self,
        train,
        tasks: list[str],
        lambdas: list[float],
        layer_names: list[str],
        task: str | None = None,
        l2_lambda: float | None = None,
    ):
        if not tasks or not lambdas:
            raise ValueError("give at least one task and one λ value")
        self.train, self.layer_names = train, layer_names
        self.cache: dict[tuple[str, float], object] = {}
        self.task = W.SelectMultiple(
            options=tasks, value=[task or tasks[0]], description="Tasks", rows=min(4, len(tasks))
        )
        self.l2_lambda = W.SelectionSlider(
            options=list(lambdas),
            value=lambdas[0] if l2_lambda is None else l2_lambda,
            description="λ",
            continuous_update=False,
        )
        self.status, self.summary = W.HTML(), W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="640px"))
        super().__init__([W.HBox([self.task, self.l2_lambda]), self.status, self.image, self.summary])
        self.task.observe(self.update, names="value")
        self.l2_lambda.observe(self.update, names="value")
        self.update()

    def result(self, task: str, l2_lambda: float):
        """The probe for (task, λ), trained once and then served from the cache."""
        key = (task, l2_lambda)
        if key not in self.cache:
            self.cache[key] = self.train(task, l2_lambda)
        return self.cache[key]

    @_safe
    def update(self):
        import matplotlib.pyplot as plt

        from .plots import plot_layer_weights

        tasks = list(self.task.value)
        if not tasks:
            raise ValueError("select at least one task (Ctrl/Cmd-click to select several)")
        lam = self.l2_lambda.value
        results = {t: self.result(t, lam) for t in tasks}
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        plot_layer_weights(
            {t: r.weights for t, r in results.items()},
            self.layer_names,
            ax=ax,
            title=f"layer weights softmax(s), λ = {lam:g}",
        )
        self.image.value = figure_to_png(fig)
        self.summary.value = "<br>".join(
            f"<b>{html.escape(t)}</b>: test accuracy {r.test_accuracy:.3f}, weights "
            + ", ".join(f"{w:.2f}" for w in r.weights.tolist())
            for t, r in results.items()
        )


def validate_attentions(attentions, tokens: list[str]) -> list[torch.Tensor]:
    """Check attention maps for one sentence: one (1, H, T, T) tensor per layer, T == len(tokens).

    Returns the tensors detached, as float32 on the CPU. Raises TypeError or ValueError saying
    how to fix the input — bertviz's own errors for these mistakes are cryptic.
    """
    import torch

    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(
            f"tokens must be a list of strings (e.g. tokenizer.convert_ids_to_tokens(ids)), got {type(tokens).__name__}"
        )
    if not tokens:
        raise ValueError("tokens is empty: give the tokens of one sentence")
    per_layer = "a list with one (1, H, T, T) tensor per layer, as model(..., output_attentions=True) returns"
    if type(attentions).__module__ == "numpy":
        raise TypeError(
            f"attentions is a numpy array: pass {per_layer}, e.g. "
            f"[torch.from_numpy(a)[None] for a in array] for an (L, H, T, T) array"
        )
    if isinstance(attentions, torch.Tensor):
        raise TypeError(
            f"attentions is one tensor of shape {tuple(attentions.shape)}: pass {per_layer}, "
            f"e.g. list(stacked.unsqueeze(1)) for an (L, H, T, T) tensor"
        )
    if not isinstance(attentions, (list, tuple)):
        raise TypeError(f"attentions must be {per_layer}; got {type(attentions).__name__}")
    if not attentions:
        raise ValueError(
            "attentions is empty: ask the model for them with output_attentions=True, and "
            'load Hugging Face models with attn_implementation="eager" (sdpa returns none)'
        )
    out = []
    for i, a in enumerate(attentions):
        if type(a).__module__ == "numpy":
            raise TypeError(f"layer {i} is a numpy array: convert each layer with torch.from_numpy(a)")
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"layer {i} is a {type(a).__name__}, not a torch tensor: pass {per_layer}")
        if a.dim() == 3:
            raise ValueError(
                f"layer {i} has shape {tuple(a.shape)} = (H, T, T): add the batch dimension "
                f"with .unsqueeze(0) to get (1, H, T, T)"
            )
        if a.dim() != 4 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"layer {i} has shape {tuple(a.shape)}; each layer must be (1, H, T, T)")
        if a.shape[0] != 1:
            raise ValueError(
                f"layer {i} holds a batch of {a.shape[0]} sentences; bertviz shows one "
                f"sentence: pass a batch of size 1, e.g. [a[:1] for a in attentions]"
            )
        out.append(a.detach().float().cpu())
    shapes = sorted({tuple(a.shape) for a in out})
    if len(shapes) > 1:
        raise ValueError(f"every layer needs the same (1, H, T, T) shape, got {shapes}")
    if out[0].shape[-1] != len(tokens):
        raise ValueError(
            f"the attention covers {out[0].shape[-1]} positions but there are "
            f"{len(tokens)} tokens: give one token per position (special tokens included)"
        )
    return out


def bertviz_view(
    attentions, tokens, view: str = "head", sentence_b_start: int | None = None, html_action: str = "return"
):
    """bertviz's interactive head view (or `view="model"`: all layers × heads) of (1, H, T, T) maps.

    `html_action="return"` gives an ``IPython.display.HTML`` object, `"view"` displays it.
    bertviz's own page loads require.js, d3 and jQuery from a CDN and stays blank offline; this
    one carries the copies the package ships, inline (:mod:`onehot2gpt.vendor`), so it draws with
    no network, also in a notebook saved or exported as HTML.
    """
    views = ("head", "model")
    if view not in views:
        raise ValueError(f"view must be one of {views}, got {view!r}")
    if html_action not in ("return", "view"):
        raise ValueError(f"html_action must be 'return' (give the HTML) or 'view' (display it), got {html_action!r}")
    layers = validate_attentions(attentions, tokens)
    if sentence_b_start is not None and not 0 < sentence_b_start < len(tokens):
        raise ValueError(
            f"sentence_b_start must be the index of sentence B's first token, in "
            f"1..{len(tokens) - 1}; got {sentence_b_start}"
        )
    import bertviz
    from IPython.display import HTML, display

    from .vendor import offline_bertviz_page

    show = bertviz.head_view if view == "head" else bertviz.model_view
    page = show(layers, list(tokens), sentence_b_start=sentence_b_start, html_action="return")
    page = HTML(offline_bertviz_page(page.data))
    if html_action == "view":
        display(page)
        return None
    return page


class AttentionExplorer(_SavedView, W.VBox):
    """Type a sentence, pick a model, layer, head and query token; see where that token looks.

    `sources` maps a model name to an attention source ``text -> (tokens, attentions)`` with one
    (1, H, T, T) tensor per layer (see :mod:`onehot2gpt.pretrained`). Each (model, text) is
    computed once and cached, so moving the sliders only redraws. `token` picks the first query
    token shown (a token string such as "it", or an index); later texts keep the same token when
    they contain it.
    """

    CACHE_SIZE = 16  # (model, text) results kept; a 512-token MiniLM result is ≈75 MB

    def __init__(
        self,
        sources: dict[str, AttentionSource],
        text: str = "The animal didn't cross the street because it was too tired.",
        token: str | int | None = None,
        layer: int = 0,
        head: int = 0,
        top_k: int = 5,
    ):
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        if not sources or not all(callable(s) for s in sources.values()):
            raise ValueError(
                "sources must map a model name to a callable text -> (tokens, attentions), "
                "e.g. {'MiniLM': minilm_source()}"
            )
        self.sources, self.default_token, self.top_k = dict(sources), token, top_k
        self.cache: dict[tuple[str, str], tuple[list[str], list[torch.Tensor]]] = {}
        # What the picture shows, for code and tests to read.
        self.tokens: list[str] = []
        self.attentions: list[torch.Tensor] = []  # validated: one (1, H, T, T) tensor per layer
        self.weights: torch.Tensor | None = None  # the (T, T) map drawn: one head or their mean
        self.top: list[tuple[str, float]] = []
        self._shown: tuple[str, str] | None = None  # (model, text) behind the picture
        self._input_error = ""  # why the current text/model could not be shown, kept until fixed
        self._busy = False  # set while controls are changed in code: their callbacks wait

        self.text = W.Text(value=text, description="Sentence", continuous_update=False, layout=W.Layout(width="90%"))
        self.model = W.Dropdown(options=list(self.sources), description="Model")
        self.token = W.Dropdown(options=[], description="Query token")
        self.layer = W.IntSlider(value=0, min=0, max=0, description="Layer", continuous_update=False)
        self.head = W.IntSlider(value=0, min=0, max=0, description="Head", continuous_update=False)
        self.average = W.Checkbox(value=False, description="mean of heads", indent=False)
        self.status, self.top_html = W.HTML(), W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="640px"))
        super().__init__(
            [
                self.text,
                W.HBox([self.model, self.token]),
                W.HBox([self.layer, self.head, self.average]),
                self.status,
                W.HBox([self.image, self.top_html]),
            ]
        )
        for control in (self.text, self.model):
            control.observe(self._on_input, names="value")
        for control in (self.layer, self.head, self.average, self.token):
            control.observe(self._on_view, names="value")
        self._run(self._load, new_input=True, initial=(layer, head))

    def result(self, model: str, text: str) -> tuple[list[str], list[torch.Tensor]]:
        """(tokens, validated attentions) for `text` under `model`, computed once, then cached."""
        key = (model, text)
        if key in self.cache:
            self.cache[key] = self.cache.pop(key)  # most recently used last: evicted last
        else:
            if not text.strip():
                raise ValueError("the sentence is empty: type a sentence to see its attention")
            tokens, attentions = self.sources[model](text)
            self.cache[key] = (list(tokens), validate_attentions(attentions, tokens))
            while len(self.cache) > self.CACHE_SIZE:
                self.cache.pop(next(iter(self.cache)))
        return self.cache[key]

    def _on_input(self, *_):
        if not self._busy:
            self._run(self._load, new_input=True)

    def _on_view(self, *_):
        if not self._busy:
            self._run(self._draw)

    def _run(self, step, new_input: bool = False, **kwargs):
        """Run an update; show any exception in .status and keep the last picture and state."""
        try:
            step(**kwargs)
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            message = (
                f"<span style='{_ERROR_STYLE}'>⚠ {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>"
            )
            if new_input:
                self._input_error = message
            self.status.value = message
            return
        if new_input:
            self._input_error = ""
        # While the text or model above cannot be shown, the older picture stays: keep saying why.
        self.status.value = self._input_error

    def _load(self, initial: tuple[int, int] | None = None):
        """Fetch (cached) attention for the current model and text; refit the controls; redraw."""
        model, text = self.model.value, self.text.value
        tokens, attentions = self.result(model, text)
        n_layers, n_heads = len(attentions), attentions[0].shape[1]
        layer, head = initial or (self.layer.value, self.head.value)
        query = self._pick_token(tokens)
        self._busy = True
        try:
            self.layer.max, self.head.max = n_layers - 1, n_heads - 1
            self.layer.value = min(max(layer, 0), n_layers - 1)
            self.head.value = min(max(head, 0), n_heads - 1)
            self.token.options = [(f"{i}: {t}", i) for i, t in enumerate(tokens)]
            self.token.value = query
        finally:
            self._busy = False
        self.tokens, self.attentions, self._shown = tokens, attentions, (model, text)
        self._draw()

    def _pick_token(self, tokens: list[str]) -> int:
        """The query index for new tokens: the token shown before if present, else the default."""
        lowered = [t.lower() for t in tokens]
        if self.tokens:
            previous = self.tokens[self.token.value]
            for t, pool in ((previous, tokens), (previous.lower(), lowered)):
                if t in pool:
                    return pool.index(t)
        default = self.default_token
        if isinstance(default, int) and 0 <= default < len(tokens):
            return default
        if isinstance(default, str) and default.lower() in lowered:
            return tokens.index(default) if default in tokens else lowered.index(default.lower())
        return 0

    def _draw(self):
        import matplotlib.pyplot as plt

        from .plots import plot_attention

        if not self.attentions:  # nothing could be loaded yet; .status says why
            return
        model, _ = self._shown
        layer, q = self.layer.value, self.token.value
        maps = self.attentions[layer][0]  # (H, T, T)
        if self.average.value:
            weights, which = maps.mean(0), "mean of heads"
        else:
            weights, which = maps[self.head.value], f"head {self.head.value}"
        self.head.disabled = self.average.value
        k = min(self.top_k, len(self.tokens))
        values, index = weights[q].topk(k)
        fig, ax = plt.subplots(figsize=(min(12, 0.4 * len(self.tokens) + 2.5), min(10, 0.35 * len(self.tokens) + 1.5)))
        plot_attention(
            weights, self.tokens, ax=ax, highlight=q, colorbar=True, title=f"{model}: layer {layer}, {which}"
        )
        self.image.value = figure_to_png(fig)
        self.weights = weights
        self.top = [(self.tokens[j], float(v)) for v, j in zip(values.tolist(), index.tolist())]
        self.top_html.value = f"<p><b>{html.escape(self.tokens[q])}</b> (token {q}) attends most to:</p>" + _table(
            [[f"{j}: {html.escape(self.tokens[j])}", f"{v:.3f}"] for v, j in zip(values.tolist(), index.tolist())],
            header=["token", "weight"],
        )


_KIND_STYLE = {"mask": "background:#ffd54f", "random": "background:#ef9a9a", "same": "background:#a5d6a7", "": ""}
_KIND_TEXT = {"mask": "→ [MASK]", "random": "→ random", "same": "kept", "": ""}


class MaskingExplorer(_SavedView, W.VBox):
    """Type a sentence; see which tokens BERT's masking chooses (15%) and what each becomes:
    [MASK] (80%), a random token (10%) or itself (10%). Draw again with another seed, change the
    rate, or mask whole words.

    `tokenizer` is a :class:`onehot2gpt.subword.WordPieceTokenizer`. State for code and tests:
    ``.tokens`` (the pieces), ``.inputs`` (what the model reads), ``.kinds`` ("mask", "random",
    "same" or "" per piece) and ``.labels`` (the ids to predict, -100 elsewhere).
    """

    def __init__(
        self,
        tokenizer,
        text: str = "Harry Potter is a series of fantasy novels written by British author J. K. Rowling.",
        prob: float = 0.15,
        seed: int = 0,
        whole_word: bool = False,
    ):
        self.tokenizer = tokenizer
        self.tokens: list[str] = []
        self.inputs: list[str] = []
        self.kinds: list[str] = []
        self.labels: list[int] = []
        self.text = W.Text(value=text, description="Sentence", continuous_update=False, layout=W.Layout(width="90%"))
        self.prob = W.FloatSlider(value=prob, min=0.05, max=0.5, step=0.05, description="Rate", continuous_update=False)
        self.seed = W.IntSlider(value=seed, min=0, max=99, description="Draw (seed)", continuous_update=False)
        self.whole_word = W.Checkbox(value=whole_word, description="whole words")
        self.status, self.summary, self.table = W.HTML(), W.HTML(), W.HTML()
        super().__init__(
            [self.text, W.HBox([self.prob, self.seed, self.whole_word]), self.status, self.summary, self.table]
        )
        for control in (self.text, self.prob, self.seed, self.whole_word):
            control.observe(self.update, names="value")
        self.update()

    @_safe
    def update(self):
        import torch

        from .bert_pretraining import mask_tokens
        from .subword import SPECIALS
        from .utils import IGNORE_INDEX

        tok = self.tokenizer
        enc = tok.encode_words(self.text.value.split())
        ids = torch.tensor([enc["input_ids"]])
        if ids.size(1) <= 2:
            raise ValueError("type a sentence to mask")
        word_ids = torch.tensor([[-1 if w is None else w for w in enc["word_index"]]])
        specials = [tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id]
        inputs, labels = mask_tokens(
            ids,
            mask_id=tok.mask_id,
            vocab_size=len(tok),
            special_ids=specials,
            prob=self.prob.value,
            word_ids=word_ids if self.whole_word.value else None,
            generator=torch.Generator().manual_seed(self.seed.value),
        )
        chosen = (labels[0] != IGNORE_INDEX).tolist()
        self.tokens = tok.convert_ids_to_tokens(ids[0].tolist())
        self.inputs = tok.convert_ids_to_tokens(inputs[0].tolist())
        self.labels = labels[0].tolist()
        self.kinds = [
            "" if not c else "mask" if i == tok.mask_id else "same" if i == o else "random"
            for c, i, o in zip(chosen, inputs[0].tolist(), ids[0].tolist())
        ]
        counts = {k: self.kinds.count(k) for k in ("mask", "random", "same")}
        n_real = sum(t not in SPECIALS for t in self.tokens)
        self.summary.value = (
            f"{sum(chosen)} of {n_real} tokens chosen: {counts['mask']} → [MASK], "
            f"{counts['random']} → random, {counts['same']} kept. The loss is "
            f"computed at the chosen positions only."
        )
        cells = [f"<span style='{_KIND_STYLE[k]}'>{html.escape(t)}</span>" for t, k in zip(self.tokens, self.kinds)]
        became = [
            f"<span style='{_KIND_STYLE[k]}'>{html.escape(i) if k else ''}</span>"
            for i, k in zip(self.inputs, self.kinds)
        ]
        self.table.value = _table(
            [["token"] + cells, ["model reads"] + became, ["what"] + [_KIND_TEXT[k] for k in self.kinds]]
        )


class FillInTheBlank(_SavedView, W.VBox):
    """Type a sentence with ``[MASK]``; see the model's top-k guesses and their probabilities.

    `predict(text, top_k)` returns [(position, [(token, probability), …]), …], one entry per
    [MASK] (:func:`onehot2gpt.bert.fill_mask` with a model and tokenizer bound). State for code and
    tests: ``.predictions`` (the last result). The default sentence is one the course BERT
    (``bert-wikitext2``) fills in right: its first guess is "century".
    """

    def __init__(self, predict, text: str = "the church was built in the 12th [MASK] .", top_k: int = 5):
        self.predict = predict
        self.predictions: list = []
        self.text = W.Text(
            value=text,
            description="Sentence",
            continuous_update=False,
            placeholder="write [MASK] where a word is missing",
            layout=W.Layout(width="90%"),
        )
        self.top_k = W.IntSlider(value=top_k, min=1, max=15, description="Top k", continuous_update=False)
        self.status, self.output = W.HTML(), W.HTML()
        super().__init__([self.text, self.top_k, self.status, self.output])
        self.text.observe(self.update, names="value")
        self.top_k.observe(self.update, names="value")
        self.update()

    @_safe
    def update(self):
        predictions = self.predict(self.text.value, self.top_k.value)
        self.predictions = predictions
        blocks = []
        for n, (position, guesses) in enumerate(predictions, 1):
            rows = "".join(
                f"<tr><td style='font-family:monospace;padding-right:8px'>{html.escape(t)}</td>"
                f"<td><div style='background:#4c72b0;height:12px;width:{max(1, int(200 * p))}px'></div></td>"
                f"<td style='padding-left:6px'>{p:.3f}</td></tr>"
                for t, p in guesses
            )
            blocks.append(f"<b>[MASK] {n}</b> (token {position})<table>{rows}</table>")
        self.output.value = (
            "<div style='display:flex;gap:24px'>" + "".join(f"<div>{b}</div>" for b in blocks) + "</div>"
        )


# Notebook 08: extractive question answering ----------------------------------------------------

PRECIPITATION = (
    "In meteorology, precipitation is any product of the condensation of atmospheric water "
    "vapor that falls under gravity. The main forms of precipitation include drizzle, rain, "
    "sleet, snow, graupel and hail. Precipitation forms as smaller droplets coalesce via "
    "collision with other rain drops or ice crystals within a cloud. Short, intense periods "
    'of rain in scattered locations are called "showers".'
)


class QuestionAnswerer(_SavedView, W.VBox):
    """Paste a passage, ask a question: the answer highlighted in the passage, or "no answer in
    this passage" when the null span ([CLS]) wins (``answer_question``'s `null_threshold`), and
    the start and end probabilities over the passage's word pieces.

    `answer(passage, question)` returns :func:`onehot2gpt.bert_tasks.answer_question`'s dict (bind the
    model and tokenizer with ``functools.partial``). The question answers on Enter, the button on
    click. Editing the passage clears the answer until it is asked again, so what is shown always
    belongs to the text on screen. State for code: ``.result`` (None while there is no answer for
    the current text).
    """

    def __init__(
        self,
        answer,
        passage: str = PRECIPITATION,
        question: str = "Where do water droplets collide with ice crystals to form precipitation?",
    ):
        self.answer = answer
        self.result: dict | None = None
        self.passage = W.Textarea(
            value=passage,
            description="Passage",
            continuous_update=False,
            placeholder="paste a paragraph that holds the answer",
            layout=W.Layout(width="95%", height="120px"),
        )
        self.question = W.Text(
            value=question,
            description="Question",
            continuous_update=False,
            placeholder="ask something the passage answers, then press Enter",
            layout=W.Layout(width="95%"),
        )
        self.button = W.Button(description="Answer", button_style="primary")
        self.status, self.output = W.HTML(), W.HTML()
        super().__init__([self.passage, self.question, self.button, self.status, self.output])
        self.button.on_click(self.update)
        self.question.observe(self.update, names="value")
        self.passage.observe(self._passage_edited, names="value")
        self.update()

    def _passage_edited(self, _change):
        self.result, self.output.value = None, ""
        self.status.value = "The passage changed: press <b>Answer</b> (or Enter in the question)."

    def update(self, *_):
        passage, question = self.passage.value, self.question.value
        try:
            result = self.answer(passage, question)
        except Exception as exc:  # never the kernel; never an answer to other text
            self.result, self.output.value = None, ""
            self.status.value = _error_html(exc)
            return
        self.result = result
        self.status.value = ""
        self.output.value = self._html(passage, result)

    @staticmethod
    def _html(passage: str, r: dict) -> str:
        a, b = r["char_span"]
        s, e = r["words"]
        no_answer = r.get("no_answer", False)
        mark = "<mark style='background:#e0e0e0'>" if no_answer else "<mark style='background:#ffd54f'><b>"
        text = (
            html.escape(passage[:a])
            + mark
            + html.escape(passage[a:b])
            + ("</mark>" if no_answer else "</b></mark>")
            + html.escape(passage[b:])
        )
        cols = []
        for i, (tok, ps, pe) in enumerate(zip(r["tokens"], r["p_start"], r["p_end"])):
            picked = "background:#fff3c4;" if r["start"] <= i <= r["end"] else ""
            cols.append(
                f"<div title='{html.escape(tok)}: P(start) {ps:.3f}, P(end) {pe:.3f}' "
                f"style='display:inline-flex;flex-direction:column;align-items:center;margin:0 1px;{picked}'>"
                f"<div style='display:flex;align-items:flex-end;height:40px;gap:1px'>"
                f"<div style='width:5px;height:{40 * ps:.1f}px;background:#4c72b0'></div>"
                f"<div style='width:5px;height:{40 * pe:.1f}px;background:#dd8452'></div></div>"
                f"<div style='font:10px monospace'>{html.escape(tok)}</div></div>"
            )
        if no_answer:
            head = (
                f"<p><b>Answer: no answer in this passage.</b> <span style='color:#666'>The null span "
                f"([CLS]) scores {r['null_score']:.1f}; the best span, “{html.escape(r['best_span'])}” "
                f"(grey, words {s}–{e}), beats it by {r['margin']:.1f}, not more than the threshold "
                f"{r['null_threshold']:.1f}.</span></p>"
            )
        else:
            null = (
                f"; it beats the null span ([CLS]) by {r['margin']:.1f}"
                if r.get("margin") is not None and r.get("null_threshold") is not None
                else ""
            )
            head = (
                f"<p><b>Answer:</b> {html.escape(r['answer'])} &nbsp; <span style='color:#666'>(words {s}–{e} "
                f"of the passage; P(start) {r['p_start'][r['start']]:.2f}, P(end) {r['p_end'][r['end']]:.2f}"
                f"{null})</span></p>"
            )
        return (
            head + f"<div style='line-height:1.5;max-width:900px'>{text}</div>"
            f"<p style='margin-bottom:2px'><span style='color:#4c72b0'>■</span> P(start) &nbsp; "
            f"<span style='color:#dd8452'>■</span> P(end) over the passage's word pieces, on a 0–1 scale (full height = 1; hover for the values; answer shaded)</p>"
            f"<div style='display:flex;flex-wrap:wrap;max-width:900px'>{''.join(cols)}</div>"
        )


# Notebook 09: decoding a GPT ---------------------------------------------------------------------

_NOTICE_STYLE = "color:#8a5a00"


def _error_html(exc: Exception) -> str:
    return f"<span style='{_ERROR_STYLE}'>⚠ {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</span>"


def _visible(token: str) -> str:
    """A token's text for a table cell: spaces, newlines and tabs made visible, HTML escaped."""
    return html.escape(token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")) or "∅"


def encode_prompt(encode, decode, prompt: str, vocab_size: int, max_len: int) -> tuple[list[int], str]:
    """Encode a prompt for a GPT → (ids, notice). A prompt longer than max_len tokens is kept whole in
    ids with a notice that the model reads only its last max_len; ValueError saying what to fix for an
    empty prompt, one the tokenizer cannot encode, or ids outside the vocabulary."""
    text = prompt
    if not text:
        raise ValueError(
            "the prompt is empty: type some text for the model to continue (a GPT has no start state of its own)"
        )
    try:
        ids = [int(i) for i in encode(text)]
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        unknown = []
        for c in dict.fromkeys(text):
            try:
                encode(c)
            except Exception:
                unknown.append(repr(c))
        which = f": it does not know {', '.join(unknown[:10])}" if unknown else ""
        raise ValueError(
            f"the tokenizer cannot encode the prompt ({type(exc).__name__}: {exc}){which}. "
            f"Use only characters or words the model was trained on"
        ) from exc
    if not ids:
        raise ValueError("the prompt encodes to no tokens: type some text the tokenizer keeps")
    outside = sorted({i for i in ids if not 0 <= i < vocab_size})
    if outside:
        raise ValueError(
            f"encode gave ids {outside[:5]} outside the model's vocabulary "
            f"0…{vocab_size - 1}: pair the model with the tokenizer it was trained with"
        )
    notice = ""
    if len(ids) > max_len:
        tail = decode(ids[-max_len:])
        notice = (
            f"the prompt has {len(ids)} tokens but the model reads at most max_len="
            f"{max_len}: it sees only the last {max_len}, “{tail}”"
        )
    return ids, notice


class SamplingExplorer(_SavedView, W.VBox):
    """Type a prompt; see the next-token distribution before and after temperature, top-k and top-p,
    and sample a continuation with a seed.

    `model` is shaped like :class:`onehot2gpt.gpt.GPT` (what :func:`onehot2gpt.sampling.generate`
    takes); `encode(text) -> list[int]` and `decode(ids) -> str` are its tokenizer's, characters or
    subwords. Top-k 0 and top-p 1 switch those filters off; temperature 0 is greedy decoding.

    State for code and tests: ``.probs`` (V,) the distribution :meth:`generate` samples the next
    token from; ``.probs_before`` (V,) the same before top-k and top-p (at temperature 0: the
    model's own, temperature 1); ``.distribution`` [(token text, probability)] over the whole
    vocabulary, most likely first; ``.top`` the table's rows [(token text, before, after)];
    ``.continuation`` (text) and ``.generated_ids`` of the last :meth:`generate`, which the button
    calls. A prompt longer than the context is cropped to its last max_len tokens, with a notice.
    """

    def __init__(
        self,
        model,
        encode,
        decode,
        prompt: str = "ROMEO:",
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = None,
        length: int = 100,
        seed: int = 0,
        rows: int = 15,
    ):
        if not (callable(encode) and callable(decode)):
            raise TypeError("encode(text) -> list[int] and decode(ids) -> str must be functions")
        if not temperature >= 0:
            raise ValueError(f"temperature must be ≥ 0 (0 = greedy), got {temperature!r}")
        if top_k is not None and (isinstance(top_k, bool) or int(top_k) != top_k or top_k < 1):
            raise ValueError(f"top_k must be a whole number ≥ 1, or None to keep every token; got {top_k!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], or None to keep every token; got {top_p!r}")
        if int(length) != length or length < 1 or int(seed) != seed or seed < 0 or rows < 1:
            raise ValueError(
                f"length, seed and rows must be whole numbers (length, rows ≥ 1, seed ≥ 0); "
                f"got {length!r}, {seed!r}, {rows!r}"
            )
        self.model, self.encode, self.decode, self.rows = model, encode, decode, rows
        self.vocab_size, self.max_len = model.config.vocab_size, model.config.max_len
        self._token_texts: dict[int, str] = {}
        # What the views show, for code and tests to read; kept as they are when an input is bad.
        self.prompt_ids: list[int] = []  # the tokens the distribution was computed after
        self.probs: torch.Tensor | None = None
        self.probs_before: torch.Tensor | None = None
        self.top: list[tuple[str, float, float]] = []
        self.continuation = ""
        self.generated_ids: list[int] = []

        self.prompt = W.Textarea(
            value=prompt, description="Prompt", continuous_update=False, rows=2, layout=W.Layout(width="90%")
        )
        self.temperature = W.FloatSlider(
            value=temperature,
            min=0.0,
            max=max(2.0, temperature),
            step=0.05,
            description="Temperature",
            continuous_update=False,
            readout_format=".2f",
        )
        self.top_k = W.IntSlider(
            value=top_k or 0,
            min=0,
            max=max(min(self.vocab_size, 100), top_k or 0),
            description="Top-k (0 off)",
            continuous_update=False,
            style={"description_width": "initial"},
        )
        self.top_p = W.FloatSlider(
            value=1.0 if top_p is None else top_p,
            min=0.01,
            max=1.0,
            step=0.01,
            description="Top-p (1 off)",
            continuous_update=False,
            style={"description_width": "initial"},
        )
        self.length = W.IntSlider(
            value=length, min=1, max=max(500, length), description="Length", continuous_update=False
        )
        self.seed = W.BoundedIntText(
            value=seed, min=0, max=2**32 - 1, description="Seed", layout=W.Layout(width="180px")
        )
        self.button = W.Button(description="Generate", button_style="primary", icon="play")
        self.status, self.table, self.output = (
            W.HTML(),
            W.HTML(),
            W.HTML("<i>Press Generate to sample a continuation.</i>"),
        )
        super().__init__(
            [
                self.prompt,
                W.HBox([self.temperature, self.top_k, self.top_p]),
                W.HBox([self.length, self.seed, self.button]),
                self.status,
                self.table,
                self.output,
            ]
        )
        for control in (self.prompt, self.temperature, self.top_k, self.top_p):
            control.observe(self.update, names="value")
        self.button.on_click(self.generate)
        self.update()

    # -- reading the controls -------------------------------------------------------------------

    def token_text(self, i: int) -> str:
        """The text of token `i` alone (decoded once, then cached)."""
        if i not in self._token_texts:
            try:
                self._token_texts[i] = self.decode([i])
            except Exception:  # a special or partial token the tokenizer cannot show alone
                self._token_texts[i] = f"<{i}>"
        return self._token_texts[i]

    @property
    def distribution(self) -> list[tuple[str, float]]:
        """[(token text, probability after the filters)] for every token, most likely first."""
        if self.probs is None:
            return []
        order = _ids_by_probability(self.probs_before)
        return [(self.token_text(i), float(self.probs[i])) for i in order]

    def _settings(self) -> tuple[float, int | None, float | None]:
        """(temperature, top_k or None, top_p or None) from the sliders."""
        top_p = float(self.top_p.value)
        return float(self.temperature.value), int(self.top_k.value) or None, None if top_p >= 1 else top_p

    def _prompt_ids(self) -> tuple[list[int], str]:
        """Encode the prompt → (ids, notice); ValueError saying what to fix when it cannot be used."""
        return encode_prompt(self.encode, self.decode, self.prompt.value, self.vocab_size, self.max_len)

    def _run(self, step):
        """Run an update; an exception becomes a message in .status and the views stay as they were
        (the last good result, for the prompt it was made from)."""
        try:
            notice = step()
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            self.status.value = _error_html(exc)
            return
        self.status.value = f"<span style='{_NOTICE_STYLE}'>ℹ {html.escape(notice)}</span>" if notice else ""

    def _device(self):
        try:
            return next(self.model.parameters()).device
        except (AttributeError, StopIteration):
            return "cpu"

    # -- the distribution ---------------------------------------------------------------------

    def update(self, *_):
        """Recompute the next-token distribution for the current prompt and filters."""
        self._run(self._update)

    def _update(self) -> str:
        import torch

        from .sampling import next_token_distribution

        ids, notice = self._prompt_ids()
        temperature, top_k, top_p = self._settings()
        x = torch.tensor(ids[-self.max_len :], dtype=torch.long, device=self._device())  # (T,), cropped
        before = next_token_distribution(self.model, x, temperature or 1.0).float().cpu()  # (V,)
        _require_finite(before)
        if temperature and top_k is None and top_p is None:
            after = before
        else:
            after = next_token_distribution(self.model, x, temperature, top_k, top_p).float().cpu()
        order = _ids_by_probability(before)
        shown = order[: self.rows]
        self.prompt_ids, self.probs_before, self.probs = ids, before, after
        self.top = [(self.token_text(i), float(before[i]), float(after[i])) for i in shown]
        self.table.value = self._table_html(shown, order, temperature, top_k, top_p)
        return notice

    def _table_html(self, shown, order, temperature, top_k, top_p) -> str:
        rank = {i: r for r, i in enumerate(order)}
        tail = self.decode(self.prompt_ids[-self.max_len :])[-40:]
        kept = int((self.probs > 0).sum())
        filters = (
            "temperature 0: greedy, the most likely token gets all the probability"
            if not temperature
            else f"temperature {temperature:g}, top-k {top_k or 'off'}, top-p {top_p or 'off'}"
        )
        before_name = "model (T = 1)" if not temperature else f"after T = {temperature:g}"
        cell = "padding:1px 6px;font-family:monospace"
        rows = []
        for i in shown:
            b, a = float(self.probs_before[i]), float(self.probs[i])
            if a > 0:
                why, style = "", ""
            else:
                why = "greedy" if not temperature else "top-k" if top_k is not None and rank[i] >= top_k else "top-p"
                style = "color:#999;text-decoration:line-through"
            bars = "".join(
                f"<td style='{cell}'><div style='background:{colour};height:10px;"
                f"width:{max(1, round(160 * p))}px'></div></td><td style='{cell}'>{p:.3f}</td>"
                for p, colour in ((b, "#9db4d6"), (a, "#4c72b0"))
            )
            removed = f"<span style='{_ERROR_STYLE}'>removed by {why}</span>" if why else ""
            rows.append(
                f"<tr style='{style}'><td style='{cell}'>{_visible(self.token_text(i))}</td>"
                f"<td style='{cell}'>{i}</td>{bars}<td style='{cell}'>{removed}</td></tr>"
            )
        header = "".join(
            f"<th style='{cell}' colspan='{n}'>{h}</th>"
            for h, n in (("token", 1), ("id", 1), (before_name, 2), ("after top-k, top-p", 2), ("", 1))
        )
        return (
            f"<p>Next token after “…{html.escape(tail)}” ({filters}): {kept} of {self.vocab_size} "
            f"tokens can be drawn; the {len(shown)} most likely are shown.</p>"
            f"<table style='border-collapse:collapse'><tr>{header}</tr>{''.join(rows)}</table>"
        )

    # -- generating ---------------------------------------------------------------------------

    def generate(self, *_):
        """Sample `length` tokens after the prompt with the current settings and seed (the button)."""
        self._run(self._generate)

    def _generate(self) -> str:
        import torch

        from .sampling import generate, next_token_distribution

        ids, notice = self._prompt_ids()
        temperature, top_k, top_p = self._settings()
        n, seed, device = int(self.length.value), int(self.seed.value), self._device()
        generator = torch.Generator(device=device).manual_seed(seed)
        x = torch.tensor(ids, dtype=torch.long, device=device)  # (T,)
        _require_finite(next_token_distribution(self.model, x[-self.max_len :], 1.0))
        with warnings.catch_warnings():  # the widget says so itself, below and in .status
            warnings.filterwarnings("ignore", message=r"the prompt \(\d+ tokens\) plus")
            out = generate(
                self.model, x, n, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator
            )  # (T + n,)
        new = out[len(ids) :].tolist()
        self.generated_ids, self.continuation = new, self.decode(new)
        how = (
            "greedy (temperature 0)"
            if not temperature
            else f"seed {seed}, temperature {temperature:g}, top-k {top_k or 'off'}, top-p {top_p or 'off'}"
        )
        window = (
            f"; the text is longer than the model's context, so each step reads only the last {self.max_len} tokens"
            if len(ids) + n - 1 > self.max_len
            else ""
        )
        self.output.value = (
            f"<p>{n} tokens, {how}{window}. <b style='background:#dde7f3'>Prompt</b> then "
            f"continuation:</p><pre style='white-space:pre-wrap;font-family:monospace;margin:0'>"
            f"<b style='background:#dde7f3'>{html.escape(self.decode(ids))}</b>"
            f"{html.escape(self.continuation)}</pre>"
        )
        return notice


def _require_finite(probs) -> None:
    """A model whose weights diverged in training (a NaN loss) gives NaN scores: say so plainly."""
    import torch

    if not bool(torch.isfinite(probs).all()):
        raise ValueError(
            "the model's next-token scores are NaN or infinite: its weights diverged "
            "during training (the loss became NaN). Train it again with a lower "
            "learning rate, or load a checkpoint"
        )


def _ids_by_probability(probs) -> list[int]:
    """Token ids by descending probability (ties: lower id first)."""
    import torch

    return torch.sort(probs, descending=True, stable=True).indices.tolist()


# The prompt shapes GPT-2's paper tried zero-shot; the course's world models read them the same way
# (their tokenizer lower-cases and splits punctuation, so "Q:" and "q :" are the same two tokens).
PROMPT_TEMPLATES = ("Q: … A:", "TL;DR:", "english = french", "free text")


def render_prompt(template: str, text: str, question: str = "", examples: list[str] | tuple = ()) -> str:
    """The prompt for `template`: the solved `examples` (each ending in a line break), then

    * ``"Q: … A:"``: the passage `text`, then ``Q: <question>`` and ``A:`` on their own lines;
    * ``"TL;DR:"``: the passage, then ``TL;DR:`` on a new line;
    * ``"english = french"``: the English sentence and ``=``;
    * ``"free text"``: `text` as it is (examples are ignored).
    """
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"unknown template {template!r}; choose one of {', '.join(PROMPT_TEMPLATES)}")
    text, question = text.strip(), question.strip()
    if not text:
        raise ValueError("the input is empty: type a passage (or an English sentence) for the prompt")
    if template == "free text":
        return text
    shots = "".join(e if e.endswith("\n") else e + "\n" for e in examples)
    if template == "Q: … A:":
        if not question:
            raise ValueError("the question is empty: type a question about the passage")
        return f"{shots}{text}\nQ: {question}\nA:"
    if template == "TL;DR:":
        return f"{shots}{text}\nTL;DR:"
    return f"{shots}{text} ="


class ZeroShotPrompter(_SavedView, W.VBox):
    """Prompt a GPT with a zero-shot template, or a few-shot one, and read the continuation token by
    token with the probability the model gave each.

    `models` maps a display name to ``(model, encode, decode)`` (a :class:`onehot2gpt.gpt.GPT` and
    its tokenizer's functions). `examples` maps a template (:data:`PROMPT_TEMPLATES`) to solved
    examples in that template's shape, of which the *Examples* slider puts 0–3 first. `gpt2`, a
    function returning ``(model, encode, decode)``, adds a "GPT-2" choice that is loaded when first
    chosen; offline it fails with a message and the previous model stays selected.

    Decoding: greedy, or sampling with temperature, top-k (0 off) and top-p (1 off) and a seed;
    generation stops at the end of the line when *Stop at line end* is ticked. State for code and
    tests: ``.prompt`` (the text sent), ``.continuation``, ``.steps`` — one dict per new token with
    ``token``, ``p`` (the model's probability, at temperature 1) and ``alternatives`` (the 3 most
    likely tokens and their probabilities).
    """

    def __init__(
        self,
        models: dict,
        examples: dict | None = None,
        gpt2=None,
        template: str = "Q: … A:",
        text: str = "",
        question: str = "",
        shots: int = 0,
        max_tokens: int = 12,
    ):
        if not models:
            raise ValueError("give at least one model: {'name': (model, encode, decode)}")
        for name, entry in models.items():
            if not (isinstance(entry, tuple) and len(entry) == 3 and callable(entry[1]) and callable(entry[2])):
                raise TypeError(
                    f"models[{name!r}] must be (model, encode, decode), with encode(text) -> ids "
                    f"and decode(ids) -> text"
                )
        if template not in PROMPT_TEMPLATES:
            raise ValueError(f"unknown template {template!r}; choose one of {', '.join(PROMPT_TEMPLATES)}")
        if int(max_tokens) != max_tokens or max_tokens < 1 or int(shots) != shots or not 0 <= shots <= 3:
            raise ValueError(f"max_tokens must be a whole number ≥ 1 and shots 0–3; got {max_tokens!r}, {shots!r}")
        self.models = dict(models)
        self.examples = {k: list(v) for k, v in (examples or {}).items()}
        unknown = set(self.examples) - set(PROMPT_TEMPLATES)
        if unknown:
            raise ValueError(
                f"examples for unknown templates {sorted(unknown)}; templates: {', '.join(PROMPT_TEMPLATES)}"
            )
        self._gpt2_loader = gpt2
        self.prompt_text = ""
        self.continuation = ""
        self.steps: list[dict] = []
        names = list(self.models) + (["GPT-2 (downloads once)"] if gpt2 is not None else [])
        self.model_choice = W.Dropdown(options=names, value=names[0], description="Model")
        self._current_model = names[0]
        self.template = W.Dropdown(options=PROMPT_TEMPLATES, value=template, description="Template")
        self.shots = W.IntSlider(value=shots, min=0, max=3, description="Examples", continuous_update=False)
        self.text = W.Textarea(
            value=text, description="Input", rows=3, layout=W.Layout(width="90%"), continuous_update=False
        )
        self.question = W.Text(
            value=question, description="Question", layout=W.Layout(width="90%"), continuous_update=False
        )
        self.prompt = W.Textarea(description="Prompt", rows=6, layout=W.Layout(width="90%"), continuous_update=False)
        self.greedy = W.Checkbox(value=True, description="Greedy (else sample)")
        self.temperature = W.FloatSlider(
            value=1.0, min=0.05, max=2.0, step=0.05, description="Temperature", continuous_update=False
        )
        self.top_k = W.IntSlider(
            value=0,
            min=0,
            max=100,
            description="Top-k (0 off)",
            style={"description_width": "initial"},
            continuous_update=False,
        )
        self.top_p = W.FloatSlider(
            value=1.0,
            min=0.05,
            max=1.0,
            step=0.05,
            description="Top-p (1 off)",
            style={"description_width": "initial"},
            continuous_update=False,
        )
        self.max_tokens = W.IntSlider(
            value=max_tokens, min=1, max=max(64, max_tokens), description="Tokens", continuous_update=False
        )
        self.stop_at_newline = W.Checkbox(value=True, description="Stop at line end")
        self.seed = W.BoundedIntText(value=0, min=0, max=2**32 - 1, description="Seed", layout=W.Layout(width="180px"))
        self.button = W.Button(description="Continue", button_style="primary", icon="play")
        self.status, self.output = W.HTML(), W.HTML("<i>Press Continue to let the model write.</i>")
        super().__init__(
            [
                W.HBox([self.model_choice, self.template, self.shots]),
                self.text,
                self.question,
                self.prompt,
                W.HBox([self.greedy, self.temperature, self.top_k, self.top_p]),
                W.HBox([self.max_tokens, self.stop_at_newline, self.seed, self.button]),
                self.status,
                self.output,
            ]
        )
        self._input_error: Exception | None = None  # the inputs above cannot make a prompt
        self._rendering = False
        for control in (self.template, self.shots, self.text, self.question):
            control.observe(self.render, names="value")
        self.prompt.observe(self._prompt_edited, names="value")
        self.model_choice.observe(self._choose_model, names="value")
        self.button.on_click(self.run)
        self.render()

    # -- the prompt ----------------------------------------------------------------------------

    def render(self, *_):
        """Rebuild the prompt from the template, examples, input and question (it stays editable)."""
        self._rendering = True
        try:
            self.question.layout.display = None if self.template.value == "Q: … A:" else "none"
            shots = self.examples.get(self.template.value, [])[: self.shots.value]
            if self.shots.value > len(shots) and self.template.value != "free text":
                raise ValueError(f"only {len(shots)} solved examples for {self.template.value!r} were given")
            self.prompt.value = render_prompt(self.template.value, self.text.value, self.question.value, shots)
            self._input_error = None
            self.status.value = ""
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            self._input_error = exc  # the prompt box still holds the last good prompt: not used
            self.status.value = _error_html(exc)
        finally:
            self._rendering = False

    def _prompt_edited(self, _change):
        """Typed into the prompt box by hand: that text is now the input, and is valid to run."""
        if not self._rendering:
            self._input_error = None
            self.status.value = ""

    def _choose_model(self, change):
        name = change["new"]
        if name in self.models:
            self._current_model = name
            self.status.value = ""
            return
        try:
            self.status.value = "<i>Loading GPT-2 …</i>"
            model, encode, decode = self._gpt2_loader()
            self.models[name] = (model, encode, decode)
            self._current_model = name
            self.status.value = ""
        except Exception as exc:  # offline: say so, keep the previous model
            self.model_choice.value = self._current_model
            self.status.value = _error_html(exc)

    # -- writing -------------------------------------------------------------------------------

    def run(self, *_):
        """Continue the prompt with the chosen model and decoding settings (the button)."""
        try:
            if self._input_error is not None:
                raise ValueError(
                    f"fix the input first ({self._input_error}); the prompt box still "
                    f"shows the last prompt that could be made, so nothing was run"
                )
            notice = self._run()
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            self.status.value = _error_html(exc)
            return
        self.status.value = f"<span style='{_NOTICE_STYLE}'>ℹ {html.escape(notice)}</span>" if notice else ""

    def _run(self) -> str:
        import torch

        from .sampling import filter_top_k, filter_top_p

        model, encode, decode = self.models[self._current_model]
        text = self.prompt.value
        if not text.strip():
            raise ValueError("the prompt is empty: type an input (or a prompt) for the model to continue")
        try:
            ids = [int(i) for i in encode(text)]
        except (KeyError, ValueError, IndexError, TypeError) as exc:
            raise ValueError(
                f"{self._current_model}'s tokenizer cannot encode the prompt "
                f"({type(exc).__name__}: {exc}); use only characters or words it was "
                f"trained on"
            ) from exc
        if not ids:
            raise ValueError("the prompt encodes to no tokens: type some text the tokenizer keeps")
        vocab_size, max_len = model.config.vocab_size, model.config.max_len
        if any(not 0 <= i < vocab_size for i in ids):
            raise ValueError(
                "the tokenizer gave ids outside the model's vocabulary: pair the model with "
                "the tokenizer it was trained with"
            )
        n = int(self.max_tokens.value)
        if n >= max_len:
            raise ValueError(f"{n} new tokens do not fit the model's context of {max_len}; ask for fewer")
        notice = ""
        # A tokenizer that can list the words it lacks (the course's WorldTokenizer) says so.
        unknown = getattr(getattr(encode, "__self__", None), "unknown", None)
        if callable(unknown) and unknown(text):
            notice = f"not in this model's vocabulary, read as <unk>: {', '.join(unknown(text)[:8])}. "
        if len(ids) + n > max_len:
            notice += (
                f"the prompt has {len(ids)} tokens; with {n} new ones it exceeds the model's context "
                f"of {max_len}, so the model reads only its last {max_len - n} tokens."
            )
            ids = ids[-(max_len - n) :]
        device = next(model.parameters()).device
        generator = torch.Generator().manual_seed(int(self.seed.value))
        top_k, top_p = int(self.top_k.value) or None, float(self.top_p.value)
        steps, new = [], []
        x, past = torch.tensor([ids], device=device), None
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for _ in range(n):
                    out = model(x, past_key_values=past, use_cache=True)
                    logits, past = out.logits[0, -1].float().cpu(), out.past_key_values
                    probs = torch.softmax(logits, -1)
                    if self.greedy.value:
                        choice = int(torch.argmax(logits))
                    else:
                        filtered = logits / float(self.temperature.value)
                        if top_k is not None:
                            filtered = filter_top_k(filtered, min(top_k, vocab_size))
                        if top_p < 1:
                            filtered = filter_top_p(filtered, top_p)
                        choice = int(torch.multinomial(torch.softmax(filtered, -1), 1, generator=generator))
                    top = torch.topk(probs, 3)
                    token = decode([choice])
                    steps.append(
                        {
                            "token": token,
                            "id": choice,
                            "p": float(probs[choice]),
                            "alternatives": [(decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)],
                        }
                    )
                    new.append(choice)
                    if self.stop_at_newline.value and "\n" in token:
                        break
                    x = torch.tensor([[choice]], device=device)
        finally:
            model.train(was_training)
        self.prompt_text, self.steps, self.continuation = text, steps, decode(new)
        self.output.value = self._html()
        return notice.strip()

    def _html(self) -> str:
        cell = "padding:1px 6px;font-family:monospace"
        spans = "".join(
            f"<span title='p = {s['p']:.3f}' style='background:rgba(76,114,176,{0.15 + 0.6 * s['p']:.2f});"
            f"margin-right:2px'>{_visible(s['token'])}</span>"
            for s in self.steps
        )
        rows = "".join(
            f"<tr><td style='{cell}'>{k + 1}</td><td style='{cell}'><b>{_visible(s['token'])}</b></td>"
            f"<td style='{cell}'>{s['p']:.3f}</td><td style='{cell}'>"
            + ", ".join(f"{_visible(t)} {p:.2f}" for t, p in s["alternatives"])
            + "</td></tr>"
            for k, s in enumerate(self.steps)
        )
        header = "".join(f"<th style='{cell}'>{h}</th>" for h in ("#", "token", "p", "the 3 most likely"))
        return (
            f"<p><b>{html.escape(self._current_model)}</b> continues (darker = more probable): {spans}</p>"
            f"<table style='border-collapse:collapse'><tr>{header}</tr>{rows}</table>"
        )


# -- looking inside a GPT -----------------------------------------------------------------------------


def _num(x: float) -> str:
    """A number for a small table: 3 significant digits, −∞ for a masked score."""
    if x == float("-inf"):
        return "−∞"
    if x != x:
        return "nan"
    return f"{x:.3g}".replace("-", "−")


def _heat(p: float) -> str:
    """A cell background for a probability or weight in [0, 1]."""
    p = max(0.0, min(1.0, float(p)))
    return f"background:rgba(33,150,243,{0.08 + 0.8 * p:.2f})"


class _InsideGPT(_SavedView, W.VBox):
    """Shared by the look-inside widgets: a prompt for a course GPT, the position to read, a status.

    A prompt longer than the model's context is cropped to its last max_len tokens (with a notice);
    an input the model cannot read shows a message and the views stay as they were."""

    def __init__(self, model, encode, decode, prompt: str, controls: list, views: list, bert_too: bool = False):
        from .lookinside import check_gpt, is_course_bert

        if not (bert_too and is_course_bert(model)):
            check_gpt(model)
        if not (callable(encode) and callable(decode)):
            raise TypeError("encode(text) -> list[int] and decode(ids) -> str must be functions")
        self.model, self.encode, self.decode = model, encode, decode
        self.vocab_size, self.max_len = model.config.vocab_size, model.config.max_len
        self._token_texts: dict[int, str] = {}
        self.ids: list[int] = []  # the tokens the views were computed from
        self.tokens: list[str] = []
        self.prompt = W.Text(value=prompt, description="Prompt", continuous_update=False, layout=W.Layout(width="90%"))
        self.position = W.IntSlider(value=0, min=0, max=1, description="Position", continuous_update=False)
        self.status = W.HTML()
        self._busy = False
        super().__init__([self.prompt, W.HBox([self.position] + controls), self.status] + views)
        self.prompt.observe(self._prompt_changed, names="value")
        self.position.observe(self.update, names="value")
        self._prompt_changed()

    def token_text(self, i: int) -> str:
        if i not in self._token_texts:
            try:
                self._token_texts[i] = self.decode([i])
            except Exception:
                self._token_texts[i] = f"<{i}>"
        return self._token_texts[i]

    def _prompt_changed(self, *_):
        try:
            ids, notice = encode_prompt(self.encode, self.decode, self.prompt.value, self.vocab_size, self.max_len)
        except Exception as exc:
            self.status.value = _error_html(exc)
            self._new_ids = None  # nothing acts on the last prompt until this one can be read
            return
        ids = ids[-self.max_len :]
        self._busy = True
        try:  # the new prompt's positions; the last one (the next-token prediction) to start with
            self.position.max = max(len(ids) - 1, 1)
            self.position.value = len(ids) - 1
            self.position.disabled = len(ids) == 1
            self._new_tokens(ids)
        finally:
            self._busy = False
        self._new_ids = ids
        self._notice = notice
        self._refresh(ids, notice)

    def _new_tokens(self, ids: list[int]) -> None:
        """Called with a new prompt's ids before anything is computed (controls that list tokens)."""

    def update(self, *_):
        if self._busy or not getattr(self, "_new_ids", None):
            return
        self._refresh(self._new_ids, self._notice)

    def _refresh(self, ids, notice):
        try:
            self._compute(ids)
            self.ids, self.tokens = ids, [self.token_text(i) for i in ids]
            self._draw()
        except Exception as exc:  # a widget must never take the kernel down; the views stay as they were
            self.status.value = _error_html(exc)
            return
        self.status.value = f"<span style='{_NOTICE_STYLE}'>ℹ {html.escape(notice)}</span>" if notice else ""

    def _label(self, t: int, ids=None) -> str:
        ids = self.ids if ids is None else ids
        return f"{t}: {_visible(self.token_text(ids[t]))}"


class ForwardStepper(_InsideGPT):
    """Step through a course GPT's forward pass for one prompt and one position: embedding and
    position → per layer LayerNorm, Q, K, V, scores, scale, mask, softmax, weighted sum, output
    projection, residual, MLP, residual → final LayerNorm → logits → temperature → probabilities.
    A course BERT with its MLM head (:class:`onehot2gpt.bert.BertForPreTraining`) works too: its
    post-norm layers, then the MLM head's read-out at the chosen position (see
    :func:`onehot2gpt.lookinside.trace_bert`).
    Every stage shows the real tensor at that position (a readable slice) and its full shape; the
    whole step-by-step pass is checked against the library's forward each time the prompt changes.

    State for code and tests: ``.trace`` (:class:`onehot2gpt.lookinside.Trace`), ``.stages``,
    ``.stage`` (the one shown), ``.check`` (the largest difference from the library's forward per part).
    """

    def __init__(
        self,
        model,
        encode,
        decode,
        prompt: str = "the river flows",
        temperature: float = 1.0,
        step: int = 0,
        values: int = 8,
    ):
        if not (isinstance(temperature, (int, float)) and temperature > 0):
            raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
        self.values = values
        self.trace = None
        self.stages: list = []
        self.check: dict[str, float] = {}
        self.step = W.IntSlider(value=step, min=0, max=1, description="Step", continuous_update=False)
        self.back = W.Button(description="◀", layout=W.Layout(width="40px"), tooltip="previous step")
        self.forward = W.Button(description="▶", layout=W.Layout(width="40px"), tooltip="next step")
        self.temperature = W.FloatSlider(
            value=temperature,
            min=0.1,
            max=max(2.0, temperature),
            step=0.1,
            description="Temperature",
            continuous_update=False,
        )
        self.header, self.view, self.checked = W.HTML(), W.HTML(), W.HTML()
        self._step_wanted = step
        super().__init__(
            model,
            encode,
            decode,
            prompt,
            [self.temperature],
            [W.HBox([self.back, self.step, self.forward]), self.header, self.view, self.checked],
            bert_too=True,
        )
        self.step.observe(self._draw_safely, names="value")
        self.temperature.observe(self.update, names="value")
        self.back.on_click(lambda _: self._move(-1))
        self.forward.on_click(lambda _: self._move(+1))

    @property
    def stage(self):
        return self.stages[self.step.value] if self.stages else None

    def _move(self, delta: int):
        self.step.value = max(0, min(self.step.max, self.step.value + delta))

    def _compute(self, ids):
        from .lookinside import check_trace, trace_model

        if self.trace is None or self.trace.ids.tolist() != ids:
            trace = trace_model(self.model, ids)
            self.check = check_trace(self.model, trace)
        trace = trace_model(self.model, ids, temperature=float(self.temperature.value))
        self.trace = trace

    def _draw(self):
        from .lookinside import stages

        self.stages = stages(self.trace, self.position.value)
        self.step.max = len(self.stages) - 1
        if self._step_wanted is not None:
            self.step.value, self._step_wanted = min(self._step_wanted, self.step.max), None
        self._show()
        worst = max(self.check.values())
        self.checked.value = (
            f"<span style='color:#1b5e20'>✓ every stage recomputed here matches the "
            f"library's forward (blocks, attention maps, logits): largest difference "
            f"{worst:.1e}</span>"
        )

    def _draw_safely(self, *_):
        try:
            self._show()
        except Exception as exc:
            self.status.value = _error_html(exc)

    def _show(self):
        s = self.stage
        p = self.position.value
        self.header.value = (
            f"<b>Step {self.step.value} of {self.step.max}: {html.escape(s.key)}</b><br>"
            f"{html.escape(s.formula)} &nbsp; <span style='color:#666'>full tensor "
            f"{html.escape(s.shape)}; shown: position {html.escape(self._label(p))}</span>"
        )
        self.view.value = self._tensor_html(s)

    def _tensor_html(self, s) -> str:
        v = s.value.detach().float().cpu()
        p = self.position.value
        n = self.values
        if v.dim() == 1 and v.numel() == self.vocab_size:  # logits or probabilities: the top 10
            values, order = v.topk(min(10, v.numel()))
            rows = [
                [html.escape(_visible(self.token_text(i))), _num(x)] for i, x in zip(order.tolist(), values.tolist())
            ]
            return _table(rows, ["next token", "value"]) + f"<i>the 10 largest of {v.numel():,} values</i>"
        if v.dim() == 1:
            cells = [_num(x) for x in v[:n].tolist()] + (["…"] if v.numel() > n else [])
            return (
                _table([cells], [str(i) for i in range(min(n, v.numel()))] + (["…"] if v.numel() > n else []))
                + f"<i>{min(n, v.numel())} of {v.numel()} values; norm {v.norm():.3g}, mean "
                f"{v.mean():.3g}, std {v.std(unbiased=False):.3g}</i>"
            )
        if s.shape.endswith(f"T={len(self.ids)})") and v.size(-1) == len(self.ids):  # (H, T): one row per head
            header = ["head"] + [html.escape(self._label(t)) for t in range(len(self.ids))]
            softmax = "softmax" in s.key
            rows = [
                [str(h)]
                + [
                    (f"<span style='{_heat(x)}'>{_num(x)}</span>" if softmax and t <= p else _num(x))
                    for t, x in enumerate(row)
                ]
                for h, row in enumerate(v.tolist())
            ]
            return _table(rows, header) + f"<i>query {html.escape(self._label(p))} against every key</i>"
        rows = [
            [str(h)] + [_num(x) for x in row[:n].tolist()] + (["…"] if v.size(-1) > n else [])
            for h, row in enumerate(v)
        ]
        return (
            _table(rows, ["head"] + [str(i) for i in range(min(n, v.size(-1)))] + (["…"] if v.size(-1) > n else []))
            + f"<i>one row per head, {min(n, v.size(-1))} of hs = {v.size(-1)} features</i>"
        )


class LogitLens(_InsideGPT):
    """The logit lens: what the residual stream predicts after the embedding and after each layer,
    read through the final LayerNorm and the output layer, at the chosen position (the last row is
    the model's own prediction). Where the prompt goes on, the token that really comes next is
    tracked: its probability and rank after each layer.

    State for code and tests: ``.rows`` (:class:`onehot2gpt.lookinside.LensRow` per layer).
    """

    def __init__(self, model, encode, decode, prompt: str = "the river flows", k: int = 5):
        self.rows: list = []
        self.k = W.IntSlider(value=k, min=1, max=10, description="Top k", continuous_update=False)
        self.table = W.HTML()
        super().__init__(model, encode, decode, prompt, [self.k], [self.table])
        self.k.observe(self.update, names="value")

    def _compute(self, ids):
        from .lookinside import logit_lens

        p = self.position.value
        target = ids[p + 1] if p + 1 < len(ids) else None
        self.rows = logit_lens(self.model, ids, position=p, k=int(self.k.value), target=target)
        self._target = target

    def _draw(self):
        p = self.position.value
        header = ["after"] + [f"#{i + 1}" for i in range(int(self.k.value))]
        if self._target is not None:
            header.append(f"next is “{html.escape(_visible(self.token_text(self._target)))}”")
        rows = []
        for r in self.rows:
            cells = [r.layer] + [
                f"<span style='{_heat(q)}'>{html.escape(_visible(self.token_text(i)))} ({q:.2f})</span>"
                for i, q in r.top
            ]
            if self._target is not None:
                cells.append(f"p {r.target_prob:.3f}, rank {r.target_rank + 1}")
            rows.append(cells)
        self.table.value = (
            f"<p>Reading the residual stream at {html.escape(self._label(p))}: "
            f"what comes next?</p>" + _table(rows, header)
        )


class InterventionExplorer(_InsideGPT):
    """Switch parts of a course GPT off and see what changes: heads (their output set to zero),
    a layer's MLP, or tokens (hidden from every other position, exBERT's masking). Shows the mean
    next-token loss over the prompt with and without, and the top predictions at the position.

    State for code and tests: ``.result`` (:class:`onehot2gpt.lookinside.Intervention`).
    """

    def __init__(self, model, encode, decode, prompt: str = "the river flows", k: int = 5):
        c = model.config if hasattr(model, "config") else None
        self.result = None
        self.k = k
        heads = [(f"layer {l} · head {h}", (l, h)) for l in range(c.n_layers) for h in range(c.n_heads)] if c else []
        self.heads = W.SelectMultiple(options=heads, description="Heads off", rows=min(8, max(len(heads), 1)))
        self.mlps = W.SelectMultiple(
            options=[(f"layer {l} MLP", l) for l in range(c.n_layers)] if c else [],
            description="MLPs off",
            rows=min(8, max(getattr(c, "n_layers", 1), 1)),
        )
        self.tokens_off = W.SelectMultiple(options=[], description="Tokens off", rows=8)
        self.table = W.HTML()
        super().__init__(
            model, encode, decode, prompt, [], [W.HBox([self.heads, self.mlps, self.tokens_off]), self.table]
        )
        for control in (self.heads, self.mlps, self.tokens_off):
            control.observe(self.update, names="value")

    def _new_tokens(self, ids):
        # A new prompt has new tokens: the token choices are rebuilt (and cleared) before anything runs.
        self.tokens_off.options = [(self._label(t, ids), t) for t in range(len(ids))]

    def _compute(self, ids):
        from .lookinside import intervene

        tokens = [t for t in self.tokens_off.value if t < len(ids)]
        self.result = intervene(
            self.model,
            ids,
            position=self.position.value,
            k=self.k,
            heads_off=list(self.heads.value),
            mlps_off=list(self.mlps.value),
            tokens_off=tokens,
        )

    def _draw(self):
        r = self.result
        off = r.switched_off
        what = (
            [f"layer {l} head {h}" for l, h in off["heads"]]
            + [f"layer {l} MLP" for l in off["mlps"]]
            + [f"token {self._label(t)}" for t in off["tokens"]]
        )
        change = r.loss_change
        rows = [
            [
                f"{html.escape(_visible(self.token_text(i)))} ({q:.3f})",
                f"{html.escape(_visible(self.token_text(j)))} ({w:.3f})",
            ]
            for (i, q), (j, w) in zip(r.top_before, r.top_after)
        ]
        self.table.value = (
            f"<p>Switched off: {html.escape(', '.join(what)) or 'nothing (pick heads, MLPs or tokens)'}"
            f"<br>Mean next-token loss over the prompt: <b>{r.loss_before:.3f}</b> → "
            f"<b>{r.loss_after:.3f}</b> nats ({'+' if change >= 0 else '−'}{abs(change):.3f})</p>"
            f"<p>Top predictions after {html.escape(self._label(r.position))}:</p>"
            + _table(rows, ["model as trained", "with the parts off"])
        )


def _thumbnail(weights, size: int = 64) -> bytes:
    """A (T, T) attention map as a small PNG (viridis, no axes), drawn without matplotlib figures."""
    import numpy as np
    from matplotlib import colormaps
    from PIL import Image

    w = weights.detach().float().cpu().numpy()
    rgba = (colormaps["viridis"](np.clip(w / max(float(w.max()), 1e-9), 0, 1)) * 255).astype("uint8")
    scale = max(1, size // max(w.shape[0], 1))
    image = Image.fromarray(rgba[..., :3]).resize((w.shape[1] * scale, w.shape[0] * scale), Image.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="png")
    return buffer.getvalue()


class AllHeadsView(_SavedView, W.VBox):
    """Every layer × head attention map as a thumbnail (rows: layers); press a head's button to see
    it large with its tokens. A counterpart of bertviz's model view made of core widgets and PNGs
    only, nothing loaded from the internet.

    `attentions`: one (1, H, T, T) tensor per layer (what ``output_attentions=True`` returns);
    `tokens`: one string per position. State: ``.selected`` (layer, head) shown large.
    """

    def __init__(self, attentions, tokens, title: str = "", selected: tuple[int, int] = (0, 0), size: int = 64):
        self.attentions = validate_attentions(attentions, tokens)
        self.tokens = list(tokens)
        self.title = title
        L, H = len(self.attentions), self.attentions[0].shape[1]
        layer, head = selected
        if not (0 <= layer < L and 0 <= head < H):
            raise ValueError(f"selected must be a (layer, head) in (0…{L - 1}, 0…{H - 1}); got {selected!r}")
        self.status, self.caption = W.HTML(), W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="520px"))
        rows = []
        self.buttons: dict[tuple[int, int], W.Button] = {}
        for l in range(L):
            cells = [W.HTML(f"<b>layer {l}</b>", layout=W.Layout(width="60px"))]
            for h in range(H):
                button = W.Button(
                    description=f"L{l} H{h}",
                    layout=W.Layout(width=f"{size + 8}px"),
                    tooltip=f"show layer {l}, head {h} large",
                )
                button.on_click(functools.partial(self._pick, (l, h)))
                self.buttons[(l, h)] = button
                thumb = W.Image(
                    value=_thumbnail(self.attentions[l][0, h], size),
                    format="png",
                    layout=W.Layout(width=f"{size}px", height=f"{size}px"),
                )
                cells.append(W.VBox([thumb, button]))
            rows.append(W.HBox(cells))
        super().__init__(
            [
                W.HTML(
                    f"<b>{html.escape(title)}</b> — {L} layers × {H} heads; press a head to "
                    f"enlarge it (rows: queries, columns: keys; each thumbnail is scaled to its own largest weight)"
                ),
                W.VBox(rows),
                self.status,
                self.caption,
                self.image,
            ]
        )
        self.selected = None
        self._pick(selected)

    def _pick(self, which, *_):
        try:
            import matplotlib.pyplot as plt

            from .plots import plot_attention

            layer, head = which
            weights = self.attentions[layer][0, head]
            fig, ax = plt.subplots(
                figsize=(min(12, 0.4 * len(self.tokens) + 2.5), min(10, 0.35 * len(self.tokens) + 1.5))
            )
            plot_attention(
                weights,
                self.tokens,
                ax=ax,
                colorbar=True,
                title=f"{self.title + ': ' if self.title else ''}layer {layer}, head {head}",
            )
            self.image.value = figure_to_png(fig)
            for key, button in self.buttons.items():
                button.button_style = "primary" if key == (layer, head) else ""
            self.selected = (layer, head)
            self.caption.value = f"Layer {layer}, head {head}:"
            self.status.value = ""
        except Exception as exc:
            self.status.value = _error_html(exc)
