"""BERT against Hugging Face (real MiniLM weights and a random tiny model), and its contracts."""

import copy
import json
import math

import pytest
import torch
from onehot2gpt.bert import (
    BertConfig,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    best_span,
    freeze,
    save_bert,
    set_dropout,
    train_top_layers,
)
from onehot2gpt.checkpoints import load
from onehot2gpt.pretrained import HF_BERT_KEYS, from_pretrained, hf_key_map, load_hf_bert, load_hf_pretraining

pytestmark = pytest.mark.usefixtures("one_thread")

transformers = pytest.importorskip("transformers")

SENTENCES = ["Attention is all you need.", "The quick brown fox jumps over the lazy dog by the river bank.", "Hi"]
PAIRS = (["Where is the cat?", "Who wrote BERT?"], ["The cat sleeps on the warm mat in the kitchen.", "Devlin et al."])


def small(**overrides) -> BertConfig:
    return BertConfig(
        **{**dict(vocab_size=50, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=16, dropout=0.0), **overrides}
    )


def random_ids(B, T, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab, (B, T), generator=g)  # 1…V−1: never [PAD]


# ------------------------------------------------------------------ MiniLM: real pretrained weights


@pytest.fixture(scope="module")
def minilm():
    from onehot2gpt.pretrained import load_minilm

    try:
        hf, tokenizer = load_minilm()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"offline MiniLM not installed: {exc}")
    return hf, tokenizer, load_hf_bert(hf)


def _encodings(tokenizer):
    singles = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    pairs = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    assert (singles["attention_mask"] == 0).any() and (pairs["attention_mask"] == 0).any()  # padded
    assert (pairs["token_type_ids"] == 1).any()  # two segments
    return {"singles": singles, "pairs": pairs}


def _compare(ours_out, hf_out, real, atol, rtol):
    assert len(ours_out.hidden_states) == len(hf_out.hidden_states)
    for layer, (a, b) in enumerate(zip(ours_out.hidden_states, hf_out.hidden_states)):
        torch.testing.assert_close(a[real], b[real], atol=atol, rtol=rtol, msg=f"hidden state {layer}")
    assert len(ours_out.attentions) == len(hf_out.attentions)
    for layer, (a, b) in enumerate(zip(ours_out.attentions, hf_out.attentions)):
        rows = real[:, None, :, None].expand_as(a)  # real queries, every key
        torch.testing.assert_close(a[rows], b[rows], atol=atol, rtol=0, msg=f"attention {layer}")
    torch.testing.assert_close(ours_out.pooled, hf_out.pooler_output, atol=atol, rtol=0)


@pytest.mark.parametrize("batch", ["singles", "pairs"])
def test_minilm_matches_hugging_face_at_every_layer(minilm, batch):
    hf, tokenizer, ours = minilm
    enc = _encodings(tokenizer)[batch]
    with torch.no_grad():
        theirs = hf(**enc, output_hidden_states=True, output_attentions=True)
        mine = ours(**enc, output_hidden_states=True, output_attentions=True)
        fused = ours(**enc)
    real = enc["attention_mask"].bool()
    assert len(mine.hidden_states) == hf.config.num_hidden_layers + 1
    # Hidden states reach |10|, where float32 steps are 1e-6: the rounding of a different but
    # equivalent order of operations (packed Q, K, V) adds up to a few 1e-6 over six layers.
    _compare(mine, theirs, real, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused.last_hidden_state[real], theirs.last_hidden_state[real], atol=1e-5, rtol=1e-5)
    assert fused.attentions is None and fused.hidden_states is None


def test_minilm_matches_hugging_face_exactly_in_float64(minilm):
    # In float64 the rounding differences vanish: only a real mistake could show here.
    hf, tokenizer, ours = minilm
    hf64, ours64 = copy.deepcopy(hf).double(), copy.deepcopy(ours).double()
    enc = _encodings(tokenizer)["pairs"]
    with torch.no_grad():
        theirs = hf64(**enc, output_hidden_states=True, output_attentions=True)
        mine = ours64(**enc, output_hidden_states=True, output_attentions=True)
    _compare(mine, theirs, enc["attention_mask"].bool(), atol=1e-10, rtol=0)


