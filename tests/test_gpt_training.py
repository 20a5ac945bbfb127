"""Training a GPT on one stream of characters (notebook 09): batches, evaluation, schedule, loop, CLI."""

import math
import time

import pytest
import torch
from onehot2gpt import gpt_training
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.gpt_training import char_dataset, estimate_loss, lm_batch, train_gpt, train_val_split
from onehot2gpt.training import cosine_lr

pytestmark = pytest.mark.usefixtures("one_thread")

REPETITIVE = "abcdefgh" * 60  # every next character is determined by the one before


def tiny_model(vocab_size, seed=0, **overrides):
    torch.manual_seed(seed)
    return GPT(GPTConfig.tiny(vocab_size=vocab_size, **overrides))


# ------------------------------------------------------------------ data


def test_char_dataset_round_trips_and_reuses_a_vocabulary():
    text = "To be, or not to be: that is the question.\nÉtude — 潮水"
    ids, vocab = char_dataset(text)
    assert ids.dtype == torch.long and ids.shape == (len(text),)
    assert vocab.itos == sorted(set(text)) and vocab.specials == ()  # nanoGPT's sorted characters
    assert "".join(vocab.decode(ids)) == text
    again, same = char_dataset("not to be", vocab)
    assert same is vocab and "".join(vocab.decode(again)) == "not to be"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        char_dataset("xyz!", vocab)
    with pytest.raises(ValueError, match="empty"):
        char_dataset("")


def test_train_val_split_keeps_order():
    ids = torch.arange(1000)
    train, val = train_val_split(ids)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), ids)  # first 90%, then the last 10%
    with pytest.raises(ValueError):
        train_val_split(ids, 1.0)


def test_lm_batch_gives_windows_and_their_shift():
    data = torch.arange(500) * 7 % 501  # distinct values, not sorted
    g = torch.Generator().manual_seed(0)
    x, y = lm_batch(data, 6, 10, g)
    assert x.shape == y.shape == (6, 10) and x.dtype == torch.long
    position = {int(v): i for i, v in enumerate(data)}
    for row_x, row_y in zip(x, y):
        start = position[int(row_x[0])]
        assert torch.equal(row_x, data[start : start + 10])  # a contiguous window…
        assert torch.equal(row_y, data[start + 1 : start + 11])  # …and the tokens after each
    x2, _ = lm_batch(data, 6, 10, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)  # the generator decides
    # A stream of exactly block_size + 1 tokens has one window, which must be found.
    x, y = lm_batch(torch.arange(11), 3, 10)
    assert torch.equal(x, torch.arange(10).expand(3, 10)) and torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="at least 11"):
        lm_batch(torch.arange(10), 2, 10)


# ------------------------------------------------------------------ evaluation and schedule


def test_estimate_loss_is_fixed_and_starts_near_ln_vocab():
    V = 50
    model = tiny_model(V).train()
    data = torch.randint(0, V, (2000,), generator=torch.Generator().manual_seed(1))
    kwargs = dict(batches=8, batch_size=4, block_size=16)
    first = estimate_loss(model, data, **kwargs)
    assert estimate_loss(model, data, **kwargs) == first  # the same windows every call
    assert estimate_loss(model, data, **kwargs, seed=99) != first  # …chosen by the seed
    assert model.training  # mode restored
    assert abs(first - math.log(V)) < 0.1  # an untrained model is ≈ uniform


def test_cosine_lr_warms_up_then_decays_to_min_lr():
    lr, min_lr, warmup, iters = 1e-3, 1e-4, 10, 111
    rates = [cosine_lr(s, lr=lr, min_lr=min_lr, warmup=warmup, iters=iters) for s in range(iters)]
    assert all(a < b for a, b in zip(rates[:warmup], rates[1 : warmup + 1]))  # rises…
    assert rates[warmup] == pytest.approx(lr)  # …to the peak
    assert all(a >= b for a, b in zip(rates[warmup:], rates[warmup + 1 :]))  # then only falls
    assert rates[-1] == pytest.approx(min_lr)  # to the floor
    middle = warmup + (iters - 1 - warmup) // 2  # half-way down the cosine (exactly)
    assert rates[middle] == pytest.approx((lr + min_lr) / 2)


