import json
import math
import shutil

import pytest
import torch
from onehot2gpt.checkpoints import load
from onehot2gpt.data import ASSETS
from onehot2gpt.vocab import Vocab
from onehot2gpt.word2vec import (
    CBOW,
    MAX_ROW_STEP,
    NoiseSampler,
    SkipGram,
    WordVectors,
    cbow_examples,
    context_windows,
    encode_corpus,
    epoch_batches,
    keep_probabilities,
    negative_sampling_grads,
    negative_sampling_loss,
    noise_distribution,
    skipgram_pairs,
    train_step,
    train_word2vec,
)

CHECKPOINT = ASSETS / "checkpoints" / "word2vec-wikitext2"


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(0)


@pytest.fixture
def two_topic_corpus():
    """Sentences that use words of one group only: fruit words never meet vehicle words."""
    g = torch.Generator().manual_seed(1)
    groups = [["apple", "pear", "plum", "fig", "lime"], ["car", "bus", "tram", "ship", "bike"]]
    sentences = []
    for i in range(300):
        words = groups[i % 2]
        sentences.append([words[j] for j in torch.randint(len(words), (12,), generator=g).tolist()])
    return groups, sentences


@pytest.fixture
def royal_vectors():
    """Hand-built vectors on axes (male, female, royal, fruit): king − man + woman = queen exactly."""
    words = ["man", "woman", "king", "queen", "apple", "prince"]
    vectors = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1], [1, 0, 0.5, 0.3]])
    return WordVectors(vectors, Vocab(words, specials=()))


# --------------------------------------------------------------------------------- examples


def test_skipgram_pairs_without_shrink_are_all_pairs_within_the_window():
    ids = torch.tensor([10, 11, 12, 13, 14])
    centres, contexts = skipgram_pairs(ids, window=2, shrink=False)
    by_hand = [
        (10, 11),
        (10, 12),
        (11, 10),
        (11, 12),
        (11, 13),
        (12, 10),
        (12, 11),
        (12, 13),
        (12, 14),
        (13, 11),
        (13, 12),
        (13, 14),
        (14, 12),
        (14, 13),
    ]
    assert list(zip(centres.tolist(), contexts.tolist())) == by_hand


def test_shapes_of_windows_and_cbow_examples(generator):
    ids = torch.randint(50, (40,), generator=generator)
    assert context_windows(ids, 3, generator).shape == (40, 6)
    contexts, centres = cbow_examples(ids, 3, generator)
    assert contexts.shape == (40, 6) and centres.shape == (40,)
    assert torch.equal(centres, ids)
    centres, contexts = skipgram_pairs(ids, 3, generator)
    assert centres.shape == contexts.shape and centres.dim() == 1


def test_pairs_never_cross_a_sentence_boundary(generator):
    lengths = torch.tensor([1, 4, 2, 7, 3])
    sentence_ids = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    positions = torch.arange(len(sentence_ids))  # ids = positions, so pairs name positions
    for shrink in (False, True):
        centres, contexts = skipgram_pairs(positions, 3, generator, shrink=shrink, sentence_ids=sentence_ids)
        assert torch.equal(sentence_ids[centres], sentence_ids[contexts])
    # Without shrink the pairs are exactly those of each sentence on its own.
    centres, contexts = skipgram_pairs(positions, 3, shrink=False, sentence_ids=sentence_ids)
    per_sentence = set()
    for part in positions.split(lengths.tolist()):
        c, o = skipgram_pairs(part, 3, shrink=False)
        per_sentence |= set(zip(c.tolist(), o.tolist()))
    assert set(zip(centres.tolist(), contexts.tolist())) == per_sentence
    # A one-word sentence has no context, so CBOW drops it.
    contexts, centres = cbow_examples(positions, 3, shrink=False, sentence_ids=sentence_ids)
    assert 0 not in centres.tolist() and len(centres) == len(positions) - 1


