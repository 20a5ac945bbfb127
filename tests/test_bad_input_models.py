"""Bad input to the model helpers and trainers (issue 48): NaN and +inf span scores, non-integer
factorization orders, and training runs whose loss explodes while it is still finite. Each gives
a clear error naming the argument, or a correct result."""

import math

import pytest
import torch
from onehot2gpt.attention import causal_mask, permutation_mask, split_heads
from onehot2gpt.bert import best_span
from onehot2gpt.rnn_lm import LSTMLM, train_lm
from onehot2gpt.utils import TrainingDiverged, check_finite_loss

NAN, INF = math.nan, math.inf
SCORES = torch.tensor([0.0, 3.0, 1.0, 0.0])


@pytest.mark.parametrize(
    "start, end, message",
    [
        (torch.full((4,), NAN), SCORES, r"^best_span: start_logits holds NaN at positions \[0, 1, 2, 3\]"),
        (SCORES, torch.tensor([0.0, NAN, 1.0, 0.0]), r"^best_span: end_logits holds NaN at positions \[1\]"),
        (torch.tensor([INF, 0.0, 0.0, 0.0]), SCORES, r"^best_span: start_logits holds \+inf at positions \[0\]"),
    ],
    ids=["all NaN start", "one NaN end", "+inf start"],
)
def test_best_span_refuses_nan_and_plus_inf_scores(start, end, message):
    # all-NaN scores used to give (0, 0, nan); +inf gave (0, 0, inf)
    with pytest.raises(ValueError, match=message):
        best_span(start, end)


@pytest.mark.parametrize(
    "allowed, error, message",
    [
        (torch.tensor([0.0, 0.5, 1.0, 1.0]), TypeError, r"^best_span: allowed must be a mask of True/False"),
        (torch.tensor([2, 1, 1, 0]), TypeError, r"^best_span: allowed must be a mask .* values \[0, 1, 2\]"),
        (
            torch.tensor([True, True]),
            ValueError,
            r"^best_span: allowed must be a bool tensor shaped like the logits \(4,\), got \(2,\)",
        ),
        ([True, True, True, True], ValueError, r"^best_span: allowed must be .* got list"),
    ],
    ids=["float mask", "counts", "wrong length", "a list"],
)
def test_best_span_refuses_an_allowed_mask_that_is_not_one(allowed, error, message):
    with pytest.raises(error, match=message):
        best_span(SCORES, SCORES, allowed=allowed)


def test_best_span_still_rules_out_minus_inf_and_accepts_a_0_1_mask():
    start, end = torch.tensor([-INF, 0.0, 2.0, 1.0]), torch.tensor([0.0, -INF, 0.5, 3.0])
    assert best_span(start, end) == (2, 3, 5.0)
    assert best_span(start, end, allowed=torch.tensor([1, 1, 1, 0])) == (2, 2, 2.5)
    assert best_span(torch.full((3,), -INF), torch.zeros(3)) is None


@pytest.mark.parametrize(
    "order, error, message",
    [
        ([0.2, 1.9, 2.5], TypeError, r"^permutation_mask: order\[0\] is float 0\.2 \(a float is never rounded\)"),
        ([0, 1.0, 2], TypeError, r"^permutation_mask: order\[1\] is float 1\.0"),
        ([True, False], TypeError, r"^permutation_mask: order\[0\] is bool True"),
        (torch.tensor([1.0, 0.0]), TypeError, r"^permutation_mask: order has dtype torch\.float32"),
        ("201", TypeError, r"^permutation_mask: order must be a list or a 1-D tensor, got str"),
        ([[0, 1]], TypeError, r"^permutation_mask: order\[0\] is list"),
        ([0, 2, 2], ValueError, r"^permutation_mask: order must be a permutation of 0 … T−1 .*got \[0, 2, 2\]"),
        ([1, 2, 3], ValueError, r"^permutation_mask: order must be a permutation .*got \[1, 2, 3\]"),
        ([], ValueError, r"^permutation_mask: order is empty"),
    ],
    ids=["floats", "one float", "bools", "float tensor", "a string", "nested", "a repeat", "from 1", "empty"],
)
def test_permutation_mask_refuses_what_is_not_an_order(order, error, message):
    # [0.2, 1.9, 2.5] used to be truncated into the order [0, 1, 2]
    with pytest.raises(error, match=message):
        permutation_mask(order)


def test_permutation_mask_accepts_integer_tensors_and_ranges():
    assert torch.equal(permutation_mask(torch.arange(4), include_self=True), causal_mask(4))
    assert torch.equal(permutation_mask(range(3)), permutation_mask([0, 1, 2]))


def test_check_finite_loss_stops_a_loss_that_explodes_while_finite():
    assert check_finite_loss(40.0, 3, start=2.0) == 40.0  # growing, but not yet exploding
    with pytest.raises(TrainingDiverged, match=r"^LM diverged at step 3: the loss is 5e\+03, more than 1000× its "):
        check_finite_loss(5000.0, 3, lr=10.0, what="LM", start=2.0)
    with pytest.raises(TrainingDiverged, match=r"the run is exploding\. Lower the learning rate \(now 10\)"):
        check_finite_loss(torch.tensor(5000.0), 3, lr=10.0, start=2.0)


def test_the_lstm_trainer_stops_when_its_loss_explodes():
    torch.manual_seed(0)
    lm = LSTMLM(10, d_model=8, n_layers=1, dropout=0.0, tie_weights=False)
    with torch.no_grad():
        lm.lm_head.weight.mul_(1e5)  # finite, but the loss of its first batch is far above ln 10
    with pytest.raises(TrainingDiverged, match=r"^LSTM LM training diverged at step 0: .* the run is exploding"):
        train_lm(lm, torch.arange(200) % 10, batch_size=4, seq_len=8, progress=False)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: causal_mask(3.0), TypeError, r"^causal_mask: t_q must be an int .* got float 3\.0"),
        (lambda: causal_mask(3, 4.5), TypeError, r"^causal_mask: t_k must be an int"),
        (lambda: causal_mask(0), ValueError, r"^causal_mask needs 1 ≤ T_q ≤ T_k"),
        (lambda: split_heads(torch.zeros(1, 2, 4), 0), ValueError, r"^n_heads=0 must be at least 1"),
        (lambda: split_heads(torch.zeros(1, 2, 4), -2), ValueError, r"^n_heads=-2 must be at least 1"),
    ],
    ids=["float T_q", "float T_k", "zero T_q", "zero heads (ZeroDivisionError)", "negative heads"],
)
def test_attention_helpers_refuse_bad_sizes_naming_them(call, error, message):
    with pytest.raises(error, match=message):
        call()
