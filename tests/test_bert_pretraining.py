"""BERT's pre-training (notebook 07): masking, next-sentence pairs, the loss, the loop."""

import math

import pytest
import torch
from onehot2gpt.bert_pretraining import mask_tokens, nsp_pairs
from onehot2gpt.utils import IGNORE_INDEX

SPECIALS = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]
MASK, VOCAB = 4, 1000


def _batch(n_rows=400, length=250, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (n_rows, length), generator=g)
    pad = length // 6
    ids[:, 0], ids[:, -pad - 1], ids[:, -pad:] = 2, 3, 0  # [CLS] … [SEP] then padding
    return ids


def _within(observed, p, n, sigmas=5):
    return abs(observed - p) < sigmas * math.sqrt(p * (1 - p) / n)


def test_mask_tokens_proportions_follow_80_10_10():
    ids = _batch()
    inputs, labels = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(1)
    )
    real = ~torch.isin(ids, torch.tensor(SPECIALS))
    chosen = labels != IGNORE_INDEX
    n_real, n_chosen = int(real.sum()), int(chosen.sum())
    assert _within(n_chosen / n_real, 0.15, n_real)
    assert not (chosen & ~real).any()  # specials never chosen
    assert torch.equal(labels[chosen], ids[chosen])  # labels = the originals
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else touched
    became_mask = (inputs == MASK) & chosen
    unchanged = (inputs == ids) & chosen
    randomised = chosen & ~became_mask & ~unchanged
    assert _within(became_mask.sum().item() / n_chosen, 0.8, n_chosen)
    # a random draw can hit the original id (1 in ~995): count those with "unchanged"
    assert _within(unchanged.sum().item() / n_chosen, 0.1, n_chosen, sigmas=6)
    assert _within(randomised.sum().item() / n_chosen, 0.1, n_chosen, sigmas=6)
    assert not torch.isin(inputs[randomised], torch.tensor(SPECIALS)).any()


def test_mask_tokens_is_seeded_and_validates():
    ids = _batch(20, 30)
    a = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(5)
    )
    b = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(5)
    )
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="special_ids"):
        mask_tokens(ids, mask_id=999, vocab_size=VOCAB, special_ids=SPECIALS)
    with pytest.raises(ValueError, match="between 0 and 1"):
        mask_tokens(ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, prob=1.5)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        mask_tokens(ids[0], mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS)


def test_whole_word_masking_masks_all_pieces_of_a_word():
    ids = _batch(200, 60, seed=2)
    word_ids = torch.full_like(ids, -1)
    real = ~torch.isin(ids, torch.tensor(SPECIALS))
    word_ids[real] = (torch.arange(ids.size(1)).expand_as(ids)[real] - 1) // 3  # 3 pieces per word
    _, labels = mask_tokens(
        ids,
        mask_id=MASK,
        vocab_size=VOCAB,
        special_ids=SPECIALS,
        word_ids=word_ids,
        generator=torch.Generator().manual_seed(3),
    )
    chosen = labels != IGNORE_INDEX
    for row in range(ids.size(0)):
        for word in word_ids[row][word_ids[row] >= 0].unique():
            pieces = chosen[row][word_ids[row] == word]
            assert pieces.all() or not pieces.any()  # all or nothing
    assert _within(chosen.sum().item() / real.sum().item(), 0.15, real.sum().item() / 3)


def test_nsp_pairs_are_half_next_half_random_from_other_articles():
    articles = [[f"a{i} s{j}" for j in range(5)] for i in range(30)]
    pairs = nsp_pairs(articles, 4000, seed=0)
    assert _within(sum(label == 0 for *_, label in pairs) / 4000, 0.5, 4000)
    for a, b, label in pairs:
        art_a, j = a.split()[0], int(a.split()[1][1:])
        if label == 0:
            assert b == f"{art_a} s{j + 1}"
        else:
            assert b.split()[0] != art_a
    assert pairs == nsp_pairs(articles, 4000, seed=0)
    with pytest.raises(ValueError, match="two"):
        nsp_pairs([["only one"]], 3)


def test_wikitext_articles_hold_sentences():
    from onehot2gpt.data import wikitext_articles

    articles = wikitext_articles("valid")
    assert 30 < len(articles) < 200
    sentences = [s for a in articles for s in a]
    assert all(s.strip() for s in sentences)
    assert not any("<unk>" in s or "@-@" in s or "@,@" in s for s in sentences)
    assert sum(s.endswith(" .") for s in sentences) > 0.9 * len(sentences)


def test_apply_masking_is_the_80_10_10_rule_given_the_draws():
    from onehot2gpt.bert_pretraining import apply_masking

    ids = torch.tensor([[10, 11, 12, 13, 14]])
    chosen = torch.tensor([[True, True, True, False, True]])
    action = torch.tensor([[0.1, 0.85, 0.95, 0.1, 0.8]])
    random_ids = torch.tensor([[50, 51, 52, 53, 54]])
    inputs, labels = apply_masking(ids, chosen, action, random_ids, MASK)
    assert inputs.tolist() == [[MASK, 51, 12, 13, 54]]
    assert labels.tolist() == [[10, 11, 12, IGNORE_INDEX, 14]]
    assert ids.tolist() == [[10, 11, 12, 13, 14]]  # not changed in place


class _Tok:  # the ids a WordPieceTokenizer exposes, on a made-up vocabulary
    pad_id, unk_id, cls_id, sep_id, mask_id = 0, 1, 2, 3, 4

    def __len__(self):
        return VOCAB


