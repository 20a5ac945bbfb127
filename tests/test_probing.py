import pytest
import torch
from onehot2gpt.probing import sentence_features, token_features, train_probe


def planted(n=600, layers=3, dim=8, signal_layer=1, seed=0):
    """Labels readable from one layer only; the other layers are noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, layers, dim, generator=g)
    x[:, signal_layer, :3] += 3.0 * torch.nn.functional.one_hot(y, 3).float()
    return x, y


def test_token_and_sentence_features():
    layers = torch.arange(2 * 3 * 2 * 1, dtype=torch.float32).view(2, 3, 2, 1)  # (B, T, L, D)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    tokens = token_features(layers, mask)
    assert tokens.shape == (3, 2, 1)
    torch.testing.assert_close(tokens[2], layers[1, 0])
    sentences = sentence_features(layers, mask)
    assert sentences.shape == (2, 2, 1)
    torch.testing.assert_close(sentences[0], layers[0, :2].mean(0))
    torch.testing.assert_close(sentences[1], layers[1, 0])


def test_mix_finds_the_layer_that_holds_the_signal():
    x, y = planted(signal_layer=1)
    result = train_probe(x[:500], y[:500], x[500:], y[500:], epochs=30, lr=0.05, task="planted")
    assert result.weights.argmax() == 1 and result.weights[1] > 0.5
    assert torch.isclose(result.weights.sum(), torch.tensor(1.0))
    assert result.test_accuracy > 0.9


def test_large_lambda_keeps_the_weights_near_uniform():
    x, y = planted(signal_layer=2)
    free = train_probe(x[:500], y[:500], x[500:], y[500:], epochs=30, lr=0.05, l2_lambda=0.0)
    held = train_probe(x[:500], y[:500], x[500:], y[500:], epochs=30, lr=0.05, l2_lambda=100.0)
    uniform = torch.full((3,), 1 / 3)
    assert (held.weights - uniform).abs().max() < 0.05
    assert (free.weights - uniform).abs().max() > (held.weights - uniform).abs().max()


def test_single_layer_probe_uses_only_that_layer():
    x, y = planted(signal_layer=0)
    on_signal = train_probe(x[:500], y[:500], x[500:], y[500:], layer=0, epochs=20, lr=0.05)
    on_noise = train_probe(x[:500], y[:500], x[500:], y[500:], layer=2, epochs=20, lr=0.05)
    assert on_signal.weights.tolist() == [1.0, 0.0, 0.0]
    assert on_signal.test_accuracy > 0.9 > on_noise.test_accuracy + 0.3


def test_onehot_probe_learns_a_table_of_word_classes():
    g = torch.Generator().manual_seed(0)
    table = torch.randint(0, 4, (50,), generator=g)  # each word has one class
    ids = torch.randint(0, 50, (2000,), generator=g)
    result = train_probe(
        ids[:1500], table[ids[:1500]], ids[1500:], table[ids[1500:]], onehot_size=50, n_classes=4, epochs=40, lr=0.1
    )
    assert result.test_accuracy > 0.95


@pytest.mark.parametrize(
    "x, y, match",
    [
        (torch.randn(5, 4), torch.zeros(5, dtype=torch.long), "n_layers"),
        (torch.randn(5, 2, 4), torch.zeros(4, dtype=torch.long), "labels"),
        (torch.randn(0, 2, 4), torch.zeros(0, dtype=torch.long), "no examples"),
    ],
)
def test_bad_shapes_say_what_to_pass(x, y, match):
    with pytest.raises(ValueError, match=match):
        train_probe(x, y, x, y)


def test_layer_weight_explorer_trains_once_per_setting_and_survives_errors():
    from onehot2gpt.probing import ProbeResult
    from onehot2gpt.widgets import LayerWeightExplorer

    calls = []

    def fake_train(task, lam):
        calls.append((task, lam))
        if task == "broken":
            raise RuntimeError("no data for this task")
        w = torch.tensor([0.2, 0.3, 0.5]) if lam == 0 else torch.full((3,), 1 / 3)
        return ProbeResult(task, lam, w, 1.0, 0.9, 0.8)

    explorer = LayerWeightExplorer(
        fake_train, ["POS", "sentiment", "broken"], [0.0, 1.0], ["token", "layer 1", "layer 2"]
    )
    assert explorer.image.value[:4] == b"\x89PNG" and "POS" in explorer.summary.value
    explorer.l2_lambda.value = 1.0
    explorer.l2_lambda.value = 0.0  # served from the cache
    assert calls == [("POS", 0.0), ("POS", 1.0)]
    explorer.task.value = ("POS", "sentiment")
    assert "sentiment" in explorer.summary.value
    summary = explorer.summary.value
    explorer.task.value = ("broken",)
    assert "no data for this task" in explorer.status.value
    assert explorer.summary.value == summary  # the last good view is kept
    explorer.task.value = ()
    assert "select at least one task" in explorer.status.value


def test_encoder_layers_stacks_every_hidden_state_in_batches():
    from onehot2gpt.bert import BertConfig, BertForSequenceClassification, BertModel
    from onehot2gpt.probing import encoder_layers

    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=30, d_model=16, n_layers=3, n_heads=2, d_ff=32, max_len=10)).train()
    ids = torch.randint(5, 30, (5, 7))
    mask = torch.ones(5, 7, dtype=torch.long)
    mask[1, 4:] = 0
    ids[1, 4:] = 0
    features = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}
    layers = encoder_layers(bert, features, batch_size=2)  # three batches
    assert layers.shape == (5, 7, 4, 16)
    assert bert.training  # the mode is given back
    bert.eval()
    out = bert(ids, features["token_type_ids"], mask, output_hidden_states=True)
    for j in range(4):
        torch.testing.assert_close(layers[:, :, j], out.hidden_states[j])
    head = BertForSequenceClassification(bert, 2)  # a fine-tuning model works too
    torch.testing.assert_close(encoder_layers(head, features), layers)
    pooled = sentence_features(layers, mask)
    torch.testing.assert_close(pooled[1, 2], out.hidden_states[2][1, :4].mean(0))
    short = {k: v.clone() for k, v in features.items()}  # rows 3-4: 3 real tokens
    short["attention_mask"][3:, 3:] = 0
    short["input_ids"][3:, 3:] = 0
    trimmed = encoder_layers(bert, short, batch_size=2)  # rows 3-4 form one batch
    assert (trimmed[4, 3:] == 0).all()  # beyond the batch's longest
    torch.testing.assert_close(trimmed[:3], layers[:3])  # other rows in their places
    full = bert(
        short["input_ids"][4:], short["token_type_ids"][4:], short["attention_mask"][4:], output_hidden_states=True
    ).hidden_states
    torch.testing.assert_close(trimmed[4, :3, 2], full[2][0, :3])  # real tokens unchanged
    with pytest.raises(ValueError, match="attention_mask"):
        encoder_layers(bert, {"input_ids": ids})


# -- one word's vectors in context (notebook 04, section 5) --------------------------------------

WORDS = ["the", "river", "bank", "money", "in", "and", "a", "un", "##aff", "##able", ".", "!"]


@pytest.fixture(scope="module")
def word_model():
    """A tiny random BERT (Hugging Face's and ours, equal weights) and our tokenizer for it."""
    transformers = pytest.importorskip("transformers")
    from onehot2gpt.pretrained import load_hf_bert
    from onehot2gpt.subword import SPECIALS, WordPieceTokenizer

    tok = WordPieceTokenizer(list(SPECIALS) + WORDS)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=24,
        attn_implementation="eager",
    )
    hf = transformers.BertModel(config, add_pooling_layer=True).eval()
    return hf, load_hf_bert(hf), tok


