"""The chunked masked-LM loss timed in bench/bert_step_variants.py computes what the plain one does:
a faster step that trained a different loss would have made its timing meaningless."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bert_step_variants as variants  # noqa: E402
from onehot2gpt.bert import BertConfig, BertForPreTraining  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig.tiny(vocab_size=500, max_len=32, dropout=0.0))


def losses_and_grads(model, bf16, chunk):
    torch.manual_seed(1)
    hidden = torch.randn(77, 128, requires_grad=True)      # 77 rows: the last chunk is a short one
    targets = torch.randint(500, (77,))
    params = [hidden, *model.mlm.parameters()]              # the decoder's weight is the embedding
    out = []
    for fused in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = (variants.chunked_mlm_loss(model, hidden, targets, chunk=chunk) if fused
                    else F.cross_entropy(model.mlm(hidden), targets))
        out.append((loss, torch.autograd.grad(loss, params)))
    return out


@pytest.mark.parametrize("chunk", [16, 128])
def test_float32_loss_and_every_gradient_equal_the_plain_loss(model, chunk):
    (plain, plain_grads), (fused, fused_grads) = losses_and_grads(model, bf16=False, chunk=chunk)
    torch.testing.assert_close(fused, plain)
    assert len(plain_grads) == 7
    for a, b in zip(fused_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_bfloat16_autocast_matches_within_bfloat16_rounding(model):
    (plain, plain_grads), (fused, fused_grads) = losses_and_grads(model, bf16=True, chunk=32)
    torch.testing.assert_close(fused, plain, rtol=1e-3, atol=1e-3)
    for a, b in zip(fused_grads, plain_grads):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=0.02, atol=0.02 * float(b.abs().max()))


def test_bad_shapes_and_chunk_are_refused(model):
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        variants.chunked_mlm_loss(model, torch.randn(2, 3, 128), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk"):
        variants.chunked_mlm_loss(model, torch.randn(4, 128), torch.zeros(4, dtype=torch.long), chunk=0)