def _articles(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        [
            torch.randint(5, VOCAB, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
            for _ in range(4)
        ]
        for _ in range(n)
    ]


def test_pretraining_batch_is_pretraining_pairs_then_mask_tokens():
    from onehot2gpt.bert_pretraining import pretraining_batch, pretraining_pairs

    articles = _articles()
    batch = pretraining_batch(articles, 16, 20, _Tok(), torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    pairs = pretraining_pairs(articles, 16, 20, _Tok(), g)
    inputs, labels = mask_tokens(pairs["input_ids"], mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=g)
    assert torch.equal(batch["input_ids"], inputs) and torch.equal(batch["mlm_labels"], labels)
    for key in ("token_type_ids", "attention_mask", "nsp_labels"):
        assert torch.equal(batch[key], pairs[key])
    ids = pairs["input_ids"]
    assert (ids[:, 0] == _Tok.cls_id).all() and ((ids == _Tok.sep_id).sum(1) == 2).all()
    assert not torch.isin(ids, torch.tensor([MASK])).any()  # the pairs are not masked yet


def test_masked_lm_loss_equals_the_pretraining_loss_of_the_model():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import masked_lm_loss, pretraining_batch, pretraining_loss

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    ).eval()
    with torch.no_grad():
        model.mlm.decoder.bias.normal_()
    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0))
    _, mlm_loss, _, _, _ = pretraining_loss(model, batch)
    hidden = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
    mine = masked_lm_loss(
        hidden,
        batch["mlm_labels"],
        model.mlm.dense,
        model.mlm.norm,
        model.bert.embeddings.tok_emb.weight,
        model.mlm.decoder.bias,
    )
    torch.testing.assert_close(mine, mlm_loss)
    assert mine.requires_grad  # usable in a training step


def test_pretrain_bert_stops_at_the_first_non_finite_loss():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert
    from onehot2gpt.utils import TrainingDiverged

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    with torch.no_grad():
        model.nsp.weight.fill_(float("nan"))  # what a diverged update leaves behind
    with pytest.raises(TrainingDiverged, match=r"BERT diverged at step 0: the loss is nan.*\(now 0\.001\)"):
        pretrain_bert(model, _Tok(), _articles(), steps=3, batch_size=4, max_len=24, progress=False)


def test_pretrain_bert_sequence_length_schedule(monkeypatch):
    """The first short_steps steps train on pairs cut to short_len pieces, the rest at max_len."""
    from onehot2gpt import bert_pretraining
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    lengths = []
    real = bert_pretraining.pretraining_batch

    def recording(articles, batch_size, max_len, tokenizer, generator, whole_word=False, **kw):
        batch = real(articles, batch_size, max_len, tokenizer, generator, whole_word, **kw)
        lengths.append((max_len, batch["input_ids"].size(1)))
        return batch

    monkeypatch.setattr(bert_pretraining, "pretraining_batch", recording)
    history = bert_pretraining.pretrain_bert(
        model,
        _Tok(),
        _articles(),
        steps=5,
        batch_size=4,
        max_len=24,
        short_len=10,
        short_steps=3,
        warmup=1,
        progress=False,
    )
    assert len(history["loss"]) == 5
    assert [asked for asked, _ in lengths] == [10, 10, 10, 24, 24]
    assert all(got <= asked for asked, got in lengths)  # pairs are cut to the length asked
    for bad, match in (
        (dict(short_len=40, short_steps=2), "short_len must be between 8 and max_len=24"),
        (dict(short_len=10, short_steps=9), "short_steps must be between 0 and steps=5"),
        (dict(short_steps=2), "needs short_len"),
    ):
        with pytest.raises(ValueError, match=match):
            bert_pretraining.pretrain_bert(
                model, _Tok(), _articles(), steps=5, batch_size=4, max_len=24, progress=False, **bad
            )


def test_pretraining_batch_masks_the_share_asked_for_and_15_percent_by_default():
    from onehot2gpt.bert_pretraining import pretraining_batch

    articles = _articles()

    def chosen_share(**kw):
        batch = pretraining_batch(articles, 200, 24, _Tok(), torch.Generator().manual_seed(5), **kw)
        real = ~torch.isin(batch["input_ids"], torch.tensor([0, 2, 3]))  # not [PAD] [CLS] [SEP]
        return float((batch["mlm_labels"] != IGNORE_INDEX).sum() / real.sum()), batch

    default, batch = chosen_share()
    same, batch_015 = chosen_share(mask_prob=0.15)
    assert torch.equal(batch["mlm_labels"], batch_015["mlm_labels"])  # the default is BERT's 15 %
    higher, _ = chosen_share(mask_prob=0.4)
    assert 0.10 < default < 0.20 and 0.33 < higher < 0.47, (default, higher)


def test_pretrain_bert_bf16_autocast_trains_float32_weights_and_validates_mask_prob():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    history = pretrain_bert(
        model,
        _Tok(),
        _articles(),
        steps=3,
        batch_size=4,
        max_len=24,
        warmup=1,
        bf16=True,
        mask_prob=0.3,
        progress=False,
    )
    assert len(history["loss"]) == 3 and all(math.isfinite(v) for v in history["loss"])
    assert all(v.dtype == torch.float32 for v in model.state_dict().values() if v.is_floating_point())
    assert not torch.equal(before["nsp.weight"], model.state_dict()["nsp.weight"])  # it learned
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="mask_prob is the share of pieces to predict"):
            pretrain_bert(model, _Tok(), _articles(), steps=2, batch_size=4, max_len=24, mask_prob=bad, progress=False)


def test_the_train_command_refuses_bf16_without_native_support(monkeypatch, tmp_path):
    from onehot2gpt import bert_pretraining

    monkeypatch.setattr(bert_pretraining, "native_bf16", lambda device="cpu": False)
    with pytest.raises(SystemExit, match="no native bfloat16.*Leave out --bf16"):
        bert_pretraining.main(["train", "--out", str(tmp_path / "b"), "--bf16", "--steps", "1"])
    assert not (tmp_path / "b").exists()  # refused before any work
    assert bert_pretraining.native_bf16("meta") is False


