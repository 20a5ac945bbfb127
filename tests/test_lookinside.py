"""The step-by-step forward, logit lens and interventions against the library's own forward."""

import copy

import pytest
import torch
import torch.nn.functional as F
from onehot2gpt.attention import causal_mask
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.lookinside import (
    check_trace,
    induction_scores,
    intervene,
    logit_lens,
    per_position_loss,
    previous_token_scores,
    repeated_random_tokens,
    stages,
    trace_gpt,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = GPT(GPTConfig.tiny(vocab_size=40, dropout=0.1))
    with torch.no_grad():  # biases and LayerNorm away from their zero / identity start
        for name, p in m.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return m.eval()


IDS = torch.tensor([3, 17, 5, 3, 17, 8, 21, 0, 39])


def test_the_trace_is_the_librarys_forward(model):
    trace = trace_gpt(model, IDS)
    diffs = check_trace(model, trace)
    assert set(diffs) == {"embedding", "logits"} | {f"layer {l} {w}" for l in range(2) for w in ("output", "attention")}
    torch.testing.assert_close(trace.logits, model(IDS[None]).logits[0], atol=1e-5, rtol=1e-5)
    attn = model(IDS[None], output_attentions=True).attentions
    for l in range(2):
        torch.testing.assert_close(trace.attentions[l], attn[l][0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(trace.probs, torch.softmax(trace.logits, -1))


def test_the_trace_reads_in_eval_mode_and_leaves_the_mode(model):
    model.train()
    try:
        trace = trace_gpt(model, IDS)
        check_trace(model, trace)
        assert model.training
    finally:
        model.eval()


def test_check_trace_finds_a_wrong_stage(model):
    trace = trace_gpt(model, IDS)
    trace.layers[1]["resid_post"] = trace.layers[1]["resid_post"] + 1e-2
    with pytest.raises(AssertionError, match="layer 1 output"):
        check_trace(model, trace)


def test_stages_follow_the_position(model):
    trace = trace_gpt(model, IDS, temperature=0.5)
    s = stages(trace, position=4)
    assert len(s) == 3 + 15 * 2 + 4
    by = {st.key: st for st in s}
    torch.testing.assert_close(by["input x"].value, trace.x0[4])
    soft = by["layer 1 · softmax"].value  # (H, T): query 4 over every key
    torch.testing.assert_close(soft.sum(-1), torch.ones(4))
    assert (soft[:, 5:] == 0).all() and torch.isinf(by["layer 1 · masked"].value[:, 5:]).all()
    torch.testing.assert_close(by["temperature"].value, trace.logits[4] / 0.5)
    torch.testing.assert_close(by["probabilities"].value, torch.softmax(trace.logits[4] / 0.5, -1))
    assert stages(trace, -1)[0].value.equal(trace.tok_emb[-1])
    with pytest.raises(ValueError, match="position"):
        stages(trace, 9)


def surgery(model, *, head=None, mlp=None):
    m = copy.deepcopy(model)
    hs = m.config.d_model // m.config.n_heads
    with torch.no_grad():
        if head is not None:
            layer, h = head
            m.blocks[layer].attn.out_proj.weight[:, h * hs : (h + 1) * hs] = 0
        if mlp is not None:
            m.blocks[mlp].ff.linear2.weight.zero_()
            m.blocks[mlp].ff.linear2.bias.zero_()
    return m


def test_a_head_switched_off_is_its_output_weights_set_to_zero(model):
    trace = trace_gpt(model, IDS, heads_off=[(1, 2)])
    torch.testing.assert_close(trace.logits, surgery(model, head=(1, 2))(IDS[None]).logits[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(trace.logits, trace_gpt(model, IDS).logits, atol=1e-4)


def test_an_mlp_switched_off_adds_nothing(model):
    trace = trace_gpt(model, IDS, mlps_off=[0])
    torch.testing.assert_close(trace.logits, surgery(model, mlp=0)(IDS[None]).logits[0], atol=1e-5, rtol=1e-5)


def test_a_token_switched_off_is_hidden_from_the_others(model):
    trace = trace_gpt(model, IDS, tokens_off=[1])
    mask = causal_mask(len(IDS))
    mask[:, 1] = False
    mask[1, 1] = True
    x = model.tok_emb(IDS[None]) + model.pos_emb(torch.arange(len(IDS)))
    with torch.no_grad():
        for block in model.blocks:
            x, w, _ = block(x, mask, need_weights=True)
        logits = model.lm_head(model.final_norm(x))[0]
    torch.testing.assert_close(trace.logits, logits, atol=1e-5, rtol=1e-5)
    assert (trace.attentions[0][:, 2:, 1] == 0).all()


def test_logit_lens_ends_at_the_models_prediction(model):
    rows = logit_lens(model, IDS, position=5, k=3, target=int(IDS[6]))
    assert [r.layer for r in rows] == ["embedding", "layer 0", "layer 1"]
    probs = torch.softmax(model(IDS[None]).logits[0, 5].detach(), -1)
    values, order = probs.topk(3)
    assert [i for i, _ in rows[-1].top] == order.tolist()
    torch.testing.assert_close(torch.tensor([p for _, p in rows[-1].top]), values)
    assert rows[-1].target_prob == pytest.approx(float(probs[IDS[6]]), rel=1e-4)
    assert rows[-1].target_rank == int((probs > probs[IDS[6]]).sum())
    x0 = model.tok_emb(IDS[None]) + model.pos_emb(torch.arange(len(IDS)))
    first = torch.softmax(model.lm_head(model.final_norm(x0))[0, 5], -1)
    assert rows[0].top[0][0] == int(first.argmax())
    with pytest.raises(ValueError, match="target"):
        logit_lens(model, IDS, target=40)
    with pytest.raises(ValueError, match="k"):
        logit_lens(model, IDS, k=0)


def test_intervene_compares_the_loss(model):
    same = intervene(model, IDS)
    assert same.loss_change == 0 and same.top_before == same.top_after
    r = intervene(model, IDS, position=3, heads_off=[(0, 1)])
    logits = surgery(model, head=(0, 1))(IDS[None]).logits[0]
    assert r.loss_after == pytest.approx(F.cross_entropy(logits[:-1], IDS[1:]).item(), rel=1e-5)
    assert r.loss_before == pytest.approx(F.cross_entropy(model(IDS[None]).logits[0, :-1], IDS[1:]).item(), rel=1e-5)
    assert r.switched_off == {"heads": [(0, 1)], "mlps": [], "tokens": []} and r.position == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(ids="the cat"), "encode"),
        (dict(ids=torch.tensor([1.0, 2.0])), "dtype"),
        (dict(ids=torch.tensor([[1, 2], [3, 4]])), "one sequence"),
        (dict(ids=torch.arange(17)), "positions 0…15"),
        (dict(ids=[1, 40]), "40"),
        (dict(ids=[1, 2], temperature=0), "temperature"),
        (dict(ids=[1, 2], temperature=float("nan")), "temperature"),
        (dict(ids=[1, 2], heads_off=[1]), "pairs"),
        (dict(ids=[1, 2], heads_off=[(2, 0)]), "layer"),
        (dict(ids=[1, 2], heads_off=[(0, 4)]), "head"),
        (dict(ids=[1, 2], mlps_off=[2]), r"mlps_off\[0\]=2 must be in \[0, 1\]"),
        (dict(ids=[1, 2], tokens_off=[2]), "tokens_off"),
    ],
)
def test_bad_input_is_a_clear_error(model, kwargs, message):
    ids = kwargs.pop("ids")
    with pytest.raises(ValueError, match=message):
        trace_gpt(model, ids, **kwargs)


def test_only_a_gpt_can_be_traced(model):
    with pytest.raises(TypeError, match="course GPT"):
        trace_gpt(torch.nn.Linear(2, 2), [1, 2])
    with pytest.raises(TypeError, match="mlps_off"):
        trace_gpt(model, [1, 2], mlps_off=[True])
    with pytest.raises(ValueError, match="switched off"):
        check_trace(model, trace_gpt(model, IDS, mlps_off=[1]))
    with pytest.raises(ValueError, match="two tokens"):
        intervene(model, [3])


def test_induction_scores_read_the_right_diagonal():
    length, prefix = 4, 2
    T = prefix + 2 * length
    perfect = torch.zeros(1, 2, T, T)
    for t in range(T):
        perfect[0, :, t, max(t - length + 1, 0) if t >= prefix + length else 0] = 1
    perfect[0, 1] = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # head 1: even
    scores = induction_scores(perfect, length, prefix)
    assert scores[0] == 1
    expected = torch.tensor([1 / (t + 1) for t in range(prefix + length, T)]).mean()
    torch.testing.assert_close(scores[1], expected)
    prev = torch.zeros(3, T, T)
    prev[:, torch.arange(1, T), torch.arange(T - 1)] = 1
    assert previous_token_scores(prev).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="prefix"):
        induction_scores(perfect, 5, prefix)
    with pytest.raises(ValueError, match="shape"):
        induction_scores(torch.zeros(T, T), length, prefix)


def test_repeated_random_tokens_repeat(model):
    ids = repeated_random_tokens(3, 5, 40, torch.Generator().manual_seed(0), prefix=2)
    assert ids.shape == (3, 12) and ids[:, 2:7].equal(ids[:, 7:])
    with pytest.raises(ValueError, match="length"):
        repeated_random_tokens(3, 0, 40)
    loss = per_position_loss(model, ids)
    assert loss.shape == (11,)
    logits = model(ids[:, :-1]).logits
    torch.testing.assert_close(loss[4], F.cross_entropy(logits[:, 4], ids[:, 5]))


@pytest.fixture(scope="module")
def bert():
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig.course(vocab_size=40, dropout=0.1))
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return m.eval()


