"""Figures, part 2: one function per architecture figure, each returning its SVG text, and
:data:`FIGURES`, the file name of each. See :mod:`onehot2gpt_teach.figures`."""

from __future__ import annotations

from collections.abc import Callable

from .figures_canvas import MUTED, Box, Canvas, sequence

# --------------------------------------------------------------------------- the figures


def _score_row(c: Canvas, x: float, y: float, score: str, target: str, positive: bool) -> Box:
    """A negative-sampling question: score box -> target word, labelled 1 (real) or 0 (noise)."""
    s = c.box(x, y, 116, 32, score, "out", 13)
    t = c.box(x + 118, y, 62, 32, target, "token", 13)
    c.arrow(s.right, t.left)
    c.text(
        (s.x1 + t.x0) / 2,
        y - 12,
        "1" if positive else "0",
        12,
        weight="bold",
        colour="#15803d" if positive else "#b91c1c",
    )
    return s


def word2vec_skipgram_cbow() -> str:
    """Skip-gram and CBOW with negative sampling, with the input (v) and output (u) tables."""
    c = Canvas(1000, 470, "word2vec: skip-gram and CBOW with negative sampling")
    ctx = ["w_{t−2}", "w_{t−1}", "w_{t+1}", "w_{t+2}"]
    ys = [150, 200, 250, 300]
    c.text(250, 24, "Skip-gram: the centre word predicts each context word", 15, weight="bold")
    c.text(750, 24, "CBOW: the averaged context predicts the centre word", 15, weight="bold")
    c.line((500, 45), (500, 400), arrow=False, colour="#e5e7eb", width=1.2)

    # Skip-gram: w_t -> row v_c of the input table -> one question per context and noise word.
    centre = c.box(45, 225, 60, 40, "w_t", "token", sub="centre")
    row = c.table(100, 140, 44, 170, 9, 4, "input v")
    c.arrow(centre.right, (100, 225))
    vc = c.box(185, 225, 44, 34, "v_c", "embed")
    c.arrow(row, vc.left)
    for y, word in zip(ys, ctx):
        s = _score_row(c, 300, y, "σ(u_o^{T} v_c)", word, True)
        c.line(vc.right, (228, 225), (228, y), s.left) if y != 225 else c.arrow(vc.right, s.left)
    neg = _score_row(c, 300, 360, "σ(u_{w_k}^{T} v_c)", "w_k", False)
    c.line(vc.right, (228, 225), (228, 360), neg.left)
    c.text(360, 392, "K noise words w_k ~ P(w)^{0.75}", 12, colour=MUTED)
    c.table(242, 76, 116, 20, 1, 0, "output u", kind="out")
    c.line((300, 96), (300, 132), dash=True, colour=MUTED)

    # CBOW: each context word -> its row of the input table -> average -> questions for w_t.
    for y, word in zip(ys, ctx):
        t = c.box(545, y, 60, 32, word, "token", 13)
        v = c.box(630, y, 72, 32, "v_{" + word + "}", "embed", 13)
        c.arrow(t.right, v.left)
        c.line(v.right, (686, y), (686, 225), (706, 225)) if y in (ys[0], ys[-1]) else c.line(
            v.right, (686, y), arrow=False
        )
    c.text(630, 122, "rows of input v", 12, colour=MUTED)
    avg = c.box(738, 225, 64, 46, "v̄", "embed", 16, sub="average")
    c.text(686, 345, "v̄ = ¼ Σ_j v_{w_{t+j}}", 12, colour=MUTED)
    pos = _score_row(c, 840, 175, "σ(u_c^{T} v̄)", "w_t", True)
    neg2 = _score_row(c, 840, 300, "σ(u_{w_k}^{T} v̄)", "w_k", False)
    c.line(avg.right, (776, 225), (776, 175), pos.left)
    c.line(avg.right, (776, 225), (776, 300), neg2.left)
    c.text(900, 332, "K noise words", 12, colour=MUTED)
    c.table(782, 76, 116, 20, 1, 0, "output u", kind="out")
    c.line((840, 96), (840, 157), dash=True, colour=MUTED)

    c.text(
        500,
        425,
        "loss per example:  ℓ = −log σ(u_o^{T} v_c) − Σ_{k=1..K} log σ(−u_{w_k}^{T} v_c)"
        "    (CBOW: v̄ for v_c, the centre w_t for o)",
        13,
    )
    c.text(
        500,
        450,
        "each word has an input vector v_w (kept as its word vector) and an output vector u_w",
        12,
        colour=MUTED,
    )
    return c.svg()