def test_pretrain_bert_minimises_mlm_plus_nsp_weight_times_nsp():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    h = pretrain_bert(
        model, _Tok(), _articles(), steps=3, batch_size=4, max_len=24, warmup=1, nsp_weight=3.0, progress=False
    )
    torch.testing.assert_close(torch.tensor(h["loss"]), torch.tensor(h["mlm_loss"]) + 3 * torch.tensor(h["nsp_loss"]))
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="nsp_weight scales the next-sentence loss"):
            pretrain_bert(model, _Tok(), _articles(), steps=2, batch_size=4, max_len=24, nsp_weight=bad, progress=False)


def test_explicit_attention_gives_the_fused_kernels_loss_and_gradients(monkeypatch):
    """--explicit-attention only changes how attention is computed (the notebook-05 formula
    instead of PyTorch's fused kernel): with padding in the batch, the loss, every gradient and a
    few training steps match the fused path; the training loop never counts correct pieces."""
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert, pretraining_batch, pretraining_loss

    def model():
        torch.manual_seed(0)
        return BertForPreTraining(
            BertConfig(vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
        )

    fused = torch.nn.functional.scaled_dot_product_attention

    def only_fused_when(explicit):  # the explicit path never calls it
        def sdpa(*a, **k):
            assert not explicit, "explicit_attention=True still called the fused kernel"
            return fused(*a, **k)

        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)

    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0))
    assert (batch["attention_mask"] == 0).any()  # the mask matters in this batch
    runs = {}
    for explicit in (False, True):
        only_fused_when(explicit)
        m = model()
        loss, mlm, nsp, correct, n = pretraining_loss(m, batch, explicit_attention=explicit)
        loss.backward()
        runs[explicit] = (loss.detach(), correct, n, {k: p.grad.clone() for k, p in m.named_parameters()})
    torch.testing.assert_close(runs[True][0], runs[False][0])
    assert runs[True][1:3] == runs[False][1:3] and runs[True][2] > 0
    for name, grad in runs[False][3].items():
        torch.testing.assert_close(runs[True][3][name], grad, msg=lambda m: f"{name}: {m}")
    only_fused_when(False)
    assert pretraining_loss(model(), batch, count_correct=False)[3] is None

    trained = {}
    for explicit in (False, True):
        only_fused_when(explicit)
        m = model()
        pretrain_bert(
            m,
            _Tok(),
            _articles(),
            steps=3,
            batch_size=4,
            max_len=24,
            warmup=1,
            explicit_attention=explicit,
            progress=False,
        )
        trained[explicit] = m.state_dict()
    for name, value in trained[False].items():
        torch.testing.assert_close(trained[True][name], value, msg=lambda m: f"{name}: {m}")


def _fake_train_command(monkeypatch):
    """bert_pretraining's train command with the loop, the evaluation and the data faked: returns
    the keyword arguments the loop was called with (filled in by each run)."""
    from onehot2gpt import bert_pretraining

    seen = {}

    def fake_pretrain(model, tokenizer, articles, **kw):
        seen.update(kw)
        return {"loss": [1.0], "mlm_loss": [1.0], "nsp_loss": [0.5]}

    monkeypatch.setattr(bert_pretraining, "pretrain_bert", fake_pretrain)
    monkeypatch.setattr(
        bert_pretraining,
        "evaluate_pretraining",
        lambda *a, **k: {"mlm_accuracy": 0.1, "mlm_loss": 5.0, "nsp_accuracy": 0.5},
    )
    monkeypatch.setattr(
        "onehot2gpt.data.wikitext_articles",
        lambda split: [[" ".join(s) for s in [["the", "cat", "sat"], ["a", "dog", "ran"]]]] * 3,
    )
    return seen


def test_the_train_command_records_explicit_attention(tmp_path, monkeypatch):
    """The option reaches the loop and the checkpoint's recorded info, which says how it was built."""
    from onehot2gpt import bert_pretraining

    args = bert_pretraining.build_parser().parse_args(["train", "--out", "x"])
    assert args.explicit_attention is False  # the default: the fused kernel
    args = bert_pretraining.build_parser().parse_args(["train", "--out", "x", "--explicit-attention"])
    assert args.explicit_attention is True
    seen = _fake_train_command(monkeypatch)
    bert_pretraining.main(
        ["train", "--out", str(tmp_path / "b"), "--steps", "1", "--vocab-size", "40", "--explicit-attention"]
    )
    import json

    info = json.loads((tmp_path / "b" / "config.json").read_text())["info"]
    assert seen["explicit_attention"] is True and info["explicit_attention"] is True
    assert seen["sample"] == info["sample"] == "article"  # the committed checkpoint's draws
    bert_pretraining.main(
        ["train", "--out", str(tmp_path / "c"), "--steps", "1", "--vocab-size", "40", "--sample", "sentence"]
    )
    info = json.loads((tmp_path / "c" / "config.json").read_text())["info"]
    assert seen["sample"] == info["sample"] == "sentence"
    with pytest.raises(SystemExit):
        bert_pretraining.build_parser().parse_args(["train", "--out", "x", "--sample", "words"])


def _film_tokenizer():
    from onehot2gpt.subword import WordPieceTokenizer

    texts = [
        "a fine and moving film",
        "a dull and lifeless film",
        "the acting is fine",
        "the plot is dull",
        "moving , funny and fine",
        "lifeless acting and a dull plot",
    ]
    return WordPieceTokenizer.train(texts * 5, vocab_size=60, score="frequency"), texts


