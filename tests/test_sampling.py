"""Decoding: the filters against brute force, greedy as the limit of temperature, the cache, cropping."""

import itertools
import math
import warnings

import pytest
import torch
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.sampling import (
    apply_temperature,
    filter_top_k,
    filter_top_p,
    generate,
    next_token_distribution,
    prompt_generator,
    real_word_share,
    repeated_ngram_share,
    repeating_tail,
    text_words,
)

pytestmark = pytest.mark.usefixtures("one_thread")

V, MAX_LEN = 30, 12


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig.tiny(vocab_size=V, max_len=MAX_LEN, d_model=32, n_heads=4, n_layers=2))
    with torch.no_grad():
        gpt.tok_emb.weight.mul_(10.0)  # std 0.2: logits spread by tenths to units, not hundredths
    return gpt.eval()


def prompt(B=1, T=4, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def seeded(seed):
    return torch.Generator().manual_seed(seed)


class LengthSpy:
    """Records how many tokens each forward call of `model` reads."""

    def __init__(self, model):
        self.lengths = []
        self.handle = model.register_forward_pre_hook(lambda m, args: self.lengths.append(args[0].size(1)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


# ------------------------------------------------------------------ filters


def test_temperature_scales_logits():
    logits = torch.tensor([0.0, 1.0, 3.0])
    torch.testing.assert_close(apply_temperature(logits, 0.5), logits * 2)
    hot, cold = (torch.softmax(apply_temperature(logits, t), -1) for t in (10.0, 0.1))
    assert hot.max() < torch.softmax(logits, -1).max() < cold.max()


def test_top_k_keeps_exactly_the_k_largest():
    logits = torch.randn(5, V, generator=seeded(1))
    for k in (1, 3, 10, V, V + 5):
        kept = filter_top_k(logits, k)
        finite = torch.isfinite(kept)
        assert torch.all(finite.sum(-1) == min(k, V))
        assert torch.equal(kept[finite], logits[finite])  # kept logits unchanged
        if k < V:  # every kept logit is at least as large as every removed one
            smallest_kept = logits.masked_fill(~finite, math.inf).min(-1).values
            largest_removed = logits.masked_fill(finite, -math.inf).max(-1).values
            assert torch.all(smallest_kept >= largest_removed)
    assert torch.equal(filter_top_k(logits[0], 4), filter_top_k(logits, 4)[0])  # (V,) like (B, V)


def test_top_k_breaks_ties_towards_the_lower_id():
    logits = torch.tensor([1.0, 3.0, 2.0, 3.0, 3.0, 0.0])
    assert torch.isfinite(filter_top_k(logits, 2)).nonzero().flatten().tolist() == [1, 3]
    assert torch.isfinite(filter_top_k(logits, 4)).nonzero().flatten().tolist() == [1, 2, 3, 4]
    assert torch.isfinite(filter_top_k(torch.zeros(7), 3)).nonzero().flatten().tolist() == [0, 1, 2]


def brute_force_nucleus(probs, p):
    """Among all subsets with mass ≥ p, the smallest (and of those the heaviest): a set of ids."""
    ids = range(len(probs))
    for size in range(1, len(probs) + 1):
        fits = [s for s in itertools.combinations(ids, size) if sum(probs[i] for i in s) >= p]
        if fits:
            return set(max(fits, key=lambda s: sum(probs[i] for i in s)))


def test_top_p_keeps_the_smallest_set_with_mass_p():
    g = seeded(2)
    n_vocab, checked = 7, 0
    logits = torch.randn(60, n_vocab, generator=g) * torch.rand(60, 1, generator=g) * 4  # flat to peaked
    ps = torch.rand(60, generator=g).clamp(min=0.01).tolist()
    for row, p in zip(logits, ps):
        probs = torch.softmax(row.double(), -1).tolist()
        # A mass within rounding of p could fall either way; those draws say nothing.
        masses = [sum(s) for r in range(1, n_vocab + 1) for s in itertools.combinations(probs, r)]
        if min(abs(m - p) for m in masses) < 1e-5:
            continue
        kept = filter_top_p(row, p)
        assert set(torch.isfinite(kept).nonzero().flatten().tolist()) == brute_force_nucleus(probs, p)
        assert torch.equal(kept[torch.isfinite(kept)], row[torch.isfinite(kept)])
        checked += 1
    assert checked > 50
    batch = filter_top_p(logits, 0.6)  # (B, V) row by row
    assert all(torch.equal(batch[i], filter_top_p(logits[i], 0.6)) for i in range(len(logits)))


def test_top_p_stops_as_soon_as_the_mass_reaches_p():
    # Four equal tokens of 1/4 each (exact in binary): two of them reach p = 0.5 exactly, so a
    # third is not needed; ties go to the lower ids.
    assert torch.isfinite(filter_top_p(torch.zeros(4), 0.5)).nonzero().flatten().tolist() == [0, 1]
    assert torch.isfinite(filter_top_p(torch.zeros(4), 0.5 + 1e-3)).sum() == 3


def test_top_p_keeps_at_least_the_most_likely_token():
    logits = torch.randn(4, V, generator=seeded(3))
    kept = filter_top_p(logits, 1e-9)
    assert torch.all(torch.isfinite(kept).sum(-1) == 1)
    assert torch.equal(kept.argmax(-1), logits.argmax(-1))
    assert torch.equal(filter_top_p(logits, 1.0), logits)  # p = 1 keeps everything
    assert torch.isfinite(filter_top_p(torch.tensor([10.0, 0.0, 0.0]), 0.5)).sum() == 1


def test_next_token_distribution_applies_temperature_then_top_k_then_top_p(model):
    ids = prompt(T=5)[0]
    with torch.no_grad():
        logits = model(ids[None]).logits[0, -1]
    probs = next_token_distribution(model, ids, temperature=0.7, top_k=8, top_p=0.8)
    expected = torch.softmax(filter_top_p(filter_top_k(logits / 0.7, 8), 0.8), -1)
    assert probs.shape == (V,)
    torch.testing.assert_close(probs, expected)
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert 1 <= (probs > 0).sum() <= 8
    onehot = next_token_distribution(model, ids, temperature=0)
    assert onehot.max() == 1 and onehot.argmax() == logits.argmax() and onehot.sum() == 1
    assert next_token_distribution(model, prompt(B=3), top_k=2).shape == (3, V)


# ------------------------------------------------------------------ generation


def test_temperature_near_zero_is_greedy(model):
    ids = prompt(B=2, T=3, seed=4)
    greedy = generate(model, ids, 8, greedy=True)
    assert torch.equal(generate(model, ids, 8, temperature=0), greedy)
    for seed in range(3):
        assert torch.equal(generate(model, ids, 8, temperature=1e-4, generator=seeded(seed)), greedy)
    probs = next_token_distribution(model, ids[0], temperature=1e-4)
    assert probs.max().item() == pytest.approx(1.0, abs=1e-6)
    # …while at temperature 1 the samples differ from greedy (so the check above could fail).
    samples = [generate(model, ids, 8, generator=seeded(s)) for s in range(3)]
    assert any(not torch.equal(s, greedy) for s in samples)


def test_samples_follow_the_filtered_distribution(model):
    ids = prompt(T=5, seed=5)
    probs = next_token_distribution(model, ids[0], temperature=1.5, top_k=5)
    n = 4000
    tokens = generate(model, ids.expand(n, -1), 1, temperature=1.5, top_k=5, generator=seeded(6))[:, -1]
    freq = torch.bincount(tokens, minlength=V).float() / n
    assert torch.all(freq[probs == 0] == 0)  # never outside the top 5
    torch.testing.assert_close(freq, probs, atol=0.04, rtol=0)  # 5 standard errors at n = 4000


@pytest.mark.parametrize(
    "settings",
    [
        dict(greedy=True),
        dict(temperature=1.0, generator_seed=7),
        dict(temperature=0.8, top_k=10, top_p=0.9, generator_seed=8),
    ],
)
@pytest.mark.parametrize("new", [6, 20])  # within the context, and past it (sliding window)
def test_cached_and_uncached_generation_agree(model, settings, new):
    settings = dict(settings)
    seed = settings.pop("generator_seed", None)
    ids = prompt(B=2, T=4, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the crop notice, tested below
        runs = {}
        for use_cache in (True, False):
            with LengthSpy(model) as spy:
                g = None if seed is None else seeded(seed)
                runs[use_cache] = generate(model, ids, new, use_cache=use_cache, generator=g, **settings)
            runs[use_cache, "lengths"] = spy.lengths
    assert runs[True].shape == (2, 4 + new)
    assert torch.equal(runs[True], runs[False])
    # The cache really is used: one token per step while it has room, the window when it is full.
    lengths = [min(4 + i, MAX_LEN) for i in range(new)]
    assert runs[False, "lengths"] == lengths
    assert runs[True, "lengths"] == [4] + [1 if 4 + i <= MAX_LEN else MAX_LEN for i in range(1, new)]


def test_a_long_prompt_is_cropped_with_one_warning(model):
    ids = prompt(T=MAX_LEN + 3, seed=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = generate(model, ids, 5, greedy=True)
    assert len(caught) == 1 and "max_len=12" in str(caught[0].message)
    assert out.shape == (1, MAX_LEN + 3 + 5) and torch.equal(out[:, : MAX_LEN + 3], ids)
    # The model saw only the last max_len tokens: the same as starting from them.
    with pytest.warns(UserWarning, match="last 12 tokens"):
        tail = generate(model, ids[:, -MAX_LEN:], 5, greedy=True)
    assert torch.equal(out[:, MAX_LEN + 3 :], tail[:, MAX_LEN:])
    with pytest.raises(ValueError, match=r"max_len=12.*on_crop='crop'"):
        generate(model, ids, 5, on_crop="error")
    with pytest.warns(UserWarning, match="max_len=12"):
        next_token_distribution(model, ids[0])


def test_no_warning_while_the_text_fits(model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 4 + 9 = 13 tokens come out, but the model reads at most 4 + 9 − 1 = 12 of them.
        out = generate(model, prompt(T=4), MAX_LEN - 4 + 1, greedy=True, on_crop="error")
    assert out.shape == (1, MAX_LEN + 1)


def test_prompt_shapes_and_the_models_mode(model):
    one = prompt(T=3, seed=11)[0]
    out = generate(model, one, 4, greedy=True)
    assert out.shape == (7,) and torch.equal(out[:3], one)
    assert torch.equal(generate(model, one.tolist(), 4, greedy=True), out)
    assert torch.equal(generate(model, one, 0), one)
    torch.manual_seed(0)
    noisy = GPT(GPTConfig.tiny(vocab_size=V, max_len=MAX_LEN, dropout=0.5)).train()
    a, b = (generate(noisy, one, 6, greedy=True) for _ in range(2))
    assert torch.equal(a, b)  # no dropout while generating…
    assert noisy.training  # …and the model is handed back in training mode


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda l: filter_top_k(l, 0), "top_k"),
        (lambda l: filter_top_k(l, -2), "top_k"),
        (lambda l: filter_top_k(l, 2.5), "top_k"),
        (lambda l: filter_top_p(l, 0.0), "top_p"),
        (lambda l: filter_top_p(l, 1.5), "top_p"),
        (lambda l: filter_top_p(l, -0.1), "top_p"),
        (lambda l: filter_top_p(l, float("nan")), "top_p"),
        (lambda l: apply_temperature(l, 0.0), "greedy"),
        (lambda l: apply_temperature(l, -1.0), "temperature"),
        (lambda l: filter_top_k(torch.tensor(1.0), 1), "last dimension"),
    ],
)
def test_bad_filter_arguments_raise_clear_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):  # TypeError for a wrong type (top_k=2.5)
        call(torch.randn(V))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-0.5), "temperature"),
        (dict(temperature=float("inf")), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(max_new_tokens=-1), "max_new_tokens"),
        (dict(on_crop="wrap"), "on_crop"),
        (dict(ids=torch.zeros(1, 0, dtype=torch.long)), "prompt is empty"),
        (dict(ids=[]), "prompt is empty"),
        (dict(ids=torch.zeros(1, 1, 2, dtype=torch.long)), r"\(T,\) or \(B, T\)"),
    ],
)
def test_bad_generate_arguments_raise_clear_errors(model, kwargs, message):
    args = {"ids": prompt(), "max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        generate(model, **args)


def test_a_model_with_nan_scores_raises_a_clear_error_instead_of_token_0_forever(model):
    import copy

    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.final_norm.weight.fill_(float("nan"))  # what lr=100 leaves behind
    for kwargs in (dict(greedy=True), dict(temperature=1.0, generator=seeded(0)), dict(top_k=5)):
        with pytest.raises(ValueError, match="NaN or infinite.*lower learning rate"):
            generate(broken, prompt(), 3, **kwargs)


def test_the_prompt_must_be_ids_not_text_or_floats(model):
    from onehot2gpt.utils import InvalidIds

    with pytest.raises(InvalidIds, match="encode the text"):
        generate(model, "ROMEO:", 3)
    with pytest.raises(InvalidIds, match="never rounded"):
        generate(model, [1, 2.9], 3)
    assert torch.equal(
        generate(model, [1, 2], 3, temperature=0), generate(model, torch.tensor([1, 2]), 3, temperature=0)
    )


# ------------------------------------------------------------------ one generator per prompt


def test_prompt_generator_is_reproducible_and_differs_between_prompts_and_seeds():
    draw = lambda g: torch.rand(8, generator=g)
    assert torch.equal(draw(prompt_generator("ROMEO:")), draw(prompt_generator("ROMEO:")))
    assert torch.equal(draw(prompt_generator([3, 4, 5])), draw(prompt_generator(torch.tensor([3, 4, 5]))))
    first = [draw(prompt_generator(p)) for p in ("ROMEO:", "JULIET:", "ROMEO: ", [1, 2])]
    assert all(not torch.equal(a, b) for a, b in itertools.combinations(first, 2))
    assert not torch.equal(draw(prompt_generator("ROMEO:", seed=1)), draw(prompt_generator("ROMEO:")))


def test_prompt_generators_keep_two_prompts_samples_apart(model):
    """The bug it fixes: one seed for two prompts whose distributions agree gives the same tokens;
    a generator per prompt does not."""
    flat = GPT(GPTConfig.tiny(vocab_size=V, max_len=MAX_LEN)).eval()
    with torch.no_grad():
        flat.tok_emb.weight.zero_()  # every prompt: the same (uniform) distribution
    a, b = torch.tensor([[1, 2]]), torch.tensor([[3, 4]])
    same_seed = [generate(flat, p, 8, generator=seeded(0))[0, 2:] for p in (a, b)]
    assert torch.equal(*same_seed)
    own = [generate(flat, p, 8, generator=prompt_generator(p))[0, 2:] for p in (a, b)]
    assert not torch.equal(*own)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: prompt_generator(""), "prompt is empty"),
        (lambda: prompt_generator([]), "prompt is empty"),
        (lambda: prompt_generator(3.5), "prompt must be text"),
        (lambda: prompt_generator([1, 2.5]), "prompt must be text"),
        (lambda: prompt_generator("a", seed=-1), "seed"),
        (lambda: prompt_generator("a", seed=1.5), "seed"),
    ],
)
def test_prompt_generator_rejects_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=message):  # TypeError for a wrong type (seed=1.5)
        call()


