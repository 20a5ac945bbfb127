"""The widgets' defects found in a browser (issue 48), each seen from Python: a cut "Temperature"
label, a quote shown as &quot;, the BERT stepper opening at [SEP] instead of [MASK] (and notebook
07's next cell then failing), a KeyError for an unknown model, a masking rate clamped without a
word, overlapping labels in the embedding plot and a legend over the layer-weight bars."""

from html.parser import HTMLParser

import ipywidgets as W
import matplotlib
import pytest
import torch
from ipywidgets.widgets.widget_description import DescriptionWidget
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.probing import ProbeResult
from onehot2gpt.vocab import Vocab, tokenize_words
from onehot2gpt.widgets import (
    AttentionExplorer,
    EmbeddingExplorer,
    ForwardStepper,
    InterventionExplorer,
    LayerWeightExplorer,
    LogitLens,
    MaskingExplorer,
    SamplingExplorer,
    TokenExplorer,
    ZeroShotPrompter,
)
from test_widgets import FakeSource, FakeVectors

matplotlib.use("Agg")
pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = 'to be, or "not" to be: that is the question.\n'
CHARS = sorted(set(TEXT))


def encode(text):
    return [CHARS.index(c) for c in text]


def decode(ids):
    return "".join(CHARS[i] for i in ids)


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig.tiny(vocab_size=len(CHARS))).eval()


@pytest.fixture(scope="module")
def bert_tokenizer():
    from onehot2gpt.subword import WordPieceTokenizer

    return WordPieceTokenizer.train(["the film was released in june 2011 ."] * 3, vocab_size=60, min_frequency=1)


def _probe(task, lam):
    return ProbeResult(task, lam, torch.tensor([0.2, 0.3, 0.5]), 1.0, 0.9, 0.8)


def every_widget(gpt, bert_tokenizer):
    words = Vocab.build([tokenize_words("the cat sat")])
    return {
        "ForwardStepper": ForwardStepper(gpt, encode, decode, prompt="to be"),
        "LogitLens": LogitLens(gpt, encode, decode, prompt="to be"),
        "InterventionExplorer": InterventionExplorer(gpt, encode, decode, prompt="to be"),
        "SamplingExplorer": SamplingExplorer(gpt, encode, decode, prompt="to be", length=5),
        "ZeroShotPrompter": ZeroShotPrompter({"tiny": (gpt, encode, decode)}, template="free text", text="to be"),
        "MaskingExplorer": MaskingExplorer(bert_tokenizer, text="the film was released in june 2011 ."),
        "EmbeddingExplorer": EmbeddingExplorer(FakeVectors(), words="cat, car"),
        "AttentionExplorer": AttentionExplorer({"small": FakeSource()}, text="the cat sat"),
        "LayerWeightExplorer": LayerWeightExplorer(_probe, ["POS"], [0.0], ["tok", "l1", "l2"]),
        "TokenExplorer": TokenExplorer({"words": words}, text="the cat"),
    }


def controls(widget):
    """Every control under `widget` that shows its description in the fixed-width label."""
    if isinstance(widget, W.Box):
        for child in widget.children:
            yield from controls(child)
    elif isinstance(widget, DescriptionWidget) and not isinstance(widget, (W.Button, W.Checkbox, W.ToggleButton)):
        yield widget


def test_no_control_description_is_cut(gpt, bert_tokenizer):
    # ipywidgets' label is about 8 characters wide: "Temperature" read "Temperat…" in four widgets
    cut, temperatures = [], []
    for name, widget in every_widget(gpt, bert_tokenizer).items():
        for control in controls(widget):
            if control.description == "Temperature":
                temperatures.append(name)
            if len(control.description) > 8 and not control.style.description_width:
                cut.append(f"{name}: {control.description}")
    assert temperatures == ["ForwardStepper", "SamplingExplorer", "ZeroShotPrompter"]
    assert cut == []


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def shown(html: str) -> str:
    """The text a browser shows for `html`."""
    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)