def _lstm_inset(c: Canvas, x: float, y: float) -> None:
    """The LSTM cell's gates in a 300 × 350 frame whose top-left corner is (x, y)."""
    c.frame(x, y, 300, 350)
    c.text(x + 150, y + 20, "inside one LSTM cell", 14, weight="bold")
    top, bus, gate = y + 75, y + 300, y + 240
    fx, ix, gx, ox, ax_, hx = x + 70, x + 120, x + 170, x + 220, x + 170, x + 262
    c.text(x + 12, top - 16, "c_{t−1}", 13, anchor="start")
    c.op(fx, top, "×")
    c.op(ax_, top, "+")
    c.line((x + 12, top), (fx - 10, top))
    c.line((fx + 10, top), (ax_ - 10, top))
    c.line((ax_ + 10, top), (x + 292, top))
    c.text(x + 290, top - 16, "c_t", 13, anchor="end")
    for name, fn, px in (("f", "σ", fx), ("i", "σ", ix), ("g", "tanh", gx), ("o", "σ", ox)):
        b = c.box(px, gate, 40, 26, fn, "rnn", 12)
        c.text(px - 8, gate - 24, name, 13, anchor="end", italic=True, weight="bold")
        c.arrow((px, bus), b.bottom)
    c.line((fx, gate - 13), (fx, top + 10))
    ig = c.op(gx, y + 160, "×")
    c.line((ix, gate - 13), (ix, ig.cy), ig.left)
    c.line((gx, gate - 13), ig.bottom)
    c.line(ig.top, (ax_, top + 10))
    th = c.box(hx, top + 42, 40, 22, "tanh", "plain", 11)
    c.line((hx, top), th.top)
    og = c.op(hx, y + 160, "×")
    c.line(th.bottom, og.top)
    c.line((ox, gate - 13), (ox, og.cy), og.left)
    c.line(og.right, (x + 292, og.cy))
    c.text(x + 290, og.cy - 16, "h_t", 13, anchor="end")
    c.line((x + 12, bus), (ox, bus), arrow=False)
    c.text(x + 12, bus + 18, "[h_{t−1}; x_t]", 12, anchor="start", colour=MUTED)
    c.text(x + 150, y + 372, "c_t = f ⊙ c_{t−1} + i ⊙ g,   h_t = o ⊙ tanh(c_t)", 12.5)


