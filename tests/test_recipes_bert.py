"""The BERT recipe's speed tricks (recipes/_bert.py): each computes the losses and gradients of the
plain loop the library teaches (onehot2gpt.bert_pretraining), and the studied switches do what they say."""

import math
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt.utils import IGNORE_INDEX
from test_bert_pretraining import MASK, SPECIALS, VOCAB, _articles, _Tok, _within

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))


def _model(n_layers=1, dropout=0.0):
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    return BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=n_layers, n_heads=2, d_ff=32, max_len=32, dropout=dropout)
    )


def _fast(model, **kw):
    """pretrain_bert_fast on the test corpus, 4 pairs of at most 24 pieces a step unless `kw` says
    otherwise, no progress bar."""
    import _bert

    return _bert.pretrain_bert_fast(
        model, _Tok(), _articles(), **{"batch_size": 4, "max_len": 24, "progress": False, **kw}
    )


def test_the_fast_loop_with_every_switch_off_is_the_plain_loop_step_for_step():
    """pretrain_bert_fast without switches trains exactly as the library's pretrain_bert: the same
    losses at every step and the same weights after, with dropout on (the same random draws)."""
    from _bert import fast_pretraining_loss, pretrain_bert_fast
    from onehot2gpt.bert_pretraining import pretrain_bert, pretraining_batch, pretraining_loss

    runs = []
    for loop in (pretrain_bert, pretrain_bert_fast):
        model = _model(n_layers=2, dropout=0.1)
        torch.manual_seed(1)
        history = loop(model, _Tok(), _articles(), steps=4, batch_size=4, max_len=24, warmup=1, progress=False)
        runs.append((history, model.state_dict()))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        torch.testing.assert_close(runs[1][1][name], value, rtol=0, atol=0)
    model = _model().eval()
    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0))
    plain, fast = pretraining_loss(model, batch), fast_pretraining_loss(model, batch)
    assert [x.item() for x in plain[:3]] == [x.item() for x in fast[:3]] and plain[3:] == fast[3:]


def test_the_bert_recipe_passes_its_switches_to_the_fast_loop_and_records_them(tmp_path, monkeypatch):
    """--laptop trains with pretrain_bert_fast and its switches; the default with the plain loop.
    The data, the loops and the evaluation are faked: this checks the wiring, not the training."""
    import json
    import runpy

    import _bert
    from onehot2gpt import bert_pretraining

    seen = {}

    def fake(name):
        def loop(model, tokenizer, articles, **kw):
            seen.clear()
            seen.update(kw, loop=name)
            return {"loss": [1.0], "mlm_loss": [1.0], "nsp_loss": [0.5]}

        return loop

    monkeypatch.setattr(bert_pretraining, "pretrain_bert", fake("plain"))
    monkeypatch.setattr(_bert, "pretrain_bert_fast", fake("fast"))
    monkeypatch.setattr(_bert, "native_bf16", lambda device="cpu": True)
    monkeypatch.setattr(
        bert_pretraining,
        "evaluate_pretraining",
        lambda *a, **k: {"mlm_accuracy": 0.1, "mlm_loss": 5.0, "nsp_accuracy": 0.5},
    )
    monkeypatch.setattr(_bert, "evaluate_nsp", lambda *a, **k: {"nsp_accuracy": 0.5})
    monkeypatch.setattr(
        "onehot2gpt.data.wikitext_articles",
        lambda split: [[" ".join(s) for s in [["the", "cat", "sat"], ["a", "dog", "ran"]]]] * 3,
    )
    script = str(Path(__file__).resolve().parents[1] / "recipes" / "bert-wikitext2.py")
    for name, extra in (("plain", []), ("fast", ["--laptop"])):
        monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path / name), "--set", "VOCAB_SIZE=40", *extra])
        runpy.run_path(script, run_name="__main__")
        info = json.loads((tmp_path / name / "config.json").read_text())["info"]
        assert seen["loop"] == name and info["loop"].endswith(
            "pretrain_bert_fast" if name == "fast" else "pretrain_bert"
        )
        assert info["arguments"]["VOCAB_SIZE"] == 40 and info["command"].startswith("python recipes/bert-wikitext2.py")
    assert seen["steps"] == info["steps"] == 14000 and seen["mask_prob"] == 0.25
    assert seen["bf16"] and seen["explicit_attention"] and seen["chunked_loss"] and seen["sparse_top"]