def test_train_gpt_follows_the_schedule():
    ids, vocab = char_dataset(REPETITIVE)
    model = tiny_model(len(vocab))
    kw = dict(lr=2e-3, min_lr=2e-4, warmup=3, iters=12)
    history = train_gpt(
        model,
        ids,
        iters=kw["iters"],
        batch_size=2,
        block_size=8,
        lr=kw["lr"],
        min_lr=kw["min_lr"],
        warmup=kw["warmup"],
        progress=False,
    )
    expected = [cosine_lr(s, **kw) for s in range(kw["iters"])]
    assert history["lr"] == pytest.approx(expected)
    assert history["evals"] == [] and history["val_loss"] is None  # no validation data given


# ------------------------------------------------------------------ the loop


def test_train_gpt_is_nanogpts_plain_loop():
    """Notebook 09 writes the loop out (schedule, batch, forward, loss, backward, clip, step); from
    the same weights and seed it must give train_gpt's loss at every step, warm-up and decay."""
    import torch.nn.functional as F

    ids, vocab = char_dataset(REPETITIVE + "the quick brown fox")
    kw = dict(lr=3e-3, min_lr=3e-4, warmup=2)
    library, by_hand = tiny_model(len(vocab)), tiny_model(len(vocab))
    expected = train_gpt(library, ids, iters=6, batch_size=3, block_size=8, **kw, progress=False)["loss"]
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in by_hand.parameters() if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in by_hand.parameters() if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=kw["lr"],
        betas=(0.9, 0.99),
    )
    by_hand.train()
    losses = []
    for step in range(6):
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, **kw, iters=6)
        x, y = lm_batch(ids, 3, 8, g)
        loss = F.cross_entropy(by_hand(x).logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(by_hand.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses == pytest.approx(expected, rel=1e-5)
    assert losses[-1] < losses[0]  # and it learns: the comparison is not vacuous


def test_train_gpt_learns_a_repetitive_text():
    ids, vocab = char_dataset(REPETITIVE)
    train, val = train_val_split(ids)
    model = tiny_model(len(vocab))
    history = train_gpt(
        model,
        train,
        val,
        iters=40,
        batch_size=8,
        block_size=16,
        lr=3e-3,
        warmup=5,
        eval_every=20,
        eval_batches=4,
        progress=False,
    )
    assert len(history["loss"]) == history["iters"] == 40
    assert [i for i, _, _ in history["evals"]] == [0, 20, 40]
    start, end = history["evals"][0][2], history["evals"][-1][2]
    assert start > 0.8 * math.log(len(vocab))  # untrained: about ln 8
    assert end < 0.5 * start  # 40 updates learn that b follows a, …
    assert history["val_loss"] == end and not model.training


def test_bf16_autocasts_the_updates_and_still_learns(monkeypatch):
    """With bf16 the forward passes of the updates run under bfloat16 autocast (the matrix products
    come out in bfloat16), the evaluation does not, and the model still learns."""
    ids, vocab = char_dataset(REPETITIVE)
    train, val = train_val_split(ids)
    model = tiny_model(len(vocab))
    seen = []
    real = gpt_training._next_token_loss

    def spy(m, x, y):
        seen.append((m.training, m(x).logits.dtype))
        return real(m, x, y)

    monkeypatch.setattr(gpt_training, "_next_token_loss", spy)
    history = train_gpt(
        model,
        train,
        val,
        iters=40,
        batch_size=8,
        block_size=16,
        lr=3e-3,
        warmup=5,
        eval_every=40,
        eval_batches=2,
        bf16=True,
        progress=False,
    )
    assert {dtype for training, dtype in seen if training} == {torch.bfloat16}
    assert {dtype for training, dtype in seen if not training} == {torch.float32}
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert history["evals"][-1][2] < 0.5 * history["evals"][0][2]


def test_stop_at_val_stops_at_the_first_evaluation_below():
    ids, vocab = char_dataset(REPETITIVE)
    model = tiny_model(len(vocab))
    history = train_gpt(
        model,
        ids,
        ids,
        iters=300,
        batch_size=8,
        block_size=16,
        lr=3e-3,
        warmup=5,
        eval_every=5,
        eval_batches=2,
        stop_at_val=0.5,
        progress=False,
    )
    losses = [v for _, _, v in history["evals"]]
    assert history["iters"] < 300 and history["iters"] % 5 == 0
    assert losses[-1] <= 0.5 and all(v > 0.5 for v in losses[:-1])
    assert history["evals"][-1][0] == history["iters"] == len(history["loss"])
    # Already below at the start: no update at all.
    history = train_gpt(
        tiny_model(len(vocab)), ids, ids, iters=10, block_size=16, eval_batches=2, stop_at_val=100.0, progress=False
    )
    assert history["iters"] == 0 and history["loss"] == [] and history["ms_per_iter"] is None


def test_train_seconds_exclude_evaluation(monkeypatch):
    real = gpt_training.estimate_loss

    def slow_estimate_loss(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(gpt_training, "estimate_loss", slow_estimate_loss)
    ids, vocab = char_dataset(REPETITIVE)
    model = tiny_model(len(vocab))
    start = time.perf_counter()
    history = train_gpt(
        model, ids, ids, iters=4, batch_size=2, block_size=8, eval_every=1, eval_batches=1, progress=False
    )
    wall = time.perf_counter() - start
    assert len(history["evals"]) == 5  # before training and after each update
    assert history["eval_seconds"] >= 2.5
    # None of the 2.5 s of sleep is on the training clock, however slow the machine is today.
    assert history["train_seconds"] <= wall - 2.5
    seconds = [s for _, s, _ in history["evals"]]
    assert seconds == sorted(seconds) and seconds[-1] == history["train_seconds"]
    assert history["ms_per_iter"] == pytest.approx(1000 * history["train_seconds"] / 4)


def test_train_gpt_rejects_windows_longer_than_the_context():
    ids, vocab = char_dataset(REPETITIVE)
    with pytest.raises(ValueError, match="max_len"):
        train_gpt(tiny_model(len(vocab)), ids, iters=1, block_size=17, progress=False)


def test_wikitext_stream_is_the_articles_pieces_with_a_separator_after_each():
    from onehot2gpt.checkpoints import checkpoint_path
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.gpt_training import wikitext_stream
    from onehot2gpt.subword import WordPieceTokenizer

    tok = WordPieceTokenizer.load(checkpoint_path("bert-wikitext2") / "vocab.txt")
    stream = wikitext_stream(tok, "valid")
    articles = wikitext_articles("valid")
    assert stream.dtype == torch.long and int((stream == tok.sep_id).sum()) == len(articles)
    first = articles[0][0]
    n = len(tok.tokenize(first))
    assert stream[:n].tolist() == tok.convert_tokens_to_ids(tok.tokenize(first))
    assert int(stream.max()) < len(tok) and int(stream.min()) >= 0


def test_a_diverging_run_stops_with_the_step_the_loss_and_the_fix():
    from onehot2gpt.utils import TrainingDiverged

    ids, vocab = char_dataset(REPETITIVE)
    model = tiny_model(len(vocab))
    with pytest.raises(
        TrainingDiverged,
        # NaN, or (usually first) a loss over 1000× ln V (8 characters: ln 8 = 2.08): the run is exploding
        match=r"diverged at step \d+: the loss is (nan|\S+, more than 1000× its starting level \(2\.08\): the "
        r"run is exploding)\. Lower the learning rate \(now 100\)",
    ):
        train_gpt(model, ids, iters=30, batch_size=4, block_size=8, lr=100, warmup=0, progress=False)