def hidden_states(bert, tok, text):
    ids = torch.tensor([tok.encode(text)])
    with torch.no_grad():
        return torch.stack(bert(ids, output_hidden_states=True).hidden_states, dim=2)[0]  # (T, L+1, D)


def test_contextual_vectors_are_the_words_own_positions_and_the_mean_of_its_pieces(word_model):
    from onehot2gpt.probing import contextual_vectors

    _, bert, tok = word_model
    sentences = ["The river bank.", "Money in the BANK and the bank!", "a bank and unaffable money."]
    vectors = contextual_vectors(bert, tok, sentences, "Bank")
    assert vectors.shape == (3, 3, 16)  # (N, embeddings + 2 layers, D)
    # Each is the word's own position in its sentence run alone: [CLS] the river bank . [SEP] has
    # bank at 3 (and is padded to the longest sentence here); in sentence 1 the first "BANK" counts.
    torch.testing.assert_close(vectors[0], hidden_states(bert, tok, sentences[0])[3])
    torch.testing.assert_close(vectors[1], hidden_states(bert, tok, sentences[1])[4])
    torch.testing.assert_close(vectors[2], hidden_states(bert, tok, sentences[2])[2])
    # [CLS] a bank and un ##aff ##able money . [SEP]: the word is the mean of its three pieces.
    split = contextual_vectors(bert, tok, sentences[2:], "unaffable")
    torch.testing.assert_close(split[0], hidden_states(bert, tok, sentences[2])[4:7].mean(0))
    assert not torch.allclose(vectors[0, 1:], vectors[2, 1:])  # context changes "bank"