def test_shrunk_windows_are_a_subset_that_keeps_every_neighbour(generator):
    positions = torch.arange(200)
    full = set(zip(*(t.tolist() for t in skipgram_pairs(positions, 4, shrink=False))))
    shrunk = list(zip(*(t.tolist() for t in skipgram_pairs(positions, 4, generator))))
    assert set(shrunk) <= full
    assert len(shrunk) < len(full)  # some centres drew b < 4
    assert {(i, i + 1) for i in range(199)} <= set(shrunk)  # b >= 1: adjacent words always pair up
    # Each centre's window is symmetric: as many left as right neighbours away from the ends.
    centres = torch.tensor([c for c, _ in shrunk])
    counts = torch.bincount(centres, minlength=200)[4:-4]
    assert (counts % 2 == 0).all() and counts.min() >= 2 and counts.max() <= 8


def test_window_of_one_is_not_random(generator):
    ids = torch.arange(9)
    shrunk = skipgram_pairs(ids, 1, generator)
    full = skipgram_pairs(ids, 1, shrink=False)
    assert all(torch.equal(a, b) for a, b in zip(shrunk, full))


def test_noise_distribution_is_unigram_to_the_three_quarters():
    counts = torch.tensor([100.0, 10.0, 1.0, 0.0])
    noise = noise_distribution(counts)
    expected = counts**0.75 / (counts**0.75).sum()
    torch.testing.assert_close(noise, expected.float())
    assert math.isclose(float(noise.sum()), 1.0, rel_tol=1e-6) and noise[3] == 0
    # Flatter than the unigram distribution: rare words gain, frequent words lose.
    unigram = counts / counts.sum()
    assert noise[0] < unigram[0] and noise[2] > unigram[2]


def test_keep_probabilities_drop_frequent_words_more():
    counts = torch.tensor([5000.0, 1000.0, 100.0, 10.0, 1.0])
    keep = keep_probabilities(counts, sample=0.01)
    assert (keep <= 1).all() and (keep > 0).all()
    assert (keep[:-1] <= keep[1:]).all() and keep[0] < keep[1] < 1
    assert keep[-1] == 1  # rare words are always kept
    # The word2vec.c formula keeps more than the paper's sqrt(t / f).
    f = counts / counts.sum()
    assert (keep[:2] > (0.01 / f[:2]).sqrt()).all()
    assert torch.equal(keep_probabilities(counts, sample=0), torch.ones(5))


def test_subsampling_keeps_each_occurrence_with_its_probability(generator):
    from onehot2gpt.word2vec import _keep_mask  # what train_word2vec draws every epoch

    ids = torch.tensor([0, 1] * 5000)
    kept = ids[_keep_mask(ids, torch.tensor([0.25, 1.0]), generator)]
    assert (kept == 1).sum() == 5000
    assert 1100 < (kept == 0).sum() < 1400


# --------------------------------------------------------------------------------- loss and gradients


def test_loss_equals_hand_computation():
    v = torch.tensor([[1.0, 2.0]])  # v_c
    u = torch.tensor([[0.5, -1.0]])  # u_o: u_o·v_c = -1.5
    noise = torch.tensor([[[1.0, 0.0], [0.0, 0.25]]])  # u_k·v_c = 1.0, 0.5
    log_sigmoid = lambda x: -math.log1p(math.exp(-x))
    by_hand = -log_sigmoid(-1.5) - log_sigmoid(-1.0) - log_sigmoid(-0.5)
    assert math.isclose(float(negative_sampling_loss(v, u, noise)), by_hand, rel_tol=1e-6)
    # The mean over the batch: a second, identical row changes nothing.
    two = negative_sampling_loss(v.repeat(2, 1), u.repeat(2, 1), noise.repeat(2, 1, 1))
    assert math.isclose(float(two), by_hand, rel_tol=1e-6)


