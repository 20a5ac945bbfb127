"""Transformer blocks against torch.nn reference layers, and the models' contracts."""

import math

import pytest
import torch
from onehot2gpt.attention import causal_mask, padding_mask
from onehot2gpt.transformer import (
    TORCH_DECODER_LAYER_KEYS,
    TORCH_ENCODER_LAYER_KEYS,
    DecoderBlock,
    EncoderBlock,
    LearnedPositions,
    Seq2SeqTransformer,
    SinusoidalPositions,
    TransformerConfig,
    load_torch_layer,
    sinusoidal_positions,
)
from torch import nn


def test_sinusoidal_table_follows_the_formula():
    pe = sinusoidal_positions(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_offsets_are_linear_maps():
    # PE[pos + k] is the same rotation of PE[pos] for every pos: the reason the paper chose it.
    d, k = 8, 3
    pe = sinusoidal_positions(40, d)
    rot = torch.zeros(d, d)
    for i in range(d // 2):
        a = k / 10000 ** (2 * i / d)
        # [sin(x + a), cos(x + a)] = [sin x, cos x] @ [[cos a, -sin a], [sin a, cos a]]
        rot[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
        )
    torch.testing.assert_close(pe[:37] @ rot, pe[3:40], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("cls", [SinusoidalPositions, LearnedPositions])
def test_positions_reject_sequences_longer_than_max_len(cls):
    pos = cls(8, max_len=5)
    assert pos(torch.zeros(2, 5, 8)).shape == (2, 5, 8)
    with pytest.raises(ValueError, match="max_len=5"):
        pos(torch.zeros(1, 6, 8))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_torch_encoder_layer(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = load_torch_layer(EncoderBlock(16, 4, 32, norm_first=norm_first), theirs).eval()
    x = torch.randn(3, 7, 16)
    ids = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    out, w = ours(x, padding_mask(ids), need_weights=True)
    ref = theirs(x, src_key_padding_mask=ids == 0)
    keep = ids != 0  # torch's fast path may zero padded positions; compare the real ones
    torch.testing.assert_close(out[keep], ref[keep], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 7))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch_decoder_layer(norm_first):
    torch.manual_seed(1)
    theirs = nn.TransformerDecoderLayer(16, 2, 24, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = load_torch_layer(DecoderBlock(16, 2, 24, norm_first=norm_first), theirs).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 8, 16)
    out, w_self, w_cross = ours(x, memory, causal_mask(5), need_weights=True)
    ref = theirs(x, memory, tgt_mask=~causal_mask(5))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    assert w_self.shape == (2, 2, 5, 5) and w_cross.shape == (2, 2, 5, 8)
    assert (w_self.triu(1) == 0).all()


def test_key_maps_cover_both_sides():
    enc, dec = EncoderBlock(8, 2, 16), DecoderBlock(8, 2, 16)
    assert set(TORCH_ENCODER_LAYER_KEYS) == set(enc.state_dict())
    assert set(TORCH_ENCODER_LAYER_KEYS.values()) == set(nn.TransformerEncoderLayer(8, 2, 16).state_dict())
    assert set(TORCH_DECODER_LAYER_KEYS) == set(dec.state_dict())
    assert set(TORCH_DECODER_LAYER_KEYS.values()) == set(nn.TransformerDecoderLayer(8, 2, 16).state_dict())
    with pytest.raises(ValueError, match="lacks"):
        load_torch_layer(dec, nn.TransformerEncoderLayer(8, 2, 16))


@pytest.fixture
def encoder_model():
    """The encoder half of a Seq2SeqTransformer: ids (B, T) → (hidden (B, T, D), maps or None)."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=20, dropout=0.0)).eval()

    def encode(ids, output_attentions=False):
        memory, _, maps = model.encode(ids, output_attentions)
        return memory, maps

    encode.model = model
    return encode


def test_encoder_model_returns_one_map_per_layer_hf_style(encoder_model):
    ids = torch.tensor([[4, 5, 6, 7], [4, 5, 0, 0]])
    hidden, maps = encoder_model(ids, output_attentions=True)
    assert hidden.shape == (2, 4, 32)
    assert isinstance(maps, tuple) and len(maps) == 2
    assert all(m.shape == (2, 2, 4, 4) for m in maps)
    assert all((m[1, :, :, 2:] == 0).all() for m in maps)  # padding keys get no attention
    hidden2, none = encoder_model(ids)
    assert none is None
    torch.testing.assert_close(hidden, hidden2)


def test_padding_does_not_change_real_positions(encoder_model):
    short = torch.tensor([[4, 5, 6]])
    padded = torch.tensor([[4, 5, 6, 0, 0]])
    a, _ = encoder_model(short)
    b, _ = encoder_model(padded)
    torch.testing.assert_close(a, b[:, :3], atol=1e-5, rtol=1e-4)


def test_encoder_model_rejects_bad_ids(encoder_model):
    with pytest.raises(ValueError, match="outside"):
        encoder_model(torch.tensor([[4, 25]]))
    with pytest.raises(ValueError, match="empty"):
        encoder_model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len=32"):
        encoder_model(torch.full((1, 40), 4))
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(d_model=30, n_heads=4)


@pytest.fixture
def seq2seq():
    torch.manual_seed(0)
    return Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=15, tgt_vocab_size=11, dropout=0.0)).eval()


def test_seq2seq_decoder_is_causal(seq2seq):
    src = torch.tensor([[5, 6, 7, 8]])
    tgt = torch.tensor([[2, 4, 5, 6, 7]])
    changed = tgt.clone()
    changed[0, 3] = 9
    a, _ = seq2seq(src, tgt)
    b, _ = seq2seq(src, changed)
    assert a.shape == (1, 5, 11)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_seq2seq_maps_and_initial_loss(seq2seq):
    src = torch.randint(4, 15, (3, 6))
    tgt = torch.randint(4, 11, (3, 5))
    logits, maps = seq2seq(src, tgt, output_attentions=True)
    assert [len(maps[k]) for k in ("encoder", "decoder", "cross")] == [2, 2, 2]
    assert maps["cross"][0].shape == (3, 2, 5, 6)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 11), tgt.reshape(-1))
    assert abs(loss.item() - math.log(11)) < 1.0  # near-uniform predictions at initialisation


def test_seq2seq_overfits_one_batch_and_decodes_it(seq2seq):
    torch.manual_seed(3)
    src = torch.randint(4, 15, (4, 5))
    body = torch.randint(4, 11, (4, 4))
    tgt = torch.cat([torch.full((4, 1), 2), body, torch.full((4, 1), 3)], 1)  # <bos> … <eos>
    seq2seq.train()
    opt = torch.optim.Adam(seq2seq.parameters(), lr=3e-3)
    for _ in range(150):
        logits, _ = seq2seq(src, tgt[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 11), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    out = seq2seq.greedy_decode(src, bos_id=2, eos_id=3, max_new=8)
    assert torch.equal(out[:, :5], tgt[:, 1:])
    assert seq2seq.training and not out.requires_grad  # decoded in eval mode, then given back as it was


def test_attention_source_serves_the_encoder_maps(encoder_model, seq2seq):
    from onehot2gpt.transformer import attention_source
    from onehot2gpt.vocab import Vocab

    vocab = Vocab(list("abcdefghijklmnop"))
    source = attention_source(encoder_model.model, vocab, list)
    tokens, maps = source("abc")
    assert tokens == ["a", "b", "c"] and len(maps) == 2 and maps[0].shape == (1, 2, 3, 3)
    _, expected = encoder_model(torch.tensor([vocab.encode_tokens(tokens)]), output_attentions=True)
    torch.testing.assert_close(maps[0], expected[0])
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        source("az")
    with pytest.raises(TypeError, match="model must be a Seq2SeqTransformer.*got Linear"):
        attention_source(nn.Linear(2, 2), vocab, list)
    with pytest.raises(ValueError, match="empty"):
        source("")
    small = Vocab(list("abcdefghijk"))  # ids 4..14 fit the seq2seq source vocabulary of 15
    _, maps = attention_source(seq2seq, small, list)("abcd")
    assert len(maps) == 2 and maps[1].shape == (1, 2, 4, 4)
