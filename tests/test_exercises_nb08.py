"""The new check of notebook 08: the loss of extractive question answering."""

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects


def _qa_loss_by_hand(model, batch):
    # Independent of the library: softmax over the allowed tokens written out, a loop over rows.
    hidden = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
    scores = hidden @ model.qa.weight.T + model.qa.bias  # (B, T, 2)
    total = 0.0
    for b in range(hidden.size(0)):
        allowed = batch["context_mask"][b].clone()
        allowed[0] = True
        for k, gold in enumerate((batch["start_positions"][b], batch["end_positions"][b])):
            s = scores[b, allowed, k]
            log_z = torch.log(torch.exp(s - s.max()).sum()) + s.max()
            total = total - (scores[b, gold, k] - log_z) / 2
    return total / hidden.size(0)


def test_check_qa_loss_passes_an_independent_solution(capsys):
    ex.check_qa_loss(_qa_loss_by_hand)
    assert "✓ qa_loss" in capsys.readouterr().out


def _ce(model, batch, span, reduce=lambda s, e: (s + e) / 2):
    import torch.nn.functional as F

    start, end = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], span_mask=span)
    return reduce(F.cross_entropy(start, batch["start_positions"]), F.cross_entropy(end, batch["end_positions"]))


def _with_cls(batch):
    span = batch["context_mask"].clone()
    span[:, 0] = True
    return span


@pytest.mark.parametrize(
    "wrong, looks_like",
    [
        (lambda m, b: _ce(m, b, b["context_mask"]), r"\[CLS\]"),
        (lambda m, b: _ce(m, b, None), "every token"),
        (lambda m, b: _ce(m, b, _with_cls(b), lambda s, e: s + e), "sum"),
        (lambda m, b: _ce(m, b, _with_cls(b), lambda s, e: s), "only the start"),
        (lambda m, b: float(_ce(m, b, _with_cls(b))), "0-dimensional"),
    ],
)
def test_check_qa_loss_rejects_wrong_answers(wrong, looks_like):
    assert_rejects(ex.check_qa_loss, wrong, match=looks_like)


def test_check_qa_loss_says_when_it_is_not_written():
    def todo(model, batch):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        ex.check_qa_loss(todo)


# ------------------------------------------------------------------ exercises 1 and 3: the heads


def _classifier(slip=""):
    from onehot2gpt.bert import BertForSequenceClassification

    class Classifier(BertForSequenceClassification):
        def forward(self, input_ids, token_type_ids=None, attention_mask=None):
            out = self.bert(input_ids, token_type_ids, attention_mask)
            if self.pooling == "pooler":
                vector = out.last_hidden_state[:, 0] if slip == "raw cls" else out.pooled
            elif slip == "mean with padding":
                vector = out.last_hidden_state.mean(1)
            else:
                real = attention_mask.unsqueeze(-1).float()
                vector = torch.einsum("btd,bt->bd", out.last_hidden_state, real[..., 0]) / real.sum(1)
            if slip == "dropout on":
                self.dropout.train()
            logits = self.classifier(self.dropout(vector))
            return logits.softmax(-1) if slip == "softmax" else logits

    return Classifier


def test_check_sequence_classifier_passes_an_independent_solution(capsys):
    ex.check_sequence_classifier(_classifier())
    assert "✓ sequence_classifier" in capsys.readouterr().out


@pytest.mark.parametrize(
    "slip, words",
    [
        ("raw cls", r"reads h_\[CLS\] itself"),
        ("mean with padding", "over the padding too"),
        ("softmax", "probabilities"),
        ("dropout on", "dropout that ignores .eval"),
    ],
)
def test_check_sequence_classifier_names_each_planted_mistake(slip, words):
    assert_rejects(ex.check_sequence_classifier, _classifier(slip), match=words)


def _qa_head(slip=""):
    from onehot2gpt.bert import BertForQuestionAnswering

    class Head(BertForQuestionAnswering):
        def forward(self, input_ids, token_type_ids=None, attention_mask=None, span_mask=None):
            h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
            S, E = self.qa.weight
            start, end = h @ S + self.qa.bias[0], h @ E + self.qa.bias[1]
            keep = attention_mask.bool()
            if span_mask is not None and slip != "no span":
                keep = keep & span_mask
            fill = 0.0 if slip == "zero" else float("-inf")
            if slip != "no mask":
                start, end = torch.where(keep, start, fill), torch.where(keep, end, fill)
            return (end, start) if slip == "swapped" else (start, end)

    return Head


def test_check_qa_head_passes_an_independent_solution(capsys):
    ex.check_qa_head(_qa_head())
    assert "✓ qa_head" in capsys.readouterr().out


@pytest.mark.parametrize(
    "slip, words",
    [("swapped", "swapped"), ("no mask", "nothing is masked"), ("no span", "span mask is ignored"), ("zero", "−∞")],
)
def test_check_qa_head_names_each_planted_mistake(slip, words):
    assert_rejects(ex.check_qa_head, _qa_head(slip), match=words)


def test_check_best_span_refuses_float_positions():
    """A float is not an index (issue 48): the check no longer truncates a float answer into a pass."""
    from onehot2gpt.bert import best_span

    def floats(s, e, m):
        start, end, _ = best_span(s, e, m)
        return float(start) + 0.4, float(end)

    with pytest.raises(AssertionError, match="whole numbers"):
        ex.check_best_span(floats)

    def numpy_ints(s, e, m):
        import numpy as np

        start, end, _ = best_span(s, e, m)
        return np.int64(start), torch.tensor(end)

    ex.check_best_span(numpy_ints)  # whole numbers of any kind still pass