def test_a_quote_token_shows_as_a_quote_in_the_stepper_and_the_lens(gpt):
    prompt = 'to "be"'  # position 6 is the token "
    stepper = ForwardStepper(gpt, encode, decode, prompt=prompt)
    stepper.step.value = [s.key for s in stepper.stages].index("layer 0 · softmax")  # a header of tokens
    lens = LogitLens(gpt, encode, decode, prompt=prompt)
    for html in (stepper.header.value, stepper.view.value, lens.table.value):
        assert "&quot;" not in html  # an entity was shown as such wherever the text was escaped or read again
        assert '6: "' in shown(html)
    assert "&amp;quot;" not in stepper.saved_view() and '6: "' in shown(lens.saved_view())


# -- the BERT stepper of notebook 07 ----------------------------------------------------------------

PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "released", "in", "2011", "."]
NOTEBOOK_PROMPT = "the film was released in [MASK] 2011 ."


def bert_encode(text):
    return [2] + [PIECES.index(w) for w in text.split()] + [3]


def bert_pieces(ids):
    return " ".join(PIECES[i] for i in ids)


@pytest.fixture(scope="module")
def bert():
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    return BertForPreTraining(BertConfig.tiny(vocab_size=len(PIECES))).eval()


def notebook_07_cell_holds(stepper, bert) -> bool:
    """Notebook 07's cell after the stepper: the last stage's top 3 at the stepper's position are
    fill-mask's top 3 at [MASK] of the notebook's prompt."""
    from onehot2gpt.lookinside_bert import trace_bert

    stepper.step.value = stepper.step.max
    top = stepper.stage.value.topk(3).indices.tolist()
    ids = bert_encode(NOTEBOOK_PROMPT)
    return top == trace_bert(bert, ids).probs[ids.index(4)].topk(3).indices.tolist()


def test_the_bert_stepper_opens_each_prompt_at_its_mask(bert):
    stepper = ForwardStepper(bert, bert_encode, bert_pieces, prompt=NOTEBOOK_PROMPT)
    assert stepper.tokens[stepper.position.value] == "[MASK]"  # it opened at [SEP]
    stepper.prompt.value = "the [MASK] was released in 2011 ."
    assert stepper.position.value == 2 and stepper.tokens[2] == "[MASK]"  # a new prompt jumped to [SEP]
    stepper.prompt.value = "the film was released ."  # no blank: its last token before [SEP]
    assert stepper.tokens[stepper.position.value] == "."


def test_notebook_07_next_cell_holds_after_playing_with_the_stepper(bert):
    stepper = ForwardStepper(bert, bert_encode, bert_pieces, prompt=NOTEBOOK_PROMPT)
    stepper.position.value = stepper.tokens.index("[MASK]")  # as the notebook does
    assert notebook_07_cell_holds(stepper, bert)
    stepper.back.click()
    stepper.temperature.value = 0.5
    stepper.prompt.value = "the film was released in [MASK] ."
    stepper.forward.click()
    stepper.prompt.value = NOTEBOOK_PROMPT  # back to the notebook's prompt: back at its [MASK]
    assert notebook_07_cell_holds(stepper, bert)


# -- errors that name the argument ------------------------------------------------------------------


