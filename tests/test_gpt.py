"""GPT against a random tiny Hugging Face GPT-2 (nothing downloaded), and its own contracts."""

import copy
import json
import math

import pytest
import torch
from onehot2gpt.checkpoints import load
from onehot2gpt.gpt import (
    GPT,
    HF_GPT2_KEYS,
    HF_GPT2_TRANSPOSED,
    GPTConfig,
    gpt_config_from_hf,
    hf_gpt2_key_map,
    lm_loss,
    load_hf_gpt2,
    save_gpt,
)
from onehot2gpt.sampling import generate

pytestmark = pytest.mark.usefixtures("one_thread")

transformers = pytest.importorskip("transformers")

V, MAX_LEN = 50, 16


def random_ids(B, T, vocab=V, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (B, T), generator=g)


def hf_config(**overrides):
    return transformers.GPT2Config(
        **{
            **dict(
                vocab_size=V,
                n_embd=32,
                n_layer=2,
                n_head=4,
                n_positions=MAX_LEN,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                bos_token_id=None,
                eos_token_id=None,
                pad_token_id=None,
                attn_implementation="eager",
            ),
            **overrides,
        }
    )


@pytest.fixture(scope="module")
def hf_tiny():
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(hf_config()).eval()
    # GPT-2's own initialisation (std 0.02) leaves attention almost uniform and logits almost
    # equal, where a wrong scale, mask or transposition would hide below the tolerance. Large
    # random weights make every head attend sharply and every layer matter.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


@pytest.fixture(scope="module")
def ours_tiny(hf_tiny):
    return load_hf_gpt2(hf_tiny)


# ------------------------------------------------------------------ parity with Hugging Face


def test_logits_and_attentions_match_hugging_face(hf_tiny, ours_tiny):
    ids = random_ids(3, MAX_LEN, seed=2)
    with torch.no_grad():
        theirs = hf_tiny(ids, output_attentions=True)
        mine = ours_tiny(ids, output_attentions=True)
        fused = ours_tiny(ids)
    assert mine.logits.shape == (3, MAX_LEN, V)
    torch.testing.assert_close(mine.logits, theirs.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused.logits, theirs.logits, atol=1e-5, rtol=0)
    assert len(mine.attentions) == len(theirs.attentions) == 2
    for layer, (a, b) in enumerate(zip(mine.attentions, theirs.attentions)):
        assert a.shape == (3, 4, MAX_LEN, MAX_LEN)
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=f"attention {layer}")
    assert fused.attentions is None and fused.past_key_values is None
    # The weights are large enough for the comparison to mean something: heads attend sharply
    # (uniform attention would give queries 4… a largest weight of at most 1/5).
    assert mine.attentions[0][..., 4:, :].max(-1).values.mean() > 0.3


def test_matches_hugging_face_exactly_in_float64(hf_tiny, ours_tiny):
    # In float64 the rounding differences vanish: only a real mistake could show here.
    hf64, ours64 = copy.deepcopy(hf_tiny).double(), copy.deepcopy(ours_tiny).double()
    ids = random_ids(2, MAX_LEN, seed=3)
    with torch.no_grad():
        theirs, mine = hf64(ids, output_attentions=True), ours64(ids, output_attentions=True)
    torch.testing.assert_close(mine.logits, theirs.logits, atol=1e-10, rtol=0)
    for a, b in zip(mine.attentions, theirs.attentions):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_greedy_continuation_matches_hugging_face(hf_tiny, ours_tiny):
    prompt = random_ids(2, 4, seed=4)
    with torch.no_grad():
        theirs = hf_tiny.generate(prompt, max_new_tokens=MAX_LEN - 4, do_sample=False)
    mine = generate(ours_tiny, prompt, MAX_LEN - 4, greedy=True)
    assert mine.shape == (2, MAX_LEN)
    assert torch.equal(mine, theirs)
    assert len(set(mine[0, 4:].tolist())) > 1  # not a single repeated token: a real test