def test_pretrain_bert_sequence_length_schedule(monkeypatch):
    """The first short_steps steps train on pairs cut to short_len pieces, the rest at max_len."""
    import _bert as bert_pretraining

    model = _model()
    lengths = []
    real = bert_pretraining.pretraining_batch

    def recording(articles, batch_size, max_len, tokenizer, generator, **kw):
        batch = real(articles, batch_size, max_len, tokenizer, generator, **kw)
        lengths.append((max_len, batch["input_ids"].size(1)))
        return batch

    monkeypatch.setattr(bert_pretraining, "pretraining_batch", recording)
    history = _fast(model, steps=5, short_len=10, short_steps=3, warmup=1)
    assert len(history["loss"]) == 5
    assert [asked for asked, _ in lengths] == [10, 10, 10, 24, 24]
    assert all(got <= asked for asked, got in lengths)  # pairs are cut to the length asked
    for bad, match in (
        (dict(short_len=40, short_steps=2), "short_len must be between 8 and max_len=24"),
        (dict(short_len=10, short_steps=9), "short_steps must be between 0 and steps=5"),
        (dict(short_steps=2), "needs short_len"),
    ):
        with pytest.raises(ValueError, match=match):
            bert_pretraining.pretrain_bert_fast(
                model, _Tok(), _articles(), steps=5, batch_size=4, max_len=24, progress=False, **bad
            )


def test_pretrain_bert_bf16_autocast_trains_float32_weights_and_validates_mask_prob():
    from _bert import pretrain_bert_fast as pretrain_bert

    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    history = _fast(model, steps=3, warmup=1, bf16=True, mask_prob=0.3)
    assert len(history["loss"]) == 3 and all(math.isfinite(v) for v in history["loss"])
    assert all(v.dtype == torch.float32 for v in model.state_dict().values() if v.is_floating_point())
    assert not torch.equal(before["nsp.weight"], model.state_dict()["nsp.weight"])  # it learned
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="mask_prob is the share of pieces to predict"):
            pretrain_bert(model, _Tok(), _articles(), steps=2, batch_size=4, max_len=24, mask_prob=bad, progress=False)


def test_pretrain_bert_minimises_mlm_plus_nsp_weight_times_nsp():
    from _bert import pretrain_bert_fast as pretrain_bert

    model = _model()
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
    from _bert import fast_pretraining_loss as pretraining_loss
    from _bert import pretraining_batch

    def model():
        return _model(n_layers=2)

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
        _fast(m, steps=3, warmup=1, explicit_attention=explicit)
        trained[explicit] = m.state_dict()
    for name, value in trained[False].items():
        torch.testing.assert_close(trained[True][name], value, msg=lambda m: f"{name}: {m}")


def test_all_nsp_pairs_holds_every_pair_once_half_next_half_random():
    from _bert import all_nsp_pairs

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
    from _bert import evaluate_nsp

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
    from _bert import all_nsp_pairs, evaluate_nsp

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
    from _bert import evaluate_nsp

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
    from _bert import evaluate_nsp

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
    from _bert import pretraining_batch, sentence_pairs
    from onehot2gpt.bert_pretraining import pretraining_pairs

    sizes = [2, 2, 61, 121]  # 1 + 1 + 60 + 120 sentences with a next one
    articles, n = _labelled_articles(sizes), 4000
    draws = {}
    for sample, draw in (("article", pretraining_pairs), ("sentence", sentence_pairs)):
        batch = draw(articles, n, 16, _Tok(), torch.Generator().manual_seed(0))
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
    again = sentence_pairs(articles, n, 16, _Tok(), torch.Generator().manual_seed(0))
    assert _read_pairs(again) == pairs  # seeded
    with pytest.raises(ValueError, match="sample is one of"):
        pretraining_batch(articles, 4, 16, _Tok(), torch.Generator(), sample="word")


