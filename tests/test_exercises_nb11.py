"""Notebook 11's query-stream exercise (issue 47): an independent two-stream layer passes, each
planted mistake is named, and the `attend` a student's code is handed reaches no reference."""

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects


def _ranks(order):
    rank = [0] * len(order)
    for step, position in enumerate(order):
        rank[position] = step
    return rank


def _layer(slip=""):
    """Two-stream attention written from the definition with loops over positions (no library)."""

    def layer(h, g, order, attend):
        T, rank = len(order), _ranks(order)
        content = torch.tensor(
            [[rank[j] < rank[i] or (j == i and slip != "content blind") for j in range(T)] for i in range(T)]
        )
        query = torch.tensor(
            [[rank[j] < rank[i] or (j == i and slip == "query sees itself") for j in range(T)] for i in range(T)]
        )
        new_g = torch.zeros_like(g)
        for i in range(T):
            if query[i].any() or slip == "nan first":
                keys = g if slip == "keys from g" else h
                new_g[i] = attend(g[i : i + 1], keys, query[i : i + 1])[0]
        return attend(h, h, content), new_g

    return layer


def test_check_two_stream_layer_passes_an_independent_solution(capsys):
    ex.check_two_stream_layer(_layer())
    assert "✓ two_stream_layer" in capsys.readouterr().out


@pytest.mark.parametrize(
    "slip, words",
    [
        ("query sees itself", "sees its own position"),
        ("content blind", "content stream does not see its own position"),
        ("keys from g", "keys and values from g"),
        ("nan first", "reads nothing"),
    ],
)
def test_check_two_stream_layer_names_each_planted_mistake(slip, words):
    assert_rejects(ex.check_two_stream_layer, _layer(slip), match=words)


def test_the_attend_handed_to_the_student_holds_no_reference():
    from onehot2gpt_exercises import nb11

    attend = nb11._make_attend(torch.Generator().manual_seed(0), 4)
    assert set(attend.__globals__) <= {"__name__", "__builtins__", "torch"}
    assert not any("reference" in repr(cell.cell_contents) for cell in attend.__closure__ or ())