# ------------------------------------------------------------------ measuring generated text


def test_text_words_split_strip_and_lower():
    assert text_words("KING RICHARD:\n  'Tis O'er--the hill;  -- fare-well!\n") == [
        "king",
        "richard",
        "tis",
        "o'er--the",
        "hill",
        "fare-well",
    ]
    assert text_words(" \n ,;: -- ") == []


def test_real_word_share_counts_known_words():
    known = set(text_words("To be, or not to be: that is the question."))
    assert real_word_share("TO BE or not to bee.", known) == pytest.approx(5 / 6)
    assert real_word_share("question!", known) == 1.0
    assert real_word_share("zzq xxv", known) == 0.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: real_word_share(";; --", {"a"}), "no words"),
        (lambda: real_word_share("a b", set()), "known_words is empty"),
        (lambda: real_word_share("a b", "a b"), "known_words must be a set"),
        (lambda: real_word_share(b"a b", {"a"}), "text must be a str"),
        (lambda: text_words([1, 2]), "text must be a str"),
    ],
)
def test_real_word_share_rejects_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=message):  # TypeError for a wrong type (bytes)
        call()


def test_repeated_ngram_share_against_brute_force():
    rng = torch.Generator().manual_seed(0)
    for _ in range(20):
        seq = torch.randint(0, 3, (int(torch.randint(0, 15, (1,), generator=rng)),), generator=rng).tolist()
        for n in (1, 2, 3):
            grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
            expected = sum(g in grams[:i] for i, g in enumerate(grams)) / len(grams) if grams else 0.0
            assert repeated_ngram_share(seq, n) == pytest.approx(expected)
    assert repeated_ngram_share("abcdef", 2) == 0.0
    assert repeated_ngram_share("abababab", 2) == pytest.approx(5 / 7)
    assert repeated_ngram_share(torch.tensor([1, 1, 1]), 1) == pytest.approx(2 / 3)


