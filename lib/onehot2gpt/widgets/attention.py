"""Attention maps: the explorer over any attention source, bertviz's views drawn offline, and every
head of a model at once."""

from __future__ import annotations

import functools
import html
import io
from typing import TYPE_CHECKING

import ipywidgets as W

from ..utils import check_choice, check_int
from ._base import WIDE_LABEL, SavedView, error_html, figure_to_png, html_table, text_box

if TYPE_CHECKING:
    import torch

    from ..pretrained import AttentionSource


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
    check_choice(view, "view", ("head", "model"))
    check_choice(html_action, "html_action", ("return", "view"), fix="'return' gives the HTML, 'view' displays it")
    layers = validate_attentions(attentions, tokens)
    if sentence_b_start is not None:
        check_int(sentence_b_start, "sentence_b_start", 1, len(tokens) - 1, fix="the index of sentence B's first token")
    import bertviz
    from IPython.display import HTML, display

    from ..vendor import offline_bertviz_page

    show = bertviz.head_view if view == "head" else bertviz.model_view
    page = show(layers, list(tokens), sentence_b_start=sentence_b_start, html_action="return")
    page = HTML(offline_bertviz_page(page.data))
    if html_action == "view":
        display(page)
        return None
    return page


class AttentionExplorer(SavedView, W.VBox):
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
        check_int(top_k, "top_k", 1)
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

        self.text = text_box(text, "Sentence")
        self.model = W.Dropdown(options=list(self.sources), description="Model")
        self.token = W.Dropdown(options=[], description="Query token", style=WIDE_LABEL)
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
        if token is not None and (isinstance(token, bool) or not isinstance(token, (str, int))):
            raise TypeError(
                f"token={token!r}: pass a token of the sentence (a string such as 'it'), its index, or None"
            )
        self._run(self._load, new_input=True, initial=(layer, head))
        if token is not None and self.tokens and self._pick_token(self.tokens, default_only=True) is None:
            shown = ", ".join(repr(t) for t in self.tokens[:12]) + (", …" if len(self.tokens) > 12 else "")
            where = f"an index 0 … {len(self.tokens) - 1}" if isinstance(token, int) else "one of its tokens"
            raise ValueError(
                f"token={token!r} is not in the sentence's {len(self.tokens)} tokens ({shown}); pass {where}, "
                "or leave token out to start at the first token"
            )

    def result(self, model: str, text: str) -> tuple[list[str], list[torch.Tensor]]:
        """(tokens, validated attentions) for `text` under `model`, computed once, then cached."""
        check_choice(model, "model", list(self.sources), fix="a name of the sources given to AttentionExplorer")
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
            message = ""
        except Exception as exc:  # a widget must never take the kernel or the student's state down
            message = error_html(exc)
        if new_input:
            self._input_error = message
        # While the text or model above cannot be shown, the older picture stays: keep saying why.
        self.status.value = message or self._input_error

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

    def _pick_token(self, tokens: list[str], default_only: bool = False) -> int | None:
        """The query index for new tokens: the token shown before if present, else the default
        (`token`), else 0. With `default_only`: the default's index, or None if it is not there."""
        default, lowered = self.default_token, [t.lower() for t in tokens]
        wanted = [self.tokens[self.token.value]] if self.tokens and not default_only else []
        for t in wanted + ([default] if isinstance(default, str) else []):
            if t in tokens or t.lower() in lowered:
                return tokens.index(t) if t in tokens else lowered.index(t.lower())
        if isinstance(default, int) and not isinstance(default, bool) and 0 <= default < len(tokens):
            return default
        return None if default_only else 0

    def _draw(self):
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
        self.image.value = _attention_png(weights, self.tokens, highlight=q, title=f"{model}: layer {layer}, {which}")
        self.weights = weights
        self.top = [(self.tokens[j], float(v)) for v, j in zip(values.tolist(), index.tolist())]
        self.top_html.value = f"<p><b>{html.escape(self.tokens[q])}</b> (token {q}) attends most to:</p>" + html_table(
            [[f"{j}: {html.escape(self.tokens[j])}", f"{v:.3f}"] for v, j in zip(values.tolist(), index.tolist())],
            header=["token", "weight"],
        )


def _attention_png(weights, tokens: list[str], **kwargs) -> bytes:
    """One head's (T, T) map drawn by :func:`onehot2gpt.plots.plot_attention` with a colour bar, as PNG."""
    import matplotlib.pyplot as plt

    from ..plots import plot_attention

    fig, ax = plt.subplots(figsize=(min(12, 0.4 * len(tokens) + 2.5), min(10, 0.35 * len(tokens) + 1.5)))
    plot_attention(weights, tokens, ax=ax, colorbar=True, **kwargs)
    return figure_to_png(fig)


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


class AllHeadsView(SavedView, W.VBox):
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
        heading = W.HTML(
            f"<b>{html.escape(title)}</b> — {L} layers × {H} heads; press a head to enlarge it (rows: "
            f"queries, columns: keys; each thumbnail is scaled to its own largest weight)"
        )
        super().__init__([heading, W.VBox(rows), self.status, self.caption, self.image])
        self.selected = None
        self._pick(selected)

    def _pick(self, which, *_):
        try:
            layer, head = which
            title = f"{self.title + ': ' if self.title else ''}layer {layer}, head {head}"
            self.image.value = _attention_png(self.attentions[layer][0, head], self.tokens, title=title)
            for key, button in self.buttons.items():
                button.button_style = "primary" if key == (layer, head) else ""
            self.selected = (layer, head)
            self.caption.value = f"Layer {layer}, head {head}:"
            self.status.value = ""
        except Exception as exc:  # a widget must never take the kernel down; the last head stays shown
            self.status.value = error_html(exc)