def test_key_map_covers_every_parameter_on_both_sides(hf_tiny, ours_tiny):
    keys = hf_gpt2_key_map(2)
    assert set(keys) == set(dict(ours_tiny.named_parameters()))
    theirs = [t for t, _ in keys.values()]
    assert sorted(theirs) == sorted(dict(hf_tiny.named_parameters()))  # each HF tensor used once
    # Exactly Hugging Face's Conv1D weights are transposed.
    conv1d = transformers.pytorch_utils.Conv1D
    assert {t for t, transposed in keys.values() if transposed} == {
        f"{n}.weight" for n, m in hf_tiny.named_modules() if isinstance(m, conv1d)
    }
    assert HF_GPT2_TRANSPOSED <= set(HF_GPT2_KEYS)


def test_packed_projection_is_query_key_value_in_order(hf_tiny, ours_tiny):
    D = 32
    packed = ours_tiny.blocks[1].attn.in_proj.weight  # (3D, D)
    c_attn = hf_tiny.transformer.h[1].attn.c_attn.weight  # (D, 3D), Conv1D
    for part in range(3):
        assert torch.equal(packed[part * D : (part + 1) * D], c_attn[:, part * D : (part + 1) * D].T)


def test_config_from_hugging_face():
    c = GPTConfig.from_hf(hf_config(n_inner=40, layer_norm_epsilon=1e-6, resid_pdrop=0.2))
    assert (c.vocab_size, c.max_len, c.d_model, c.n_layers, c.n_heads, c.d_ff, c.eps, c.dropout) == (
        V,
        MAX_LEN,
        32,
        2,
        4,
        40,
        1e-6,
        0.2,
    )
    assert GPTConfig.from_hf(hf_config()).d_ff == 4 * 32  # n_inner=None means 4 · n_embd
    assert gpt_config_from_hf(hf_config()) == GPTConfig.from_hf(hf_config())  # one conversion, two names


@pytest.mark.parametrize(
    "option, named",
    [
        (dict(activation_function="relu"), "activation_function"),
        (dict(scale_attn_by_inverse_layer_idx=True), "inverse_layer"),
        (dict(reorder_and_upcast_attn=True), "reorder_and_upcast"),
        (dict(add_cross_attention=True), "cross"),
        (dict(scale_attn_weights=False), "scale_attn_weights"),
        (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    ],
)
def test_from_hf_rejects_variants_we_do_not_build(option, named):
    with pytest.raises(ValueError, match=named):
        GPTConfig.from_hf(hf_config(**option))


def test_an_untied_checkpoint_is_refused(hf_tiny):
    untied = copy.deepcopy(hf_tiny)
    untied.lm_head.weight = torch.nn.Parameter(untied.lm_head.weight.detach() + 1.0)
    with pytest.raises(ValueError, match="lm_head differs"):
        load_hf_gpt2(untied, GPTConfig.from_hf(hf_tiny.config))


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(d_ff=64), "ff.linear1.weight"),
        (dict(n_layers=1), "transformer.h.1."),
        (dict(vocab_size=60), "tok_emb.weight"),
        (dict(max_len=32), "pos_emb.weight"),
    ],
)
def test_mismatched_config_names_the_key(hf_tiny, change, named):
    config = GPTConfig(**{**GPTConfig.from_hf(hf_tiny.config).to_dict(), **change})
    with pytest.raises(ValueError, match="do not fit") as info:
        load_hf_gpt2(hf_tiny, config)
    assert named in str(info.value)


# ------------------------------------------------------------------ tied weights and checkpoints


def test_output_layer_is_the_token_embedding_after_load_and_round_trip(hf_tiny, ours_tiny, tmp_path):
    def tied(model):
        return model.lm_head.weight is model.tok_emb.weight

    assert tied(GPT(GPTConfig.tiny()))
    assert tied(ours_tiny) and not ours_tiny.training
    assert torch.equal(ours_tiny.lm_head.weight, hf_tiny.transformer.wte.weight)
    save_gpt(ours_tiny, tmp_path / "tiny", info={"note": "test"})
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "tiny" / "weights.safetensors"))
    assert "lm_head.weight" not in stored and "tok_emb.weight" in stored  # saved once
    back, _, config, info = load(tmp_path / "tiny")
    assert tied(back) and not back.training
    assert back.config == ours_tiny.config == config and info == {"note": "test"}
    ids = random_ids(2, 10)
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, ours_tiny(ids).logits, atol=0, rtol=0)