def test_adapt_mlm_lowers_the_masked_lm_loss_on_the_tasks_text_and_leaves_nsp_alone():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import adapt_mlm

    tok, texts = _film_tokenizer()
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=len(tok), d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=32, dropout=0.0)
    )
    nsp_before = model.nsp.weight.detach().clone()
    emb_before = model.bert.embeddings.tok_emb.weight.detach().clone()
    losses = adapt_mlm(model, tok, texts, steps=60, batch_size=16, max_len=24, lr=3e-3, mask_prob=0.3, progress=False)
    assert 50 <= len(losses) <= 60 and all(math.isfinite(v) for v in losses)
    assert sum(losses[-10:]) / 10 < 0.6 * sum(losses[:10]) / 10, (losses[:10], losses[-10:])
    assert torch.equal(model.nsp.weight, nsp_before)  # no next-sentence loss here
    assert not torch.equal(model.bert.embeddings.tok_emb.weight, emb_before)
    assert not model.training


def test_adapt_mlm_refuses_bad_input_before_training():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import adapt_mlm

    tok, texts = _film_tokenizer()
    model = BertForPreTraining(
        BertConfig(vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for bad, error, match in (
        ("a fine film", TypeError, "list of sentences"),
        ([1, 2], TypeError, "list of sentences"),
        ([], ValueError, "no sentence"),
        (["", "  "], ValueError, "no sentence"),
    ):
        with pytest.raises(error, match=match):
            adapt_mlm(model, tok, bad, steps=2, max_len=24, progress=False)
    for kw, match in (
        (dict(steps=0), "steps"),
        (dict(batch_size=-1), "batch_size"),
        (dict(mask_prob=1.0), "mask_prob"),
        (dict(max_len=2), "between 3"),
        (dict(max_len=64), "between 3 and this BERT's 32"),
    ):
        with pytest.raises(ValueError, match=match):
            adapt_mlm(model, tok, texts, progress=False, **{"max_len": 24, **kw})
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    with pytest.raises(TypeError, match="BertForPreTraining"):
        adapt_mlm(model.bert, tok, texts, max_len=24, progress=False)  # the encoder alone: no MLM head


def test_all_nsp_pairs_holds_every_pair_once_half_next_half_random():
    from onehot2gpt.bert_pretraining import all_nsp_pairs

    articles = [[f"a{i} s{j}" for j in range(n)] for i, n in enumerate([5, 1, 3, 2, 0, 4])]
    pairs = all_nsp_pairs(articles, seed=0)
    assert len(pairs) == 2 * (4 + 0 + 2 + 1 + 0 + 3)
    assert [label for *_, label in pairs] == [0, 1] * (len(pairs) // 2)
    nexts = {(a, b) for a, b, label in pairs if label == 0}
    assert nexts == {(f"a{i} s{j}", f"a{i} s{j + 1}") for i, n in enumerate([5, 1, 3, 2, 0, 4]) for j in range(n - 1)}
    for a, b, label in pairs:
        if label == 1:
            assert b.split()[0] != a.split()[0]  # from another article
    assert pairs == all_nsp_pairs(articles, seed=0)
    assert pairs != all_nsp_pairs(articles, seed=1)  # the random partners change
    for bad in ([["one"], ["two"]], [["a", "b"]], [["a", "b"], []]):
        with pytest.raises(ValueError, match="two or more sentences"):
            all_nsp_pairs(bad)


def _nsp_model(seed=0):
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(seed)
    return BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )


def _sensitive_head(model, articles):
    """Point the NSP head of a random model along the pooled vectors' spread, so that its answers
    differ from pair to pair (a random head answers every pair alike)."""
    from onehot2gpt.bert_pretraining import evaluate_nsp

    pooled = []
    handle = model.bert.register_forward_hook(lambda module, args, out: pooled.append(out.pooled.detach()))
    evaluate_nsp(model, _Tok(), articles, max_len=20, mask_prob=0.0, batch_size=1)
    handle.remove()
    pooled = torch.cat(pooled)
    u = pooled[0] - pooled.mean(0)
    scores = (pooled @ u).sort().values
    middle = scores[len(scores) // 2 - 1 : len(scores) // 2 + 1].mean()  # between two pairs, not on one
    with torch.no_grad():
        model.nsp.weight.copy_(torch.stack([u, -u]))
        model.nsp.bias.copy_(torch.stack([-middle, middle]))


def test_evaluate_nsp_scores_every_pair_whatever_the_batching():
    from onehot2gpt.bert_pretraining import all_nsp_pairs, evaluate_nsp

    model, articles = _nsp_model().train(), _articles(n=20)
    _sensitive_head(model, articles)
    whole = evaluate_nsp(model, _Tok(), articles, max_len=20, mask_prob=0.0)
    assert model.training  # left as it was found
    assert whole["pairs"] == len(all_nsp_pairs(articles, seed=1234)) == whole["correct"].numel() == 2 * 20 * 3
    assert whole["nsp_accuracy"] == pytest.approx(whole["correct"].float().mean().item())
    assert 0 < whole["correct"].sum() < whole["pairs"] and whole["correct"].tolist() != [True, False] * 60
    # padding and batching change nothing: one pair at a time gives the same predictions
    single = evaluate_nsp(model, _Tok(), articles, max_len=20, mask_prob=0.0, batch_size=1)
    assert torch.equal(single["correct"], whole["correct"])
    # a head that always says IsNext is right on exactly half the pairs
    with torch.no_grad():
        model.nsp.weight.zero_()
        model.nsp.bias.copy_(torch.tensor([5.0, -5.0]))
    always = evaluate_nsp(model, _Tok(), articles, max_len=20)
    assert always["nsp_accuracy"] == 0.5
    assert always["correct"].tolist() == [True, False] * (always["pairs"] // 2)


def test_evaluate_nsp_masks_the_input_like_pre_training_and_is_seeded():
    from onehot2gpt.bert_pretraining import evaluate_nsp

    model, articles = _nsp_model(1), _articles(n=20)
    seen = []
    model.bert.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))

    def inputs(**kw):
        seen.clear()
        evaluate_nsp(model, _Tok(), articles, max_len=20, **kw)
        return torch.cat([torch.nn.functional.pad(x, (0, 20 - x.size(1))) for x in seen])

    whole, masked = inputs(mask_prob=0.0), inputs(mask_prob=0.5)
    assert not (whole == MASK).any()
    real = ~torch.isin(whole, torch.tensor(SPECIALS))
    assert _within(((masked == MASK) & real).sum().item() / real.sum().item(), 0.5 * 0.8, real.sum().item())
    assert torch.equal(masked, inputs(mask_prob=0.5))  # the same masks again
    assert not torch.equal(masked, inputs(mask_prob=0.5, seed=7))


def test_evaluate_nsp_refuses_bad_input():
    from onehot2gpt.bert_pretraining import evaluate_nsp

    model, articles = _nsp_model(), _articles(n=4)
    with pytest.raises(TypeError, match="BertForPreTraining"):
        evaluate_nsp(model.bert, _Tok(), articles)  # the encoder alone: no NSP head
    for kw, error, match in (
        (dict(max_len=4), ValueError, "between 5 and this BERT's 32"),
        (dict(max_len=64), ValueError, "between 5 and this BERT's 32"),
        (dict(max_len=20.0), TypeError, "max_len"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(mask_prob=1.0), ValueError, "mask_prob"),
        (dict(mask_prob=-0.1), ValueError, "mask_prob"),
        (dict(mask_prob="0.15"), ValueError, "mask_prob"),
    ):
        with pytest.raises(error, match=match):
            evaluate_nsp(model, _Tok(), articles, **{"max_len": 20, **kw})
    with pytest.raises(ValueError, match="two or more sentences"):
        evaluate_nsp(model, _Tok(), [[[5, 6, 7]]], max_len=20)


def _labelled_articles(sizes):
    """Article k's sentence j is the two pieces [10 + k, 200 + j], so a pair can be read back."""
    return [[[10 + k, 200 + j] for j in range(n)] for k, n in enumerate(sizes)]


def _read_pairs(batch):
    rows = batch["input_ids"].tolist()
    return [((r[1] - 10, r[2] - 200), (r[4] - 10, r[5] - 200)) for r in rows]


def test_pretraining_pairs_by_sentence_draw_every_sentence_alike():
    from onehot2gpt.bert_pretraining import pretraining_pairs

    sizes = [2, 2, 61, 121]  # 1 + 1 + 60 + 120 sentences with a next one
    articles, n = _labelled_articles(sizes), 4000
    draws = {}
    for sample in ("article", "sentence"):
        batch = pretraining_pairs(articles, n, 16, _Tok(), torch.Generator().manual_seed(0), sample=sample)
        draws[sample] = (_read_pairs(batch), batch["nsp_labels"].tolist())
    pairs, labels = draws["sentence"]
    assert _within(sum(labels) / n, 0.5, n)
    first = [a for a, _ in pairs]
    # by sentence, article 3 gives 120 of the 182 first sentences; by article, a quarter of them
    assert _within(sum(k == 3 for k, _ in first) / n, 120 / 182, n)
    assert _within(sum(k == 3 for (k, _), _ in draws["article"][0]) / n, 0.25, n)
    assert _within(sum(k == 0 for k, _ in first) / n, 1 / 182, n)
    for (a, b), label in zip(pairs, labels):
        if label == 0:
            assert b == (a[0], a[1] + 1)  # IsNext: the very next sentence
        else:
            assert b[0] != a[0] and 0 <= b[1] < sizes[b[0]]  # NotNext: another article's
    partners = [b for (a, b), label in zip(pairs, labels) if label == 1 and a[0] != 3]
    # a NotNext partner is any sentence of the other articles alike: article 3 holds 121 of 125 there
    assert _within(sum(k == 3 for k, _ in partners) / len(partners), 121 / 125, len(partners))
    again = pretraining_pairs(articles, n, 16, _Tok(), torch.Generator().manual_seed(0), sample="sentence")
    assert _read_pairs(again) == pairs  # seeded
    with pytest.raises(ValueError, match="sample is one of"):
        pretraining_pairs(articles, 4, 16, _Tok(), torch.Generator(), sample="word")


def test_pretrain_bert_passes_sample_to_every_batch(monkeypatch):
    from onehot2gpt import bert_pretraining
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    seen, real = [], bert_pretraining.pretraining_batch

    def spy(*args, **kwargs):
        seen.append(kwargs.get("sample"))
        return real(*args, **kwargs)

    monkeypatch.setattr(bert_pretraining, "pretraining_batch", spy)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    bert_pretraining.pretrain_bert(
        model, _Tok(), _articles(), steps=3, batch_size=4, max_len=24, sample="sentence", progress=False
    )
    assert seen == ["sentence"] * 3
    with pytest.raises(ValueError, match="sample is one of"):
        bert_pretraining.pretrain_bert(
            model, _Tok(), _articles(), steps=1, max_len=24, sample="Sentence", progress=False
        )


# ---- the laptop recipe's faster step: the chunked masked-LM loss and length-sorted batches ----


def _mlm_losses_and_grads(bf16, chunk, pad_to=64):
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import chunked_mlm_loss

    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=500, max_len=32, dropout=0.0))
    with torch.no_grad():
        model.mlm.decoder.bias.normal_()  # a bias gradient that is not all alike
    torch.manual_seed(1)
    hidden = torch.randn(77, 128, requires_grad=True)  # 77 rows: the last chunk is a short one
    targets = torch.randint(500, (77,))
    params = [hidden, *model.mlm.parameters()]  # the decoder's weight is the embedding
    out = []
    for chunked in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = (
                chunked_mlm_loss(model, hidden, targets, chunk=chunk, pad_to=pad_to)
                if chunked
                else torch.nn.functional.cross_entropy(model.mlm(hidden), targets)
            )
        out.append((loss, torch.autograd.grad(loss, params)))
    return out