def test_the_bert_trace_is_the_librarys_forward(bert):
    from onehot2gpt.lookinside import trace_model
    from onehot2gpt.lookinside_bert import trace_bert

    ids = torch.tensor([2, 17, 5, 4, 9, 3, 0, 0])  # two padding tokens at the end
    types = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    trace = trace_bert(bert, ids, types)
    diffs = check_trace(bert, trace)
    assert max(diffs.values()) < 1e-4 and "layer 1 attention" in diffs
    out = bert(ids[None], types[None])
    torch.testing.assert_close(trace.logits, out.mlm_logits[0], atol=1e-5, rtol=1e-5)
    assert (trace.attentions[0][:, :, 6:] == 0).all()  # nobody reads the padding
    s = stages(trace, 2)
    assert len(s) == 5 + 15 * bert.config.n_layers + 6 and s[-1].key == "probabilities"
    torch.testing.assert_close(s[-1].value, torch.softmax(out.mlm_logits[0, 2], -1))
    assert isinstance(trace_model(bert, ids), type(trace))
    broken = trace_bert(bert, ids, types)
    broken.layers[0]["ln2"] = broken.layers[0]["ln2"] + 1e-2
    with pytest.raises(AssertionError, match="layer 0 output"):
        check_trace(bert, broken)
    with pytest.raises(TypeError, match="BERT"):
        trace_bert(torch.nn.Linear(2, 2), ids)
    with pytest.raises(ValueError, match="token_type_ids"):
        trace_bert(bert, ids, types[:3])