def test_hand_gradients_equal_autograd(generator):
    B, M, K, D = 4, 3, 5, 8
    inputs = torch.randn(B, M, D, generator=generator, dtype=torch.float64, requires_grad=True)
    outputs = torch.randn(B, 1 + K, D, generator=generator, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(B, M, generator=generator) > 0.3
    # The same loss pair by pair: input m of row b against row b's true word and noise words.
    b, m = mask.nonzero().T
    loss = negative_sampling_loss(inputs[b, m], outputs[b, 0], outputs[b, 1:]) * len(b)
    loss.backward()
    hand_loss, d_inputs, d_outputs = negative_sampling_grads(inputs.detach(), outputs.detach(), mask)
    torch.testing.assert_close(hand_loss, loss.detach())
    torch.testing.assert_close(d_inputs, inputs.grad)
    torch.testing.assert_close(d_outputs, outputs.grad)
    in_scale, out_scale = torch.rand(B, M, generator=generator), torch.rand(B, 1 + K, generator=generator)
    _, d_in, d_out = negative_sampling_grads(inputs.detach(), outputs.detach(), mask, in_scale, out_scale)
    torch.testing.assert_close(d_in, in_scale[..., None] * inputs.grad)
    torch.testing.assert_close(d_out, out_scale[..., None] * outputs.grad)


def test_one_fast_step_is_one_sgd_step_of_the_autograd_model(generator):
    V, D, lr = 6, 4, 0.01  # small: no damping of repeated words
    net = SkipGram(V, D, generator)
    with torch.no_grad():
        net.out_embed.weight.normal_(generator=generator)
    contexts = torch.tensor([[1, 2, -1, 3], [1, 1, 4, -1]])  # repeated words: updates must add up
    centres = torch.tensor([0, 5])
    negatives = torch.tensor([[2, 4], [0, 0]])
    found = contexts >= 0
    # word2vec.c orientation: each context word predicts the centre against the noise words.
    pair_ctx = contexts[found]
    pair_row = torch.arange(2)[:, None].expand_as(contexts)[found]
    loss = net(pair_ctx, centres[pair_row], negatives[pair_row]) * len(pair_ctx)
    loss.backward()
    expected_in = net.in_embed.weight.detach() - lr * net.in_embed.weight.grad
    expected_out = net.out_embed.weight.detach() - lr * net.out_embed.weight.grad
    in_w, out_w = net.in_embed.weight.detach().clone(), net.out_embed.weight.detach().clone()
    fast_loss, n = train_step(in_w, out_w, contexts, centres, negatives, lr, cbow=False)
    assert n == len(pair_ctx) and math.isclose(fast_loss, loss.item(), rel_tol=1e-5)
    torch.testing.assert_close(in_w, expected_in)
    torch.testing.assert_close(out_w, expected_out)


def test_fast_cbow_step_uses_the_word2vec_c_convention(generator):
    V, D, lr = 7, 4, 0.01
    net = CBOW(V, D, generator)
    with torch.no_grad():
        net.out_embed.weight.normal_(generator=generator)
    contexts = torch.tensor([[1, 2, -1, 3], [4, -1, -1, 6]])
    centres, negatives = torch.tensor([0, 5]), torch.tensor([[2, 4], [0, 1]])
    (net(centres, contexts, negatives) * 2).backward()  # SkipGram's argument order
    in_w, out_w = net.in_embed.weight.detach().clone(), net.out_embed.weight.detach().clone()
    train_step(in_w, out_w, contexts, centres, negatives, lr, cbow=True)
    torch.testing.assert_close(out_w, net.out_embed.weight.detach() - lr * net.out_embed.weight.grad)
    # The true gradient reaches each of the C context words divided by C; word2vec.c (and so
    # the fast trainer) gives each the undivided error, i.e. C times the autograd step.
    # Rows 1, 2, 3 sit in a window of 3 words, rows 4 and 6 in one of 2.
    scale = torch.tensor([0, 3, 3, 3, 2, 0, 2.0])[:, None]
    torch.testing.assert_close(in_w, net.in_embed.weight.detach() - lr * scale * net.in_embed.weight.grad)


def test_cbow_and_skipgram_take_their_arguments_in_the_same_order(generator):
    import inspect

    assert list(inspect.signature(CBOW.forward).parameters) == list(inspect.signature(SkipGram.forward).parameters)
    net = CBOW(5, 3, generator)
    centres, contexts, negatives = torch.tensor([0]), torch.tensor([[1, 2, -1]]), torch.tensor([[3, 4]])
    mean = net.in_embed(torch.tensor([1, 2])).mean(0, keepdim=True)
    expected = negative_sampling_loss(mean, net.out_embed(centres), net.out_embed(negatives))
    torch.testing.assert_close(net(centres, contexts, negatives), expected)


def test_a_word_repeated_in_a_batch_gets_a_damped_step(generator):
    V, D, n, lr = 4, 3, 100, 0.1  # lr · n = 10 > MAX_ROW_STEP
    net = SkipGram(V, D, generator)
    with torch.no_grad():
        net.out_embed.weight.normal_(generator=generator)
    contexts = torch.zeros(n, 1, dtype=torch.long)  # word 0 predicts word 1 n times
    centres, negatives = torch.ones(n, dtype=torch.long), torch.full((n, 1), 2)
    (net(contexts[:, 0], centres, negatives) * n).backward()
    in_w, out_w = net.in_embed.weight.detach().clone(), net.out_embed.weight.detach().clone()
    train_step(in_w, out_w, contexts, centres, negatives, lr, cbow=False)
    # n summed steps of lr become MAX_ROW_STEP / n of each: a total step of MAX_ROW_STEP.
    expected = net.in_embed.weight.detach() - MAX_ROW_STEP / n * net.in_embed.weight.grad
    torch.testing.assert_close(in_w, expected)
    torch.testing.assert_close(
        out_w[1:3], net.out_embed.weight[1:3].detach() - MAX_ROW_STEP / n * net.out_embed.weight.grad[1:3]
    )


def test_models_start_like_word2vec_c(generator):
    net = SkipGram(50, 10, generator)
    assert net.in_embed.weight.abs().max() <= 0.05 and net.in_embed.weight.std() > 0
    assert (net.out_embed.weight == 0).all()
    loss = net(torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([[5, 6, 7], [8, 9, 10]]))
    assert loss.dim() == 0 and math.isclose(loss.item(), 4 * math.log(2), rel_tol=1e-6)  # all scores 0


# --------------------------------------------------------------------------------- training


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_training_separates_words_that_never_meet(two_topic_corpus, model):
    groups, sentences = two_topic_corpus
    wv = train_word2vec(
        sentences,
        d_model=16,
        window=2,
        negative=3,
        min_count=1,
        sample=0,
        epochs=8,
        batch_size=256,
        lr=0.05,
        model=model,
        threads=1,
        progress=False,
    )
    within = [wv.similarity(a, b) for g in groups for a in g for b in g if a < b]
    across = [wv.similarity(a, b) for a in groups[0] for b in groups[1]]
    assert min(within) > max(across)
    assert wv.most_similar("apple", k=4)[-1][0] in groups[0]
    assert wv.config["loss_per_epoch"][-1] < wv.config["loss_per_epoch"][0]


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_max_steps_and_on_step_replay_the_trainer_by_hand(two_topic_corpus, model):
    """The trainer is: one generator → init, epoch_batches, a noise generator; then per batch
    noise draws, a linearly decayed lr and train_step. Replaying that by hand gives its losses."""
    _, sentences = two_topic_corpus
    settings = dict(
        d_model=8, window=3, negative=4, min_count=1, sample=1e-2, epochs=2, lr=0.02, min_lr=1e-4, batch_size=64
    )
    recorded = []
    wv = train_word2vec(
        sentences,
        model=model,
        seed=3,
        max_steps=7,
        progress=False,
        on_step=lambda step, loss: recorded.append((step, loss)),
        **settings,
    )
    assert [step for step, _ in recorded] == list(range(7))
    vocab, ids, sentence_ids = encode_corpus(sentences, min_count=1)
    counts = torch.bincount(ids, minlength=len(vocab))
    generator = torch.Generator().manual_seed(3)
    net = SkipGram(len(vocab), 8, generator)
    in_w, out_w = net.in_embed.weight.detach().clone(), net.out_embed.weight.detach().clone()
    batches = epoch_batches(ids, sentence_ids, keep_probabilities(counts, 1e-2), 3, 64, generator)
    assert len(batches) > 7
    noise_generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=generator)))
    draw = NoiseSampler(noise_distribution(counts))
    losses = []
    for i, (contexts, centres) in enumerate(batches[:7]):
        negatives = draw((len(centres), 4), noise_generator)
        step_lr = 0.02 - (0.02 - 1e-4) * i / len(batches) / 2
        loss, n = train_step(in_w, out_w, contexts, centres, negatives, step_lr, cbow=model == "cbow")
        losses.append(loss / n)
    torch.testing.assert_close(torch.tensor([loss for _, loss in recorded]), torch.tensor(losses))
    torch.testing.assert_close(wv.vectors, in_w)