@pytest.mark.parametrize("chunk, pad_to", [(16, 64), (128, 64), (32, 1), (128, 100)])
def test_chunked_mlm_loss_and_every_gradient_equal_the_plain_loss_in_float32(chunk, pad_to):
    """77 rows: padded to 128 (or 100) rows, whose loss and gradients must not count, or not."""
    (plain, plain_grads), (chunked, chunked_grads) = _mlm_losses_and_grads(bf16=False, chunk=chunk, pad_to=pad_to)
    torch.testing.assert_close(chunked, plain)
    assert len(plain_grads) == 7
    for a, b in zip(chunked_grads, plain_grads):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pad_to", [1, 64])
def test_chunked_mlm_loss_under_bfloat16_autocast_matches_within_bfloat16_rounding(pad_to):
    (plain, plain_grads), (chunked, chunked_grads) = _mlm_losses_and_grads(bf16=True, chunk=32, pad_to=pad_to)
    torch.testing.assert_close(chunked, plain, rtol=1e-3, atol=1e-3)
    for a, b in zip(chunked_grads, plain_grads):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=0.02, atol=0.02 * float(b.abs().max()))


def test_chunked_mlm_loss_refuses_bad_shapes_and_chunks():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import chunked_mlm_loss

    model = BertForPreTraining(BertConfig.tiny(vocab_size=50, max_len=32, dropout=0.0))
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        chunked_mlm_loss(model, torch.randn(2, 3, 128), torch.zeros(2, dtype=torch.long))
    for chunk in (0, 2.5, True):
        with pytest.raises(ValueError, match="chunk"):
            chunked_mlm_loss(model, torch.randn(4, 128), torch.zeros(4, dtype=torch.long), chunk=chunk)
    for pad_to in (0, 8.0, False):
        with pytest.raises(ValueError, match="pad_to"):
            chunked_mlm_loss(model, torch.randn(4, 128), torch.zeros(4, dtype=torch.long), pad_to=pad_to)
    with pytest.raises(ValueError, match="no masked pieces"):
        chunked_mlm_loss(model, torch.randn(0, 128), torch.zeros(0, dtype=torch.long))


