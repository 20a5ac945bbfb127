"""Notebook 03's build checks: the LSTM cell (an independent correct cell passes, typical mistakes
are rejected with the concept first, the stand-in equals one step of torch.nn.LSTM) and the LSTM
language model built on it, proven on the course checkpoint, each planted mistake named."""

import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects
from onehot2gpt_exercises import check_lstm_cell
from onehot2gpt_exercises.nb03 import torch_lstm_cell


def cell_by_hand(
    x,
    h,
    c,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    order="ifgo",
    g_act=torch.tanh,
    keep_old=True,
    tanh_out=True,
    bias_hh_on=True,
):
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + (bias_hh if bias_hh_on else 0)
    blocks = dict(zip(order, gates.chunk(4, dim=1)))
    i, f, o = (torch.sigmoid(blocks[k]) for k in "ifo")
    g = g_act(blocks["g"])
    c_new = (f * c if keep_old else 0) + i * g
    return (o * torch.tanh(c_new) if tanh_out else o * c_new), c_new


def test_a_correct_cell_passes(capsys):
    check_lstm_cell(cell_by_hand)
    assert "✓ lstm_cell" in capsys.readouterr().out


def test_stand_in_is_one_step_of_torch_lstm():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 3, batch_first=True)
    x, h0, c0 = torch.randn(2, 1, 5), torch.randn(1, 2, 3), torch.randn(1, 2, 3)
    _, (h1, c1) = lstm(x, (h0, c0))
    p = dict(lstm.named_parameters())
    args = (x[:, 0], h0[0], c0[0], p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"])
    for cell in (torch_lstm_cell, cell_by_hand):
        h, c = cell(*args)
        torch.testing.assert_close(h, h1[0])
        torch.testing.assert_close(c, c1[0])


@pytest.mark.parametrize(
    "wrong, match",
    [
        (lambda *a: cell_by_hand(*a, order="ifog"), "order i, f, o, g"),
        (lambda *a: cell_by_hand(*a, g_act=torch.sigmoid), "candidate g is squashed with a sigmoid"),
        (lambda *a: cell_by_hand(*a, keep_old=False), "forgets the old one"),
        (lambda *a: cell_by_hand(*a, tanh_out=False), "without tanh"),
        (lambda *a: cell_by_hand(*a, bias_hh_on=False), "biases is missing"),
        (lambda *a: cell_by_hand(*a)[::-1], "swapped"),
        (lambda *a: cell_by_hand(*a, order="figo"), None),
        (lambda *a: cell_by_hand(*a)[0], "return two tensors"),
    ],
)
def test_wrong_cells_are_rejected(wrong, match):
    assert_rejects(check_lstm_cell, wrong, match)


def test_unwritten_cell_gives_nothing_away():
    def unwritten(*args):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet") as info:
        check_lstm_cell(unwritten)
    assert "Think about" not in str(info.value) and "Hint" not in str(info.value)


# ------------------------------------------------------------------ the LSTM language model, built on a cell


def _lm_class(residual="rest", cell=None):
    """A student's MyLSTMLM with its own step loop (an independent LSTM cell unless `cell`)."""

    def own_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
        i, f, g, o = (x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    step = cell or own_cell

    class MyLSTMLM(ex.TorchLSTMLM):
        def forward(self, ids, states=None):
            h = self.tok_proj(self.tok_emb(ids))
            for j, lstm in enumerate(self.fwd_layers):
                hs, cs = h.new_zeros(h.shape[0], lstm.hidden_size), h.new_zeros(h.shape[0], lstm.hidden_size)
                outs = []
                for t in range(h.shape[1]):
                    hs, cs = step(
                        h[:, t], hs, cs, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0
                    )
                    outs.append(hs)
                out = torch.stack(outs, 1)
                h = out + h if (residual == "all" or (residual == "rest" and j > 0)) else out
            z = self.out_proj(h)
            return self.softmax.log_prob(z.reshape(-1, z.shape[-1])).view(*ids.shape, -1), None

    return MyLSTMLM


def test_check_lstm_lm_passes_an_independent_model_and_the_stand_in(capsys):
    ex.check_lstm_lm(_lm_class())
    ex.check_lstm_lm(ex.TorchLSTMLM)
    assert capsys.readouterr().out.count("✓ lstm_lm") == 2


@pytest.mark.parametrize(
    "residual, reason",
    [("none", "residual connection around layers 2 … L is missing"), ("all", "first layer has a residual")],
)
def test_check_lstm_lm_names_each_planted_mistake(residual, reason):
    assert_rejects(ex.check_lstm_lm, _lm_class(residual), reason)


def test_check_lstm_lm_catches_a_wrong_cell_inside_the_model():
    def forgets_nothing(x, h, c, w_ih, w_hh, b_ih, b_hh):  # the forget gate left out: c never decays
        i, f, g, o = (x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, dim=-1)
        c = c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    assert_rejects(ex.check_lstm_lm, _lm_class(cell=forgets_nothing))


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda s: [
                (tuple(["<bos>", *s, "<eos>"][: t + 1]), ["<bos>", *s, "<eos>"][t]) for t in range(1, len(s) + 2)
            ],
            "shifted by one",
        ),
        (
            lambda s: [
                (tuple(["<bos>", *s, "<eos>"][:t]), ["<bos>", *s, "<eos>"][t - 1]) for t in range(1, len(s) + 2)
            ],
            "shift the targets by one",
        ),
        (lambda s: [(tuple(["<bos>", *s][:t]), ["<bos>", *s][t]) for t in range(1, len(s) + 1)], "predict <eos>"),
    ],
)
def test_check_next_token_pairs_names_targets_that_are_not_shifted(wrong, words):
    """Issue 47: an LM's targets are its inputs shifted by one; the usual slips are named."""
    assert_rejects(ex.check_next_token_pairs, wrong, match=words)
