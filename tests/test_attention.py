"""Attention against PyTorch's own implementations, and the properties every attention has."""

import math

import pytest
import torch
import torch.nn.functional as F
from onehot2gpt.attention import (
    TORCH_MHA_KEYS,
    MultiHeadAttention,
    causal_mask,
    load_torch_mha,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from torch import nn


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, 3, 5, 8, generator=g),
        torch.randn(2, 3, 7, 8, generator=g),
        torch.randn(2, 3, 7, 4, generator=g),
    )


def test_matches_torch_sdpa_without_and_with_masks(qkv):
    q, k, v = qkv
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    mask = torch.rand(2, 1, 5, 7, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[..., 0] = True  # every query keeps at least one key
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_weights_are_a_softmax_of_scaled_scores(qkv):
    q, k, v = qkv
    _, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))
    expected = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), -1)
    torch.testing.assert_close(w, expected)


def test_one_query_is_a_weighted_sum_of_values():
    # The seeds' sum: A(q, K, V) = Σ_i softmax(q·k_i/√d) v_i, computed one key at a time.
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(4, generator=g), torch.randn(6, 4, generator=g), torch.randn(6, 3, generator=g)
    scores = torch.stack([q @ k[i] / 2.0 for i in range(6)])
    expected = sum(torch.softmax(scores, 0)[i] * v[i] for i in range(6))
    out, _ = scaled_dot_product_attention(q[None], k, v)
    torch.testing.assert_close(out[0], expected)


def test_masked_keys_get_zero_weight_and_fully_masked_rows_no_nans(qkv):
    q, k, v = qkv
    ids = torch.tensor([[5, 6, 7, 0, 0, 0, 0], [5, 6, 7, 8, 9, 10, 0]])
    _, w = scaled_dot_product_attention(q, k, v, padding_mask(ids))
    assert (w[0, :, :, 3:] == 0).all() and (w[1, :, :, 6] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))
    none = torch.zeros(5, 7, dtype=torch.bool)
    out, w = scaled_dot_product_attention(q, k, v, none)
    assert not out.isnan().any() and (w == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masking_equals_filling_the_scores_with_minus_infinity_outputs_and_gradients(qkv, dtype):
    """Every output and every gradient must be bit-for-bit what filling the masked scores with −∞
    gives, in float32 and in bfloat16,
    with a padding mask and with a mask that leaves one query no key at all (zero gradients, no NaNs)."""

    def filled(q, k, v, mask):  # the textbook form, written out here as the reference
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~mask, float("-inf"))
        w = torch.softmax(scores, -1).nan_to_num(0.0)
        return w @ v, w

    ids = torch.tensor([[5, 6, 7, 0, 0, 0, 0], [5, 6, 7, 8, 9, 10, 0]])
    empty_row = torch.ones(5, 7, dtype=torch.bool)
    empty_row[2] = False
    for mask in (padding_mask(ids), empty_row):
        results = []
        for attend in (scaled_dot_product_attention, filled):
            leaves = [t.to(dtype).clone().requires_grad_() for t in qkv]
            out, w = attend(*leaves, mask)
            (out.float().square().sum() + (w.float() * 3).sum()).backward()
            results.append([out, w] + [t.grad for t in leaves])
        for ours, reference in zip(*results):
            assert not ours.isnan().any()
            assert torch.equal(ours, reference)


def test_masks_must_be_boolean(qkv):
    q, k, v = qkv
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 7))


def test_causal_mask_shape_and_offset():
    m = causal_mask(4)
    assert m.tolist() == [[j <= i for j in range(4)] for i in range(4)]
    assert causal_mask(2, 5).tolist() == [[True] * 4 + [False], [True] * 5]
    with pytest.raises(ValueError, match="T_q"):
        causal_mask(5, 3)


def test_split_and_merge_heads_are_inverses():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    h = split_heads(x, 4)
    assert h.shape == (2, 4, 3, 2)
    assert torch.equal(h[0, 1, 0], x[0, 0, 2:4])  # head 1 holds features 2–3
    assert torch.equal(merge_heads(h), x)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x, 3)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multi_head_self_attention_matches_torch(need_weights):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True)
    ours = load_torch_mha(MultiHeadAttention(16, 4), theirs)
    x = torch.randn(3, 6, 16)
    ids = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4])
    keep = padding_mask(ids)
    out, w = ours(x, mask=keep, need_weights=need_weights)
    ref, ref_w = theirs(x, x, x, key_padding_mask=ids == 0, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    if need_weights:
        torch.testing.assert_close(w, ref_w)
    else:
        assert w is None


def test_multi_head_cross_attention_and_causal_match_torch():
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(12, 3, batch_first=True)
    ours = load_torch_mha(MultiHeadAttention(12, 3), theirs)
    x, memory = torch.randn(2, 4, 12), torch.randn(2, 9, 12)
    out, w = ours(x, memory, memory, need_weights=True)
    ref, ref_w = theirs(x, memory, memory, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w, ref_w)
    y = torch.randn(2, 5, 12)
    out, _ = ours(y, y.clone(), y.clone(), mask=causal_mask(5))  # separate K and V tensors
    ref, _ = theirs(y, y, y, attn_mask=~causal_mask(5))
    torch.testing.assert_close(out, ref)


def test_multi_head_attention_is_causal_under_the_causal_mask():
    torch.manual_seed(2)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 6, 8)
    changed = x.clone()
    changed[0, 4] += 1.0
    a, _ = mha(x, mask=causal_mask(6))
    b, _ = mha(changed, mask=causal_mask(6))
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_key_map_covers_every_parameter():
    assert set(TORCH_MHA_KEYS) == set(MultiHeadAttention(8, 2).state_dict())
    assert set(TORCH_MHA_KEYS.values()) == set(nn.MultiheadAttention(8, 2).state_dict())


def test_bad_shapes_say_what_is_expected():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
        MultiHeadAttention(8, 2)(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="shape mismatch"):
        load_torch_mha(MultiHeadAttention(8, 2), nn.MultiheadAttention(8, 4))


def test_permutation_mask_orders_the_context():
    import itertools

    from onehot2gpt.attention import causal_mask, permutation_mask

    assert torch.equal(permutation_mask([0, 1, 2, 3], include_self=True), causal_mask(4))
    assert torch.equal(permutation_mask([3, 2, 1, 0], include_self=True), causal_mask(4).T)
    for order in itertools.permutations(range(4)):
        mask = permutation_mask(list(order))
        assert not mask.diagonal().any()
        for k, i in enumerate(order):  # the k-th predicted reads exactly the k before it
            assert set(mask[i].nonzero().flatten().tolist()) == set(order[:k])
    for bad in ([0, 0, 1], [1, 2], []):
        with pytest.raises(ValueError, match="permutation"):
            permutation_mask(bad)