def test_pretraining_loss_with_the_chunked_loss_trains_the_same_step():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretraining_batch, pretraining_loss

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0))
    results = []
    for chunked in (False, True):
        model.zero_grad()
        loss, mlm, nsp, correct, n = pretraining_loss(model, batch, count_correct=False, chunked_loss=chunked)
        loss.backward()
        results.append((loss.detach(), correct, n, [p.grad.clone() for p in model.parameters()]))
    (plain, _, n0, plain_grads), (chunked, correct, n1, chunked_grads) = results
    torch.testing.assert_close(chunked, plain)
    assert correct is None and n0 == n1 == int((batch["mlm_labels"] != IGNORE_INDEX).sum())
    for a, b in zip(chunked_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # evaluation counts correct predictions, which needs the logits: the plain path answers
    assert pretraining_loss(model, batch, chunked_loss=True)[3] is not None


def test_length_sorted_batches_regroup_the_same_pairs_by_length():
    from onehot2gpt.bert_pretraining import LENGTH_STEP, length_sorted_batches, pretraining_pairs

    articles = _articles(n=30)
    pool, size, max_len = 5, 8, 20
    batches = length_sorted_batches(
        articles, size, max_len, _Tok(), torch.Generator().manual_seed(4), pool, mask_prob=0.25
    )
    pairs = pretraining_pairs(articles, pool * size, max_len, _Tok(), torch.Generator().manual_seed(4))
    assert len(batches) == pool and all(len(b["nsp_labels"]) == size for b in batches)

    def rows(ids, segs, nsp, mask):  # each pair read back whole, its padding dropped
        return sorted(
            (tuple(i[m.bool()].tolist()), tuple(s[m.bool()].tolist()), int(y))
            for i, s, y, m in zip(ids, segs, nsp, mask)
        )

    drawn = rows(pairs["input_ids"], pairs["token_type_ids"], pairs["nsp_labels"], pairs["attention_mask"])
    unmasked = []
    for b in batches:
        lengths = b["attention_mask"].sum(1)
        # padded to its longest pair, rounded up to a multiple of LENGTH_STEP (at most the drawn width)
        width = pairs["input_ids"].shape[1]
        assert b["input_ids"].shape[1] == min(width, -(-int(lengths.max()) // LENGTH_STEP) * LENGTH_STEP)
        chosen = b["mlm_labels"] != IGNORE_INDEX
        original = torch.where(chosen, b["mlm_labels"], b["input_ids"])
        assert set(b) == {"input_ids", "token_type_ids", "attention_mask", "nsp_labels", "mlm_labels"}
        assert (b["input_ids"][b["attention_mask"] == 0] == _Tok.pad_id).all()
        assert not chosen[b["attention_mask"] == 0].any()  # padding is never a target
        unmasked += rows(original, b["token_type_ids"], b["nsp_labels"], b["attention_mask"])
    assert sorted(unmasked) == drawn  # the same pairs with their segments and labels, each once
    spans = sorted((int(b["attention_mask"].sum(1).min()), int(b["attention_mask"].sum(1).max())) for b in batches)
    for (_, hi), (lo, _) in zip(spans, spans[1:]):
        assert hi <= lo  # grouped: the lengths do not interleave
    padded = sum(b["input_ids"].numel() for b in batches)
    assert padded < pool * size * pairs["input_ids"].shape[1]  # less padding than drawn batches
    assert any(b["input_ids"].shape[1] < pairs["input_ids"].shape[1] for b in batches)
    again = length_sorted_batches(
        articles, size, max_len, _Tok(), torch.Generator().manual_seed(4), pool, mask_prob=0.25
    )
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, again))  # seeded
    with pytest.raises(ValueError, match="pool"):
        length_sorted_batches(articles, size, max_len, _Tok(), torch.Generator(), 0)


def test_pretrain_bert_with_length_buckets_trains_on_every_drawn_batch(monkeypatch):
    from onehot2gpt import bert_pretraining
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    pools, real = [], bert_pretraining.length_sorted_batches

    def spy(*args, **kwargs):
        pools.append(args[2])  # the length asked for
        return real(*args, **kwargs)

    monkeypatch.setattr(bert_pretraining, "length_sorted_batches", spy)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    history = bert_pretraining.pretrain_bert(
        model,
        _Tok(),
        _articles(),
        steps=10,
        batch_size=4,
        max_len=24,
        short_len=12,
        short_steps=3,
        length_buckets=4,
        chunked_loss=True,
        progress=False,
    )
    # 3 short steps from one pool of 4; the length changes, so the long steps draw new pools: 4 + 3
    assert pools == [12, 24, 24] and len(history["loss"]) == 10
    assert all(math.isfinite(x) for x in history["loss"])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="length_buckets"):
            bert_pretraining.pretrain_bert(
                model, _Tok(), _articles(), steps=1, max_len=24, length_buckets=bad, progress=False
            )