def test_contextual_vectors_agree_for_hugging_face_and_our_bert(word_model, tmp_path):
    transformers = pytest.importorskip("transformers")
    from onehot2gpt.probing import contextual_vectors

    hf, ours, tok = word_model
    tok.save(tmp_path / "vocab.txt")
    hf_tok = transformers.BertTokenizerFast.from_pretrained(tmp_path)
    sentences = ["The river bank.", "Money in the bank and a bank!", "a bank and unaffable money."]
    for word in ("bank", "unaffable"):
        texts = sentences if word == "bank" else sentences[2:]
        expected = contextual_vectors(ours, tok, texts, word)
        torch.testing.assert_close(contextual_vectors(hf, hf_tok, texts, word), expected)
        torch.testing.assert_close(contextual_vectors(ours, hf_tok, texts, word), expected)


@pytest.mark.parametrize(
    "sentences, word, error, match",
    [
        (["the river bank ."], "money", ValueError, r"sentence 0 \('the river bank \.'\) has no word 'money'"),
        (["the bank", "a river"], "bank", ValueError, "sentence 1 .* has no word 'bank'"),
        (["the bank", "  "], "bank", ValueError, "sentence 1 is empty"),
        ([], "bank", ValueError, "no sentences"),
        (["the river bank"], "river bank", ValueError, "one word"),
        (["the river bank"], "", ValueError, "one word"),
        ("the river bank", "bank", TypeError, "list of strings"),
        (["the river bank " * 10], "bank", ValueError, "at most 24"),
    ],
)
def test_contextual_vectors_say_what_is_wrong(word_model, sentences, word, error, match):
    from onehot2gpt.probing import contextual_vectors

    _, bert, tok = word_model
    with pytest.raises(error, match=match):
        contextual_vectors(bert, tok, sentences, word)


def test_contextual_vectors_need_a_tokenizer_that_knows_each_pieces_word(word_model):
    from onehot2gpt.probing import contextual_vectors

    _, bert, _ = word_model
    with pytest.raises(TypeError, match="which word each piece came from"):
        contextual_vectors(bert, str.split, ["the bank"], "bank")