def test_key_map_covers_minilm_on_both_sides(minilm):
    hf, _, ours = minilm
    keys = hf_key_map(hf.config.num_hidden_layers)
    assert set(keys) == set(dict(ours.named_parameters()))
    theirs = [t for names in keys.values() for t in names]
    assert sorted(theirs) == sorted(dict(hf.named_parameters()))  # each HF tensor used exactly once


# ------------------------------------------------------------------ a random tiny BertForPreTraining


@pytest.fixture(scope="module")
def hf_tiny():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return transformers.BertForPreTraining(config).eval()


def test_pretraining_heads_match_hugging_face(hf_tiny):
    ours = load_hf_pretraining(hf_tiny)
    ids = random_ids(3, 12, 99, seed=1)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    with torch.no_grad():
        theirs = hf_tiny(input_ids=ids, token_type_ids=types, attention_mask=mask)
        mine = ours(ids, types, mask)
    real = mask.bool()
    torch.testing.assert_close(mine.mlm_logits[real], theirs.prediction_logits[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(mine.nsp_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=0)


def test_key_map_covers_the_pretraining_model_on_both_sides(hf_tiny):
    ours = BertForPreTraining(BertConfig.from_hf(hf_tiny.config))
    keys = hf_key_map(2, pretraining=True)
    assert set(keys) == set(dict(ours.named_parameters()))
    theirs = [t for names in keys.values() for t in names]
    assert sorted(theirs) == sorted(dict(hf_tiny.named_parameters()))
    # The packed projection is Q, K, V in that order.
    assert keys["bert.encoder.layers.1.self_attn.in_proj.weight"] == tuple(
        f"bert.encoder.layer.1.attention.self.{p}.weight" for p in ("query", "key", "value")
    )


def test_loading_copies_query_key_value_into_their_thirds(hf_tiny):
    ours = load_hf_bert(hf_tiny)
    D = 32
    attn = hf_tiny.bert.encoder.layer[0].attention.self
    packed = ours.encoder.layers[0].self_attn.in_proj.weight
    for part, linear in enumerate((attn.query, attn.key, attn.value)):
        assert torch.equal(packed[part * D : (part + 1) * D], linear.weight)


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(d_ff=64), "ff.linear1.weight"),
        (dict(n_layers=1), "encoder.layer.1."),
        (dict(vocab_size=100), "tok_emb.weight"),
    ],
)
def test_mismatched_config_names_the_key(hf_tiny, change, named):
    config = BertConfig(**{**BertConfig.from_hf(hf_tiny.config).to_dict(), **change})
    with pytest.raises(ValueError, match="do not fit") as info:
        load_hf_bert(hf_tiny, config)
    assert named in str(info.value)


def test_from_hf_rejects_variants_we_do_not_build():
    hf_config = transformers.BertConfig(hidden_act="gelu_new")
    with pytest.raises(ValueError, match="gelu"):
        BertConfig.from_hf(hf_config)


def test_mlm_decoder_is_the_token_embedding_after_load_and_round_trip(hf_tiny, tmp_path):
    def tied(model):
        return model.mlm.decoder.weight is model.bert.embeddings.tok_emb.weight

    assert tied(BertForPreTraining(small()))
    ours = load_hf_pretraining(hf_tiny)
    assert tied(ours)
    assert torch.equal(ours.mlm.decoder.weight, hf_tiny.bert.embeddings.word_embeddings.weight)
    save_bert(ours, tmp_path / "tiny")
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "tiny" / "weights.safetensors"))
    assert "mlm.decoder.weight" not in stored and "bert.embeddings.tok_emb.weight" in stored  # saved once
    back = load(tmp_path / "tiny").model
    assert isinstance(back, BertForPreTraining) and tied(back)
    ids = random_ids(2, 10, 99)
    with torch.no_grad():
        torch.testing.assert_close(back(ids).mlm_logits, ours(ids).mlm_logits, atol=0, rtol=0)


def test_load_rejects_bert_weights_that_do_not_fit_the_config(tmp_path):
    save_bert(BertModel(small()), tmp_path / "m")
    config_file = tmp_path / "m" / "config.json"
    data = json.loads(config_file.read_text())
    data["config"]["d_ff"] = 128
    config_file.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="ff.linear1.weight"):
        load(tmp_path / "m")