def test_noise_sampler_draws_the_distribution(generator):
    probs = torch.tensor([0.5, 0.25, 0.125, 0.125, 0.0])
    draws = NoiseSampler(probs)((200_000,), generator)
    freq = torch.bincount(draws, minlength=5).float() / len(draws)
    torch.testing.assert_close(freq, probs, atol=5e-3, rtol=0)
    with pytest.raises(ValueError, match="summing to 1"):
        NoiseSampler(torch.tensor([0.5, 0.2]))


def test_training_is_reproducible_and_hogwild_workers_also_learn(two_topic_corpus):
    groups, sentences = two_topic_corpus
    kwargs = dict(d_model=8, window=2, negative=2, min_count=1, sample=0, epochs=3, batch_size=128, progress=False)
    a, b = train_word2vec(sentences, **kwargs), train_word2vec(sentences, **kwargs)
    assert torch.equal(a.vectors, b.vectors)
    assert not torch.equal(a.vectors, train_word2vec(sentences, seed=1, **kwargs).vectors)
    wv = train_word2vec(sentences, threads=2, **{**kwargs, "epochs": 8})
    within = [wv.similarity(a, b) for g in groups for a in g for b in g if a < b]
    across = [wv.similarity(a, b) for a in groups[0] for b in groups[1]]
    assert min(within) > max(across)


