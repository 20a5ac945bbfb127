"""Matplotlib figures shared by the notebooks: matrices, similarity heat maps, 2-D projections,
attention maps.

Every function draws on a given `ax` (or a new figure) and returns the axes, so notebooks can
combine panels and widgets can redraw them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.text import Text

from .utils import check_int


def _axes(ax, figsize):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_matrix(
    matrix,
    row_labels: Sequence[str] = (),
    col_labels: Sequence[str] = (),
    *,
    ax=None,
    cmap: str = "Blues",
    annotate: bool | None = None,
    fmt: str = "{:.2f}",
    title: str = "",
    vmin=None,
    vmax=None,
    colorbar: bool = False,
):
    """Heat map of a (R, C) matrix with optional row/column labels and cell values."""
    m = torch.as_tensor(matrix, dtype=torch.float32).detach().cpu()
    if m.dim() != 2:
        raise ValueError(f"plot_matrix needs a 2-D matrix, got shape {tuple(m.shape)}")
    rows, cols = m.shape
    ax = _axes(ax, (max(3, 0.45 * cols + 1.5), max(2, 0.4 * rows + 1)))
    image = ax.imshow(m.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if len(row_labels):
        ax.set_yticks(range(rows), labels=list(row_labels))
    if len(col_labels):
        ax.set_xticks(range(cols), labels=list(col_labels), rotation=60, ha="right")
    if annotate or (annotate is None and rows * cols <= 150):  # by default, when the numbers fit
        hi = float(m.max()) if vmax is None else vmax
        lo = float(m.min()) if vmin is None else vmin
        for i in range(rows):
            for j in range(cols):
                v = float(m[i, j])
                dark = (v - lo) > 0.6 * (hi - lo) if hi > lo else False
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=8, color="white" if dark else "black")
    if colorbar:
        ax.figure.colorbar(image, ax=ax)
    if title:
        ax.set_title(title)
    return ax


def plot_one_hot(matrix, tokens: Sequence[str], vocab_tokens: Sequence[str], *, ax=None, title=""):
    """One-hot rows (T, V) for `tokens`, columns labelled with the vocabulary."""
    title = title or "one-hot vectors: one row per token"
    return plot_matrix(matrix, tokens, vocab_tokens, ax=ax, annotate=True, fmt="{:.0f}", title=title)


def plot_similarity(vectors, labels: Sequence[str], *, ax=None, title: str = "cosine similarity"):
    """Cosine-similarity heat map of the rows of a (N, D) matrix."""
    v = torch.as_tensor(vectors, dtype=torch.float32)
    v = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    return plot_matrix(v @ v.T, labels, labels, ax=ax, cmap="RdBu_r", vmin=-1, vmax=1, title=title)


def pca_2d(vectors) -> torch.Tensor:
    """Project the rows of a (N, D) matrix on their first two principal components → (N, 2)."""
    x = torch.as_tensor(vectors, dtype=torch.float32)
    if x.dim() != 2 or x.shape[0] < 2:
        raise ValueError(f"need at least two vectors of shape (N, D) to project, got {tuple(x.shape)}")
    x = x - x.mean(0, keepdim=True)
    _, _, vt = torch.linalg.svd(x, full_matrices=False)
    proj = x @ vt[:2].T
    # Fix each component's sign so the picture does not flip between runs or machines.
    signs = torch.sign(proj[proj.abs().argmax(0), torch.arange(proj.shape[1])])
    return proj * torch.where(signs == 0, torch.ones_like(signs), signs)


def plot_projection(
    vectors, labels: Sequence[str], *, groups: Sequence[int] | None = None, ax=None, title: str = "PCA projection"
):
    """Scatter the 2-D PCA projection of (N, D) vectors with a text label on each point."""
    xy = pca_2d(vectors)
    ax = _axes(ax, (6, 5))
    colors = None if groups is None else [plt.cm.tab10(int(g) % 10) for g in groups]
    ax.scatter(xy[:, 0], xy[:, 1], c=colors, s=18)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title)
    _place_labels(ax, xy.tolist(), labels)
    return ax


# Where a label may go around its point: 16 directions at growing distances (points).
_DIRECTIONS = [
    (math.cos(a * math.pi / 8), math.sin(a * math.pi / 8))
    for a in (1, 15, 7, 9, 0, 8, 4, 12, 3, 13, 5, 11, 2, 14, 6, 10)
]
_DISTANCES = [3, 7, 12, 18, 26, 36, 48, 62, 80]


def _place_labels(ax, xy: list[list[float]], labels: Sequence[str], fontsize: int = 9) -> None:
    """Annotate each point with its label where it overlaps no label placed before it (nor, if it
    can, another point): the first free spot of 16 directions × growing distances, with a thin line
    back to the point when it had to move away; the spot with the least overlap when none is free."""
    texts = [
        ax.annotate(
            label,
            (x, y),
            fontsize=fontsize,
            xytext=(3, 3),
            textcoords="offset points",
            arrowprops=dict(arrowstyle="-", color="0.6", linewidth=0.5, shrinkA=0, shrinkB=2),
        )
        for (x, y), label in zip(xy, labels)
    ]
    try:
        renderer = ax.figure.canvas.get_renderer()
    except AttributeError:  # a backend that cannot measure text: the labels stay beside their points
        for text in texts:
            text.arrow_patch.set_visible(False)
        return
    ax.get_xlim(), ax.get_ylim()  # the autoscaled limits, so that positions on screen are final
    r = 2.5 * ax.figure.dpi / 72  # a marker's half width (s=18)
    markers = [(px - r, py - r, px + r, py + r) for px, py in ax.transData.transform(xy)]
    placed: list[tuple] = []

    def overlap(a, b) -> float:
        w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    def put(text, dx: float, dy: float, distance: float) -> tuple:
        text.xyann = (dx * distance, dy * distance)
        text.set_horizontalalignment("left" if dx > 0.3 else "right" if dx < -0.3 else "center")
        text.set_verticalalignment("bottom" if dy > 0.3 else "top" if dy < -0.3 else "center")
        text.update_positions(renderer)
        return tuple(Text.get_window_extent(text, renderer).extents)  # the words alone, not the line

    for i, text in enumerate(texts):
        others = markers[:i] + markers[i + 1 :]
        best = None
        for distance in _DISTANCES:
            for dx, dy in _DIRECTIONS:
                box = put(text, dx, dy, distance)
                # covering another label is what makes a plot unreadable; covering a point, less so
                cost = sum(overlap(box, o) for o in placed) + 0.05 * sum(overlap(box, o) for o in others)
                if best is None or cost < best[0]:
                    best = (cost, (dx, dy, distance), box)
                if cost == 0:
                    break
            if best[0] == 0:
                break
        _, (dx, dy, distance), box = best
        put(text, dx, dy, distance)
        text.arrow_patch.set_visible(distance > _DISTANCES[1])  # right beside its point: no line needed
        placed.append(box)


def plot_layer_weights(
    weights: dict[str, Sequence[float]],
    layer_names: Sequence[str] | None = None,
    *,
    ax=None,
    title: str = "learned layer weights softmax(s)",
):
    """Grouped bars: one group per layer, one bar per task (as in the ELMo paper's figure)."""
    if not weights:
        raise ValueError("give at least one task's weights, e.g. {'POS': result.weights}")
    rows = {name: torch.as_tensor(w, dtype=torch.float32).flatten() for name, w in weights.items()}
    n_layers = {len(w) for w in rows.values()}
    if len(n_layers) != 1:
        raise ValueError(f"every task needs the same number of layer weights, got {sorted(n_layers)}")
    (n,) = n_layers
    layer_names = list(layer_names) if layer_names is not None else [f"layer {j}" for j in range(n)]
    if len(layer_names) != n:
        raise ValueError(f"{len(layer_names)} layer names for {n} layers")
    ax = _axes(ax, (1.6 * n + 2, 3.2))
    width = 0.8 / len(rows)
    for i, (name, w) in enumerate(rows.items()):
        ax.bar([j + (i - (len(rows) - 1) / 2) * width for j in range(n)], w.tolist(), width, label=name)
    ax.axhline(1 / n, color="grey", linestyle="--", linewidth=1, label="plain average")
    ax.set_xticks(range(n), labels=layer_names)
    ax.set_ylabel("weight")
    ax.set_ylim(0, max(1 / n, max(float(w.max()) for w in rows.values())) * 1.15)
    # beside the axes, not over them: inside, "best" still covers bars when every layer has tall ones
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    ax.set_title(title)
    return ax


def plot_attention(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    ax=None,
    title: str = "",
    annotate: bool | None = None,
    vmax: float | None = 1.0,
    highlight: int | None = None,
    colorbar: bool = False,
):
    """Heat map of one head's (T_q, T_k) attention: row i shows how query i spreads its weight.

    Rows are the attending tokens (queries), columns the attended-to tokens (keys); colours run
    from 0 to `vmax` (1 by default, so heads compare fairly; None uses the largest weight).
    `highlight` outlines one query row. Typical use: ``plot_attention(attentions[layer][0, head],
    tokens)`` with one (1, H, T, T) tensor per layer as models return them.
    """
    w = torch.as_tensor(weights, dtype=torch.float32).detach().cpu()
    if w.dim() != 2:
        raise ValueError(
            f"plot_attention shows one head: give a (T_q, T_k) matrix, got shape "
            f"{tuple(w.shape)} (pick one, e.g. attentions[layer][0, head])"
        )
    if w.numel() == 0:
        raise ValueError(f"there is no attention to show: weights have shape {tuple(w.shape)}")
    key_tokens = query_tokens if key_tokens is None else key_tokens
    if (len(query_tokens), len(key_tokens)) != tuple(w.shape):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} need {w.shape[0]} query and {w.shape[1]} "
            f"key labels, got {len(query_tokens)} and {len(key_tokens)}"
        )
    rows, cols = w.shape
    ax = _axes(ax, (min(12, 0.4 * cols + 2), min(10, 0.35 * rows + 1.5)))
    vmax = float(w.max()) if vmax is None else vmax
    plot_matrix(
        w, query_tokens, key_tokens, ax=ax, annotate=annotate, title=title, vmin=0.0, vmax=vmax, colorbar=colorbar
    )
    ax.set_xlabel("attended to (key)")
    ax.set_ylabel("attending (query)")
    if highlight is not None:
        check_int(highlight, "highlight", 0, rows - 1, fix="the index of a query row")
        ax.add_patch(plt.Rectangle((-0.5, highlight - 0.5), cols, 1, fill=False, edgecolor="#e66100", linewidth=2.5))
        ax.get_yticklabels()[highlight].set_fontweight("bold")
        ax.get_yticklabels()[highlight].set_color("#e66100")
    return ax
