import json
import math

import pytest
import torch
from onehot2gpt.checkpoints import load
from onehot2gpt.data import ASSETS
from onehot2gpt.elmo import BiLM, BiLMConfig, ElmoFeatures, ScalarMix, reverse_padded, save_bilm, split_sentences
from onehot2gpt.vocab import BOS, EOS, UNK, Vocab

CHECKPOINT = ASSETS / "checkpoints" / "bilm-wikitext2"
V = 50


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def bilm():
    torch.manual_seed(0)
    return BiLM(BiLMConfig.tiny(V)).eval()


@pytest.fixture
def batch():
    """Three rows of lengths 7, 5 and 2, right-padded with 0."""
    torch.manual_seed(1)
    ids = torch.randint(4, V, (3, 7))
    mask = torch.arange(7) < torch.tensor([[7], [5], [2]])
    return ids * mask, mask


@pytest.fixture
def vocab():
    words = "the bank of the river was steep she paid money into the bank account".split()
    return Vocab.build([words])


def halves(layers, j):
    """Forward and backward halves of layer j of (B, T, L+1, 2H)."""
    H = layers.shape[-1] // 2
    return layers[:, :, j, :H], layers[:, :, j, H:]


# ----------------------------------------------------------------------------- shapes, layout


def test_forward_shapes(bilm, batch):
    out = bilm(*batch)
    c = bilm.config
    assert out["fwd_logits"].shape == out["bwd_logits"].shape == (3, 7, V)
    assert out["layers"].shape == (3, 7, c.n_layers + 1, 2 * c.hidden) == (3, 7, 3, c.output_dim)
    torch.testing.assert_close(bilm.representations(*batch), out["layers"])
    assert (out["layers"][~batch[1]] == 0).all()  # padded positions are zero


def test_layer_zero_is_the_context_free_token_layer(bilm):
    ids = torch.tensor([[5, 9, 7, 11], [8, 9, 12, 6]])  # token 9 at position 1 in two contexts
    layers = bilm.representations(ids)
    x = bilm.tok_proj(bilm.tok_emb(ids))
    torch.testing.assert_close(layers[:, :, 0], torch.cat([x, x], -1))
    torch.testing.assert_close(layers[0, 1, 0], layers[1, 1, 0])
    for j in (1, 2):  # contextual layers differ
        assert not torch.allclose(layers[0, 1, j], layers[1, 1, j])


def test_forward_and_backward_stacks_are_independent(bilm, batch):
    before = bilm.representations(*batch)
    assert not set(map(id, bilm.fwd_layers.parameters())) & set(map(id, bilm.bwd_layers.parameters()))
    with torch.no_grad():
        for p in bilm.bwd_layers.parameters():
            p.add_(torch.randn_like(p))
    after = bilm.representations(*batch)
    for j in (1, 2):
        torch.testing.assert_close(halves(after, j)[0], halves(before, j)[0])
        assert not torch.allclose(halves(after, j)[1], halves(before, j)[1])


# ----------------------------------------------------------------------------- causality, padding


def test_forward_lm_ignores_the_future_and_backward_lm_ignores_the_past(bilm):
    torch.manual_seed(2)
    ids = torch.randint(4, V, (2, 9))
    t = 4
    future = ids.clone()
    future[:, t + 1 :] = (future[:, t + 1 :] + 1 - 4) % (V - 4) + 4
    past = ids.clone()
    past[:, :t] = (past[:, :t] + 1 - 4) % (V - 4) + 4
    base, fut, pst = (bilm(x) for x in (ids, future, past))
    for j in (1, 2):
        f0, b0 = halves(base["layers"], j)
        f1, b1 = halves(fut["layers"], j)
        f2, b2 = halves(pst["layers"], j)
        torch.testing.assert_close(f1[:, : t + 1], f0[:, : t + 1])  # forward: up to t unchanged
        assert not torch.allclose(f1[:, t + 1 :], f0[:, t + 1 :])
        torch.testing.assert_close(b2[:, t:], b0[:, t:])  # backward: from t on unchanged
        assert not torch.allclose(b2[:, :t], b0[:, :t])
    torch.testing.assert_close(fut["fwd_logits"][:, : t + 1], base["fwd_logits"][:, : t + 1])
    torch.testing.assert_close(pst["bwd_logits"][:, t:], base["bwd_logits"][:, t:])