def test_minilm_gives_the_lecture_notes_two_apples_that_lean_to_their_senses(one_thread):
    """The ELMo motivation of the lecture notes: "Jobs was the CEO of apple." / "He finally ate the apple."."""
    from onehot2gpt.pretrained import minilm_bert
    from onehot2gpt.probing import contextual_vectors

    try:
        minilm, tok = minilm_bert()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"offline MiniLM not installed: {exc}")
    apples = contextual_vectors(minilm, tok, ["Jobs was the CEO of apple.", "He finally ate the apple."], "apple")
    cosines = torch.cosine_similarity(apples[0], apples[1], dim=-1)  # one per layer
    assert (cosines[1:] < cosines[0]).all()  # every layer moves them apart from the embeddings
    probes = torch.cat([contextual_vectors(minilm, tok, [w], w) for w in ("company", "fruit")])
    to_probes = torch.cosine_similarity(apples[:, None, -1], probes[None, :, -1], dim=-1)  # (apple, probe)
    assert to_probes[0, 0] > to_probes[1, 0]  # "company": nearer the CEO's apple than the eaten one
    assert to_probes[1, 1] > to_probes[0, 1]  # "fruit": nearer the eaten apple than the CEO's


# Readable sense scores (notebook 04) ------------------------------------------------------------


