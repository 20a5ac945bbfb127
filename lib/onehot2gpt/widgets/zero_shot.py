"""Prompting a model zero-shot: GPT-2's prompt shapes read by the course's world models."""

from __future__ import annotations

import html

import ipywidgets as W

from ..utils import check_choice, check_int, evaluating
from ._base import WIDE_LABEL, SavedView, error_html, safe_update, text_box, visible_token
from .sampling import encode_prompt

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
    check_choice(template, "template", PROMPT_TEMPLATES)
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


class ZeroShotPrompter(SavedView, W.VBox):
    """Prompt a GPT with a zero-shot or few-shot template and read the continuation token by token,
    with the probability the model gave each.

    `models` maps a display name to ``(model, encode, decode)`` (a :class:`onehot2gpt.gpt.GPT` and
    its tokenizer's functions). `examples` maps a template (:data:`PROMPT_TEMPLATES`) to solved
    examples, of which the *Examples* slider puts 0–3 first. `gpt2`, a function returning
    ``(model, encode, decode)``, adds a "GPT-2" choice loaded when first chosen (offline: a message,
    and the previous model stays). Decoding: greedy, or sampling with temperature, top-k (0 off),
    top-p (1 off) and a seed, stopping at the line end when *Stop at line end* is ticked.

    State for code and tests: ``.prompt_text`` (the text sent), ``.continuation``, ``.steps`` — one
    dict per new token: ``token``, ``id``, ``p`` (the model's probability, at temperature 1) and
    ``alternatives`` (the 3 most likely tokens and their probabilities).
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
        check_choice(template, "template", PROMPT_TEMPLATES)
        check_int(max_tokens, "max_tokens", 1)
        check_int(shots, "shots", 0, 3, fix="the Examples slider puts 0–3 solved examples first")
        self.models = dict(models)
        self.examples = {k: list(v) for k, v in (examples or {}).items()}
        for key in self.examples:
            check_choice(key, "a key of examples", PROMPT_TEMPLATES, fix="examples maps a template to its examples")
        self._gpt2_loader = gpt2
        self.prompt_text = ""
        self.continuation = ""
        self.steps: list[dict] = []
        names = list(self.models) + (["GPT-2 (downloads once)"] if gpt2 is not None else [])
        self.model_choice = W.Dropdown(options=names, value=names[0], description="Model")
        self._current_model = names[0]
        self.template = W.Dropdown(options=PROMPT_TEMPLATES, value=template, description="Template")
        self.shots = W.IntSlider(value=shots, min=0, max=3, description="Examples", continuous_update=False)
        self.text = text_box(text, "Input", area=True, rows=3)
        self.question = text_box(question, "Question")
        self.prompt = text_box("", "Prompt", area=True, rows=6)
        self.greedy = W.Checkbox(value=True, description="Greedy (else sample)")
        self.temperature = W.FloatSlider(
            value=1.0,
            min=0.05,
            max=2.0,
            step=0.05,
            description="Temperature",
            style=WIDE_LABEL,
            continuous_update=False,
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
            self.status.value = error_html(exc)
        finally:
            self._rendering = False

    def _prompt_edited(self, _change):
        """Typed into the prompt box by hand: that text is now the input, and is valid to run."""
        if not self._rendering:
            self._input_error = None
            self.status.value = ""

    def _choose_model(self, change):
        name = change["new"]
        try:
            if name not in self.models:  # GPT-2, loaded when first chosen
                self.status.value = "<i>Loading GPT-2 …</i>"
                model, encode, decode = self._gpt2_loader()
                self.models[name] = (model, encode, decode)
            self._current_model = name
            self.status.value = ""
        except Exception as exc:  # offline: say so, keep the previous model
            self.model_choice.value = self._current_model
            self.status.value = error_html(exc)

    # -- writing -------------------------------------------------------------------------------

    @safe_update
    def run(self) -> str:
        """Continue the prompt with the chosen model and decoding settings (the button)."""
        import torch

        from ..sampling import filter_top_k, filter_top_p

        if self._input_error is not None:
            raise ValueError(
                f"fix the input first ({self._input_error}); the prompt box still "
                f"shows the last prompt that could be made, so nothing was run"
            )
        model, encode, decode = self.models[self._current_model]
        text = self.prompt.value
        if not text.strip():
            raise ValueError("the prompt is empty: type an input (or a prompt) for the model to continue")
        vocab_size, max_len = model.config.vocab_size, model.config.max_len
        ids, _ = encode_prompt(encode, decode, text, vocab_size, max_len)  # cropped below, to leave room
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
        with evaluating(model):
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
                alternatives = [(decode([int(i)]), float(p)) for p, i in zip(*top)]  # the 3 most likely
                steps.append({"token": token, "id": choice, "p": float(probs[choice]), "alternatives": alternatives})
                new.append(choice)
                if self.stop_at_newline.value and "\n" in token:
                    break
                x = torch.tensor([[choice]], device=device)
        self.prompt_text, self.steps, self.continuation = text, steps, decode(new)
        self.output.value = self._html()
        return notice.strip()

    def _html(self) -> str:
        cell = "padding:1px 6px;font-family:monospace"
        spans = "".join(
            f"<span title='p = {s['p']:.3f}' style='background:rgba(76,114,176,{0.15 + 0.6 * s['p']:.2f});"
            f"margin-right:2px'>{visible_token(s['token'])}</span>"
            for s in self.steps
        )
        rows = "".join(
            f"<tr><td style='{cell}'>{k + 1}</td><td style='{cell}'><b>{visible_token(s['token'])}</b></td>"
            f"<td style='{cell}'>{s['p']:.3f}</td><td style='{cell}'>"
            + ", ".join(f"{visible_token(t)} {p:.2f}" for t, p in s["alternatives"])
            + "</td></tr>"
            for k, s in enumerate(self.steps)
        )
        header = "".join(f"<th style='{cell}'>{h}</th>" for h in ("#", "token", "p", "the 3 most likely"))
        return (
            f"<p><b>{html.escape(self._current_model)}</b> continues (darker = more probable): {spans}</p>"
            f"<table style='border-collapse:collapse'><tr>{header}</tr>{rows}</table>"
        )
