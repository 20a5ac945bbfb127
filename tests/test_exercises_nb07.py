"""The new check of notebook 07: the masked-LM loss on the chosen positions (tied output layer)."""

import onehot2gpt_exercises as ex
import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_rejects


def _mlm_loss_by_hand(hidden, labels, dense, norm, embedding, bias):
    # Independent of the library: every position through the head, then ignore_index picks the chosen.
    h = dense(hidden)
    h = 0.5 * h * (1 + torch.erf(h / 2**0.5))  # GELU, written out
    mean, var = h.mean(-1, keepdim=True), h.var(-1, unbiased=False, keepdim=True)
    h = (h - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    logits = torch.einsum("btd,vd->btv", h, embedding) + bias
    per_token = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="none")
    n = (labels != -100).sum()
    return per_token.sum() / n


def test_check_mlm_loss_passes_an_independent_solution(capsys):
    ex.check_mlm_loss(_mlm_loss_by_hand)
    assert "✓ mlm_loss" in capsys.readouterr().out


def _transform(dense, norm, h, act=F.gelu):
    return norm(act(dense(h)))


@pytest.mark.parametrize(
    "wrong, looks_like",
    [
        (lambda h, y, d, n, E, b: F.cross_entropy(_transform(d, n, h[y != -100]) @ E.T, y[y != -100]), "bias"),
        (
            lambda h, y, d, n, E, b: F.cross_entropy(_transform(d, n, h[y != -100], F.relu) @ E.T + b, y[y != -100]),
            None,
        ),
        (lambda h, y, d, n, E, b: F.cross_entropy(F.gelu(d(h[y != -100])) @ E.T + b, y[y != -100]), "LayerNorm"),
        (lambda h, y, d, n, E, b: F.cross_entropy(h[y != -100] @ E.T + b, y[y != -100]), "transform"),
        (
            lambda h, y, d, n, E, b: F.cross_entropy(
                _transform(d, n, h[y != -100]) @ E.T + b, y[y != -100], reduction="sum"
            ),
            "sum",
        ),
        (
            lambda h, y, d, n, E, b: F.cross_entropy(_transform(d, n, h[y != -100]) @ E.T + b, y[y != -100]).item(),
            "0-dimensional",
        ),
    ],
)
def test_check_mlm_loss_rejects_wrong_answers(wrong, looks_like):
    assert_rejects(ex.check_mlm_loss, wrong, match=looks_like)


def test_check_apply_masking_names_the_missing_random_and_unchanged():
    def all_masked(ids, chosen, action, random_ids, mask_id):
        return torch.where(chosen, torch.full_like(ids, mask_id), ids), torch.where(
            chosen, ids, torch.full_like(ids, -100)
        )

    assert_rejects(ex.check_apply_masking, all_masked, match="10% random")
