import math

import pytest
import torch
import torch.nn.functional as F
from onehot2gpt.rnn_lm import LSTMLM, NGramLM, encode_corpus, lm_batches, perplexity, train_lm
from onehot2gpt.vocab import EOS, UNK, Vocab

CORPUS = [
    s.split()
    for s in ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the dog saw the cat on the mat"]
]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def vocab():
    return Vocab.build(CORPUS)


# ----------------------------------------------------------------------------- n-grams


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("kneser_ney", [True, False])
@pytest.mark.parametrize("context", [[], ["the"], ["on", "the"], ["zebra", "cat"], ["mat", "mat"]])
def test_ngram_probabilities_sum_to_one_and_match_prob(vocab, n, kneser_ney, context):
    lm = NGramLM(n, vocab, kneser_ney=kneser_ney).fit(CORPUS)
    p = lm.next_token_probs(context)
    assert p.shape == (len(vocab),)
    assert p.sum().item() == pytest.approx(1.0, abs=1e-9)
    assert (p > 0).all()  # smoothing: nothing is impossible
    for token in ["cat", "mat", "sat", EOS, UNK]:
        assert lm.prob(context, token) == pytest.approx(p[vocab[token]].item(), rel=1e-9)


def test_unsmoothed_bigram_is_the_count_ratio_and_unseen_words_get_zero(vocab):
    lm = NGramLM(2, vocab, discount=0.0).fit(CORPUS)
    # "the" is followed by cat ×2, mat ×2, dog ×2, log ×1 (7 times in all)
    assert lm.prob(["the"], "cat") == pytest.approx(2 / 7)
    assert lm.prob(["the"], "log") == pytest.approx(1 / 7)
    assert lm.prob(["the"], "saw") == 0.0
    assert lm.perplexity([["the", "zebra"]]) == math.inf  # <unk> never seen in training


def test_unknown_words_are_scored_as_unk(vocab):
    lm = NGramLM(2, vocab).fit(CORPUS)
    assert lm.prob(["zebra"], "giraffe") == lm.prob([UNK], UNK)


def test_kneser_ney_continuation_counts_francisco():
    # "francisco" is as frequent as "glasses" but only ever follows "san": after an unseen
    # context Kneser-Ney trusts it less; plain absolute discounting cannot tell them apart.
    text = [["san", "francisco"]] * 4 + [[w, "glasses"] for w in ["my", "his", "her", "reading"]]
    vocab = Vocab.build(text + [["new"]])
    kn = NGramLM(2, vocab, kneser_ney=True).fit(text)
    ad = NGramLM(2, vocab, kneser_ney=False).fit(text)
    assert kn.prob(["new"], "francisco") < kn.prob(["new"], "glasses")
    assert ad.prob(["new"], "francisco") == pytest.approx(ad.prob(["new"], "glasses"))


def test_longer_contexts_fit_the_training_text_better_but_cover_less_of_new_text(vocab):
    ppl = [NGramLM(n, vocab).fit(CORPUS).perplexity(CORPUS) for n in (1, 2, 3)]
    assert ppl[0] > ppl[1] > ppl[2]
    lm = NGramLM(3, vocab).fit(CORPUS)
    assert lm.coverage(CORPUS) == 1.0
    new = [["the", "cat", "saw", "the", "log"], ["a", "mat", "sat"]]
    cover = [lm.coverage(new, order) for order in (1, 2, 3)]
    assert cover[0] >= cover[1] >= cover[2] and cover[2] < 1.0


def test_ngram_generate_samples_known_tokens(vocab):
    lm = NGramLM(2, vocab).fit(CORPUS)
    out = lm.generate(["the"], max_tokens=12, generator=torch.Generator().manual_seed(0))
    assert len(out) <= 12 and all(t in vocab for t in out)


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda v: NGramLM(0, v), ValueError),
        (lambda v: NGramLM(2, v, discount=1.5), ValueError),
        (lambda v: NGramLM(2, v).fit("the cat sat"), TypeError),
        (lambda v: NGramLM(2, v).fit([]), ValueError),
        (lambda v: NGramLM(2, v).fit(["the cat", "a dog"]), TypeError),
        (lambda v: NGramLM(2, v).prob(["the"], "cat"), RuntimeError),
        (lambda v: NGramLM(2, v).fit(CORPUS).prob("the", "cat"), TypeError),
        (lambda v: NGramLM(2, v).fit(CORPUS).coverage(CORPUS, order=3), ValueError),
    ],
)
def test_ngram_bad_input_raises(vocab, make, error):
    with pytest.raises(error):
        make(vocab)


# ----------------------------------------------------------------------------- LSTM LM


@pytest.fixture
def model():
    torch.manual_seed(0)
    return LSTMLM(vocab_size=40, d_model=32, n_layers=2, dropout=0.0)


def test_lstm_shapes_and_tied_weights(model):
    logits, (h, c) = model(torch.randint(0, 40, (3, 7)))
    assert logits.shape == (3, 7, 40)
    assert h.shape == c.shape == (2, 3, 32)
    assert model.lm_head.weight is model.tok_emb.weight
    untied = LSTMLM(40, d_model=32, tie_weights=False)
    assert untied.lm_head.weight is not untied.tok_emb.weight


def test_lstm_loss_at_init_is_about_ln_vocab_size(model):
    ids = torch.randint(0, 40, (8, 20))
    logits, _ = model(ids)
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    assert abs(loss.item() - math.log(40)) < 0.1