def lstm_lm() -> str:
    """The course's LSTM language model (the checkpoint notebook 03 loads) unrolled over four steps:
    embedding E and projection P, two LSTM layers, projection Q and an adaptive softmax; the
    cell's gates in an inset."""
    c = Canvas(1000, 640, "LSTM language model, unrolled over four time steps")
    words = ["the", "cat", "sat", "on"]
    xs = [110, 250, 390, 530]
    y_tok, y_emb, y_proj, y_cell, y_q, y_soft, y_next = 540, 478, 420, 335, 252, 198, 138
    prev = None
    for t, (x, w) in enumerate(zip(xs, words), start=1):
        tok = c.box(x, y_tok, 80, 32, w, "token", 14)
        c.text(x, y_tok + 28, f"w_{t}", 12, colour=MUTED)
        emb = c.box(x, y_emb, 80, 30, f"E w_{t}", "embed", 14)
        proj = c.box(x, y_proj, 112, 30, f"x_{t} = P E w_{t}", "embed", 13)
        cell = c.stack(x, y_cell, 92, 56, "LSTM", "rnn", 15, copies=1)
        q = c.box(x, y_q, 80, 30, f"Q h_{t}", "out", 14)
        soft = c.box(x, y_soft, 124, 30, "adaptive softmax", "out", 12)
        nxt = c.box(x, y_next, 80, 32, (words[1:] + ["the"])[t - 1], "token", 14)
        c.text(x, y_next - 30, f"P(w_{t + 1} | w_{{≤{t}}})", 12, colour=MUTED)
        c.arrow(tok.top, emb.bottom)
        c.arrow(emb.top, proj.bottom)
        c.arrow(proj.top, cell.bottom)
        c.arrow((x, cell.y0 - 5), q.bottom)
        c.text(x + 8, (cell.y0 - 5 + q.y1) / 2, f"h_{t}", 12, anchor="start", colour=MUTED)
        c.arrow(q.top, soft.bottom)
        c.arrow(soft.top, nxt.bottom)
        left = prev.x1 + 5 if prev else 30
        for dy, name in ((-16, "c"), (16, "h")):
            c.arrow((left, y_cell + dy), (cell.x0, y_cell + dy))
            c.text((left + cell.x0) / 2, y_cell + dy - 10, f"{name}_{t - 1}", 11, colour=MUTED)
        prev = cell
    for dy in (-16, 16):
        c.arrow((prev.x1 + 5, y_cell + dy), (prev.x1 + 40, y_cell + dy))
    c.text(prev.x1 + 50, y_cell, "…", 16, anchor="start")
    c.text(
        500,
        598,
        "x_t = P E w_t,   h_t = LSTM(h_{t−1}, x_t),   log P(w_{t+1} | w_{≤t}) = adaptive log-softmax(Q h_t)",
        12.5,
    )
    c.text(
        500,
        620,
        "two LSTM layers, the second adding its input to its output (a residual); the same weights at every step",
        12,
        colour=MUTED,
    )
    _lstm_inset(c, 680, 60)
    return c.svg()


def elmo_bilm() -> str:
    """The ELMo biLM: the forward LM above the token layer, the backward LM below it, and the
    task's scalar mix of one token's 2L + 1 vectors."""
    c = Canvas(1000, 540, "ELMo: a two-layer biLM and the task's scalar mix of its layers")
    words = ["he", "sat", "by", "the", "bank"]
    xs = [80, 205, 330, 455, 580]
    rows = {"f2": 105, "f1": 185, "x": 270, "b1": 355, "b2": 435}
    for k, (x, w) in enumerate(zip(xs, words), start=1):
        c.box(x, rows["x"], 84, 46, w, "token", 14, sub=f"x_{k}")
        for j, kind, direction in ((1, "rnn", "f"), (2, "rnn", "f"), (1, "mix", "b"), (2, "mix", "b")):
            y = rows[f"{direction}{j}"]
            arrow = "→" if direction == "f" else "←"
            b = c.box(x, y, 84, 36, f"{arrow}h_{{{k},{j}}}", kind, 13)
            below = rows["x"] if j == 1 else rows[f"{direction}1"]
            if direction == "f":
                c.arrow((x, below - (23 if j == 1 else 18)), b.bottom)
            else:
                c.arrow((x, below + (23 if j == 1 else 18)), b.top)
            if k > 1 and direction == "f":
                c.arrow((xs[k - 2] + 42, y), b.left)
            if k > 1 and direction == "b":
                c.arrow(b.left, (xs[k - 2] + 42, y))
    for key, label in (
        ("f2", "forward LSTM layer 2"),
        ("f1", "forward LSTM layer 1"),
        ("x", "token layer (j = 0)"),
        ("b1", "backward LSTM layer 1"),
        ("b2", "backward LSTM layer 2"),
    ):
        c.text(632, rows[key], label, 12, anchor="start", colour=MUTED)
    c.text(
        420,
        28,
        "token k has 2L + 1 = 5 vectors:  h_{k,0} = [x_k; x_k],  h_{k,j} = [→h_{k,j}; ←h_{k,j}]",
        14,
        weight="bold",
    )
    c.text(
        420,
        54,
        "forward LM: left → right, predicts the next word;   backward LM: right → left, predicts the previous word",
        12,
        colour=MUTED,
    )
    c.text(330, 500, "ELMo_k^{task} = γ^{task} Σ_j s_j^{task} h_{k,j},   s^{task} = softmax(w^{task})", 13.5)
    # Token k = 5 ("bank"): its column feeds the scalar mix.
    c.rect(
        xs[4] - 50, rows["f2"] - 26, 100, rows["b2"] - rows["f2"] + 52, "none", "#0d9488", rx=10, dash=True, width=1.4
    )
    c.rect(790, 95, 195, 370, "#f9fafb", "#0d9488", rx=10, dash=True, width=1.4)
    c.text(800, 115, "scalar mix, column 5", 12.5, weight="bold", anchor="start")
    ys = {0: 400, 1: 330, 2: 260}
    bus = 955
    for j, y in ys.items():
        h = c.box(835, y, 66, 30, f"h_{{5,{j}}}", "embed" if j == 0 else "rnn", 13)
        m = c.op(905, y, "×")
        c.arrow(h.right, m.left)
        c.text(905, y + 22, f"s_{j}", 13)
        c.line(m.right, (bus, y), arrow=False)
    c.line((bus, ys[0]), (bus, 200), arrow=False)
    acc = c.op(bus, 190, "+", 11)
    gam = c.op(bus, 145, "×", 11)
    c.arrow(acc.top, gam.bottom)
    c.text(bus - 18, 145, "γ", 15, anchor="end")
    task = c.box(887, 75, 190, 30, "task model", "out", 13)
    c.line(gam.top, (bus, 110), (887, 110), task.bottom)
    c.text(bus - 18, 190, "Σ_j s_j h_{5,j}", 12, anchor="end")
    return c.svg()