def test_padding_never_leaks_into_real_tokens(bilm, batch):
    ids, mask = batch
    padded = bilm.representations(ids, mask)
    other_pad = ids.masked_fill(~mask, 17)  # different junk in the padding
    torch.testing.assert_close(bilm.representations(other_pad, mask), padded)
    for b, n in enumerate(mask.sum(1).tolist()):  # each row alone, without padding
        alone = bilm.representations(ids[b : b + 1, :n])
        torch.testing.assert_close(padded[b : b + 1, :n], alone)


def test_backward_lm_starts_at_the_last_real_token(bilm, batch):
    ids, mask = batch
    layers = bilm.representations(ids, mask)
    b, n = 1, 5  # row 1 has 5 real tokens
    last_alone = bilm.representations(ids[b : b + 1, n - 1 : n])
    torch.testing.assert_close(halves(layers, 1)[1][b, n - 1], halves(last_alone, 1)[1][0, 0])


def test_reverse_padded_reverses_real_tokens_only():
    x = torch.arange(12).view(2, 6)
    lengths = torch.tensor([4, 6])
    r = reverse_padded(x, lengths)
    assert r.tolist() == [[3, 2, 1, 0, 4, 5], [11, 10, 9, 8, 7, 6]]
    torch.testing.assert_close(reverse_padded(r, lengths), x)
    y = torch.randn(2, 6, 3)
    torch.testing.assert_close(reverse_padded(y, lengths)[0, 0], y[0, 3])


# ----------------------------------------------------------------------------- loss


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_loss_at_init_is_about_ln_vocab_size(softmax, batch):
    torch.manual_seed(0)
    config = BiLMConfig(vocab_size=V, d_model=16, hidden=24, dropout=0.0, max_len=64, softmax=softmax, cutoffs=(10, 30))
    model = BiLM(config)
    assert abs(model.lm_loss(*batch).item() - math.log(V)) < 0.1
    probs = model(*batch)["fwd_logits"].exp().sum(-1)
    torch.testing.assert_close(probs, torch.ones_like(probs))


def test_lm_loss_is_the_mean_of_both_directions_nll(bilm, batch):
    ids, mask = batch
    out = bilm(ids, mask)
    fwd = -out["fwd_logits"][:, :-1].gather(-1, ids[:, 1:, None])[..., 0][mask[:, 1:]]
    bwd = -out["bwd_logits"][:, 1:].gather(-1, ids[:, :-1, None])[..., 0][mask[:, 1:]]
    expected = (fwd.mean() + bwd.mean()) / 2
    torch.testing.assert_close(bilm.lm_loss(ids, mask), expected)
    assert bilm.nll(ids, mask)[2] == int(mask.sum()) - len(ids)  # n−1 targets per row


