"""Decoding a GPT: the next-token distribution under temperature, top-k and top-p, and sampling."""

from __future__ import annotations

import html
import warnings
from typing import TYPE_CHECKING

import ipywidgets as W

from ..utils import check_finite_logits, check_int, check_number
from ._base import ERROR_STYLE, WIDE_LABEL, SavedView, TokenTexts, safe_update, text_box, visible_token

if TYPE_CHECKING:
    import torch


def encode_prompt(encode, decode, prompt: str, vocab_size: int, max_len: int) -> tuple[list[int], str]:
    """Encode a prompt for a GPT → (ids, notice). A prompt longer than max_len tokens is kept whole in
    ids with a notice that the model reads only its last max_len; ValueError saying what to fix for an
    empty prompt, one the tokenizer cannot encode, or ids outside the vocabulary."""
    if not prompt:
        raise ValueError(
            "the prompt is empty: type some text for the model to continue (a GPT has no start state of its own)"
        )
    try:
        ids = [int(i) for i in encode(prompt)]
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        unknown = []
        for c in dict.fromkeys(prompt):
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
        notice = (
            f"the prompt has {len(ids)} tokens but the model reads at most max_len="
            f"{max_len}: it sees only the last {max_len}, “{decode(ids[-max_len:])}”"
        )
    return ids, notice


class SamplingExplorer(TokenTexts, SavedView, W.VBox):
    """Type a prompt; see the next-token distribution before and after temperature, top-k and top-p,
    and sample a continuation with a seed (the button calls :meth:`generate`).

    `model` is a :class:`onehot2gpt.gpt.GPT`; `encode(text) -> list[int]` and `decode(ids) -> str`
    are its tokenizer's. Top-k 0 and top-p 1 switch those filters off; temperature 0 is greedy. A
    prompt longer than the context is cropped to its last max_len tokens, with a notice.

    State for code and tests: ``.probs`` (V,) the distribution the next token is sampled from;
    ``.probs_before`` (V,) the same before top-k and top-p (at temperature 0: at temperature 1);
    ``.distribution`` [(token text, probability)], most likely first; ``.top`` the table's rows
    [(token text, before, after)]; ``.continuation`` and ``.generated_ids`` of the last generate.
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
        check_number(temperature, "temperature", 0, fix="0 is greedy decoding")
        if top_k is not None:
            check_int(top_k, "top_k", 1, fix="or None to keep every token")
        if top_p is not None:
            check_number(top_p, "top_p", 0, 1, low_open=True, fix="or None to keep every token")
        check_int(length, "length", 1)
        check_int(seed, "seed", 0, 2**32 - 1)
        check_int(rows, "rows", 1)
        self.model, self.encode, self.decode, self.rows = model, encode, decode, rows
        self.vocab_size, self.max_len = model.config.vocab_size, model.config.max_len
        # What the views show, for code and tests to read; kept as they are when an input is bad.
        self.prompt_ids: list[int] = []  # the tokens the distribution was computed after
        self.probs: torch.Tensor | None = None
        self.probs_before: torch.Tensor | None = None
        self.top: list[tuple[str, float, float]] = []
        self.continuation = ""
        self.generated_ids: list[int] = []

        self.prompt = text_box(prompt, "Prompt", area=True, rows=2)
        self.temperature = W.FloatSlider(
            value=temperature,
            min=0.0,
            max=max(2.0, temperature),
            step=0.05,
            description="Temperature",
            style=WIDE_LABEL,
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
        self.status, self.table = W.HTML(), W.HTML()
        self.output = W.HTML("<i>Press Generate to sample a continuation.</i>")
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

    def _device(self):
        try:
            return next(self.model.parameters()).device
        except (AttributeError, StopIteration):
            return "cpu"

    # -- the distribution ---------------------------------------------------------------------

    @safe_update
    def update(self) -> str:
        """Recompute the next-token distribution for the current prompt and filters."""
        import torch

        from ..sampling import next_token_distribution

        ids, notice = encode_prompt(self.encode, self.decode, self.prompt.value, self.vocab_size, self.max_len)
        temperature, top_k, top_p = self._settings()
        x = torch.tensor(ids[-self.max_len :], dtype=torch.long, device=self._device())  # (T,), cropped
        before = next_token_distribution(self.model, x, temperature or 1.0).float().cpu()  # (V,)
        check_finite_logits(before)
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
            why = "" if a > 0 else "greedy" if not temperature else "top-k" if top_k and rank[i] >= top_k else "top-p"
            style = "color:#999;text-decoration:line-through" if why else ""
            bars = "".join(
                f"<td style='{cell}'><div style='background:{colour};height:10px;"
                f"width:{max(1, round(160 * p))}px'></div></td><td style='{cell}'>{p:.3f}</td>"
                for p, colour in ((b, "#9db4d6"), (a, "#4c72b0"))
            )
            removed = f"<span style='{ERROR_STYLE}'>removed by {why}</span>" if why else ""
            rows.append(
                f"<tr style='{style}'><td style='{cell}'>{visible_token(self.token_text(i))}</td>"
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

    @safe_update
    def generate(self) -> str:
        """Sample `length` tokens after the prompt with the current settings and seed (the button)."""
        import torch

        from ..sampling import generate, next_token_distribution

        ids, notice = encode_prompt(self.encode, self.decode, self.prompt.value, self.vocab_size, self.max_len)
        temperature, top_k, top_p = self._settings()
        n, seed, device = int(self.length.value), int(self.seed.value), self._device()
        generator = torch.Generator(device=device).manual_seed(seed)
        x = torch.tensor(ids, dtype=torch.long, device=device)  # (T,)
        check_finite_logits(next_token_distribution(self.model, x[-self.max_len :], 1.0))
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


def _ids_by_probability(probs) -> list[int]:
    """Token ids by descending probability (ties: lower id first)."""
    import torch

    return torch.sort(probs, descending=True, stable=True).indices.tolist()
