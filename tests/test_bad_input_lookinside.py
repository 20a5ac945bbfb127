"""Bad input to the look-inside tools (issue 48): a model with NaN weights is refused by every
tool with a message that names the broken parameter, so the step-by-step forward never blames
itself ("the step-by-step forward differs") for what the weights did."""

import math
import re

import pytest
import torch
from onehot2gpt.bert import BertConfig, BertForPreTraining
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.lookinside import (
    check_trace,
    induction_scores,
    intervene,
    logit_lens,
    previous_token_scores,
    trace_gpt,
    trace_model,
)

IDS = torch.tensor([3, 17, 5, 3, 17, 8])


def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig.tiny(vocab_size=40)).eval()


@pytest.fixture(scope="module")
def sound():
    return _gpt()


@pytest.fixture(scope="module")
def broken():
    model = _gpt()
    with torch.no_grad():
        model.blocks[1].ff.linear1.weight[2, 3] = math.nan
    return model


TOOLS = {
    "trace_gpt": lambda m: trace_gpt(m, IDS),
    "logit_lens": lambda m: logit_lens(m, IDS),
    "intervene": lambda m: intervene(m, IDS, heads_off=[(0, 0)]),
    "trace_model": lambda m: trace_model(m, IDS),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_blames_the_first_non_finite_weight(broken, tool):
    # each used to return NaN probabilities and losses without a word
    message = (
        rf"^{tool}: the model's weights are broken, not the tool: blocks\.1\.ff\.linear1\.weight holds 1 NaN value"
    )
    with pytest.raises(ValueError, match=message):
        TOOLS[tool](broken)


def test_check_trace_blames_weights_that_broke_after_the_trace(sound):
    trace = trace_gpt(sound, IDS)
    model = _gpt()
    with torch.no_grad():
        model.final_norm.weight[0] = math.inf
    # the trace itself is fine; the model now gives inf/NaN, which used to read as "the
    # step-by-step forward differs from the library's"
    with pytest.raises(ValueError, match=r"^check_trace: .*final_norm\.weight holds 1 infinite value"):
        check_trace(model, trace)
    with pytest.raises(ValueError, match=r"^logit_lens: .*final_norm\.weight holds 1 infinite value"):
        logit_lens(model, IDS, trace=trace)


def test_a_course_bert_with_nan_weights_is_refused_before_its_trace():
    torch.manual_seed(0)
    bert = BertForPreTraining(BertConfig.tiny(vocab_size=30)).eval()
    with torch.no_grad():
        next(bert.parameters()).fill_(math.nan)
    first = next(name for name, _ in bert.named_parameters())
    with pytest.raises(ValueError, match=rf"^trace_model: .*{re.escape(first)} holds \d+ NaN value"):
        trace_model(bert, [2, 5, 6, 3])


def test_sound_weights_still_trace_and_agree_with_the_library(sound):
    trace = trace_gpt(sound, IDS)
    assert all(d <= 1e-4 for d in check_trace(sound, trace).values())
    rows = logit_lens(sound, IDS, k=3)
    assert len(rows) == sound.config.n_layers + 1 and all(math.isfinite(p) for r in rows for _, p in r.top)
    assert math.isfinite(intervene(sound, IDS, mlps_off=[0]).loss_change)


@pytest.mark.parametrize(
    "call", [lambda w: induction_scores(w, 3), previous_token_scores], ids=["induction_scores", "previous_token_scores"]
)
def test_head_scores_refuse_nan_attention_maps(call):
    maps = torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0)), -1)
    maps[1, 4, 2] = math.nan  # used to give a NaN score for that head, without a word
    with pytest.raises(ValueError, match=r"^weights: the attention maps hold 1 NaN or infinite values"):
        call(maps)
    assert bool(torch.isfinite(call(maps.nan_to_num(0.0))).all())


def _bert(broken: bool):
    torch.manual_seed(0)
    bert = BertForPreTraining(BertConfig.tiny(vocab_size=30)).eval()
    if broken:
        with torch.no_grad():
            bert.bert.encoder.layers[0].ff.linear1.weight[1, 2] = math.nan
    return bert


BERT_WEIGHT = re.escape("bert.encoder.layers.0.ff.linear1.weight")
BERT_IDS = [2, 5, 6, 3]


def test_bert_tools_called_directly_blame_the_first_non_finite_weight():
    from onehot2gpt.lookinside_bert import bert_stages, check_bert_trace, trace_bert

    sound, broken = _bert(False), _bert(True)
    trace = trace_bert(sound, BERT_IDS)  # made before the weights broke
    # each used to run on and give NaN stages, or "the step-by-step forward differs"
    for tool, call in [
        ("trace_bert", lambda: trace_bert(broken, BERT_IDS)),
        ("check_bert_trace", lambda: check_bert_trace(broken, trace)),
        ("bert_stages", lambda: bert_stages(broken, 0)),
    ]:
        with pytest.raises(ValueError, match=rf"^{tool}: the model's weights are broken, not the tool: {BERT_WEIGHT} "):
            call()
    assert all(d <= 1e-4 for d in check_bert_trace(sound, trace).values())
    assert len(bert_stages(trace, -1)) > 10


def test_bert_stages_refuses_a_model_a_nan_trace_and_a_position_outside_it():
    from onehot2gpt.lookinside_bert import bert_stages, trace_bert

    with pytest.raises(
        TypeError, match=r"^bert_stages: trace must be a BertTrace, got BertForPreTraining: pass trace_bert"
    ):
        bert_stages(_bert(False), 0)
    trace = trace_bert(_bert(False), BERT_IDS)
    with pytest.raises(ValueError, match=r"^position=4 must be "):
        bert_stages(trace, 4)
    trace.layers[0]["mlp_out"][1, 0] = math.nan  # a trace kept from a model that broke
    with pytest.raises(ValueError, match=r"^bert_stages: the trace holds NaN values \(first in layers\)"):
        bert_stages(trace, 0)


def test_stages_refuses_a_model_in_place_of_a_trace(sound):
    from onehot2gpt.lookinside import stages

    # used to fail with "'GPT' object has no attribute 'ids'"
    with pytest.raises(TypeError, match=r"^stages: trace must be a Trace, got GPT: pass trace_gpt\(model, ids\)"):
        stages(sound, -1)
    assert len(stages(trace_gpt(sound, IDS), -1)) > 10


def test_head_scores_name_weights_that_are_not_attention_maps():
    from onehot2gpt.lookinside import induction_scores, previous_token_scores

    with pytest.raises(TypeError, match="weights must be a torch.Tensor"):
        previous_token_scores("x")
    with pytest.raises(TypeError, match="weights must be a floating"):
        induction_scores(torch.ones(1, 2, 4, 4, dtype=torch.long), length=2)


@pytest.mark.parametrize("value", [0.5, 2.0, float("nan")])
def test_probing_features_refuse_a_mask_that_is_not_zero_or_one(value):
    from onehot2gpt.probing import sentence_features, token_features

    layers, mask = torch.randn(2, 3, 4, 5), torch.tensor([[1.0, 1.0, 0.0], [1.0, value, 0.0]])
    for features in (token_features, sentence_features):
        with pytest.raises(ValueError, match=r"mask holds .*0 \(padding\) or 1"):
            features(layers, mask)
    assert token_features(layers, mask == 1).shape == (3, 4, 5)  # a bool mask of the real ones