def _sparse_model(n_layers=2):
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=n_layers, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    return model


@pytest.mark.parametrize("explicit", [False, True])
def test_encode_for_losses_gives_the_full_encoders_rows_and_pooled_cls(explicit):
    """The top layer run only at [CLS] and the masked pieces gives exactly the rows the full
    encoder gives there, in x[chosen]'s order, and the same pooled [CLS]: pairs with different
    numbers of masked pieces and padding in the batch."""
    from onehot2gpt.bert_pretraining import encode_for_losses, pretraining_batch

    model = _sparse_model(n_layers=2)
    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0), mask_prob=0.25)
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    counts = chosen.sum(1)
    assert (batch["attention_mask"] == 0).any() and counts.min() < counts.max()  # the batch tests both
    full = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    hidden, pooled = encode_for_losses(model.bert, batch, chosen, explicit_attention=explicit)
    assert hidden.shape == (int(counts.sum()), 16)
    torch.testing.assert_close(hidden, full.last_hidden_state[chosen])
    torch.testing.assert_close(pooled, full.pooled)


def test_pretraining_loss_with_the_sparse_top_layer_gives_the_same_loss_and_gradients():
    """--sparse-top changes no number: the loss, the count of correct pieces and every
    parameter's gradient equal the full encoder's, with the plain and the chunked MLM loss, and a
    few training steps end at the same weights."""
    from onehot2gpt.bert_pretraining import pretrain_bert, pretraining_batch, pretraining_loss

    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0), mask_prob=0.25)
    for count_correct, chunked in ((True, False), (False, True)):
        runs = {}
        for sparse in (False, True):
            model = _sparse_model()
            loss, mlm, nsp, correct, n = pretraining_loss(
                model, batch, count_correct=count_correct, chunked_loss=chunked, sparse_top=sparse
            )
            loss.backward()
            runs[sparse] = (
                loss.detach(),
                nsp.detach(),
                correct,
                n,
                {k: p.grad.clone() for k, p in model.named_parameters()},
            )
        torch.testing.assert_close(runs[True][0], runs[False][0])
        torch.testing.assert_close(runs[True][1], runs[False][1])
        assert runs[True][2:4] == runs[False][2:4]
        for name, grad in runs[False][4].items():
            assert grad.abs().sum() > 0, f"{name} got no gradient, so the test could not see it differ"
            torch.testing.assert_close(runs[True][4][name], grad, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    trained = {}
    for sparse in (False, True):
        model = _sparse_model()
        pretrain_bert(
            model,
            _Tok(),
            _articles(),
            steps=3,
            batch_size=4,
            max_len=24,
            warmup=1,
            mask_prob=0.25,
            sparse_top=sparse,
            progress=False,
        )
        trained[sparse] = model.state_dict()
    for name, value in trained[False].items():
        torch.testing.assert_close(trained[True][name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


def test_encode_for_losses_refuses_what_it_cannot_compute():
    from onehot2gpt.bert_pretraining import encode_for_losses, pretraining_batch
    from onehot2gpt.transformer import Encoder

    model = _sparse_model()
    batch = pretraining_batch(_articles(), 4, 24, _Tok(), torch.Generator().manual_seed(0))
    chosen = batch["mlm_labels"] != IGNORE_INDEX
    with pytest.raises(ValueError, match="bool tensor"):
        encode_for_losses(model.bert, batch, chosen.long())
    with pytest.raises(ValueError, match="bool tensor"):
        encode_for_losses(model.bert, batch, chosen[:, :-1])
    cls_too = chosen.clone()
    cls_too[0, 0] = True
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        encode_for_losses(model.bert, batch, cls_too)
    model.bert.encoder = Encoder(2, 16, 2, 32, norm_first=True)
    with pytest.raises(ValueError, match="pre-norm"):
        encode_for_losses(model.bert, batch, chosen)


def test_the_train_command_passes_and_records_sparse_top(tmp_path, monkeypatch):
    from onehot2gpt import bert_pretraining

    assert bert_pretraining.build_parser().parse_args(["train", "--out", "x"]).sparse_top is False
    seen = _fake_train_command(monkeypatch)
    bert_pretraining.main(["train", "--out", str(tmp_path / "b"), "--steps", "1", "--vocab-size", "40", "--sparse-top"])
    import json

    info = json.loads((tmp_path / "b" / "config.json").read_text())["info"]
    assert seen["sparse_top"] is True and info["sparse_top"] is True


def _state_before_step(model, when):
    """Snapshots of `model`'s weights taken just before training step `when` (1, 2, …) runs its
    forward pass, and the steps at which each encoder layer ran: (snapshots, {layer: [steps]})."""
    step, snaps, ran = [0], {}, {}

    def count(module, args):
        step[0] += 1
        if step[0] == when:
            snaps.update({k: v.detach().clone() for k, v in model.state_dict().items()})

    hooks = [model.bert.embeddings.register_forward_pre_hook(count)]
    for i, layer in enumerate(list(model.bert.encoder.layers)):
        # on its attention, which runs whether the block is called whole or (--sparse-top) in parts
        hooks.append(layer.self_attn.register_forward_pre_hook(lambda m, a, i=i: ran.setdefault(i, []).append(step[0])))
    return snaps, ran, hooks


@pytest.mark.parametrize("sparse", [False, True])
def test_progressive_stacking_trains_the_bottom_half_then_copies_it_on_top(sparse):
    """--stack-steps S: the first S steps are exactly a 2-layer BERT's training (the top half never
    runs), then layers 0, 1 are copied onto 2, 3 and all four train."""
    from onehot2gpt.bert_pretraining import pretrain_bert

    kw = dict(steps=5, batch_size=4, max_len=24, warmup=1, mask_prob=0.25, sparse_top=sparse, progress=False)
    model = _sparse_model(n_layers=4)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    layers = model.bert.encoder.layers
    snaps, ran, hooks = _state_before_step(model, 4)
    pretrain_bert(model, _Tok(), _articles(), stack_steps=3, **kw)
    for h in hooks:
        h.remove()
    assert model.bert.encoder.layers is layers and len(layers) == 4  # whole again afterwards
    assert ran[0] == ran[1] == [1, 2, 3, 4, 5] and ran[2] == ran[3] == [4, 5]
    for name, value in snaps.items():
        if name.startswith(("bert.encoder.layers.2.", "bert.encoder.layers.3.")):
            low = name.replace("layers.2.", "layers.0.").replace("layers.3.", "layers.1.")
            if value.dim() == 2:  # matrices start apart (biases 0, norms 1)
                assert not torch.equal(start[name], start[low]), name  # so a copy is visible
            torch.testing.assert_close(value, snaps[low], rtol=0, atol=0, msg=lambda m: f"{name}: {m}")
            assert not torch.equal(model.state_dict()[name], value)  # and then trained on
    # the first phase is a 2-layer BERT's training: the same weights before step 4
    small = _sparse_model(n_layers=2)
    small.load_state_dict({k: v for k, v in start.items() if ".layers.2." not in k and ".layers.3." not in k})
    small_snaps, _, hooks = _state_before_step(small, 4)
    pretrain_bert(small, _Tok(), _articles(), **kw)
    first = next(k for k in small_snaps if ".layers.0." in k and k.endswith("weight"))
    assert not torch.equal(small_snaps[first], start[first])  # three steps have trained it
    for name, value in small_snaps.items():
        torch.testing.assert_close(snaps[name], value, rtol=1e-6, atol=1e-7, msg=lambda m: f"{name}: {m}")


def test_stack_layers_copies_weights_and_optimizer_state_without_sharing_them():
    from onehot2gpt.bert_pretraining import stack_layers

    model = _sparse_model(n_layers=4)
    layers = model.bert.encoder.layers
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        x = torch.randn(2, 5, 16)
        for layer in layers[:2]:
            x, _ = layer(x)
        opt.zero_grad()
        x.pow(2).mean().backward()
        opt.step()
    stack_layers(layers, opt)
    for low, high in ((layers[0], layers[2]), (layers[1], layers[3])):
        for p_low, p_high in zip(low.parameters(), high.parameters()):
            assert torch.equal(p_low, p_high)
            for key in ("step", "exp_avg", "exp_avg_sq"):
                assert torch.equal(opt.state[p_high][key], opt.state[p_low][key]), key
            opt.state[p_high]["exp_avg"].add_(1.0)  # a copy, not the same tensor
            assert not torch.equal(opt.state[p_high]["exp_avg"], opt.state[p_low]["exp_avg"])
            assert p_high.data_ptr() != p_low.data_ptr()


def test_progressive_stacking_refuses_bad_settings_and_leaves_the_model_whole():
    from onehot2gpt.bert_pretraining import pretrain_bert
    from onehot2gpt.utils import TrainingDiverged

    kw = dict(batch_size=4, max_len=24, warmup=1, progress=False)
    for bad in (-1, 5, 6, 1.5, True, "2"):
        with pytest.raises(ValueError, match="stack_steps"):
            pretrain_bert(_sparse_model(n_layers=4), _Tok(), _articles(), steps=5, stack_steps=bad, **kw)
    with pytest.raises(ValueError, match="even number of encoder layers"):
        pretrain_bert(_sparse_model(n_layers=3), _Tok(), _articles(), steps=5, stack_steps=2, **kw)
    model = _sparse_model(n_layers=4)
    layers = model.bert.encoder.layers
    with pytest.raises(TrainingDiverged):  # stops inside the first phase
        pretrain_bert(model, _Tok(), _articles(), steps=5, stack_steps=4, lr=float("inf"), **kw)
    assert model.bert.encoder.layers is layers and len(layers) == 4


def test_the_train_command_passes_and_records_stack_steps(tmp_path, monkeypatch):
    from onehot2gpt import bert_pretraining

    assert bert_pretraining.build_parser().parse_args(["train", "--out", "x"]).stack_steps == 0
    seen = _fake_train_command(monkeypatch)
    bert_pretraining.main(
        ["train", "--out", str(tmp_path / "b"), "--steps", "10", "--vocab-size", "40", "--stack-steps", "6"]
    )
    import json

    info = json.loads((tmp_path / "b" / "config.json").read_text())["info"]
    assert seen["stack_steps"] == 6 and info["stack_steps"] == 6
