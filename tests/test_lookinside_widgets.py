"""The look-inside widgets driven as a student drives them, their numbers checked against the
library's forward; and the saved picture every widget carries for readers without a kernel."""

import re

import pytest
import torch
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.lookinside import intervene, logit_lens, trace_gpt
from onehot2gpt.widgets import (
    AllHeadsView,
    ForwardStepper,
    InterventionExplorer,
    LogitLens,
    TokenExplorer,
    snapshot_html,
)

TEXT = "to be, or not to be: that is the question.\n"
CHARS = sorted(set(TEXT))


def encode(text):
    return [CHARS.index(c) if c in CHARS else {}[c] for c in text]  # KeyError for an unknown character


def decode(ids):
    return "".join(CHARS[i] for i in ids)


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig.tiny(vocab_size=len(CHARS))).eval()  # 2 layers, 4 heads, max_len 16


def test_stepper_walks_every_stage_and_checks_the_forward(gpt):
    w = ForwardStepper(gpt, encode, decode, prompt="to be or")
    assert w.position.value == 7 and w.position.max == 7
    assert len(w.stages) == 3 + 15 * 2 + 4 and w.step.max == len(w.stages) - 1
    assert set(w.check) >= {"logits", "layer 1 output"} and max(w.check.values()) < 1e-4
    assert "✓" in w.checked.value
    w.forward.click()
    w.forward.click()
    assert w.step.value == 2 and w.stage.key == "input x"
    torch.testing.assert_close(w.stage.value, trace_gpt(gpt, encode("to be or")).x0[7])
    w.step.value = [s.key for s in w.stages].index("layer 1 · softmax")
    assert "Step" in w.header.value and w.view.value.count("<tr>") == 1 + 4  # a row per head
    w.position.value = 3  # another query: its own row
    assert w.stage.key == "layer 1 · softmax"
    torch.testing.assert_close(w.stage.value, trace_gpt(gpt, encode("to be or")).attentions[1][:, 3])
    w.step.value = w.step.max  # probabilities, at temperature 2
    w.temperature.value = 2.0
    expected = torch.softmax(gpt(torch.tensor([encode("to be or")])).logits[0, 3] / 2.0, -1)
    torch.testing.assert_close(w.stage.value, expected)
    assert "next token" in w.view.value
    w.back.click()
    assert w.stage.key == "temperature"


def test_stepper_reports_bad_prompts_and_keeps_its_views(gpt):
    w = ForwardStepper(gpt, encode, decode, prompt="to be")
    view, trace = w.view.value, w.trace
    w.prompt.value = "to bé"  # a character the model never saw
    assert "cannot encode" in w.status.value and "&#x27;é&#x27;" in w.status.value
    assert w.view.value == view and w.trace is trace
    w.position.value = 0  # not acted on: the prompt is unreadable
    assert "cannot encode" in w.status.value
    w.prompt.value = ""
    assert "empty" in w.status.value
    w.prompt.value = "to be, or not to be: that"  # 25 characters, 16 positions
    assert "only the last 16" in w.status.value and len(w.ids) == 16 and w.position.max == 15
    with pytest.raises(TypeError, match="course GPT"):
        ForwardStepper(torch.nn.Linear(2, 2), encode, decode)
    with pytest.raises(ValueError, match="temperature"):
        ForwardStepper(gpt, encode, decode, temperature=0)


def test_stepper_survives_a_model_that_breaks(gpt, monkeypatch):
    w = ForwardStepper(gpt, encode, decode, prompt="to be")
    import onehot2gpt.lookinside as inside

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(inside, "trace_gpt", broken)
    before = w.view.value
    w.prompt.value = "or not"
    assert "RuntimeError: out of memory" in w.status.value and w.view.value == before


def test_logit_lens_matches_the_library(gpt):
    w = LogitLens(gpt, encode, decode, prompt="that is the", k=3)
    assert [r.layer for r in w.rows] == ["embedding", "layer 0", "layer 1"]
    ids = encode("that is the")
    logits = gpt(torch.tensor([ids])).logits[0, -1]
    assert [i for i, _ in w.rows[-1].top] == logits.topk(3).indices.tolist()
    assert w.rows[-1].target_prob is None and "next is" not in w.table.value
    w.position.value = 4  # "that " → "i": the true next token
    assert w.rows == logit_lens(gpt, ids, position=4, k=3, target=ids[5])
    assert "next is “i”" in w.table.value and w.table.value.count("rank") == 3
    w.k.value = 5
    assert all(len(r.top) == 5 for r in w.rows)
    w.prompt.value = "é"
    assert "cannot encode" in w.status.value and len(w.rows[0].top) == 5


