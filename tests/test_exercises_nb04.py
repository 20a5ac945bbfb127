"""The biLM-layers check of notebook 04: an independent correct solution passes, typical mistakes
are rejected with the concept first, and the stand-in equals the library's BiLM."""

import pytest
import torch
from exercise_helpers import assert_rejects
from onehot2gpt.elmo import BiLM, BiLMConfig
from onehot2gpt_exercises import check_bilm_layers
from onehot2gpt_exercises.nb04 import library_bilm_layers


def flip_rows(h, lengths):
    out = h.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = h[b, :n].flip(0)
    return out


def layers_by_hand(x, fwd_lstms, bwd_lstms, lengths, back=True, whole=False, residual=True, zero_pad=True):
    rev = (lambda h: h.flip(1)) if whole else (lambda h: flip_rows(h, lengths))

    def stack(lstms, h):
        states = []
        for j, lstm in enumerate(lstms):
            out = lstm(h)[0]
            h = out + h if (j and residual) else out
            states.append(h)
        return states

    fwd = stack(fwd_lstms, x)
    bwd = [rev(h) if back else h for h in stack(bwd_lstms, rev(x))]
    out = torch.stack([torch.cat([x, x], -1)] + [torch.cat([f, b], -1) for f, b in zip(fwd, bwd)], 2)
    real = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).float()
    return out * real[:, :, None, None] if zero_pad else out


def test_a_correct_solution_passes(capsys):
    check_bilm_layers(layers_by_hand)
    assert "✓ bilm_layers" in capsys.readouterr().out


def test_stand_in_equals_the_library_bilm():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.tiny(vocab_size=30)).eval()
    ids = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
    mask = ids != 0
    with torch.no_grad():
        x = bilm.tok_proj(bilm.tok_emb(ids))
        got = library_bilm_layers(x, bilm.fwd_layers, bilm.bwd_layers, mask.sum(1))
        torch.testing.assert_close(got, bilm.representations(ids, mask))
        torch.testing.assert_close(got, layers_by_hand(x, bilm.fwd_layers, bilm.bwd_layers, mask.sum(1)))


@pytest.mark.parametrize(
    "wrong, match",
    [
        (lambda *a: layers_by_hand(*a, back=False), "left in reading order"),
        (lambda *a: layers_by_hand(*a, whole=True), "padding included"),
        (lambda *a: layers_by_hand(*a, residual=False), "residual"),
        (lambda *a: layers_by_hand(*a, zero_pad=False), "padded positions are not zero"),
        (lambda *a: layers_by_hand(*a)[:, :, 1:], "token layer"),
        (lambda *a: layers_by_hand(*a).flip(-1), None),
    ],
)
def test_wrong_solutions_are_rejected(wrong, match):
    assert_rejects(check_bilm_layers, wrong, match)


def test_check_bilm_layers_proves_the_answer_on_the_course_checkpoints_stacks(capsys):
    from onehot2gpt.checkpoints import load

    trained = load("bilm-wikitext2").model
    seen = []

    def spy(x, fwd_lstms, bwd_lstms, lengths):
        seen.append(all(torch.equal(a.weight_hh_l0, b.weight_hh_l0) for a, b in zip(fwd_lstms, trained.fwd_layers)))
        return library_bilm_layers(x, fwd_lstms, bwd_lstms, lengths)

    check_bilm_layers(spy)
    assert "✓ bilm_layers" in capsys.readouterr().out
    assert any(seen) and not all(seen)  # the trained stacks, and random ones