def test_bilm_overfits_one_small_batch(batch):
    torch.manual_seed(0)
    model = BiLM(BiLMConfig.tiny(V)).train()
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    for _ in range(80):
        loss = model.lm_loss(*batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


# ----------------------------------------------------------------------------- scalar mix


def test_scalar_mix_weights_sum_to_one_and_equal_s_is_the_average():
    torch.manual_seed(0)
    layers = torch.randn(2, 5, 3, 8)
    mix = ScalarMix(3)
    assert mix.weights().sum().item() == pytest.approx(1.0)
    torch.testing.assert_close(mix(layers), layers.mean(-2))
    with torch.no_grad():
        mix.s.copy_(torch.tensor([0.3, -1.0, 2.0]))
    w = mix.weights()
    assert w.sum().item() == pytest.approx(1.0) and w.argmax() == 2
    torch.testing.assert_close(mix(layers), (layers * w[:, None]).sum(-2))


def test_scalar_mix_gamma_scales_and_can_be_fixed():
    layers = torch.randn(4, 3, 6)
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.gamma.fill_(2.5)
    torch.testing.assert_close(mix(layers), 2.5 * layers.mean(-2))
    fixed = ScalarMix(3, gamma=False)
    assert [n for n, _ in fixed.named_parameters()] == ["s"]


def _fit_mix(l2_lambda: float, steps: int = 60) -> torch.Tensor:
    """Train a mix on a target that only layer 2 explains; return its weights."""
    torch.manual_seed(0)
    layers = torch.randn(64, 3, 4)
    target = layers[:, 2]
    mix = ScalarMix(3, l2_lambda=l2_lambda)
    opt = torch.optim.Adam(mix.parameters(), lr=0.1)
    for _ in range(steps):
        loss = ((mix(layers) - target) ** 2).mean() + mix.penalty()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return mix.weights()


def test_l2_penalty_pulls_the_weights_towards_the_plain_average():
    free, held = _fit_mix(0.0), _fit_mix(100.0)
    assert free[2] > 0.6  # λ = 0: the useful layer wins
    torch.testing.assert_close(held, torch.full((3,), 1 / 3), atol=0.03, rtol=0)
    assert ScalarMix(3, l2_lambda=1.0).penalty().item() == 0.0  # s = 0 is not penalised


def test_scalar_mix_layer_norm_and_bad_shapes():
    torch.manual_seed(0)
    layers = 5 + 3 * torch.randn(2, 6, 3, 8)
    mask = torch.ones(2, 6, dtype=torch.bool)
    out = ScalarMix(3, layer_norm=True)(layers, mask)
    assert abs(out.mean().item()) < 0.1
    with pytest.raises(ValueError, match="layers"):
        ScalarMix(4)(layers)
    with pytest.raises(ValueError):
        ScalarMix(3, l2_lambda=-1.0)


# ----------------------------------------------------------------------------- features


@pytest.fixture
def features(vocab):
    torch.manual_seed(0)
    return ElmoFeatures(BiLM(BiLMConfig.tiny(len(vocab))), vocab)


def test_elmo_features_batch_by_length_and_return_the_sentences_in_their_order(features):
    # more sentences than one batch, lengths mixed: each row equals that sentence encoded alone
    words = ["the", "bank", "of", "river", "she", "paid", "money"]
    g = torch.Generator().manual_seed(3)
    sentences = [
        [words[int(k)] for k in torch.randint(len(words), (int(n),), generator=g)]
        for n in torch.randint(1, 9, (11,), generator=g)
    ]
    features.batch_size = 4
    layers, mask = features.encode(sentences)
    assert layers.shape[:2] == mask.shape == (11, max(len(s) for s in sentences))
    for b, sentence in enumerate(sentences):
        alone, alone_mask = features.encode([sentence])
        n = len(sentence)
        assert mask[b].sum() == n and bool(alone_mask.all())
        torch.testing.assert_close(layers[b, :n], alone[0], atol=1e-6, rtol=1e-5)
        assert not layers[b, n:].any(), "padding positions stay zero"


def test_elmo_features_pad_strip_boundaries_and_map_unknown_words(features, vocab):
    sentences = [["The", "bank", "of", "the", "river"], ["she", "paid"], ["zebra", "giraffe"]]
    layers, mask = features.encode(sentences)
    config = features.bilm.config
    assert layers.shape == (3, 5, config.n_layers + 1, config.output_dim) and features.n_layers == 3
    assert mask.tolist()[1] == [True, True, False, False, False]
    assert not layers.requires_grad and (layers[~mask] == 0).all()
    # Same as running the biLM on <bos> … <eos> and dropping the two boundary positions.
    ids = torch.tensor([[vocab[BOS]] + vocab.encode_tokens(["she", "paid"]) + [vocab[EOS]]])
    torch.testing.assert_close(layers[1, :2], features.bilm.representations(ids)[0, 1:3])
    # Lower-cased lookup; unknown words are <unk>.
    alone, _ = features.encode([["the", "bank", "of", "the", "river"]])
    torch.testing.assert_close(layers[0], alone[0])
    unk, _ = features.encode([[UNK, UNK]])
    torch.testing.assert_close(layers[2, :2], unk[0])


def test_elmo_features_errors(features, vocab):
    with pytest.raises(TypeError):
        features.encode("the bank")
    with pytest.raises(TypeError):
        features.encode(["the bank", "a river"])
    with pytest.raises(ValueError):
        features.encode([])
    with pytest.raises(ValueError, match="empty"):
        features.encode([["bank"], []])
    too_long = ["bank"] * (features.bilm.config.max_len - 1)
    with pytest.raises(ValueError, match="max_len"):
        features.encode([too_long])
    with pytest.raises(ValueError, match="vocabulary"):
        ElmoFeatures(BiLM(BiLMConfig.tiny(len(vocab) + 1)), vocab)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda m, ids, mask: m(ids.float(), mask), TypeError),
        (lambda m, ids, mask: m(ids[0], mask[0]), ValueError),
        (lambda m, ids, mask: m(ids, mask[:, :3]), ValueError),
        (lambda m, ids, mask: m(ids, ~mask), ValueError),  # left padding
        (lambda m, ids, mask: m(ids + V, mask), IndexError),
        (lambda m, ids, mask: m(ids.float().tolist(), mask), TypeError),  # float ids: never truncated
        (lambda m, ids, mask: m.lm_loss(ids[:, :1]), ValueError),  # nothing to predict
        (lambda m, ids, mask: BiLMConfig(vocab_size=10, softmax="sampled"), ValueError),
        (lambda m, ids, mask: BiLMConfig(vocab_size=10, softmax="adaptive", cutoffs=(5, 12)), ValueError),
        (lambda m, ids, mask: BiLMConfig(hidden=0), ValueError),
    ],
)
def test_bilm_bad_input_raises(bilm, batch, call, error):
    with pytest.raises(error):
        call(bilm, *batch)


