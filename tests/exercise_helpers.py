"""Shared by the exercise-check tests: how a check must reject a wrong answer."""

import re

import pytest


def assert_rejects(check, wrong, match=None):
    """`check` fails `wrong` twice: first naming the concept and giving no code-level hint, then
    (the second wrong attempt) with the hint."""
    with pytest.raises(AssertionError) as first:
        check(wrong)
    text = str(first.value)
    assert "Think about:" in text, f"the first failure names no concept:\n{text}"
    assert "Hint:" not in text, f"the first failure already gives the code-level hint:\n{text}"
    if match:
        assert re.search(match, text), f"{match!r} not in:\n{text}"
    with pytest.raises(AssertionError) as second:
        check(wrong)
    assert "Hint:" in str(second.value), f"the second failure gives no hint:\n{second.value}"
