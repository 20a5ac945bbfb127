"""Looking inside a GPT: stepping through a forward pass, the logit lens, switching parts off."""

from __future__ import annotations

import html

import ipywidgets as W

from ..utils import check_int, check_number
from ._base import (
    WIDE_LABEL,
    SavedView,
    TokenTexts,
    error_html,
    format_number,
    heat_style,
    html_table,
    safe_update,
    visible_token,
)
from .sampling import encode_prompt


class _InsideGPT(TokenTexts, SavedView, W.VBox):
    """Shared by the look-inside widgets: a prompt for a course GPT, the position to read, a status.

    A prompt longer than the model's context is cropped to its last max_len tokens (with a notice);
    an input the model cannot read shows a message and the views stay as they were."""

    def __init__(self, model, encode, decode, prompt: str, controls: list, views: list, bert_too: bool = False):
        from ..lookinside import check_gpt, is_course_bert

        if not (bert_too and is_course_bert(model)):
            check_gpt(model)
        if not (callable(encode) and callable(decode)):
            raise TypeError("encode(text) -> list[int] and decode(ids) -> str must be functions")
        self.model, self.encode, self.decode = model, encode, decode
        self.is_bert = bert_too and is_course_bert(model)
        self.vocab_size, self.max_len = model.config.vocab_size, model.config.max_len
        self.ids: list[int] = []  # the tokens the views were computed from
        self.tokens: list[str] = []
        self.prompt = W.Text(value=prompt, description="Prompt", continuous_update=False, layout=W.Layout(width="90%"))
        self.position = W.IntSlider(value=0, min=0, max=1, description="Position", continuous_update=False)
        self.status = W.HTML()
        self._busy = False
        self._new_ids: list[int] | None = None  # the prompt's ids, None while it cannot be read
        self._notice = ""
        super().__init__([self.prompt, W.HBox([self.position] + controls), self.status] + views)
        self.prompt.observe(self._prompt_changed, names="value")
        self.position.observe(self.update, names="value")
        self._prompt_changed()

    def _prompt_changed(self, *_):
        try:
            ids, notice = encode_prompt(self.encode, self.decode, self.prompt.value, self.vocab_size, self.max_len)
        except Exception as exc:
            self.status.value = error_html(exc)
            self._new_ids = None  # nothing acts on the last prompt until this one can be read
            return
        ids = ids[-self.max_len :]
        self._busy = True
        try:  # the new prompt's positions, starting at the one that predicts (_start)
            self.position.max = max(len(ids) - 1, 1)
            self.position.value = self._start(ids)
            self.position.disabled = len(ids) == 1
            self._new_tokens(ids)
        finally:
            self._busy = False
        self._new_ids, self._notice = ids, notice
        self._refresh()

    def _start(self, ids: list[int]) -> int:
        """The position a new prompt opens at: for a GPT the last one (the next-token prediction);
        for a BERT its first [MASK] (the blank it fills in), else its last token before [SEP]."""
        if not self.is_bert:
            return len(ids) - 1
        texts = [self.token_text(i).strip() for i in ids]
        if "[MASK]" in texts:
            return texts.index("[MASK]")
        return len(ids) - 2 if len(ids) > 1 and texts[-1] == "[SEP]" else len(ids) - 1

    def _new_tokens(self, ids: list[int]) -> None:
        """Called with a new prompt's ids before anything is computed (controls that list tokens)."""

    def update(self, *_):
        if not self._busy and self._new_ids:
            self._refresh()

    @safe_update
    def _refresh(self) -> str:
        ids = self._new_ids
        self._compute(ids)
        self.ids, self.tokens = ids, [self.token_text(i) for i in ids]
        self._draw()
        return self._notice

    def _label(self, t: int, ids=None) -> str:
        """Position t and its token, as HTML (spaces and newlines made visible)."""
        ids = self.ids if ids is None else ids
        return f"{t}: {visible_token(self.token_text(ids[t]))}"