def test_load_rejects_gpt_weights_that_do_not_fit_the_config(tmp_path):
    save_gpt(GPT(GPTConfig.tiny()), tmp_path / "m")
    config_file = tmp_path / "m" / "config.json"
    data = json.loads(config_file.read_text())
    data["config"]["d_ff"] = 64
    config_file.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="ff.linear1.weight"):
        load(tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="save_gpt"):
        load(tmp_path / "nowhere", kind="gpt")


# ------------------------------------------------------------------ contracts of our own model


def test_changing_a_later_token_leaves_earlier_logits_unchanged():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny()).eval()
    ids = random_ids(2, 12, seed=5)
    t = 6
    other = ids.clone()
    other[:, t + 1] = (ids[:, t + 1] + 7) % V
    with torch.no_grad():
        a, b = model(ids, output_attentions=True), model(other, output_attentions=True)
    torch.testing.assert_close(a.logits[:, : t + 1], b.logits[:, : t + 1], atol=0, rtol=0)
    assert not torch.allclose(a.logits[:, t + 1 :], b.logits[:, t + 1 :])  # the change does matter later
    for w in a.attentions:
        assert torch.all(w.triu(diagonal=1) == 0)  # no weight on future keys
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 12))


def test_cached_forward_equals_the_uncached_one():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny()).eval()
    ids = random_ids(2, MAX_LEN, seed=6)
    with torch.no_grad():
        full = model(ids, output_attentions=True)
        logits, past, start = [], None, 0
        for end in (5, 6, 10, MAX_LEN):  # pieces of 5, 1, 4 and 6 tokens
            out = model(ids[:, start:end], output_attentions=True, past_key_values=past, use_cache=True)
            assert all(k.shape == v.shape == (2, 4, end, 8) for k, v in out.past_key_values)
            for w_piece, w_full in zip(out.attentions, full.attentions):
                assert w_piece.shape == (2, 4, end - start, end)
                torch.testing.assert_close(w_piece, w_full[:, :, start:end, :end], atol=1e-6, rtol=0)
            logits.append(out.logits)
            past, start = out.past_key_values, end
    torch.testing.assert_close(torch.cat(logits, dim=1), full.logits, atol=1e-5, rtol=0)


def test_loss_at_initialisation_is_that_of_uniform_guessing():
    torch.manual_seed(0)
    vocab = 1000
    model = GPT(GPTConfig.tiny(vocab_size=vocab)).eval()
    with torch.no_grad():
        loss = lm_loss(model, random_ids(4, MAX_LEN, vocab))
    assert loss.item() == pytest.approx(math.log(vocab), abs=0.05)


def test_the_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny())
    ids = random_ids(4, MAX_LEN, seed=7)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(120):
        loss = lm_loss(model, ids)
        first = first or loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 3.5 and loss.item() < 0.1


def test_residual_projections_start_smaller():
    torch.manual_seed(0)
    c = GPTConfig.tiny(d_model=64, n_layers=8)
    model = GPT(c)
    block = model.blocks[3]
    assert block.attn.in_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)
    for proj in (block.attn.out_proj, block.ff.linear2):
        assert proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * c.n_layers), rel=0.1)


def test_inputs_are_checked_with_clear_errors():
    model = GPT(GPTConfig.tiny())
    with pytest.raises(ValueError, match=r"max_len=16.*crop"):
        model(random_ids(1, MAX_LEN + 1))
    past = model(random_ids(1, 10), use_cache=True).past_key_values
    with pytest.raises(ValueError, match=r"17 positions.*max_len=16"):
        model(random_ids(1, 7), past_key_values=past)
    with pytest.raises(ValueError, match="outside 0…49"):
        model(torch.tensor([[1, V]]))
    with pytest.raises(ValueError, match="outside 0…49"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match="torch.long"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"ids\[None\]"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"expected \(B, H, T_past, hs\)"):
        model(random_ids(2, 1), past_key_values=past)  # the cache of a batch of 1
    with pytest.raises(ValueError, match="T=1 must be at least 2; lm_loss needs an input and its next token"):
        lm_loss(model, random_ids(2, 1))


