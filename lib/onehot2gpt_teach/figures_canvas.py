"""Figures, part 1: the drawing kit, a small SVG canvas (boxes sized to their text, arrows,
labels with sub- and superscripts) in the course's one style. See :mod:`onehot2gpt_teach.figures`."""

from __future__ import annotations

from dataclasses import dataclass

FONT = "Helvetica, Arial, 'DejaVu Sans', 'Liberation Sans', sans-serif"
INK = "#1f2937"  # text and arrows
MUTED = "#6b7280"  # notes, shapes, captions inside figures
# kind -> (fill, stroke)
COLOURS = {
    "token": ("#f3f4f6", "#9ca3af"),
    "embed": ("#dbeafe", "#2563eb"),
    "rnn": ("#dcfce7", "#16a34a"),
    "attn": ("#ffedd5", "#ea580c"),
    "ffn": ("#ede9fe", "#7c3aed"),
    "norm": ("#fef9c3", "#ca8a04"),
    "out": ("#fce7f3", "#db2777"),
    "mix": ("#ccfbf1", "#0d9488"),
    "special": ("#e5e7eb", "#4b5563"),
    "plain": ("#ffffff", "#6b7280"),
}


# --------------------------------------------------------------------------- drawing helpers


def _num(v: float) -> str:
    """Coordinates printed the same on every run and platform."""
    v = round(float(v), 2)
    return str(int(v)) if v == int(v) else f"{v:g}"


def escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _parse(label: str, shift: float, size: float, level: int) -> list[tuple[str, float, float]]:
    """Split TeX-like `label` into (text, baseline shift, font size) runs; braces may nest."""
    runs, i, plain = [], 0, ""
    while i < len(label):
        ch = label[i]
        if ch in "_^" and i + 1 < len(label):
            if label[i + 1] == "{":
                depth, j = 0, i + 1
                while j < len(label):
                    depth += {"{": 1, "}": -1}.get(label[j], 0)
                    if depth == 0:
                        break
                    j += 1
                body, i = label[i + 2 : j], j + 1
            else:
                body, i = label[i + 1], i + 2
            runs.append((plain, shift, size))
            plain = ""
            small = size * (0.72 if level == 0 else 0.85)
            step = size * (0.3 if ch == "_" else -0.4)
            runs += _parse(body, shift + step, small, level + 1)
        else:
            plain += ch
            i += 1
    runs.append((plain, shift, size))
    return [r for r in runs if r[0]]


def _rich(label: str, size: float) -> str:
    """`label` as SVG text content, with TeX-like ``x_{sub}`` and ``x^{sup}`` as shifted tspans.

    Example: ``_rich("h_{t-1}", 14)`` puts ``t-1`` in a smaller tspan 0.3 em below the line.
    """
    out, base = [], 0.0
    for text, shift, fs in _parse(label, 0.0, size, 0):
        text = escape(text)
        if shift == 0.0 and base == 0.0:
            out.append(text)
            continue
        font = f' font-size="{_num(fs)}"' if fs != size else ""
        out.append(f'<tspan dy="{_num(shift - base)}"{font}>{text}</tspan>')
        base = shift
    return "".join(out)


def text_width(label: str, size: float) -> float:
    """Rough rendered width of `label` in a sans-serif font (for sizing boxes around text)."""
    return sum(
        fs * (0.3 if c in "il.,:;|[]()'ftjI1 " else 0.8 if c in "mwMW" else 0.58)
        for text, _, fs in _parse(label, 0.0, size, 0)
        for c in text
    )


@dataclass(frozen=True)
class Box:
    """A drawn box: centre (cx, cy), width w, height h; its sides' midpoints for arrows."""

    cx: float
    cy: float
    w: float
    h: float

    @property
    def top(self) -> tuple[float, float]:
        return (self.cx, self.cy - self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.cx, self.cy + self.h / 2)

    @property
    def left(self) -> tuple[float, float]:
        return (self.cx - self.w / 2, self.cy)

    @property
    def right(self) -> tuple[float, float]:
        return (self.cx + self.w / 2, self.cy)

    @property
    def x0(self) -> float:
        return self.cx - self.w / 2

    @property
    def x1(self) -> float:
        return self.cx + self.w / 2

    @property
    def y0(self) -> float:
        return self.cy - self.h / 2

    @property
    def y1(self) -> float:
        return self.cy + self.h / 2


