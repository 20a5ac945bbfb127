"""Tokens, one-hot rows, embeddings and ELMo's layer weights: the widgets of the early notebooks."""

from __future__ import annotations

import html

import ipywidgets as W

from ..utils import check_choice, check_int
from ..vocab import Vocab, one_hot, tokenize_chars, tokenize_words
from ._base import ERROR_STYLE, WIDE_LABEL, SavedView, figure_to_png, html_table, safe_update, text_box


class TokenExplorer(SavedView, W.VBox):
    """Type a sentence; see its tokens, their ids (<unk> for unseen ones) and one-hot rows.

    `vocabs` maps a unit name ("words", "characters") to the Vocab used for it.
    """

    TOKENIZERS = {"words": tokenize_words, "characters": lambda s: tokenize_chars(s, keep_spaces=False)}

    def __init__(self, vocabs: dict[str, Vocab], text: str = "The cat sat on the mat.", max_tokens: int = 40):
        unknown = set(vocabs) - set(self.TOKENIZERS)
        if not vocabs or unknown:
            raise ValueError(f"vocabs must map some of {sorted(self.TOKENIZERS)} to a Vocab; got keys {sorted(vocabs)}")
        self.vocabs, self.max_tokens = vocabs, check_int(max_tokens, "max_tokens", 1)
        self.tokens: list[str] = []  # what the last update showed, for code and tests to read
        self.ids: list[int] = []
        self.text = text_box(text, "Sentence")
        self.unit = W.ToggleButtons(options=list(vocabs), description="Units")
        self.summary, self.tokens_html, self.one_hot_html = W.HTML(), W.HTML(), W.HTML()
        self.status = W.HTML()
        super().__init__([self.text, self.unit, self.status, self.summary, self.tokens_html, self.one_hot_html])
        self.text.observe(self.update, names="value")
        self.unit.observe(self.update, names="value")
        self.update()

    @safe_update
    def update(self):
        vocab = self.vocabs[self.unit.value]
        tokens = self.TOKENIZERS[self.unit.value](self.text.value)
        if not tokens:
            self.tokens, self.ids = [], []
            self.summary.value = "<i>Type a sentence above to see its tokens.</i>"
            self.tokens_html.value = self.one_hot_html.value = ""
            return
        shown = tokens[: self.max_tokens]
        ids = vocab.encode_tokens(shown)
        self.tokens, self.ids = tokens, ids  # set together: both describe the sentence shown
        n_unk = sum(i == vocab.unk_id for i in ids)
        more = f" (showing the first {self.max_tokens})" if len(tokens) > self.max_tokens else ""
        self.summary.value = (
            f"{len(tokens)} tokens{more}, vocabulary of {len(vocab):,}: "
            f"<b>{n_unk}</b> unseen → <code>&lt;unk&gt;</code>"
        )
        id_cells = [f"<span style='{ERROR_STYLE}'>{i}</span>" if i == vocab.unk_id else str(i) for i in ids]
        self.tokens_html.value = html_table([["token"] + [html.escape(t) for t in shown], ["id"] + id_cells])
        columns = sorted(set(ids))
        matrix = one_hot(ids, len(vocab))[:, columns]  # (T, number of distinct ids)
        header = ["token \\ id"] + [f"{c}<br>{html.escape(vocab.itos[c])}" for c in columns]
        rows = [
            [html.escape(t)] + ["<b>1</b>" if v else "0" for v in row] for t, row in zip(shown, matrix.int().tolist())
        ]
        self.one_hot_html.value = (
            f"<p>One-hot rows have {len(vocab):,} entries each; only the "
            f"{len(columns)} columns that hold a 1 are shown.</p>" + html_table(rows, header)
        )


class EmbeddingExplorer(SavedView, W.VBox):
    """Pick words; see them and their nearest neighbours in a 2-D PCA projection of the embedding.

    `word_vectors` needs `most_similar(word, k)`, `__getitem__(word)` and `__contains__(word)`
    (a :class:`onehot2gpt.word2vec.WordVectors`).
    """

    def __init__(self, word_vectors, words: str = "king, queen, man, woman", neighbours: int = 3):
        self.wv = word_vectors
        self.words = text_box(words, "Words", placeholder="comma-separated words, e.g. paris, france, london")
        self.neighbours = W.IntSlider(
            value=neighbours, min=0, max=10, description="Neighbours", style=WIDE_LABEL, continuous_update=False
        )
        self.status, self.table = W.HTML(), W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="560px"))
        self.labels: list[str] = []  # the words in the current picture, for code and tests
        super().__init__([self.words, self.neighbours, self.status, W.HBox([self.image, self.table])])
        self.words.observe(self.update, names="value")
        self.neighbours.observe(self.update, names="value")
        self.update()

    @safe_update
    def update(self):
        import matplotlib.pyplot as plt
        import torch

        from ..plots import plot_projection

        asked = [w.strip().lower() for w in self.words.value.split(",") if w.strip()]
        known = [w for w in dict.fromkeys(asked) if w in self.wv]
        unknown = [w for w in asked if w not in self.wv]
        note = f"not in the vocabulary (try another spelling or a more common word): {', '.join(unknown)}"
        note = note if unknown else ""
        labels, groups, rows = [], [], []
        for g, word in enumerate(known):
            labels.append(word)
            groups.append(g)
            near = self.wv.most_similar(word, k=self.neighbours.value) if self.neighbours.value else []
            listed = ", ".join(f"{html.escape(n)} ({s:.2f})" for n, s in near)
            rows.append(f"<tr><td><b>{html.escape(word)}</b></td><td>{listed}</td></tr>")
            for n, _ in near:
                if n not in labels:
                    labels.append(n)
                    groups.append(g)
        if len(labels) < 2:
            need = "pick at least two known words (or one word and some neighbours)"
            raise ValueError(f"{need}; {note}" if note else need)
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
        return note


class LayerWeightExplorer(SavedView, W.VBox):
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
        if task is not None:
            check_choice(task, "task", tasks, fix="the task shown first: one of tasks")
        if l2_lambda is not None:
            check_choice(l2_lambda, "l2_lambda", lambdas, fix="the λ shown first: one of lambdas")
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

    @safe_update
    def update(self):
        import matplotlib.pyplot as plt

        from ..plots import plot_layer_weights

        tasks = list(self.task.value)
        if not tasks:
            raise ValueError("select at least one task (Ctrl/Cmd-click to select several)")
        lam = self.l2_lambda.value
        results = {t: self.result(t, lam) for t in tasks}
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        weights = {t: r.weights for t, r in results.items()}
        plot_layer_weights(weights, self.layer_names, ax=ax, title=f"layer weights softmax(s), λ = {lam:g}")
        self.image.value = figure_to_png(fig)
        self.summary.value = "<br>".join(
            f"<b>{html.escape(t)}</b>: test accuracy {r.test_accuracy:.3f}, weights "
            + ", ".join(f"{w:.2f}" for w in r.weights.tolist())
            for t, r in results.items()
        )