def test_interventions_match_the_library(gpt):
    w = InterventionExplorer(gpt, encode, decode, prompt="to be or not")
    assert w.result.loss_change == 0
    w.heads.value = ((1, 2),)
    assert w.result == intervene(gpt, encode("to be or not"), position=11, heads_off=[(1, 2)])
    assert "layer 1 head 2" in w.table.value
    w.mlps.value = (0,)
    w.tokens_off.value = (3,)
    expected = intervene(gpt, encode("to be or not"), position=11, heads_off=[(1, 2)], mlps_off=[0], tokens_off=[3])
    assert w.result == expected and re.search(r"→ <b>[\d.]+</b> nats", w.table.value)
    w.prompt.value = "to be"  # new tokens: the old choice is gone
    assert w.tokens_off.value == () and len(w.tokens_off.options) == 5
    assert w.result.switched_off["tokens"] == [] and w.result.position == 4
    w.prompt.value = "to bé"
    assert "cannot encode" in w.status.value


def test_all_heads_view_enlarges_the_pressed_head():
    torch.manual_seed(0)
    maps = [torch.softmax(torch.randn(1, 3, 4, 4), -1) for _ in range(2)]
    w = AllHeadsView(maps, ["a", "b", "c", "d"], title="toy")
    assert w.selected == (0, 0) and len(w.buttons) == 6
    picture = w.image.value
    w.buttons[(1, 2)].click()
    assert w.selected == (1, 2) and w.image.value != picture and w.buttons[(1, 2)].button_style == "primary"
    with pytest.raises(ValueError, match="tokens"):
        AllHeadsView(maps, ["a", "b"])
    with pytest.raises(ValueError, match="selected"):
        AllHeadsView(maps, ["a", "b", "c", "d"], selected=(2, 0))


def test_every_widget_carries_a_saved_picture(gpt):
    from onehot2gpt.vocab import Vocab, tokenize_words

    w = LogitLens(gpt, encode, decode, prompt="to be")
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    saved = bundle["text/html"]
    assert "onehot2gpt-snapshot" in saved and w.table.value in saved
    assert "<b>Prompt</b> <code>to be</code>" in saved  # a control as text
    heads = AllHeadsView([torch.softmax(torch.randn(1, 2, 3, 3), -1)], ["x", "y", "z"])
    assert snapshot_html(heads).count("data:image/png;base64,") == 2 + 1  # thumbnails and the large head
    explorer = TokenExplorer({"words": Vocab.build([tokenize_words("the cat")])}, text="the cat")
    explorer.text.value = "the dog"
    assert "the dog" in explorer.saved_view()  # the state as it is now
    assert "the dog" in explorer.snapshot().data


def test_stepper_walks_a_bert_too():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.lookinside_bert import trace_bert

    torch.manual_seed(0)
    bert = BertForPreTraining(BertConfig.course(vocab_size=len(CHARS) + 1)).eval()
    w = ForwardStepper(bert, encode, decode, prompt="to be")
    assert len(w.stages) == 5 + 15 * bert.config.n_layers + 6 and max(w.check.values()) < 1e-4
    w.step.value = w.step.max
    expected = trace_bert(bert, encode("to be")).probs[4]
    torch.testing.assert_close(w.stage.value, expected)
    with pytest.raises(TypeError, match="course GPT"):
        LogitLens(bert, encode, decode)  # the lens reads a GPT's residual stream


def test_token_texts_are_escaped_once(gpt):
    def amp(ids):  # "," reads as "&", a token whose text HTML must escape
        return decode(ids).replace(",", "&")

    lens = LogitLens(gpt, encode, amp, prompt="to be,")
    assert "at 5: &amp;:" in lens.table.value and "&amp;amp;" not in lens.table.value
    ablation = InterventionExplorer(gpt, encode, amp, prompt="to be,")
    assert ablation.tokens_off.options[5][0] == "5: &"  # an option's label is text, not HTML
    assert "&amp;amp;" not in ablation.table.value