def _scaled_dot_product(c: Canvas, cx: float, base: float) -> Box:
    """The scaled dot-product attention column (Q, K, V at y = `base`); returns its output box."""
    q = c.box(cx - 70, base, 44, 30, "Q", "token", 14)
    k = c.box(cx - 10, base, 44, 30, "K", "token", 14)
    v = c.box(cx + 80, base, 44, 30, "V", "token", 14)
    mm = c.box(cx - 40, base - 70, 120, 32, "Q K^{T}", "attn", 14)
    c.arrow(q.top, (q.cx, mm.y1))
    c.arrow(k.top, (k.cx, mm.y1))
    sc = c.box(cx - 40, base - 130, 120, 32, "÷ √d_k", "attn", 14)
    mk = c.box(cx - 40, base - 190, 120, 32, "mask (optional)", "attn", 12, dash=True)
    sm = c.box(cx - 40, base - 250, 120, 32, "softmax", "attn", 14)
    out = c.box(cx + 20, base - 320, 130, 32, "· V", "attn", 14)
    for a, b in ((mm, sc), (sc, mk), (mk, sm)):
        c.arrow(a.top, b.bottom)
    c.arrow(sm.top, (sm.cx, out.y1))
    c.arrow(v.top, (v.cx, out.y1))
    for box, note in ((mm, "scores (T, T)"), (mk, "−∞ where a key is hidden"), (sm, "weights: rows sum to 1")):
        c.text(box.x0 - 12, box.cy, note, 11, anchor="end", colour=MUTED)
    return out


def attention() -> str:
    """Scaled dot-product attention, and multi-head attention built from it."""
    c = Canvas(1000, 520, "Scaled dot-product attention and multi-head attention")
    c.text(250, 26, "Scaled dot-product attention", 15, weight="bold")
    c.text(720, 26, "Multi-head attention", 15, weight="bold")
    out = _scaled_dot_product(c, 270, 440)
    res = c.box(out.cx, out.cy - 62, 100, 30, "output", "plain", 13)
    c.arrow(out.top, res.bottom)
    c.text(240, 500, "Attention(Q, K, V) = softmax(Q K^{T} / √d_k) V", 13)
    c.line((465, 45), (465, 470), arrow=False, colour="#e5e7eb", width=1.2)

    # Multi-head: project per head, attend per head, concatenate, project with W^O.
    for name, x in (("Q", 600), ("K", 720), ("V", 840)):
        inp = c.box(x, 440, 44, 30, name, "token", 14)
        lin = c.stack(x, 370, 92, 34, f"W^{{{name}}}_i", "ffn", 13)
        c.arrow(inp.top, lin.bottom)
        c.arrow(lin.top, (x, 300))
    att = c.stack(720, 280, 300, 40, "scaled dot-product attention", "attn", 14, copies=3)
    c.text(att.x1 + 24, 262, "h heads", 12, anchor="start", colour=MUTED)
    cat = c.box(720, 200, 150, 32, "concat", "plain", 14)
    c.arrow(att.top, cat.bottom)
    wo = c.box(720, 140, 150, 32, "linear W^{O}", "ffn", 14)
    c.arrow(cat.top, wo.bottom)
    mres = c.box(720, 80, 100, 30, "output", "plain", 13)
    c.arrow(wo.top, mres.bottom)
    for y, note in (
        (440, "(B, T, D)"),
        (330, "per head (B, H, T, hs), hs = D / H"),
        (200, "(B, T, H·hs)"),
        (80, "(B, T, D)"),
    ):
        c.text(990, y, note, 11, anchor="end", colour=MUTED)
    c.text(
        720,
        500,
        "head_i = Attention(Q W^{Q}_i, K W^{K}_i, V W^{V}_i),   MultiHead = concat(head_1..head_h) W^{O}",
        12.5,
    )
    return c.svg()