def test_an_unknown_model_or_task_is_named_not_a_key_error():
    explorer = AttentionExplorer({"small": FakeSource(), "big": FakeSource(4, 5)}, text="the cat sat")
    with pytest.raises(ValueError, match=r"^model='tiny' must be one of 'small', 'big'; a name of the sources"):
        explorer.result("tiny", "the cat sat")  # KeyError: 'tiny'
    with pytest.raises(ValueError, match=r"^task='NER' must be one of 'POS', 'sentiment'"):
        LayerWeightExplorer(_probe, ["POS", "sentiment"], [0.0, 1.0], ["tok", "l1", "l2"], task="NER")
    with pytest.raises(ValueError, match=r"^l2_lambda=10\.0 must be one of 0\.0, 1\.0"):
        LayerWeightExplorer(_probe, ["POS", "sentiment"], [0.0, 1.0], ["tok", "l1", "l2"], l2_lambda=10.0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prob": 0.9}, r"^prob=0\.9 must be a finite number in \[0\.05, 0\.5\]; the share of tokens"),
        ({"prob": 0.0}, r"^prob=0 must be a finite number in \[0\.05, 0\.5\]"),
        ({"seed": 150}, r"^seed=150 must be in \[0, 99\]; the Draw slider's seeds"),
    ],
    ids=["prob 0.9 (was clamped to 0.5)", "prob 0", "seed 150 (was clamped to 99)"],
)
def test_masking_explorer_refuses_what_its_sliders_would_clamp(bert_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MaskingExplorer(bert_tokenizer, **kwargs)


# -- the plots the widgets draw ---------------------------------------------------------------------


def _overlaps(a, b) -> bool:
    return min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)


def test_projection_labels_do_not_overlap_in_a_crowd():
    import matplotlib.pyplot as plt
    from matplotlib.text import Text
    from onehot2gpt.plots import plot_projection

    # eight words in one tight cluster and two far away: on screen the eight share one spot
    g = torch.Generator().manual_seed(0)
    vectors = torch.cat([0.02 * torch.randn(8, 2, generator=g), torch.tensor([[10.0, 0.0], [0.0, 10.0]])])
    words = ["king", "queen", "prince", "princess", "man", "woman", "boy", "girl", "far", "away"]
    fig, ax = plt.subplots(figsize=(6, 5))
    plot_projection(vectors, words, ax=ax)
    renderer = fig.canvas.get_renderer()
    boxes = []
    for label in ax.texts:
        label.update_positions(renderer)
        boxes.append(Text.get_window_extent(label, renderer))  # the words, not the line to the point
    plt.close(fig)
    assert sorted(t.get_text() for t in ax.texts) == sorted(words)
    crossing = [(words[i], words[j]) for i in range(10) for j in range(i + 1, 10) if _overlaps(boxes[i], boxes[j])]
    assert crossing == []


def test_the_layer_weight_legend_covers_no_bar():
    import matplotlib.pyplot as plt
    from onehot2gpt.plots import plot_layer_weights

    # every layer near 1/3 for both tasks: tall bars everywhere, no free corner inside the axes
    weights = {"POS": [0.33, 0.34, 0.33], "sentiment": [0.34, 0.33, 0.33]}
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    plot_layer_weights(weights, ["tok", "l1", "l2"], ax=ax)
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [patch.get_window_extent(renderer) for patch in ax.patches]
    plt.close(fig)
    assert len(bars) == 6 and not any(_overlaps(legend, bar) for bar in bars)


def test_attention_explorer_refuses_a_query_token_that_is_not_in_the_sentence():
    """Issue 48: token=99 or a word the sentence lacks used to start at token 0 without a word."""
    import pytest
    import torch
    from onehot2gpt.widgets import AttentionExplorer

    def source(text):
        tokens = text.split()
        T = len(tokens)
        return tokens, [torch.full((1, 2, T, T), 1.0 / T)]

    assert AttentionExplorer({"toy": source}, text="the cat sat", token="cat").token.value == 1
    assert AttentionExplorer({"toy": source}, text="the cat sat", token=2).token.value == 2
    for token, words in ((99, "an index 0 … 2"), ("dog", "one of its tokens"), (-1, "an index 0 … 2")):
        with pytest.raises(ValueError, match=rf"token={token!r} is not in the sentence's 3 tokens.*{words}"):
            AttentionExplorer({"toy": source}, text="the cat sat", token=token)
    with pytest.raises(TypeError, match="token=True"):
        AttentionExplorer({"toy": source}, text="the cat sat", token=True)