def test_lstm_is_causal(model):
    ids = torch.randint(0, 40, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 40
    a, _ = model(ids)
    b, _ = model(changed)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_carried_state_equals_reading_the_whole_sequence(model):
    ids = torch.randint(0, 40, (2, 12))
    whole, _ = model(ids)
    first, state = model(ids[:, :5])
    second, _ = model(ids[:, 5:], state)
    torch.testing.assert_close(torch.cat([first, second], 1), whole)


def test_lstm_overfits_one_small_batch(model):
    torch.manual_seed(0)
    ids = torch.randint(0, 40, (4, 12))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    for _ in range(200):
        logits, _ = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


def test_lm_batches_are_contiguous_and_shifted():
    ids = torch.arange(103)
    batches = lm_batches(ids, batch_size=4, seq_len=6)
    rows = torch.cat([x for x, _ in batches], 1)
    targets = torch.cat([y for _, y in batches], 1)
    assert rows.shape[0] == 4 and all(x.shape == y.shape for x, y in batches)
    torch.testing.assert_close(targets, rows + 1)  # y is x one step ahead
    torch.testing.assert_close(rows[:, 1:], rows[:, :-1] + 1)  # each row is one unbroken stretch


def test_train_lm_lowers_loss_and_perplexity(model):
    torch.manual_seed(0)
    ids = torch.tensor([5, 6, 7, 8, 9] * 80)
    model.train()
    before = perplexity(model, ids, batch_size=4, seq_len=10)
    assert model.training  # measured in eval mode, then given back as it was
    history = train_lm(model, ids, epochs=8, batch_size=4, seq_len=10, lr=2e-2, progress=False)
    after = perplexity(model, ids, batch_size=4, seq_len=10)
    assert len(history) == 8 * len(lm_batches(ids, 4, 10))
    assert history[-1] < history[0] / 4 and after < before / 4
    assert model.training  # perplexity() restores the mode


def test_train_lm_is_truncated_bptt_with_adam_and_clipping():
    # The loop notebook 03 writes out: train_lm gives the same per-step losses and weights.
    ids = torch.randint(0, 40, (500,), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    mine = LSTMLM(40, d_model=16, n_layers=2, dropout=0.0)
    theirs = LSTMLM(40, d_model=16, n_layers=2, dropout=0.0)
    theirs.load_state_dict(mine.state_dict())
    opt = torch.optim.Adam(mine.parameters(), lr=1e-2)
    losses, state = [], None
    for x, y in lm_batches(ids, 4, 8)[:6]:
        logits, state = mine(x, state)
        state = tuple(s.detach() for s in state)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mine.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    history = train_lm(theirs, ids, batch_size=4, seq_len=8, lr=1e-2, clip=0.5, max_steps=6, progress=False)
    torch.testing.assert_close(torch.tensor(history), torch.tensor(losses))
    torch.testing.assert_close(theirs.state_dict(), mine.state_dict())


def test_generate_is_seeded_and_stops_at_eos(model):
    prompt = [2, 5, 6]
    a = model.generate(prompt, max_new_tokens=15, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, max_new_tokens=15, generator=torch.Generator().manual_seed(1))
    assert a == b and len(a) == 15 and all(0 <= i < 40 for i in a)
    with torch.no_grad():
        model.lm_head.bias.fill_(-1e4)
        model.lm_head.bias[3] = 1e4  # always predict id 3
    assert model.generate(prompt, max_new_tokens=15, eos_id=3) == [3]


def test_encode_corpus_appends_eos(vocab):
    ids = encode_corpus([["the", "cat"], ["zebra"]], vocab)
    assert ids.tolist() == [vocab["the"], vocab["cat"], vocab[EOS], vocab[UNK], vocab[EOS]]


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda m: m(torch.rand(2, 5)), TypeError),
        (lambda m: m(torch.tensor([1, 2, 3])), ValueError),
        (lambda m: m(torch.zeros(2, 0, dtype=torch.long)), ValueError),
        (lambda m: m(torch.tensor([[1, 40]])), IndexError),
        (lambda m: m([[1, 2.0]]), TypeError),  # a float id is refused, never truncated
        (lambda m: lm_batches(torch.arange(5), 4, 3), ValueError),
        (lambda m: lm_batches(torch.rand(50), 2, 3), TypeError),
        (lambda m: lm_batches(torch.arange(50).view(5, 10), 2, 3), ValueError),
        (lambda m: m.generate([], 3), ValueError),
        (lambda m: LSTMLM(40, dropout=1.0), ValueError),
    ],
)
def test_lstm_bad_input_raises(model, call, error):
    with pytest.raises(error):
        call(model)


def test_encode_corpus_rejects_text(vocab):
    with pytest.raises(TypeError):
        encode_corpus("the cat", vocab)
    with pytest.raises(ValueError):
        encode_corpus([], vocab)


def test_train_lm_stops_at_the_first_non_finite_loss():
    from onehot2gpt.utils import TrainingDiverged

    torch.manual_seed(0)
    lm = LSTMLM(10, d_model=8, n_layers=1, dropout=0.0)
    with torch.no_grad():
        lm.lm_head.bias.fill_(float("nan"))  # what a diverged update leaves behind
    with pytest.raises(TrainingDiverged, match=r"step 0: the loss is nan.*learning rate \(now 0\.002\)"):
        train_lm(lm, torch.arange(200) % 10, batch_size=4, seq_len=8, progress=False)


def test_generate_from_a_nan_model_says_so():
    torch.manual_seed(0)
    lm = LSTMLM(10, d_model=8, n_layers=1, dropout=0.0)
    with torch.no_grad():
        lm.lm_head.bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="NaN or infinite.*learning rate"):
        lm.generate([1, 2], 3)
