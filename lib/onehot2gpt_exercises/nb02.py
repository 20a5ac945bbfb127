"""Checks for notebook 02 (word2vec)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int, same_shape

# Exercise 1: skip-gram pairs


def _reference_skipgram_pairs(ids, window):
    from onehot2gpt.word2vec import skipgram_pairs

    centres, contexts = skipgram_pairs(torch.as_tensor(ids, dtype=torch.long), window, shrink=False)
    return list(zip(centres.tolist(), contexts.tolist()))


def library_skipgram_pairs(ids, window):
    """What notebook 02's cells after exercise 1 use while `my_skipgram_pairs` does not pass its
    check yet: the library's ``skipgram_pairs(..., shrink=False)`` as a list of (centre, context)."""
    return _reference_skipgram_pairs(ids, window)


def _skipgram_pairs_diagnose(got, expected, ids, window):
    if not isinstance(got, (list, tuple)):
        return None
    try:
        got_set, expected_set = sorted(map(tuple, got)), sorted(expected)
    except TypeError:
        return None
    if got_set == expected_set:
        return "the right pairs in another order: centre by centre, each centre's contexts left to right"
    if len(got) > len(expected) and all(p in got_set for p in expected_set):
        return (
            "every expected pair is there, plus some more: a word is never its own context, and the window reaches "
            "`window` words to each side, no further"
        )
    if len(got) < len(expected):
        return "some pairs are missing: the window has `window` words on *each* side of the centre"
    return None


def check_skipgram_pairs(fn: Callable) -> None:
    """Exercise: ids (list of ints) and window → list of (centre, context) pairs, all offsets
    1..window on both sides, centre by centre, contexts left to right."""

    def make(gen):
        n = rand_int(gen, 1, 12)
        return torch.randint(0, 50, (n,), generator=gen).tolist(), rand_int(gen, 1, 4)

    check_function(
        fn,
        _reference_skipgram_pairs,
        make,
        name="skipgram_pairs",
        concept="a pair joins a centre word with each word 1 to `window` positions to its left and right (never with "
        "itself, never past either end of the list); the pairs come centre by centre, and each centre's contexts from "
        "left to right",
        hint="which positions j pair with the centre at position i: those with 1 ≤ |i − j| ≤ window that lie inside "
        "the list? Each pair is a tuple (centre id, context id) of ints, centre by centre, its contexts from left to "
        "right",
        diagnose=_skipgram_pairs_diagnose,
    )


# Exercise 2: the negative-sampling loss


def _loss_diagnose(got, expected, v, u, noise):
    if not isinstance(got, torch.Tensor) or got.numel() != 1 or float(expected) == 0:
        return None
    ratio = float(got) / float(expected)
    if len(v) > 1 and abs(ratio - len(v)) < 1e-3:
        return "you summed over the batch: the loss is the mean over the B examples"
    from onehot2gpt.word2vec import negative_sampling_loss

    if torch.allclose(got.detach().double(), negative_sampling_loss(v, u, -noise).double(), rtol=1e-4):
        return (
            "the noise words are scored with the wrong sign: a noise word's term is −log σ(−u_k·v_c), small when its "
            "score is low"
        )
    return None


def check_negative_sampling_loss(fn: Callable) -> None:
    """Exercise: centre vectors (B, D), context vectors (B, D), noise vectors (B, K, D) → mean loss,
    a 0-d tensor."""
    from onehot2gpt.word2vec import negative_sampling_loss

    def make(gen):
        b, d, k = (rand_int(gen, 1, 6) for _ in range(3))
        return (torch.randn(b, d, generator=gen), torch.randn(b, d, generator=gen), torch.randn(b, k, d, generator=gen))

    check_function(
        fn,
        negative_sampling_loss,
        make,
        name="negative_sampling_loss",
        concept="the real context word should score high, so its term is −log σ of its score; each noise word should "
        "score low, so its term is −log σ of minus its score, summed over the K noise words; the loss is the mean of "
        "that over the batch, kept as a tensor (a single number autograd can differentiate)",
        hint="per example the loss is −log σ(u_o·v_c) − Σ_k log σ(−u_k·v_c), where the K noise scores come from one "
        "batched product of (B, K, D) with (B, D, 1), one score per noise word; log σ computed in one step stays "
        "finite where the log of σ underflows, and the answer is the mean over the batch, a tensor of shape () (not a "
        "Python number)",
        diagnose=_loss_diagnose,
    )


# Exercise 3: the noise distribution