def test_from_pretrained_offline_says_what_to_do(tmp_path):
    # An empty cache and no network access: the Hub model cannot be had.
    with pytest.raises(OSError, match="bert-base-uncased") as info:
        from_pretrained("bert-base-uncased", local_files_only=True, cache_dir=tmp_path)
    assert "internet" in str(info.value) and "load('all-MiniLM-L6-v2')" in str(info.value)


# ------------------------------------------------------------------ contracts of our own model


def test_shapes_and_the_eager_path_equal_the_fused_one():
    torch.manual_seed(0)
    c = small()
    model = BertModel(c).eval()
    ids = random_ids(3, 10, c.vocab_size)
    with torch.no_grad():
        full = model(ids, output_hidden_states=True, output_attentions=True)
        fast = model(ids)
    assert full.last_hidden_state.shape == (3, 10, c.d_model) and full.pooled.shape == (3, c.d_model)
    assert len(full.hidden_states) == c.n_layers + 1
    assert all(h.shape == (3, 10, c.d_model) for h in full.hidden_states)
    assert len(full.attentions) == c.n_layers
    assert all(a.shape == (3, c.n_heads, 10, 10) for a in full.attentions)
    assert full.hidden_states[-1] is full.last_hidden_state
    torch.testing.assert_close(fast.last_hidden_state, full.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_attention_rows_sum_to_one_and_padding_gets_zero_weight():
    torch.manual_seed(0)
    model = BertModel(small()).eval()
    ids = random_ids(2, 9, 50)
    ids[0, 6:] = 0  # default mask: [PAD] = pad_id = 0
    with torch.no_grad():
        maps = model(ids, output_attentions=True).attentions
    for w in maps:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 9))
        assert torch.all(w[0, :, :, 6:] == 0)
        assert torch.all(w[1] > 0)


def test_changing_a_padded_token_leaves_real_positions_unchanged():
    torch.manual_seed(0)
    model = BertModel(small()).eval()
    ids = random_ids(2, 8, 50)
    mask = torch.ones_like(ids)
    mask[:, 5:] = 0
    other = ids.clone()
    other[:, 5:] = (ids[:, 5:] % 40) + 3  # different ids behind the mask
    assert not torch.equal(ids, other)
    with torch.no_grad():
        a, b = model(ids, attention_mask=mask), model(other, attention_mask=mask)
    torch.testing.assert_close(a.last_hidden_state[:, :5], b.last_hidden_state[:, :5], atol=1e-6, rtol=0)
    torch.testing.assert_close(a.pooled, b.pooled, atol=1e-6, rtol=0)


def test_inputs_are_checked_with_clear_errors():
    model = BertModel(small(max_len=16))
    with pytest.raises(ValueError, match=r"max_len=16.*truncat"):
        model(random_ids(1, 17, 50))
    with pytest.raises(ValueError, match="outside 0…49"):
        model(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match="token_type_ids must have the shape"):
        model(random_ids(2, 5, 50), token_type_ids=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="token_type_ids holds ids"):
        model(random_ids(2, 5, 50), token_type_ids=torch.full((2, 5), 2))
    with pytest.raises(ValueError, match="attention_mask must have the shape"):
        model(random_ids(2, 5, 50), attention_mask=torch.ones(2, 6))


def test_losses_at_initialisation_are_those_of_uniform_guessing():
    torch.manual_seed(0)
    V = 1000
    model = BertForPreTraining(BertConfig.course(vocab_size=V, n_layers=2, max_len=32)).eval()
    ids = random_ids(4, 32, V)
    with torch.no_grad():
        out = model(ids, mlm_labels=ids, nsp_labels=torch.tensor([0, 1, 0, 1]))
    assert out.mlm_loss.item() == pytest.approx(math.log(V), abs=0.1)
    assert out.nsp_loss.item() == pytest.approx(math.log(2), abs=0.05)
    assert out.loss.item() == pytest.approx(out.mlm_loss.item() + out.nsp_loss.item())


def test_the_mlm_model_overfits_one_batch():
    torch.manual_seed(0)
    model = BertForPreTraining(small())
    ids = random_ids(4, 12, 50, seed=3)
    labels = torch.full_like(ids, -100)
    labels[:, [2, 5, 9]] = ids[:, [2, 5, 9]]  # predict three tokens per row…
    inputs = ids.clone()
    inputs[:, [2, 5, 9]] = 1  # …hidden behind one stand-in [MASK] id
    nsp = torch.tensor([0, 1, 1, 0])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(150):
        loss = model(inputs, mlm_labels=labels, nsp_labels=nsp).loss
        first = first or loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 3.0 and loss.item() < 0.05