def _sublayer(c: Canvas, cx: float, y: float, w: float, label: str, kind: str, side: float, size: float = 13) -> float:
    """A post-norm sublayer whose input line starts at height `y`: the sublayer box, add & norm
    above it, the residual path on the `side` x; returns the y where its output leaves."""
    sub = c.box(cx, y - 40, w, 36, label, kind, size)
    norm = c.box(cx, y - 92, w, 26, "add & norm", "norm", 12)
    c.arrow((cx, y), sub.bottom)
    c.arrow(sub.top, norm.bottom)
    c.line((cx, y - 8), (side, y - 8), (side, norm.cy), norm.left if side < cx else norm.right)
    return norm.y0


def transformer_encoder_decoder() -> str:
    """The Transformer encoder–decoder (Vaswani et al., 2017, figure 1) in the course's style."""
    c = Canvas(880, 790, "The Transformer encoder-decoder")
    ex, dx, w = 270, 630, 200
    c.text(ex, 24, "Encoder", 16, weight="bold")
    c.text(dx, 24, "Decoder", 16, weight="bold")
    for x, tok, emb, sign in (
        (ex, "source tokens", "input embedding", -1),
        (dx, "target tokens (shifted right)", "output embedding", 1),
    ):
        t = c.box(x, 760, w + 40, 30, tok, "token", 13)
        e = c.box(x, 700, w, 34, emb, "embed", 13)
        c.arrow(t.top, e.bottom)
        p = c.op(x, 648, "+", 11)
        c.arrow(e.top, p.bottom)
        pe = c.op(x + sign * 42, 648, "∿", 11)
        c.arrow(pe.left if sign > 0 else pe.right, p.right if sign > 0 else p.left)
        c.text(pe.cx + sign * 18, 648, "positional encoding", 12, colour=MUTED, anchor="start" if sign > 0 else "end")

    # Encoder block: self-attention, feed-forward; residuals on the left.
    c.frame(ex - 135, 405, 270, 227, "N×")
    y = _sublayer(c, ex, 637, w, "multi-head self-attention", "attn", ex - w / 2 - 18)
    enc_out = _sublayer(c, ex, y, w, "feed-forward", "ffn", ex - w / 2 - 18)
    c.line((ex, enc_out), (ex, 380), arrow=False)

    # Decoder block: masked self-attention, cross-attention, feed-forward; residuals on the right.
    c.frame(dx - 135, 298, 270, 334, "×N", label_side="right")
    side = dx + w / 2 + 18
    y = _sublayer(c, dx, 637, w, "masked self-attention", "attn", side)
    cross_in = y
    y = _sublayer(c, dx, y, w, "cross-attention", "attn", side)
    y = _sublayer(c, dx, y, w, "feed-forward", "ffn", side)
    # Keys and values of every cross-attention come from the encoder's output.
    cross = Box(dx, cross_in - 40, w, 36)
    c.line((ex, 380), (ex, 375), (dx - 160, 375), (dx - 160, cross.cy), cross.left)
    c.text(dx - 168, 480, "K, V", 12, anchor="end", colour=MUTED)
    c.text(dx + 8, cross_in - 12, "Q", 11, anchor="start", colour=MUTED)
    lin = c.box(dx, 250, w, 32, "linear", "out", 13)
    c.arrow((dx, y), lin.bottom)
    sm = c.box(dx, 195, w, 32, "softmax", "out", 13)
    c.arrow(lin.top, sm.bottom)
    pr = c.box(dx, 140, w + 40, 30, "next-token probabilities", "token", 13)
    c.arrow(sm.top, pr.bottom)
    c.text(ex, 130, "x ← LayerNorm(x + Sublayer(x))", 13)
    c.text(ex, 156, "FFN(x) = max(0, xW_1 + b_1)W_2 + b_2", 13)
    c.text(ex, 182, "post-norm, as in the paper; the decoder's", 12, colour=MUTED)
    c.text(ex, 200, "self-attention is masked to the past", 12, colour=MUTED)
    return c.svg()