def test_repeating_tail_finds_the_loop_a_text_ends_in():
    assert repeating_tail("once upon the shall the shall the shall") == (10, 30)
    assert repeating_tail("xyzabcabcabc") == (3, 9)
    assert repeating_tail("abcdefg") == (0, 0)
    assert repeating_tail("ab" * 50 + "c") == (0, 0)  # the loop must reach the end
    assert repeating_tail([5, 1, 2, 1, 2]) == (2, 4)
    assert repeating_tail("qabcabcabc", max_period=2) == (0, 0)
    rng = torch.Generator().manual_seed(1)
    for _ in range(20):  # brute force: the longest periodic suffix with 2+ cycles
        seq = torch.randint(0, 2, (12,), generator=rng).tolist()
        spans = {
            p: max(s for s in range(len(seq) + 1) if all(seq[-s:][i] == seq[-s:][i - p] for i in range(p, s)))
            for p in range(1, 7)
        }
        spans = {p: s for p, s in spans.items() if s >= 2 * p}
        expected = max(spans.items(), key=lambda kv: (kv[1], -kv[0])) if spans else (0, 0)
        assert repeating_tail(seq) == expected, seq


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: repeated_ngram_share("abc", 0), "n=0 must be"),
        (lambda: repeated_ngram_share({1, 2}, 1), "seq must be"),
        (lambda: repeating_tail(3), "seq must be"),
        (lambda: repeating_tail("abab", max_period=0), "max_period"),
    ],
)
def test_repetition_measures_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