# ------------------------------------------------------------------ fine-tuning heads


def test_fine_tuning_heads_give_the_promised_shapes():
    torch.manual_seed(0)
    c = small()
    ids = random_ids(2, 7, 50)
    ids[1, 5:] = 0
    assert BertForSequenceClassification(BertModel(c), n_labels=3)(ids).shape == (2, 3)
    assert BertForTokenClassification(c, n_labels=5)(ids).shape == (2, 7, 5)
    span = torch.zeros_like(ids, dtype=torch.bool)
    span[:, 2:6] = True  # the "document"
    start, end = BertForQuestionAnswering(c)(ids, span_mask=span)
    assert start.shape == end.shape == (2, 7)
    for logits in (start, end):
        assert torch.isinf(logits[~span]).all() and torch.isinf(logits[1, 5:]).all()  # outside, padding
        assert torch.isfinite(logits[0, 2:6]).all()


def test_freeze_bert_trains_only_the_head():
    torch.manual_seed(0)
    head = BertForSequenceClassification(BertModel(small()), n_labels=2, freeze_bert=True)
    loss = torch.nn.functional.cross_entropy(head(random_ids(2, 6, 50)), torch.tensor([0, 1]))
    loss.backward()
    assert all(p.grad is None for p in head.bert.parameters())
    assert all(p.grad is not None for p in head.classifier.parameters())
    freeze(head.bert, frozen=False)
    assert all(p.requires_grad for p in head.bert.parameters())


def test_train_top_layers_freezes_the_bottom_and_switches_its_dropout_off():
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertModel(small(n_layers=3, dropout=0.5)), n_labels=2, pooling="mean")
    names = train_top_layers(model, 1)
    assert names and all(n.startswith(("bert.encoder.layers.2.", "classifier.")) for n in names)
    model.train()
    ids = random_ids(2, 6, 50)
    # With the lower layers' dropout off, the input of the top layer is the same on every call.
    seen = []
    hook = model.bert.encoder.layers[2].register_forward_pre_hook(lambda m, args: seen.append(args[0].clone()))
    model(ids), model(ids)
    hook.remove()
    torch.testing.assert_close(seen[0], seen[1])
    assert not torch.equal(model(ids), model(ids))  # the top layer and the head still drop out
    loss = torch.nn.functional.cross_entropy(model(ids), torch.tensor([0, 1]))
    loss.backward()
    assert all(p.grad is None for p in model.bert.encoder.layers[0].parameters())
    assert all(p.grad is not None for p in model.bert.encoder.layers[2].parameters())
    with pytest.raises(ValueError, match=r"top_layers=4 must be in \[0, 3\]"):
        train_top_layers(model, 4)
    with pytest.raises(TypeError, match="top_layers must be an int"):
        train_top_layers(model, 1.5)
    with pytest.raises(TypeError, match="BertFor"):
        train_top_layers(model.bert, 1)


def test_set_dropout_reaches_every_dropout_and_the_attention_weights():
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertModel(small(dropout=0.0)), n_labels=2).train()
    ids = random_ids(2, 6, 50)
    assert torch.equal(model(ids), model(ids))  # no dropout anywhere
    set_dropout(model, 0.3)
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    rates += [m.dropout for m in model.modules() if isinstance(getattr(m, "dropout", None), float)]
    assert rates and all(r == 0.3 for r in rates)
    assert not torch.equal(model(ids), model(ids))
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"p=\S+ must be a finite number in \[0, 1\)"):
            set_dropout(model, bad)
    for bad in ("0.1", True):
        with pytest.raises(TypeError, match="p must be a number"):
            set_dropout(model, bad)