def test_pretrain_bert_passes_sample_to_every_batch(monkeypatch):
    import _bert as bert_pretraining
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    seen, real = [], bert_pretraining.pretraining_batch

    def spy(*args, **kwargs):
        seen.append(kwargs.get("sample"))
        return real(*args, **kwargs)

    monkeypatch.setattr(bert_pretraining, "pretraining_batch", spy)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    bert_pretraining.pretrain_bert_fast(
        model, _Tok(), _articles(), steps=3, batch_size=4, max_len=24, sample="sentence", progress=False
    )
    assert seen == ["sentence"] * 3
    with pytest.raises(ValueError, match="sample is one of"):
        bert_pretraining.pretrain_bert_fast(
            model, _Tok(), _articles(), steps=1, max_len=24, sample="Sentence", progress=False
        )


# ---- the laptop recipe's faster step: the chunked masked-LM loss and length-sorted batches ----


def _mlm_losses_and_grads(bf16, chunk, pad_to=64):
    from _bert import chunked_mlm_loss
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.course(vocab_size=500, max_len=32, dropout=0.0))
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
    from _bert import chunked_mlm_loss
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    model = BertForPreTraining(BertConfig.course(vocab_size=50, max_len=32, dropout=0.0))
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
    from _bert import fast_pretraining_loss as pretraining_loss
    from _bert import pretraining_batch

    model = _model()
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
    from _bert import LENGTH_STEP, length_sorted_batches, pretraining_pairs

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
    import _bert as bert_pretraining

    pools, real = [], bert_pretraining.length_sorted_batches

    def spy(*args, **kwargs):
        pools.append(args[2])  # the length asked for
        return real(*args, **kwargs)

    monkeypatch.setattr(bert_pretraining, "length_sorted_batches", spy)
    model = _model()
    history = _fast(model, steps=10, short_len=12, short_steps=3, length_buckets=4, chunked_loss=True)
    # 3 short steps from one pool of 4; the length changes, so the long steps draw new pools: 4 + 3
    assert pools == [12, 24, 24] and len(history["loss"]) == 10
    assert all(math.isfinite(x) for x in history["loss"])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="length_buckets"):
            bert_pretraining.pretrain_bert_fast(
                model, _Tok(), _articles(), steps=1, max_len=24, length_buckets=bad, progress=False
            )


def _sparse_model(n_layers=2):

    return _model(n_layers=n_layers)


@pytest.mark.parametrize("explicit", [False, True])
def test_encode_for_losses_gives_the_full_encoders_rows_and_pooled_cls(explicit):
    """The top layer run only at [CLS] and the masked pieces gives exactly the rows the full
    encoder gives there, in x[chosen]'s order, and the same pooled [CLS]: pairs with different
    numbers of masked pieces and padding in the batch."""
    from _bert import encode_for_losses, pretraining_batch

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
    from _bert import fast_pretraining_loss as pretraining_loss
    from _bert import pretraining_batch

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
        _fast(model, steps=3, warmup=1, mask_prob=0.25, sparse_top=sparse)
        trained[sparse] = model.state_dict()
    for name, value in trained[False].items():
        torch.testing.assert_close(trained[True][name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


def test_encode_for_losses_refuses_what_it_cannot_compute():
    from _bert import encode_for_losses, pretraining_batch
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
    from _bert import pretrain_bert_fast as pretrain_bert

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
    from _bert import stack_layers

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
    from _bert import pretrain_bert_fast as pretrain_bert
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
