"""The checks of notebook 02 that came with issue 14: the hand-written skip-gram step, and the
stricter checks of the older exercises (a tensor loss, an int analogy answer)."""

import onehot2gpt_exercises as ex
import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_rejects


def sgns_step(
    in_w,
    out_w,
    contexts,
    centres,
    negatives,
    lr,
    *,
    mean=False,
    sign=1.0,
    keep_pads=False,
    assign=False,
    skip_out=False,
    sequential=False,
):
    """An independent solution, pair by pair in plain Python loops; the flags make it wrong."""
    pairs = [(b, int(w)) for b in range(len(contexts)) for w in contexts[b] if keep_pads or w >= 0]
    total = 0.0
    grads_in, grads_out = torch.zeros_like(in_w), torch.zeros_like(out_w)
    old_in, old_out = in_w.clone(), out_w.clone()
    for b, w in pairs:
        targets = [int(centres[b])] + [int(k) for k in negatives[b]]
        for j, t in enumerate(targets):
            label = 1.0 if j == 0 else 0.0
            score = float(old_in[w] @ old_out[t])
            total += float(F.softplus(torch.tensor(-score if label else score)))
            g = float(torch.sigmoid(torch.tensor(score))) - label
            grads_in[w] += g * old_out[t]
            grads_out[t] += g * old_in[w]
            if sequential:  # updating as it goes: later pairs see moved vectors
                old_in[w] -= lr * g * old_out[t]
    scale = lr / len(pairs) if mean else lr
    if assign:  # one write per row: repeated words lose updates
        rows = sorted({w for _, w in pairs})
        in_w[rows] = in_w[rows] - sign * scale * grads_in[rows] / 2
    else:
        in_w -= sign * scale * grads_in
    if not skip_out:
        out_w -= sign * scale * grads_out
    return (total / len(pairs) if mean else total), len(pairs)


def test_sgns_step_check_accepts_an_independent_solution(capsys):
    ex.check_sgns_step(sgns_step)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, match",
    [
        (lambda *a: sgns_step(*a, mean=True), "mean"),
        (lambda *a: sgns_step(*a, sign=-1.0), "uphill"),
        (lambda *a: sgns_step(*a, skip_out=True), "out_w"),
        (lambda *a: sgns_step(*a, keep_pads=True), None),
        (lambda *a: sgns_step(*a, assign=True), None),
        (lambda *a: sgns_step(*a, sequential=True), None),
        (lambda in_w, out_w, c, t, n, lr: (0.0, 1), "neither table"),
    ],
)
def test_sgns_step_check_rejects_wrong_steps(wrong, match):
    assert_rejects(ex.check_sgns_step, wrong, match)


def test_sgns_step_check_wants_two_results():
    with pytest.raises(AssertionError, match="return two things"):
        ex.check_sgns_step(lambda *a: sgns_step(*a)[0])


def test_loss_check_wants_a_tensor_that_autograd_can_use():
    def as_float(v, u, noise):
        positive = (u * v).sum(-1)
        negative = torch.bmm(noise, v.unsqueeze(2)).squeeze(2)
        return float((-F.logsigmoid(positive) - F.logsigmoid(-negative).sum(-1)).mean())

    assert_rejects(ex.check_negative_sampling_loss, as_float, "expected a tensor")


def test_analogy_check_wants_a_python_int():
    def as_tensor(unit, a, b, c):
        scores = unit @ (unit[b] - unit[a] + unit[c])
        scores[[a, b, c]] = -float("inf")
        return scores.argmax()

    assert_rejects(ex.check_analogy, as_tensor, "Python int")


@pytest.mark.parametrize(
    "check, wrong, match",
    [
        (ex.check_noise_distribution, lambda c: c / c.sum(), "unigram"),
        (ex.check_noise_distribution, lambda c: c**0.75, "sum to"),
        (ex.check_analogy, lambda unit, a, b, c: int((unit @ (unit[b] - unit[a] + unit[c])).argmax()), "query words"),
    ],
)
def test_old_checks_name_the_mistake(check, wrong, match):
    assert_rejects(check, wrong, match)