def _noise_diagnose(got, expected, counts):
    if not same_shape(got, expected):
        return None
    got = got.double()
    if torch.allclose(got, counts.double() / counts.double().sum(), rtol=1e-4):
        return "this is the plain unigram distribution (count / total): the 0.75 power is missing"
    if not torch.isclose(got.sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-4):
        return f"your probabilities sum to {float(got.sum()):.4g}, not 1: divide by the total"
    return None


def check_noise_distribution(fn: Callable) -> None:
    """Exercise: word counts (V,) → noise probabilities (V,) ∝ count^0.75, float32 like the counts."""
    from onehot2gpt.word2vec import noise_distribution

    check_function(
        fn,
        noise_distribution,
        lambda g: (torch.randint(1, 1000, (rand_int(g, 2, 20),), generator=g).float(),),
        name="noise_distribution",
        concept="each word is drawn with probability proportional to its count raised to the power 0.75, so the "
        "probabilities are those weights divided by their sum (they add up to 1), one per word, in the counts' dtype",
        hint="raise the counts to the power 0.75, then divide by their sum",
        diagnose=_noise_diagnose,
    )


# Exercise 4: analogies by 3CosAdd


def _reference_analogy(unit_vectors, a, b, c):
    target = unit_vectors[b] - unit_vectors[a] + unit_vectors[c]
    scores = unit_vectors @ target
    scores[[a, b, c]] = -float("inf")
    return int(scores.argmax())


def _analogy_diagnose(got, expected, unit_vectors, a, b, c):
    if isinstance(got, int) and got in (a, b, c):
        return "your answer is one of the three query words, which 3CosAdd never answers"
    return None


def check_analogy(fn: Callable) -> None:
    """Exercise: unit-length vectors (V, D) and ids a, b, c → id of the best d (3CosAdd), an int."""

    def make(gen):
        v = torch.randn(30, 8, generator=gen)
        a, b, c = torch.randperm(30, generator=gen)[:3].tolist()
        return v / v.norm(dim=1, keepdim=True), a, b, c

    def as_int(*args):
        got = fn(*args)
        if isinstance(got, bool) or not isinstance(got, int):
            raise TypeError(f"return the answer's id as a Python int, got {type(got).__name__} {got!r}")
        return got

    check_function(
        as_int,
        _reference_analogy,
        make,
        name="analogy",
        concept="3CosAdd: the answer is the word whose vector points most nearly the way of b − a + c (for unit "
        "vectors, the highest dot product), and a, b and c themselves are never answers; the answer is one word id, a "
        "Python int",
        hint="score every word by its dot product with b − a + c (the vectors are unit length, so that is cosine up "
        "to a constant), rule out a, b and c themselves, and return the id with the highest score as a Python int",
        diagnose=_analogy_diagnose,
    )


# Exercise 5: one skip-gram training step by hand (the library's fast trainer's step)


def _step_inputs(gen):
    """Tables and one batch in the trainer's format, small enough that no row is damped."""
    V, D, B, b, K = (rand_int(gen, low, high) for low, high in ((6, 12), (2, 6), (1, 6), (1, 4), (1, 5)))
    in_w = torch.randn(V, D, generator=gen) * 0.5
    out_w = torch.randn(V, D, generator=gen) * 0.5
    contexts = torch.randint(0, V, (B, 2 * b), generator=gen)
    pads = torch.rand(B, 2 * b, generator=gen) < 0.25  # windows cut by a sentence end
    pads[:, b - 1] = False  # every centre keeps one word
    contexts[pads] = -1
    contexts[0, 0] = contexts[0, -1] = contexts[0, b - 1]  # a word twice in one row
    centres = torch.randint(0, V, (B,), generator=gen)
    negatives = torch.randint(0, V, (B, K), generator=gen)
    lr = 0.005 + 0.005 * float(torch.rand((), generator=gen))  # lr · repeats < MAX_ROW_STEP
    return in_w, out_w, contexts, centres, negatives, lr


def _reference_step(in_w, out_w, contexts, centres, negatives, lr):
    from onehot2gpt.word2vec import train_step

    loss, n = train_step(in_w, out_w, contexts, centres, negatives, lr, cbow=False)
    return {"loss": loss, "n": n, "in_w": in_w, "out_w": out_w}


