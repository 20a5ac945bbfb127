"""BERT's widgets: how masking picks its tokens, filling in a blank, extractive question answering."""

from __future__ import annotations

import html

import ipywidgets as W

from ..utils import check_int, check_number
from ._base import WIDE_LABEL, SavedView, error_html, html_table, safe_update, text_box

_KIND_STYLE = {"mask": "background:#ffd54f", "random": "background:#ef9a9a", "same": "background:#a5d6a7", "": ""}
_KIND_TEXT = {"mask": "→ [MASK]", "random": "→ random", "same": "kept", "": ""}


class MaskingExplorer(SavedView, W.VBox):
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
        # the sliders' ranges: a value outside them would be clamped without a word
        check_number(prob, "prob", 0.05, 0.5, fix="the share of tokens masking chooses; BERT's is 0.15")
        check_int(seed, "seed", 0, 99, fix="the Draw slider's seeds")
        self.tokenizer = tokenizer
        self.tokens: list[str] = []
        self.inputs: list[str] = []
        self.kinds: list[str] = []
        self.labels: list[int] = []
        self.text = text_box(text, "Sentence")
        self.prob = W.FloatSlider(value=prob, min=0.05, max=0.5, step=0.05, description="Rate", continuous_update=False)
        self.seed = W.IntSlider(
            value=seed, min=0, max=99, description="Draw (seed)", style=WIDE_LABEL, continuous_update=False
        )
        self.whole_word = W.Checkbox(value=whole_word, description="whole words")
        self.status, self.summary, self.table = W.HTML(), W.HTML(), W.HTML()
        super().__init__(
            [self.text, W.HBox([self.prob, self.seed, self.whole_word]), self.status, self.summary, self.table]
        )
        for control in (self.text, self.prob, self.seed, self.whole_word):
            control.observe(self.update, names="value")
        self.update()

    @safe_update
    def update(self):
        import torch

        from ..bert_pretraining import mask_tokens
        from ..subword import SPECIALS
        from ..utils import IGNORE_INDEX

        tok = self.tokenizer
        enc = tok.encode_words(self.text.value.split())
        ids = torch.tensor([enc["input_ids"]])
        if ids.size(1) <= 2:
            raise ValueError("type a sentence to mask")
        word_ids = torch.tensor([[-1 if w is None else w for w in enc["word_index"]]])
        inputs, labels = mask_tokens(
            ids,
            mask_id=tok.mask_id,
            vocab_size=len(tok),
            special_ids=[tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id],
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
        what = [_KIND_TEXT[k] for k in self.kinds]
        self.table.value = html_table([["token"] + cells, ["model reads"] + became, ["what"] + what])


class FillInTheBlank(SavedView, W.VBox):
    """Type a sentence with ``[MASK]``; see the model's top-k guesses and their probabilities.

    `predict(text, top_k)` returns [(position, [(token, probability), …]), …], one entry per
    [MASK] (:func:`onehot2gpt.bert.fill_mask` with a model and tokenizer bound). State for code and
    tests: ``.predictions`` (the last result). The default sentence is one the course BERT
    (``bert-wikitext2``) fills in right: its first guess is "century".
    """

    def __init__(self, predict, text: str = "the church was built in the 12th [MASK] .", top_k: int = 5):
        self.predict = predict
        self.predictions: list = []
        self.text = text_box(text, "Sentence", placeholder="write [MASK] where a word is missing")
        self.top_k = W.IntSlider(value=top_k, min=1, max=15, description="Top k", continuous_update=False)
        self.status, self.output = W.HTML(), W.HTML()
        super().__init__([self.text, self.top_k, self.status, self.output])
        self.text.observe(self.update, names="value")
        self.top_k.observe(self.update, names="value")
        self.update()

    @safe_update
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
            blocks.append(f"<div><b>[MASK] {n}</b> (token {position})<table>{rows}</table></div>")
        self.output.value = f"<div style='display:flex;gap:24px'>{''.join(blocks)}</div>"


# Notebook 08: extractive question answering ----------------------------------------------------

PRECIPITATION = (
    "In meteorology, precipitation is any product of the condensation of atmospheric water "
    "vapor that falls under gravity. The main forms of precipitation include drizzle, rain, "
    "sleet, snow, graupel and hail. Precipitation forms as smaller droplets coalesce via "
    "collision with other rain drops or ice crystals within a cloud. Short, intense periods "
    'of rain in scattered locations are called "showers".'
)


class QuestionAnswerer(SavedView, W.VBox):
    """Paste a passage, ask a question: the answer highlighted in the passage, or "no answer in
    this passage" when the null span ([CLS]) wins (``answer_question``'s `null_threshold`), and
    the start and end probabilities over the passage's word pieces.

    `answer(passage, question)` returns :func:`onehot2gpt.qa.answer_question`'s dict (bind the
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
        hint = "paste a paragraph that holds the answer"
        self.passage = text_box(passage, "Passage", area=True, width="95%", height="120px", placeholder=hint)
        hint = "ask something the passage answers, then press Enter"
        self.question = text_box(question, "Question", width="95%", placeholder=hint)
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
            self.status.value = error_html(exc)
            return
        self.result = result
        self.status.value = ""
        self.output.value = self._html(passage, result)

    @staticmethod
    def _html(passage: str, r: dict) -> str:
        a, b = r["char_span"]
        s, e = r["words"]
        no_answer = r.get("no_answer", False)
        mark = "background:#e0e0e0" if no_answer else "background:#ffd54f;font-weight:bold"  # grey: no answer
        before, span, after = (html.escape(part) for part in (passage[:a], passage[a:b], passage[b:]))
        text = f"{before}<mark style='{mark}'>{span}</mark>{after}"
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