def bert_input() -> str:
    """BERT's input: token + segment + position embeddings summed (Devlin et al., 2019, fig. 2)."""
    tokens = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "play", "##ing", "[SEP]"]
    c = Canvas(1060, 330, "BERT's input representation: token + segment + position embeddings")
    x0, step, w = 215, 76, 68
    rows = [("Input", 40), ("Token embeddings", 105), ("Segment embeddings", 185), ("Position embeddings", 265)]
    for label, y in rows:
        c.text(x0 - 50, y, label, 13, anchor="end", weight="bold" if label != "Input" else "normal")
    for i, tok in enumerate(tokens):
        x = x0 + i * step
        c.box(x, 40, w, 32, tok, "special" if tok.startswith("[") else "token", 13)
        c.box(x, 105, w, 36, "E_{" + tok + "}", "embed", 14)
        seg = "A" if i <= 5 else "B"
        c.box(x, 185, w, 36, "E_{" + seg + "}", "mix" if seg == "A" else "rnn", 14)
        c.box(x, 265, w, 36, "E_{" + str(i) + "}", "ffn", 14)
        c.op(x, 145, "+", 9)
        c.op(x, 225, "+", 9)
    c.text(x0 - 50, 145, "+", 16, anchor="end", weight="bold")
    c.text(x0 - 50, 225, "+", 16, anchor="end", weight="bold")
    c.text(
        530,
        312,
        "each token's input vector is the sum of its three embeddings (then LayerNorm "
        "and dropout); sentence A gets E_A, sentence B gets E_B",
        12,
        colour=MUTED,
    )
    return c.svg()


def _bert_panel(c: Canvas, x: float, y: float, title: str, tokens: list[str], heads: dict[int, str], note: str) -> None:
    """One fine-tuning shape: tokens -> BERT -> last vectors -> the task's head on the positions
    in `heads` (position -> head label), with a one-line `note` under the title."""
    c.frame(x, y, 500, 300)
    c.text(x + 250, y + 20, title, 14, weight="bold")
    c.text(x + 250, y + 42, note, 11.5, colour=MUTED)
    n, step = len(tokens), 470 / len(tokens)
    xs = [x + 15 + step * (i + 0.5) for i in range(n)]
    bert = c.box(x + 250, y + 185, 470, 46, "BERT (pre-trained, fine-tuned with the head)", "attn", 14)
    for px, tok in zip(xs, tokens):
        t = c.box(px, y + 268, step - 6, 28, tok, "special" if tok.startswith("[") else "token", 11)
        c.arrow(t.top, (px, bert.y1))
        if tok == "[CLS]":
            vec = "h_{[CLS]}"
        else:
            vec = "…" if tok == "…" else "h" if n > 6 else "h_{" + tok.replace("Tok ", "") + "}"
        v = c.box(px, y + 130, step - 6, 26, vec, "embed", 11)
        c.arrow((px, bert.y0), v.bottom)
    for i, label in heads.items():
        hb = c.box(xs[i], y + 80, step - 6, 26, label, "out", 11)
        c.arrow((xs[i], y + 117), hb.bottom)