def _step_diagnose(got, expected, in_w, out_w, contexts, centres, negatives, lr):
    if not isinstance(got, dict):
        return None
    if torch.equal(got["in_w"], in_w) and torch.equal(got["out_w"], out_w):
        return "neither table changed: the step must update in_w and out_w themselves (in place)"
    if torch.equal(got["in_w"], in_w):
        return "out_w changed but in_w did not: the context words' input vectors also take a step"
    if torch.equal(got["out_w"], out_w):
        return "in_w changed but out_w did not: the centre's and the noise words' output vectors also take a step"
    if (
        (got["in_w"][-1] != expected["in_w"][-1]).any()
        and (contexts == -1).any()
        and not (contexts == in_w.shape[0] - 1).any()
    ):
        return "the last row of in_w moved: the -1 pads are not words, they must be left out"
    step_got, step_exp = got["in_w"] - in_w, expected["in_w"] - in_w
    if torch.allclose(step_got, -step_exp, atol=1e-6):
        return "the input vectors moved uphill: a step goes against the gradient (minus lr times it)"
    n = expected["n"]
    if n > 1 and torch.allclose(step_got * n, step_exp, atol=1e-6):
        return "the steps are n times too small: they follow the summed loss, not the mean"
    try:
        if n > 1 and abs(float(got["loss"]) * n - float(expected["loss"])) < 1e-3 * abs(float(expected["loss"])):
            return "the loss is the mean; return the sum over all (context, centre) predictions"
    except (TypeError, ValueError):
        return None
    return (
        "some rows differ: if a word occurs more than once in the batch, are all its updates added up, each computed "
        "from the vectors as they were before the step?"
    )


def check_sgns_step(fn: Callable) -> None:
    """Exercise: one SGD step of skip-gram with negative sampling on a batch of windows, by hand.

    ``fn(in_w (V, D), out_w (V, D), contexts (B, C) with -1 pads, centres (B,), negatives (B, K), lr)``
    updates both tables in place and returns (summed loss, number of predictions); the reference is
    the library's fast trainer's step, on batches where it damps nothing."""

    def run(in_w, out_w, contexts, centres, negatives, lr):
        result = fn(in_w, out_w, contexts, centres, negatives, lr)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(
                f"return two things: the summed loss and the number of predictions, got {type(result).__name__}"
            )
        loss, n = result
        return {"loss": float(loss), "n": int(n), "in_w": in_w, "out_w": out_w}

    check_function(
        run,
        _reference_step,
        _step_inputs,
        name="sgns_step",
        concept="each context word's input vector v is scored against the centre's output vector (label 1) and the K "
        "noise words' output vectors (label 0); σ(score) − label is the error, and error × the other vector is each "
        "vector's gradient of the loss summed over all predictions; both tables step by −lr × gradient, computed from "
        "the vectors before the step; pads (-1) are not words, and a word that appears several times gets the sum of "
        "its updates",
        hint="each real (context, centre) pair (pads −1 left out, P of them) scores its context's input vector v (D) "
        "against 1 + K output vectors u, the centre's then the noise words': scores (P, 1+K), error g = σ(s) − label; "
        "the loss is softplus(−s) of the centre's score plus softplus(s) of each noise score, summed. The input row "
        "then moves by −lr · Σ_j g_j u_j and each output row by −lr · g_j v, both computed from the vectors before "
        "the step and added up where a word repeats (an in-place index add, not an assignment)",
        diagnose=_step_diagnose,
    )


_WORDS = "where bank a of unbelievable rivers learning it naïve bookshelf tokyo runnning the x ceo embeddings".split()


def check_char_ngrams(fn: Callable) -> None:
    """Exercise: fastText's character n-grams of a word, ``fn(word, min_n, max_n)`` → list of str,
    compared with :func:`onehot2gpt.fasttext.char_ngrams` (order included)."""
    from onehot2gpt.fasttext import char_ngrams

    def make(gen):
        word = _WORDS[rand_int(gen, 0, len(_WORDS))]
        min_n = rand_int(gen, 1, 4)
        return word, min_n, min_n + rand_int(gen, 0, 4)

    def diagnose(got, expected, word, min_n, max_n):
        if not isinstance(got, list):
            return None
        if got and all(not g.startswith("<") for g in got):
            return "the word must be written with its boundary marks first: '<' + word + '>'"
        if sorted(got) == sorted(expected):
            return (
                "the right n-grams in the wrong order: all of length min_n first, left to right, then the next length"
            )
        if len(got) == len(expected) - 1 or len(got) == len(expected) - (max_n - min_n + 1):
            return "one n-gram short per length: an n-gram may end at the last character (range(len(s) - n + 1))"
        return None

    check_function(
        fn,
        char_ngrams,
        make,
        name="char_ngrams",
        diagnose=diagnose,
        concept="fastText writes the word between boundary marks, <word>, and takes every substring of each length "
        "from min_n to max_n, shortest first and left to right within a length; the marks make prefixes and suffixes "
        "their own n-grams ('<wh' is not 'wh' in the middle of a word)",
        hint="mark the word as <word> first; then for each length n from min_n to max_n, shortest first, which start "
        "positions give a whole n-character piece of the marked word (the last one starts n characters before its "
        "end)?",
    )