def test_best_span_picks_the_highest_start_plus_end():
    start = torch.tensor([0.0, 3.0, 1.0, 0.0, 0.0])
    end = torch.tensor([0.0, 0.0, 1.0, 4.0, 0.0])
    assert best_span(start, end) == (1, 3, 7.0)
    # e < s is never allowed, even when start[4] + end[0] would be largest.
    assert best_span(torch.tensor([1.0, 0.0, 0.0, 0.0, 9.0]), torch.tensor([9.0, 0.0, 0.0, 0.0, 0.0])) == (0, 0, 10.0)
    # The length limit: span (1, 3) has 3 tokens; with at most 2, the best is (2, 3) = 1 + 4.
    assert best_span(start, end, max_answer_len=2) == (2, 3, 5.0)
    assert best_span(start, end, max_answer_len=1) == (3, 3, 4.0)  # one token: best single position
    allowed = torch.tensor([False, False, True, True, False])
    assert best_span(start, end, allowed=allowed) == (2, 3, 5.0)
    assert best_span(start, end, allowed=torch.zeros(5, dtype=torch.bool)) is None
    inf = float("-inf")
    assert best_span(torch.tensor([inf, inf]), torch.tensor([0.0, 0.0])) is None


def test_course_is_the_course_size_and_tiny_a_test_size_as_for_every_model():
    from onehot2gpt.gpt import GPTConfig

    course = BertConfig.course()
    assert course == BertConfig()
    assert (course.d_model, course.n_layers, course.n_heads, course.max_len) == (128, 4, 4, 128)
    assert BertConfig.course(n_layers=2).n_layers == 2
    tiny, gpt = BertConfig.tiny(), GPTConfig.tiny()
    assert (tiny.vocab_size, tiny.d_model, tiny.n_layers, tiny.n_heads, tiny.max_len) == (
        gpt.vocab_size,
        gpt.d_model,
        gpt.n_layers,
        gpt.n_heads,
        gpt.max_len,
    )
    assert BertConfig.tiny(vocab_size=30, dropout=0.0).vocab_size == 30
    with torch.device("meta"):
        sizes = [sum(p.numel() for p in BertModel(c).parameters()) for c in (tiny, course)]
    assert sizes[0] * 20 < sizes[1]


def test_presets_have_the_papers_sizes():
    base, large = BertConfig.base(), BertConfig.large()
    assert (base.vocab_size, base.d_model, base.n_layers, base.n_heads, base.d_ff, base.max_len) == (
        30522,
        768,
        12,
        12,
        3072,
        512,
    )
    assert (large.d_model, large.n_layers, large.n_heads, large.d_ff) == (1024, 24, 16, 4096)
    # BERT-Base has ≈110M parameters (the paper's figure).
    with torch.device("meta"):  # sizes only: no memory, no initialisation cost
        n = sum(p.numel() for p in BertModel(BertConfig.base()).parameters())
    assert 105e6 < n < 115e6
    assert "{i}" in next(k for k in HF_BERT_KEYS if k.startswith("encoder."))


def test_fill_mask_ranks_the_mlm_distribution():
    from onehot2gpt.bert import fill_mask
    from onehot2gpt.subword import WordPieceTokenizer

    tok = WordPieceTokenizer.train(["the cat sat on the mat . a dog ran"] * 2, vocab_size=60, min_frequency=1)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=12)
    ).eval()
    result = fill_mask(model, tok, "the [MASK] sat on the [MASK]", top_k=4)
    ids = tok.encode("the [MASK] sat on the [MASK]")
    positions = [i for i, t in enumerate(ids) if t == tok.mask_id]
    assert [p for p, _ in result] == positions
    logits = model(torch.tensor([ids])).mlm_logits[0, positions[1]]
    values, index = torch.softmax(logits, -1).topk(4)
    assert [t for t, _ in result[1][1]] == tok.convert_ids_to_tokens(index.tolist())
    assert [p for _, p in result[1][1]] == pytest.approx(values.tolist(), abs=1e-6)
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "the cat sat")
    with pytest.raises(ValueError, match="at most 12"):
        fill_mask(model, tok, "the [MASK] " + "cat " * 20)


def test_course_checkpoint_loads_and_beats_a_unigram_guess():
    from collections import Counter

    from onehot2gpt.bert_pretraining import evaluate_pretraining, pretraining_batch, tokenize_articles
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.utils import IGNORE_INDEX

    model, tok, _, _ = load("bert-wikitext2")
    assert isinstance(model, BertForPreTraining) and len(tok) == model.config.vocab_size
    assert model.mlm.decoder.weight is model.bert.embeddings.tok_emb.weight
    valid = tokenize_articles(tok, wikitext_articles("valid")[:20])
    scores = evaluate_pretraining(model, tok, valid, batches=4, seed=7)
    g = torch.Generator().manual_seed(7)  # the same batches: the most frequent masked token, always
    labels = torch.cat([pretraining_batch(valid, 64, 64, tok, g)["mlm_labels"].flatten() for _ in range(4)])
    labels = labels[labels != IGNORE_INDEX].tolist()
    unigram = Counter(labels).most_common(1)[0][1] / len(labels)
    assert scores["mlm_accuracy"] > unigram + 0.03
    assert scores["nsp_accuracy"] > 0.55