def bert_finetuning() -> str:
    """BERT's four fine-tuning shapes (Devlin et al., 2019, figure 4) with the course's heads."""
    c = Canvas(1040, 650, "BERT fine-tuning: four task shapes")
    pooled = "class = argmax(W p + b),  p = tanh(W_p h_{[CLS]} + b_p)"
    _bert_panel(
        c,
        15,
        15,
        "(a) sentence pair → class (entailment)",
        ["[CLS]", "A_1", "…", "A_n", "[SEP]", "B_1", "…", "B_m", "[SEP]"],
        {0: "class"},
        pooled,
    )
    _bert_panel(
        c,
        525,
        15,
        "(b) one sentence → class (sentiment)",
        ["[CLS]", "Tok 1", "Tok 2", "…", "Tok n", "[SEP]"],
        {0: "class"},
        pooled,
    )
    _bert_panel(
        c,
        15,
        335,
        "(c) question answering: a span of the document",
        ["[CLS]", "Q_1", "…", "[SEP]", "D_1", "D_2", "…", "D_m", "[SEP]"],
        {4: "s, e", 5: "s, e", 6: "…", 7: "s, e"},
        "start score S·h_t, end score E·h_t; answer: the best span s ≤ e",
    )
    _bert_panel(
        c,
        525,
        335,
        "(d) one sentence → a tag per token (POS)",
        ["[CLS]", "Tok 1", "Tok 2", "…", "Tok n", "[SEP]"],
        {1: "tag", 2: "tag", 3: "…", 4: "tag"},
        "logits_t = W h_t + b for every token",
    )
    return c.svg()


def gpt_decoder() -> str:
    """GPT's decoder-only stack: embeddings, N pre-norm blocks, final LayerNorm, tied output."""
    c = Canvas(720, 780, "GPT: a decoder-only stack of pre-norm blocks with a tied output layer")
    cx, w = 340, 230
    tok = c.box(cx, 745, 290, 30, "tokens u_1 … u_T (a context of T)", "token", 13)
    te = c.box(cx - 75, 690, 130, 34, "token W_e", "embed", 13)
    pe = c.box(cx + 75, 690, 130, 34, "position W_p", "embed", 13)
    c.arrow((te.cx, tok.y0), te.bottom)
    c.arrow((pe.cx, tok.y0), pe.bottom)
    s = c.op(cx, 640, "+", 11)
    c.elbow(te.top, s.left)
    c.elbow(pe.top, s.right)
    c.text(cx + 22, 622, "h_0 = U W_e + W_p", 13, anchor="start")

    c.frame(cx - 150, 325, 300, 285, "N×")
    c.text(cx + 160, 470, "decoder block", 12, anchor="start", colour=MUTED)
    y, side = s.y0, cx - w / 2 - 20
    for label, kind, top in (("masked multi-head self-attention", "attn", 600), ("MLP (GELU)", "ffn", 470)):
        ln = c.box(cx, top - 15, w, 26, "LayerNorm", "norm", 12)
        sub = c.box(cx, top - 62, w, 36, label, kind, 13)
        add = c.op(cx, top - 108, "+", 10)
        c.arrow((cx, y), ln.bottom)
        c.arrow(ln.top, sub.bottom)
        c.arrow(sub.top, add.bottom)
        branch = (y + ln.y1) / 2
        c.line((cx, branch), (side, branch), (side, add.cy), add.left)
        y = add.y0
    c.text(side - 8, 540, "x + F(LN(x))", 11, anchor="end", colour=MUTED)
    fl = c.box(cx, 295, w, 26, "final LayerNorm", "norm", 12)
    c.arrow((cx, y), fl.bottom)
    out = c.box(cx, 240, w, 36, "h_n W_e^{T}", "out", 14)
    c.arrow(fl.top, out.bottom)
    c.line((te.x0, te.cy), (50, te.cy), (50, out.cy), out.left, dash=True, colour=MUTED)
    c.text(58, 262, "tied: the same W_e", 12, anchor="start", colour=MUTED)
    sm = c.box(cx, 180, w, 30, "softmax", "out", 13)
    c.arrow(out.top, sm.bottom)
    p = c.box(cx, 125, 290, 30, "P(u_{t+1} | u_{≤t}) at every t", "token", 13)
    c.arrow(sm.top, p.bottom)
    c.text(cx, 40, "P(u) = softmax(h_n W_e^{T})", 15, weight="bold")
    c.text(cx, 68, "the causal mask lets position t attend to positions ≤ t only", 12, colour=MUTED)
    for y, note in ((690, "(B, T, D)"), (500, "(B, T, D)"), (240, "(B, T, V)")):
        c.text(705, y, note, 11, anchor="end", colour=MUTED)
    return c.svg()