def test_training_builds_a_frequency_ordered_vocab_and_drops_rare_words():
    sentences = [["a", "b", "a", "c"], ["a", "b", "rare"]] * 5 + [["only", "once"]]
    wv = train_word2vec(sentences, d_model=4, min_count=2, epochs=1, progress=False)
    assert wv.vocab.itos == ["a", "b", "c", "rare"] and wv.vectors.shape == (4, 4)
    ids = [torch.tensor(wv.vocab.encode_tokens(s)) for s in sentences[:-1]]
    assert train_word2vec(ids, vocab=wv.vocab, d_model=4, epochs=1, progress=False).vectors.shape == (4, 4)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(sentences=[]), "empty"),
        (dict(sentences=[[], []]), "empty"),
        (dict(window=0), "window"),
        (dict(negative=0), "negative"),
        (dict(d_model=0), "d_model"),
        (dict(model="glove"), "skipgram"),
        (dict(sentences=[["a", "b"]], min_count=5), "min_count"),
        (dict(sentences=[torch.tensor([0, 1])]), "vocab"),
        (dict(sentences=[["a"], ["b"], ["a"]]), "two"),
    ],
)
def test_bad_training_input_says_what_to_do(bad, match):
    kwargs = {"sentences": [["a", "b", "c"]] * 3, "min_count": 1, "progress": False, **bad}
    with pytest.raises(ValueError, match=match):
        train_word2vec(kwargs.pop("sentences"), **kwargs)
    with pytest.raises(ValueError, match="window"):
        skipgram_pairs(torch.arange(5), 0)


# --------------------------------------------------------------------------------- word vectors


def test_analogy_finds_the_planted_answer_and_skips_the_query_words(royal_vectors):
    assert royal_vectors.analogy("man", "king", "woman")[0][0] == "queen"
    everything = royal_vectors.analogy("man", "king", "woman", k=10)
    assert {w for w, _ in everything} == {"queen", "apple", "prince"}
    # The nearest word to a word is never the word itself.
    assert royal_vectors.most_similar("king", k=1)[0][0] == "prince"
    assert royal_vectors.most_similar("king", k=10, exclude=["prince"])[0][0] != "prince"