def test_attention_source_gives_the_maps_of_the_model_for_one_or_two_sentences():
    from onehot2gpt.bert import attention_source
    from onehot2gpt.subword import WordPieceTokenizer

    tok = WordPieceTokenizer.train(["the cat sat on the mat . a dog ran"] * 2, vocab_size=60, min_frequency=1)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=len(tok), d_model=16, n_layers=2, n_heads=2, d_ff=32, max_len=12)
    ).train()
    source = attention_source(model, tok)
    tokens, maps = source("the cat sat")
    assert tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert len(maps) == 2 and maps[0].shape == (1, 2, 5, 5)
    ids = torch.tensor([tok.encode("the cat sat")])
    model.eval()
    expected = model.bert(ids, output_attentions=True).attentions
    torch.testing.assert_close(maps[1], expected[1])
    model.train()
    source("the cat")
    assert model.training  # the mode is given back
    tokens, maps = source("the cat [SEP] a dog")
    assert tokens == ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"]
    pair = tok("the cat", "a dog")
    model.eval()
    expected = model.bert(
        torch.tensor([pair["input_ids"]]), torch.tensor([pair["token_type_ids"]]), output_attentions=True
    ).attentions
    torch.testing.assert_close(maps[0], expected[0])  # segment B is really segment B
    assert source("zebra")[0] == ["[CLS]", "[UNK]", "[SEP]"]
    for bad, match in (("", "empty"), ("   ", "empty"), ("the " * 20, "at most 12")):
        with pytest.raises(ValueError, match=match):
            source(bad)


def test_pseudo_log_likelihood_masks_one_position_at_a_time():
    from onehot2gpt.bert import BertConfig, BertForPreTraining, pseudo_log_likelihood

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=30, max_len=16, d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    ).eval()
    ids = torch.tensor([2, 7, 8, 9, 3])  # [CLS]-like, three tokens, [SEP]-like
    total = 0.0
    for t in (1, 2, 3):
        masked = ids.clone()
        masked[t] = 4
        with torch.no_grad():
            total += torch.log_softmax(model(masked[None]).mlm_logits[0, t], -1)[ids[t]]
    torch.testing.assert_close(pseudo_log_likelihood(model, ids, mask_id=4), total)
    with pytest.raises(ValueError, match="mask_id"):
        pseudo_log_likelihood(model, ids, mask_id=99)
    with pytest.raises(ValueError, match="\\[CLS\\]"):
        pseudo_log_likelihood(model, ids[:2], mask_id=4)


def test_mlm_continue_writes_with_the_course_bert():
    from onehot2gpt.bert import mlm_continue

    model, tok, _, _ = load("bert-wikitext2")
    text = mlm_continue(model, tok, "the river flows through the city", 5)
    assert isinstance(text, str) and text.strip()
    ids = tok.encode("the river flows through the city")[:-1]
    with torch.no_grad():  # the first new token, by hand
        first = int(model(torch.tensor([ids + [tok.mask_id, tok.sep_id]])).mlm_logits[0, len(ids)].argmax())
    assert text.startswith(tok.decode([first]))
    with pytest.raises(ValueError, match="continue"):
        mlm_continue(model, tok, "  ", 3)


def test_masked_lm_utilities_need_a_model_with_an_mlm_head():
    from onehot2gpt.bert import fill_mask, mlm_continue, pseudo_log_likelihood

    encoder = BertModel(small(max_len=16))  # what load('all-MiniLM-L6-v2') gives: no MLM head
    for call in (
        lambda: fill_mask(encoder, None, "the [MASK] sat"),
        lambda: pseudo_log_likelihood(encoder, [2, 5, 3], mask_id=4),
        lambda: mlm_continue(encoder, None, "the cat", 2),
    ):
        with pytest.raises(
            TypeError,
            match=r"needs a model with an MLM head \(a BertForPreTraining\).*"
            r"load\(.all-MiniLM-L6-v2.\)",
        ):
            call()