def gpt1_input_transformations() -> str:
    """GPT-1's task inputs (Radford et al., 2018, figure 1, right) in the course's style."""
    c = Canvas(1000, 560, "GPT-1: input transformations for fine-tuning")
    S, D, E = ("<start>", "special"), ("<delim>", "special"), ("<extract>", "special")
    rows = [
        ("Classification", [[S, ("text", "token"), E]], "sum"),
        ("Entailment", [[S, ("premise", "token"), D, ("hypothesis", "token"), E]], "sum"),
        (
            "Similarity",
            [[S, ("text 1", "token"), D, ("text 2", "token"), E], [S, ("text 2", "token"), D, ("text 1", "token"), E]],
            "add",
        ),
        (
            "Multiple choice",
            [
                [S, ("context", "token"), D, ("answer 1", "token"), E],
                [S, ("context", "token"), D, ("answer 2", "token"), E],
                [S, ("context", "token"), D, ("answer N", "token"), E],
            ],
            "softmax",
        ),
    ]
    y = 40
    for name, seqs, how in rows:
        c.text(20, y + 20 * (len(seqs) - 1) + 0, name, 14, anchor="start", weight="bold")
        ends = []
        for i, seq in enumerate(seqs):
            yy = y + 44 * i
            bb = sequence(c, 150, yy, seq, h=30, size=12)
            tr = c.box(600, yy, 120, 30, "Transformer", "attn", 13)
            c.arrow(bb.right, tr.left)
            if how == "softmax":
                lin = c.box(720, yy, 70, 30, "linear", "out", 12)
                c.arrow(tr.right, lin.left)
                ends.append(lin.right)
            else:
                ends.append(tr.right)
        if how == "sum":
            lin = c.box(720, y, 70, 30, "linear", "out", 12)
            c.arrow(ends[0], lin.left)
            c.text(770, y, "W_y → softmax over classes", 12, anchor="start", colour=MUTED)
        elif how == "add":
            p = c.op(690, y + 22, "+", 10)
            c.line(ends[0], (690, y), (690, p.y0))
            c.line(ends[1], (690, y + 44), (690, p.y1))
            lin = c.box(770, y + 22, 70, 30, "linear", "out", 12)
            c.arrow(p.right, lin.left)
            c.text(820, y + 22, "W_y → softmax", 12, anchor="start", colour=MUTED)
        else:
            sm = c.box(880, y + 44, 90, 30, "softmax", "out", 12)
            for e, yy in zip(ends, (y, y + 44, y + 88)):
                c.line(e, (815, yy), (815, y + 44), sm.left) if yy != y + 44 else c.arrow(e, sm.left)
            c.text(880, y + 78, "over the answers", 11, colour=MUTED)
        y += 44 * len(seqs) + 50
    c.text(
        500,
        520,
        "the pre-trained Transformer is the same in every row; its state at <extract>, "
        "h_l^{m}, feeds the new linear layer W_y:  P(y | x) = softmax(h_l^{m} W_y)",
        12.5,
    )
    c.text(500, 544, "objective while fine-tuning: L_3 = L_2 + λ·L_1 (task loss plus the LM loss)", 12, colour=MUTED)
    return c.svg()


FIGURES: dict[str, Callable[[], str]] = {
    "word2vec_skipgram_cbow.svg": word2vec_skipgram_cbow,
    "lstm_lm.svg": lstm_lm,
    "elmo_bilm.svg": elmo_bilm,
    "attention.svg": attention,
    "transformer_encoder_decoder.svg": transformer_encoder_decoder,
    "bert_input.svg": bert_input,
    "bert_finetuning.svg": bert_finetuning,
    "gpt_decoder.svg": gpt_decoder,
    "gpt1_input_transformations.svg": gpt1_input_transformations,
}