class Canvas:
    """An SVG drawing built element by element; ``svg()`` returns the whole document."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    def _add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        label: str,
        size: float = 14,
        anchor: str = "middle",
        colour: str = INK,
        weight: str = "normal",
        italic: bool = False,
    ) -> None:
        """Text whose line is vertically centred on y."""
        style = ' font-style="italic"' if italic else ""
        bold = f' font-weight="{weight}"' if weight != "normal" else ""
        self._add(
            f'<text x="{_num(x)}" y="{_num(y + size * 0.35)}" font-size="{_num(size)}" '
            f'text-anchor="{anchor}" fill="{colour}"{bold}{style} xml:space="preserve">{_rich(label, size)}</text>'
        )

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str,
        stroke: str,
        rx: float = 6,
        dash: bool = False,
        width: float = 1.4,
    ) -> None:
        d = ' stroke-dasharray="5 4"' if dash else ""
        self._add(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
            f'rx="{_num(rx)}" fill="{fill}" stroke="{stroke}" stroke-width="{_num(width)}"{d}/>'
        )

    def box(
        self,
        cx: float,
        cy: float,
        w: float,
        h: float,
        label: str = "",
        kind: str = "plain",
        size: float = 14,
        sub: str = "",
        weight: str = "normal",
        dash: bool = False,
    ) -> Box:
        """A rounded box of colour `kind` centred on (cx, cy) with a label and optional second line."""
        fill, stroke = COLOURS[kind]
        self.rect(cx - w / 2, cy - h / 2, w, h, fill, stroke, dash=dash)
        if sub:
            self.text(cx, cy - size * 0.55, label, size, weight=weight)
            self.text(cx, cy + size * 0.65, sub, size * 0.8, colour=MUTED)
        elif label:
            self.text(cx, cy, label, size, weight=weight)
        return Box(cx, cy, w, h)

    def stack(
        self, cx: float, cy: float, w: float, h: float, label: str, kind: str, size: float = 14, copies: int = 2
    ) -> Box:
        """A box with `copies` shadows behind it: one per head or per layer."""
        fill, stroke = COLOURS[kind]
        for k in range(copies, 0, -1):
            self.rect(cx - w / 2 + 5 * k, cy - h / 2 - 5 * k, w, h, fill, stroke)
        return self.box(cx, cy, w, h, label, kind, size)

    def frame(
        self, x: float, y: float, w: float, h: float, label: str = "", label_side: str = "left", size: float = 15
    ) -> None:
        """A light dashed frame around a repeated block, with e.g. "N×" beside it."""
        self.rect(x, y, w, h, "#f9fafb", "#9ca3af", rx=10, dash=True, width=1.2)
        if label:
            lx = x - 10 if label_side == "left" else x + w + 10
            self.text(lx, y + h / 2, label, size, anchor="end" if label_side == "left" else "start", weight="bold")

    def line(
        self,
        *points: tuple[float, float],
        arrow: bool = True,
        dash: bool = False,
        colour: str = INK,
        width: float = 1.5,
    ) -> None:
        """A polyline through `points`, with an arrowhead at the last point."""
        d = " ".join(("M" if i == 0 else "L") + f"{_num(x)},{_num(y)}" for i, (x, y) in enumerate(points))
        head = f' marker-end="url(#{"arrow" if colour == INK else "arrow-muted"})"' if arrow else ""
        dashes = ' stroke-dasharray="5 4"' if dash else ""
        self._add(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{_num(width)}"{dashes}{head}/>')

    def arrow(self, start: tuple[float, float], end: tuple[float, float], **kw) -> None:
        self.line(start, end, **kw)

    def elbow(self, start: tuple[float, float], end: tuple[float, float], first: str = "v", **kw) -> None:
        """A right-angled arrow: vertical then horizontal (`first` "v") or the other way ("h")."""
        corner = (start[0], end[1]) if first == "v" else (end[0], start[1])
        self.line(start, corner, end, **kw)

    def op(self, cx: float, cy: float, symbol: str = "+", r: float = 10) -> Box:
        """A small circle holding ``+`` or ``×`` (drawn as strokes, so it is centred in any font)
        or any other short symbol as text."""
        self._add(
            f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{_num(r)}" fill="#ffffff" stroke="{INK}" stroke-width="1.4"/>'
        )
        a = r * 0.55
        if symbol == "+":
            self.line((cx - a, cy), (cx + a, cy), arrow=False)
            self.line((cx, cy - a), (cx, cy + a), arrow=False)
        elif symbol == "×":
            b = a * 0.75
            self.line((cx - b, cy - b), (cx + b, cy + b), arrow=False)
            self.line((cx - b, cy + b), (cx + b, cy - b), arrow=False)
        else:
            self.text(cx, cy, symbol, r * 1.2)
        return Box(cx, cy, 2 * r, 2 * r)

    def table(
        self, x: float, y: float, w: float, h: float, rows: int, hot: int, label: str, kind: str = "embed"
    ) -> tuple[float, float]:
        """An embedding table as a striped matrix with one highlighted row; returns the
        midpoint of that row's right edge."""
        fill, stroke = COLOURS[kind]
        self.rect(x, y, w, h, "#ffffff", stroke, rx=2)
        step = h / rows
        self.rect(x, y + hot * step, w, step, fill, stroke, rx=0)
        for r in range(1, rows):
            self._add(
                f'<path d="M{_num(x)},{_num(y + r * step)} h{_num(w)}" stroke="{stroke}" '
                f'stroke-opacity="0.35" stroke-width="1"/>'
            )
        self.text(x + w / 2, y - 12, label, 13, weight="bold")
        return (x + w, y + (hot + 0.5) * step)

    def svg(self) -> str:
        head = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(self.width)}" '
            f'height="{_num(self.height)}" viewBox="0 0 {_num(self.width)} {_num(self.height)}" '
            f'font-family="{FONT}" role="img">\n'
            f"<title>{escape(self.title)}</title>\n<defs>\n"
        )
        markers = "".join(
            f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            f'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,1 L9,5 L0,9 z" fill="{colour}"/></marker>\n'
            for name, colour in (("arrow", INK), ("arrow-muted", MUTED))
        )
        background = f'</defs>\n<rect width="{_num(self.width)}" height="{_num(self.height)}" fill="#ffffff"/>\n'
        return head + markers + background + "\n".join(self.parts) + "\n</svg>\n"


def sequence(c: Canvas, x: float, y: float, parts: list[tuple[str, str]], h: float = 34, size: float = 13) -> Box:
    """Adjacent boxes sized to their text, as one token sequence; returns its bounding box."""
    x0 = x
    for label, kind in parts:
        w = text_width(label, size) + 20
        c.box(x + w / 2, y, w, h, label, kind, size)
        x += w
    return Box((x0 + x) / 2, y, x - x0, h)
