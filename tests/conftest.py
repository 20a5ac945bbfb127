"""Shared fixtures for the library tests."""

import onehot2gpt_exercises as exercises
import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest, and undisturbed by other jobs, on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def fresh_attempts():
    """Each test starts as a student who has not tried yet."""
    exercises.reset_attempts()
    yield
    exercises.reset_attempts()
