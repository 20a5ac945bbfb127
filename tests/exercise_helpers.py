"""Shared by the exercise-check tests: how a check must reject a wrong answer."""

import re

import pytest


def assert_rejects(check, wrong, match=None):
    """`check` fails `wrong` twice: first naming the concept and giving no hint, then
    (the second wrong attempt) with the hint."""
    with pytest.raises(AssertionError) as first:
        check(wrong)
    text = str(first.value)
    assert "Think about:" in text, f"the first failure names no concept:\n{text}"
    assert "Hint:" not in text, f"the first failure already gives the hint:\n{text}"
    if match:
        assert re.search(match, text), f"{match!r} not in:\n{text}"
    with pytest.raises(AssertionError) as second:
        check(wrong)
    assert "Hint:" in str(second.value), f"the second failure gives no hint:\n{second.value}"


def top_k_lowest_ids(logits, k):
    """A student's top-k filter written without the library (loops and plain sorting): keeps the
    k largest logits of each row, a tie going to the lower id; -inf elsewhere."""
    out = logits.clone()
    for row in out.view(-1, out.shape[-1]):
        ranked = sorted(range(len(row)), key=lambda i: (-float(row[i]), i))  # a tie: lower id first
        for i in ranked[k:]:
            row[i] = float("-inf")
    return out