def test_analogy_evaluation_skips_unknown_and_rare_words(royal_vectors):
    questions = [
        ("royal", "man", "king", "woman", "queen"),
        ("royal", "woman", "queen", "man", "king"),
        ("royal", "man", "woman", "king", "apple"),  # wrong: the answer is queen
        ("fruit", "man", "king", "woman", "banana"),  # unknown word
        ("royal", "Man", "King", "Woman", "Queen"),
    ]  # case-insensitive, like gensim
    result = royal_vectors.evaluate_analogies(questions)
    assert (result["n_used"], result["n_total"], result["n_correct"]) == (4, 5, 3)
    assert result["accuracy"] == 0.75 and result["per_section"] == {"royal": 0.75}
    # Only the 4 most frequent words are searched: questions about "apple" or "queen" drop out.
    assert royal_vectors.evaluate_analogies(questions, restrict_vocab=4)["n_used"] == 3
    assert royal_vectors.evaluate_analogies(questions, restrict_vocab=3)["n_used"] == 0
    # "man is to man as woman is to ?": the query is woman itself, so only because a, b and c
    # are left out is the answer her nearest other word, queen.
    assert royal_vectors.evaluate_analogies([("x", "man", "man", "woman", "queen")])["accuracy"] == 1


def test_wordsim_evaluation_gives_the_hand_computed_spearman():
    angles = torch.tensor([0.0, 0.1, 0.3, 0.6, 1.0])  # cosine to "w0" falls with the angle
    vectors = torch.stack([angles.cos(), angles.sin()], 1)
    wv = WordVectors(vectors, Vocab([f"w{i}" for i in range(5)], specials=()))
    # Model ranks of the 4 pairs by cosine: 1, 2, 3, 4; human ranks: 1, 2, 4, 3.
    pairs = [("w0", "w1", 9.0), ("w0", "w2", 8.0), ("w0", "w3", 5.0), ("w0", "w4", 6.0), ("w0", "unknown", 1.0)]
    result = wv.evaluate_wordsim(pairs)
    assert math.isclose(result["spearman"], 1 - 6 * 2 / (4 * (4**2 - 1)))  # Σd² = 2, n = 4
    assert (result["n_used"], result["n_total"]) == (4, 5)


def test_unknown_words_raise_a_helpful_key_error(royal_vectors):
    assert "king" in royal_vectors and "King" not in royal_vectors
    with pytest.raises(KeyError, match="lower-cased.*'king'"):
        royal_vectors["King"]
    with pytest.raises(KeyError, match="in wv"):
        royal_vectors.similarity("king", "emperor")


def test_save_load_round_trip(tmp_path, royal_vectors):
    royal_vectors.config["corpus"] = "hand-built"
    royal_vectors.save(tmp_path / "ckpt")
    loaded = load(tmp_path / "ckpt").model
    assert loaded.vocab.itos == royal_vectors.vocab.itos and loaded.vectors.dtype == torch.float32
    torch.testing.assert_close(loaded.vectors, royal_vectors.vectors, atol=1e-3, rtol=1e-3)
    assert loaded.config["corpus"] == "hand-built" and loaded.config["d_model"] == 4 == loaded.d_model
    assert loaded.analogy("man", "king", "woman")[0][0] == "queen"
    from safetensors.torch import load_file

    assert load_file(str(tmp_path / "ckpt" / "weights.safetensors"))["vectors"].dtype == torch.float16


def test_loading_mismatched_files_raises(tmp_path, royal_vectors):
    royal_vectors.save(tmp_path / "a")
    WordVectors(torch.ones(2, 4), Vocab(["x", "y"], specials=())).save(tmp_path / "b")
    shutil.copy(tmp_path / "b" / "vocab.json", tmp_path / "a" / "vocab.json")
    with pytest.raises(ValueError, match=r"vocab\.json has sha256 .*another checkpoint"):
        load(tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="missing"):
        load(tmp_path / "nowhere", kind="word2vec")