def two_clusters(per_sense=4, spread=0.1, seed=0):
    """Two senses as two tight clusters around orthogonal directions."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.eye(6)[:2] * 3.0
    labels = torch.tensor([0] * per_sense + [1] * per_sense)
    return centres[labels] + spread * torch.randn(2 * per_sense, 6, generator=g), labels


def test_pair_accuracy_is_one_for_clusters_zero_when_reversed_and_a_half_for_ties():
    from onehot2gpt.probing import nearest_sense_accuracy, sense_pair_accuracy

    v, labels = two_clusters()
    assert sense_pair_accuracy(v, labels) == 1.0
    assert nearest_sense_accuracy(v, labels) == 1.0
    # Labels that put each vector with the other cluster: every comparison goes the wrong way.
    crossed = torch.tensor([0, 0, 1, 1, 1, 1, 0, 0])
    wrong = torch.cat([v[:2], v[4:6], v[2:4], v[6:]])  # rows 0,1 | 4,5 | 2,3 | 6,7 of v
    assert sense_pair_accuracy(wrong, torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])) < 0.5
    assert sense_pair_accuracy(v, crossed) < 0.5
    # One vector for every sentence (a type vector, like word2vec): ties everywhere, chance.
    same = torch.ones(6, 3)
    assert sense_pair_accuracy(same, torch.tensor([0, 0, 0, 1, 1, 1])) == 0.5


def test_pair_accuracy_counts_each_anchor_with_each_partner_and_each_other():
    from onehot2gpt.probing import sense_pair_accuracy

    # Anchor 0's same-sense partner 1 is nearer than other 3 but farther than other 2: by hand,
    # over all anchors with a partner, 5 of the 8 comparisons go the right way.
    v = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 1, 1])
    sims = torch.nn.functional.normalize(v, dim=1) @ torch.nn.functional.normalize(v, dim=1).T
    right = total = 0
    for i in range(4):
        for j in range(4):
            for k in range(4):
                if i != j and labels[i] == labels[j] and labels[i] != labels[k]:
                    total += 1
                    right += float(sims[i, j] > sims[i, k]) + 0.5 * float(sims[i, j] == sims[i, k])
    assert sense_pair_accuracy(v, labels) == pytest.approx(right / total)
    assert 0 < right / total < 1


def test_nearest_sense_accuracy_leaves_out_a_sense_seen_once():
    from onehot2gpt.probing import nearest_sense_accuracy

    v, labels = two_clusters(per_sense=3)
    lone = torch.cat([v, torch.tensor([[0.0, 0.0, 5.0, 0.0, 0.0, 0.0]])])
    assert nearest_sense_accuracy(lone, torch.cat([labels, torch.tensor([2])])) == 1.0


def test_shuffled_labels_p_value_is_small_for_clusters_and_large_for_noise():
    from onehot2gpt.probing import nearest_sense_accuracy, shuffled_labels_p_value

    v, labels = two_clusters(per_sense=4)
    # 70 ways to choose which 4 of 8 are sense 0; the true split and its mirror image score 1.
    assert shuffled_labels_p_value(v, labels) == pytest.approx(2 / 70)
    assert shuffled_labels_p_value(v, labels, score=nearest_sense_accuracy) == pytest.approx(2 / 70)
    sampled = shuffled_labels_p_value(v, labels, max_relabelings=50, seed=1)
    assert sampled == pytest.approx(3 / 51, abs=3 / 51) and sampled >= 1 / 51
    noise = torch.randn(10, 6, generator=torch.Generator().manual_seed(3))
    assert shuffled_labels_p_value(noise, torch.tensor([0] * 5 + [1] * 5)) > 0.05
    three = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])  # 8! / (3! 3! 2!) = 560 relabelings
    assert 0 < shuffled_labels_p_value(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), three) <= 1


@pytest.mark.parametrize(
    "vectors, labels, match",
    [
        (torch.randn(4, 3), torch.tensor([0, 0, 1]), "one per vector"),
        (torch.randn(4, 3), torch.tensor([0.0, 0.0, 1.0, 1.0]), "integer sense ids"),
        (torch.tensor([[1.0, float("nan")], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), torch.tensor([0, 0, 1, 1]), "NaN"),
        (torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), torch.tensor([0, 0, 1, 1]), "all zeros"),
        (torch.randn(4, 3), torch.tensor([0, 0, 0, 0]), "another"),
        (torch.randn(4, 3), torch.tensor([0, 1, 2, 3]), "two vectors of one sense"),
        (torch.tensor([0, 1, 2, 3]), torch.tensor([0, 0, 1, 1]), "float tensor"),
    ],
)
def test_sense_scores_say_what_is_wrong(vectors, labels, match):
    from onehot2gpt.probing import sense_pair_accuracy, shuffled_labels_p_value

    with pytest.raises(ValueError, match=match):
        sense_pair_accuracy(vectors, labels)
    if match not in ("another", "two vectors of one sense"):
        with pytest.raises(ValueError, match=match):
            shuffled_labels_p_value(vectors, labels)


def test_chance_p_value_is_the_binomial_tail():
    from onehot2gpt.probing import chance_p_value

    assert chance_p_value(20, 20) == pytest.approx(0.5**20)
    assert chance_p_value(0, 20) == pytest.approx(1.0)
    assert chance_p_value(15, 20) == pytest.approx(21700 / 2**20)  # (C(20,15)+…+C(20,20)) / 2^20
    assert chance_p_value(2, 3, chance=1 / 3) == pytest.approx(3 * (1 / 3) ** 2 * (2 / 3) + (1 / 3) ** 3)
    for bad, match in [((21, 20), r"correct=21 must be in \[0, 20\]"), ((3, 0), "total=0"), ((3, 5, 1.0), "chance=1")]:
        with pytest.raises(ValueError, match=match):
            chance_p_value(*bad)
    with pytest.raises(TypeError, match="correct must be an int, got float 2.5"):
        chance_p_value(2.5, 5)


def test_probe_result_keeps_its_model_and_predicts_the_test_accuracy():
    x, y = planted(signal_layer=2)
    result = train_probe(x[:500], y[:500], x[500:], y[500:], epochs=20, lr=0.05, task="planted")
    proba = result.predict_proba(x[500:])
    assert proba.shape == (100, 3) and torch.allclose(proba.sum(1), torch.ones(100))
    assert (proba.argmax(1) == y[500:]).float().mean().item() == pytest.approx(result.test_accuracy)
    assert "model" not in repr(result)
    with pytest.raises(ValueError, match="NaN"):
        result.predict_proba(torch.full((2, 3, 8), float("nan")))
    with pytest.raises(ValueError, match="float features"):
        result.predict_proba(torch.zeros(2, 8))
