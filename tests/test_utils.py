"""One validator for token ids (`utils.as_ids`), used by every function that takes ids."""

import numpy as np
import pytest
import torch

from onehot2gpt.utils import InvalidIds, as_ids
from onehot2gpt.vocab import Vocab, one_hot


@pytest.mark.parametrize("good, expected", [
    ([1, 2, 3], torch.tensor([1, 2, 3])),
    ([[1, 2], [3, 4]], torch.tensor([[1, 2], [3, 4]])),
    (torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2])),
    (np.array([4, 5]), torch.tensor([4, 5])),
    ((np.int64(3), 1), torch.tensor([3, 1])),
])
def test_integer_ids_come_back_as_long_tensors(good, expected):
    got = as_ids(good, vocab_size=6)
    assert got.dtype == torch.long and torch.equal(got, expected)


@pytest.mark.parametrize("bad, says", [
    ("ROMEO:", "encode the text"),
    ([1, 2.0], "never rounded"),                       # a float in a list is not truncated
    ([[1, 2], [3, 4.7]], r"position \[1, 1\]"),
    (torch.tensor([1.0, 2.0]), "torch.float32"),
    (np.array([1.5]), "float64"),
    ([True, False], "bool"),
    (torch.ones(3, dtype=torch.bool), "bool"),
    ([[1, 2], [3]], "ragged"),
    ([], "empty"),
    ([0, 9], "outside 0…5"),
    ([-1, 2], "outside 0…5"),
    ({"input_ids": [1]}, "tensor or a list"),
    (["the", "cat"], "encode text"),
])
def test_bad_ids_are_refused_with_what_to_do(bad, says):
    with pytest.raises(InvalidIds, match=says):
        as_ids(bad, vocab_size=6)


def test_dimensions_are_checked_with_the_fix():
    with pytest.raises(InvalidIds, match=r"\(B, T\).*ids\[None\]"):
        as_ids([1, 2], dims=2)
    with pytest.raises(InvalidIds, match=r"ids\[0\]"):
        as_ids([[1, 2]], dims=1)
    assert as_ids([], dims=1, allow_empty=True).shape == (0,)


def test_invalid_ids_are_caught_by_the_old_exception_types():
    for kind in (ValueError, TypeError, IndexError):
        with pytest.raises(kind):
            as_ids([1.5])


@pytest.mark.parametrize("call", [
    lambda: one_hot([0, 1.9], 3),
    lambda: one_hot(torch.tensor([0.0, 1.0]), 3),
    lambda: Vocab(["a", "b"]).decode([2.0]),
    lambda: Vocab(["a", "b"]).decode([99]),
])
def test_library_functions_refuse_float_ids_instead_of_truncating(call):
    with pytest.raises(InvalidIds):
        call()