class ForwardStepper(_InsideGPT):
    """Step through a course GPT's forward pass for one prompt and one position: embedding and
    position → per layer LayerNorm, Q, K, V, scores, scale, mask, softmax, weighted sum, output
    projection, residual, MLP, residual → final LayerNorm → logits → temperature → probabilities.
    A course BERT with its MLM head works too (:func:`onehot2gpt.lookinside_bert.trace_bert`).
    Each stage shows the tensor at that position (a readable slice) and its full shape; the pass
    is checked against the library's forward each time the prompt changes.

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
        check_number(temperature, "temperature", 0, low_open=True)
        check_int(step, "step", 0)
        self.values = check_int(values, "values", 1, fix="how many numbers of a vector to show")
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
            style=WIDE_LABEL,
            continuous_update=False,
        )
        self.header, self.view, self.checked = W.HTML(), W.HTML(), W.HTML()
        self._step_wanted = step
        views = [W.HBox([self.back, self.step, self.forward]), self.header, self.view, self.checked]
        super().__init__(model, encode, decode, prompt, [self.temperature], views, bert_too=True)
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
        from ..lookinside import check_trace, trace_model

        if self.trace is None or self.trace.ids.tolist() != ids:
            trace = trace_model(self.model, ids)
            self.check = check_trace(self.model, trace)
        self.trace = trace_model(self.model, ids, temperature=float(self.temperature.value))

    def _draw(self):
        from ..lookinside import stages

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
            self.status.value = error_html(exc)

    def _show(self):
        s = self.stage
        p = self.position.value
        self.header.value = (
            f"<b>Step {self.step.value} of {self.step.max}: {html.escape(s.key)}</b><br>"
            f"{html.escape(s.formula)} &nbsp; <span style='color:#666'>full tensor "
            f"{html.escape(s.shape)}; shown: position {self._label(p)}</span>"
        )
        self.view.value = self._tensor_html(s)

    def _tensor_html(self, s) -> str:
        v = s.value.detach().float().cpu()
        p, n, T = self.position.value, self.values, len(self.ids)
        if v.dim() == 1 and v.numel() == self.vocab_size:  # logits or probabilities: the top 10
            values, order = v.topk(min(10, v.numel()))
            rows = [
                [visible_token(self.token_text(i)), format_number(x)] for i, x in zip(order.tolist(), values.tolist())
            ]
            return html_table(rows, ["next token", "value"]) + f"<i>the 10 largest of {v.numel():,} values</i>"
        if v.dim() == 2 and s.shape.endswith(f"T={T})") and v.size(-1) == T:  # (H, T): one row per head
            heat = "softmax" in s.key  # the weights this query gives the keys it may see
            rows = [
                [str(h)]
                + [
                    f"<span style='{heat_style(x)}'>{format_number(x)}</span>" if heat and t <= p else format_number(x)
                    for t, x in enumerate(row)
                ]
                for h, row in enumerate(v.tolist())
            ]
            header = ["head"] + [self._label(t) for t in range(T)]
            return html_table(rows, header) + f"<i>query {self._label(p)} against every key</i>"
        more = ["…"] if v.size(-1) > n else []  # (D,) or (H, hs): the first n features
        header = [str(i) for i in range(min(n, v.size(-1)))] + more
        if v.dim() == 1:
            return (
                html_table([[format_number(x) for x in v[:n].tolist()] + more], header)
                + f"<i>{min(n, v.numel())} of {v.numel()} values; norm {v.norm():.3g}, mean "
                f"{v.mean():.3g}, std {v.std(unbiased=False):.3g}</i>"
            )
        rows = [[str(h)] + [format_number(x) for x in row[:n].tolist()] + more for h, row in enumerate(v)]
        return (
            html_table(rows, ["head"] + header)
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
        check_int(k, "k", 1, 10, fix="how many candidates per layer")
        self.k = W.IntSlider(value=k, min=1, max=10, description="Top k", continuous_update=False)
        self.table = W.HTML()
        super().__init__(model, encode, decode, prompt, [self.k], [self.table])
        self.k.observe(self.update, names="value")

    def _compute(self, ids):
        from ..lookinside import logit_lens

        p = self.position.value
        target = ids[p + 1] if p + 1 < len(ids) else None
        self.rows = logit_lens(self.model, ids, position=p, k=int(self.k.value), target=target)
        self._target = target

    def _draw(self):
        p = self.position.value
        header = ["after"] + [f"#{i + 1}" for i in range(int(self.k.value))]
        if self._target is not None:
            header.append(f"next is “{visible_token(self.token_text(self._target))}”")
        rows = []
        for r in self.rows:
            cells = [r.layer] + [
                f"<span style='{heat_style(q)}'>{visible_token(self.token_text(i))} ({q:.2f})</span>" for i, q in r.top
            ]
            if self._target is not None:
                cells.append(f"p {r.target_prob:.3f}, rank {r.target_rank + 1}")
            rows.append(cells)
        self.table.value = f"<p>Reading the residual stream at {self._label(p)}: what comes next?</p>" + html_table(
            rows, header
        )


class InterventionExplorer(_InsideGPT):
    """Switch parts of a course GPT off and see what changes: heads (their output set to zero),
    a layer's MLP, or tokens (hidden from every other position, exBERT's masking). Shows the mean
    next-token loss over the prompt with and without, and the top predictions at the position.

    State for code and tests: ``.result`` (:class:`onehot2gpt.lookinside.Intervention`).
    """

    def __init__(self, model, encode, decode, prompt: str = "the river flows", k: int = 5):
        from ..lookinside import check_gpt

        check_gpt(model)
        c = model.config
        self.result = None
        self.k = check_int(k, "k", 1, fix="how many top predictions to compare")
        heads = [(f"layer {l} · head {h}", (l, h)) for l in range(c.n_layers) for h in range(c.n_heads)]
        self.heads = W.SelectMultiple(options=heads, description="Heads off", rows=min(8, len(heads)), style=WIDE_LABEL)
        mlps = [(f"layer {l} MLP", l) for l in range(c.n_layers)]
        self.mlps = W.SelectMultiple(options=mlps, description="MLPs off", rows=min(8, len(mlps)))
        self.tokens_off = W.SelectMultiple(options=[], description="Tokens off", rows=8, style=WIDE_LABEL)
        self.table = W.HTML()
        super().__init__(
            model, encode, decode, prompt, [], [W.HBox([self.heads, self.mlps, self.tokens_off]), self.table]
        )
        for control in (self.heads, self.mlps, self.tokens_off):
            control.observe(self.update, names="value")

    def _new_tokens(self, ids):
        # A new prompt has new tokens: the token choices are rebuilt (and cleared) before anything runs.
        self.tokens_off.options = [(html.unescape(self._label(t, ids)), t) for t in range(len(ids))]

    def _compute(self, ids):
        from ..lookinside import intervene

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
            [f"{visible_token(self.token_text(i))} ({q:.3f})", f"{visible_token(self.token_text(j))} ({w:.3f})"]
            for (i, q), (j, w) in zip(r.top_before, r.top_after)
        ]
        self.table.value = (
            f"<p>Switched off: {', '.join(what) or 'nothing (pick heads, MLPs or tokens)'}"
            f"<br>Mean next-token loss over the prompt: <b>{r.loss_before:.3f}</b> → "
            f"<b>{r.loss_after:.3f}</b> nats ({'+' if change >= 0 else '−'}{abs(change):.3f})</p>"
            f"<p>Top predictions after {self._label(r.position)}:</p>"
            + html_table(rows, ["model as trained", "with the parts off"])
        )