# ----------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_save_load_round_trip(tmp_path, vocab, softmax):
    torch.manual_seed(0)
    config = BiLMConfig(
        vocab_size=len(vocab), d_model=8, hidden=12, dropout=0.0, max_len=32, softmax=softmax, cutoffs=(6,)
    )
    model = BiLM(config).eval()
    save_bilm(model, vocab, tmp_path / "ck", half=False, info={"note": "test"})
    loaded, loaded_vocab, loaded_config, info = load(tmp_path / "ck")
    assert loaded.config == config == loaded_config and loaded_vocab.itos == vocab.itos
    assert info == {"note": "test"}
    ids = torch.tensor([vocab.encode_tokens(["the", "bank", "river"])])
    for key, value in model(ids).items():
        torch.testing.assert_close(loaded(ids)[key], value)
    save_bilm(model, vocab, tmp_path / "half")  # float16 by default
    half = load(tmp_path / "half").model
    torch.testing.assert_close(half.representations(ids), model.representations(ids), atol=2e-3, rtol=2e-3)


def test_mismatched_checkpoint_raises(tmp_path, vocab):
    model = BiLM(BiLMConfig.tiny(len(vocab)))
    save_bilm(model, vocab, tmp_path)
    config_path = tmp_path / "config.json"
    data = json.loads(config_path.read_text())
    data["config"]["hidden"] += 1
    config_path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="do not fit"):
        load(tmp_path)
    data["config"]["hidden"] -= 1
    data["config"]["n_layers"] = 3
    config_path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="missing"):
        load(tmp_path)
    data["config"]["n_layers"] = 2
    data["config"]["vocab_size"] += 1
    config_path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="tokens"):
        load(tmp_path)
    (tmp_path / "weights.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="weights.safetensors"):
        load(tmp_path)
    with pytest.raises(ValueError):
        save_bilm(BiLM(BiLMConfig.tiny(len(vocab) + 1)), vocab, tmp_path / "bad")


def test_split_sentences():
    assert split_sentences("a b . c d . e".split()) == [["a", "b", "."], ["c", "d", "."], ["e"]]
    assert split_sentences([]) == []


# ----------------------------------------------------------------------------- the course checkpoint


def test_committed_checkpoint_loads_and_matches_its_config():
    bilm, vocab, _, info = load("bilm-wikitext2")  # raises if weights and config disagree
    stored = json.loads((CHECKPOINT / "config.json").read_text())
    assert BiLMConfig(**stored["config"]) == bilm.config
    assert len(vocab) == bilm.config.vocab_size
    assert (CHECKPOINT / "weights.safetensors").stat().st_size < 11e6
    for direction in ("fwd", "bwd"):  # it beats the count-based baseline
        assert info[f"valid_ppl_{direction}"] < info["ngram"][f"valid_ppl_{direction}"]
    layers, mask = ElmoFeatures(bilm, vocab).encode([["the", "river", "bank"], ["money"]])
    assert layers.shape == (2, 3, bilm.config.n_layers + 1, bilm.config.output_dim)
    assert torch.isfinite(layers).all()