def test_course_checkpoint_loads():
    wv = load("word2vec-wikitext2").model
    config = json.loads((CHECKPOINT / "config.json").read_text())
    # saved before the rename: config.json says "dim", the loaded vectors say d_model
    assert config["config"]["dim"] == 100 and wv.d_model == 100 and wv.config["d_model"] == 100
    assert "dim" not in wv.config and config["info"]["model"] == "skipgram"
    assert len(wv) == config["config"]["vocab_size"] and torch.isfinite(wv.vectors).all()
    assert {"the", "king", "queen"} <= set(wv.vocab.itos)


def test_evaluation_matches_gensim_conventions(tmp_path, generator):
    gensim_models = pytest.importorskip("gensim.models")
    words = [f"w{i}" for i in range(40)]
    vectors = torch.randn(40, 6, generator=generator)
    kv = gensim_models.KeyedVectors(6)
    kv.add_vectors(words, vectors.numpy())
    wv = WordVectors(vectors, Vocab(words, specials=()))
    picks = torch.randint(44, (300, 4), generator=generator).tolist()  # ids >= 40: unknown words
    questions = []
    for i, q in enumerate(picks):
        a, b, c, d = (f"w{j}" for j in q)
        if i % 2 and max(q[:3]) < 30:  # half the usable ones: gensim's answer
            d = kv.most_similar(positive=[b, c], negative=[a], topn=1, restrict_vocab=30)[0][0]
        questions.append(("s1" if i % 3 else "s2", a, b, c, d))
    path = tmp_path / "questions.txt"
    lines = []
    for section in ("s1", "s2"):
        lines.append(f": {section}")
        lines += [" ".join(q[1:]) for q in questions if q[0] == section]
    path.write_text("\n".join(lines) + "\n")
    score, sections = kv.evaluate_word_analogies(str(path), restrict_vocab=30)
    ours = wv.evaluate_analogies(questions, restrict_vocab=30)
    assert math.isclose(ours["accuracy"], score, abs_tol=1e-9) and 0.2 < score < 0.8
    assert ours["n_used"] == sum(len(s["correct"]) + len(s["incorrect"]) for s in sections[:-1])
    triples = torch.randint(44, (60, 3), generator=generator).tolist()
    # no word with itself and no pair twice: equal cosines would tie only up to float rounding,
    # which breaks the tie one way on one CPU and the other way on another
    seen = set()
    triples = [t for t in triples if t[0] != t[1] and not (frozenset(t[:2]) in seen or seen.add(frozenset(t[:2])))]
    pairs = [(f"w{a}", f"w{b}", float(s)) for a, b, s in triples]
    assert len(pairs) > 40 and any(max(t[:2]) >= 40 for t in triples)  # unknown words stay in
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs))
    _, spearman, oov_percent = kv.evaluate_word_pairs(str(path))
    result = wv.evaluate_wordsim(pairs)
    assert math.isclose(result["spearman"], spearman.statistic, abs_tol=1e-6)
    assert math.isclose(100 * (1 - result["coverage"]), oov_percent, abs_tol=1e-9)


def test_most_similar_excludes_one_word_given_as_a_string(royal_vectors):
    # "prince" as a string is one word, not the letters p, r, i, n, c, e
    assert royal_vectors.most_similar("king", k=1, exclude="prince")[0][0] != "prince"
    assert len(royal_vectors.most_similar("king", k=10, exclude="prince")) == 4
    assert len(royal_vectors.most_similar("king", k=10, exclude=["not-a-word"])) == 5


def test_analogy_refuses_a_question_whose_answer_is_a_query_word(royal_vectors):
    for a, b, c in [("king", "king", "king"), ("man", "man", "woman"), ("man", "king", "man")]:
        with pytest.raises(ValueError, match="3CosAdd leaves out"):
            royal_vectors.analogy(a, b, c)
    assert royal_vectors.analogy("man", "king", "king")[0][0] not in {"man", "king"}  # b = c is a question


def test_word2vec_training_stops_with_the_shared_divergence_error():
    from onehot2gpt.utils import TrainingDiverged

    with pytest.raises(TrainingDiverged, match=r"word2vec \(epoch 1.*the loss is nan.*\(now 1e\+300\)"):
        train_word2vec([["a", "b", "c", "d"]] * 20, d_model=4, min_count=1, epochs=2, lr=1e300, progress=False)