def test_config_checks_and_defaults():
    assert GPTConfig(d_model=64, n_heads=4).d_ff == 256
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(dropout=1.5)
    with pytest.raises(Exception):
        GPTConfig().d_model = 3  # frozen
    char = GPTConfig.char()
    assert (char.vocab_size, char.n_layers, char.n_heads, char.d_model, char.max_len, char.dropout) == (
        65,
        4,
        4,
        128,
        64,
        0.0,
    )
    assert GPTConfig.small(vocab_size=8000).vocab_size == 8000
    no_bias = GPT(GPTConfig.tiny(bias=False))
    assert not any(n.endswith(".bias") for n, _ in no_bias.named_parameters())


@pytest.mark.parametrize(
    "preset, layers, width, heads, millions",
    [
        ("gpt2_small", 12, 768, 12, 124),
        ("gpt2_medium", 24, 1024, 16, 355),
        ("gpt2_large", 36, 1280, 20, 774),
        ("gpt2_xl", 48, 1600, 25, 1558),
    ],
)
def test_presets_have_gpt2s_sizes(preset, layers, width, heads, millions):
    c = getattr(GPTConfig, preset)()
    assert (c.vocab_size, c.max_len, c.n_layers, c.d_model, c.n_heads, c.d_ff) == (
        50257,
        1024,
        layers,
        width,
        heads,
        4 * width,
    )
    with torch.device("meta"):  # sizes only: no memory, no initialisation cost
        n = sum(p.numel() for p in GPT(c).parameters())  # the tied matrix counts once
    assert n / 1e6 == pytest.approx(millions, abs=1)  # GPT-2's published sizes (tied, with positions)


def test_gpt2_by_name_offline_says_what_to_do(tmp_path):
    from onehot2gpt.pretrained import gpt2

    # An empty cache and no network access: the Hub model cannot be had.
    with pytest.raises(OSError, match="'gpt2'") as info:
        gpt2("gpt2", local_files_only=True, cache_dir=tmp_path)
    assert "internet" in str(info.value) and 'load("gpt-wikitext2")' in str(info.value)


def test_gpt2_from_a_local_folder_loads_into_our_class(tmp_path):
    import transformers
    from onehot2gpt.pretrained import gpt2
    from tokenizers import Tokenizer, models, pre_tokenizers

    config = transformers.GPT2Config(vocab_size=60, n_positions=16, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(config).eval()
    hf.save_pretrained(tmp_path)
    vocab = {chr(ord("a") + i): i for i in range(26)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="a"))
    backend.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend).save_pretrained(tmp_path)
    ours, tokenizer = gpt2(str(tmp_path))
    ids = torch.tensor([tokenizer("hello")["input_ids"]])
    assert ids.shape == (1, 5)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, hf(ids).logits, atol=1e-5, rtol=1e-5)


def test_gpt2_by_name_without_network_fails_at_once(tmp_path, monkeypatch):
    import time

    from onehot2gpt import pretrained

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # nothing cached
    monkeypatch.setattr(pretrained, "hub_reachable", lambda timeout=3.0: False)
    start = time.perf_counter()
    with pytest.raises(OSError, match="no network") as info:
        pretrained.gpt2("gpt2", cache_dir=tmp_path)
    assert "internet" in str(info.value) and time.perf_counter() - start < 10


def test_hub_reachable_answers_quickly_for_an_unreachable_endpoint(monkeypatch):
    from onehot2gpt.pretrained import hub_reachable

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    assert hub_reachable(timeout=1.0) is False


def test_sequence_log_prob_is_the_chain_rule():
    from onehot2gpt.gpt import lm_loss, sequence_log_prob

    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=20, max_len=12)).eval()
    ids = torch.randint(0, 20, (3, 9))
    with torch.no_grad():
        batch = sequence_log_prob(model, ids)
        assert batch.shape == (3,)
        torch.testing.assert_close(batch.mean(), -lm_loss(model, ids) * 8)
        by_hand = sum(torch.log_softmax(model(ids[:1, :t]).logits[0, -1], -1)[ids[0, t]] for t in range(1, 9))
        torch.testing.assert_close(sequence_log_prob(model, ids[0]), by_hand)
    with pytest.raises(ValueError, match=r"T=1 must be in \[2, 12\]"):
        sequence_log_prob(model, ids[0, :1])
    with pytest.raises(ValueError, match=r"T=13 must be in \[2, 12\].*context of 12"):
        sequence_log_prob(model, torch.zeros(13, dtype=torch.long))
