"""Checks for notebook 11 (beyond GPT)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int


def check_permutation_mask(fn: Callable) -> None:
    """Exercise: order (a list, a permutation of 0 … T−1) → (T, T) bool, True where position i may
    attend to position j because j is predicted before i."""
    from onehot2gpt.attention import permutation_mask

    def make(gen):
        return (torch.randperm(rand_int(gen, 1, 8), generator=gen).tolist(),)

    check_function(
        fn,
        permutation_mask,
        make,
        name="permutation_mask",
        trials=8,
        concept="in permutation language modelling a token may see exactly the tokens predicted before it in the "
        "chosen order, whatever their positions in the sentence; rows and columns are positions, and a token never "
        "sees itself",
        hint="first find each position's rank, the step at which it is predicted (order lists the positions in "
        "prediction order); position i may see position j exactly when j's rank is smaller than i's (strictly: a "
        "token does not see itself in the query stream). Rows and columns are positions, not ranks",
    )


def _reference_chain_rule(logits, ids):
    return torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(ids)[1:, None]).sum()


def check_chain_rule_log_prob(fn: Callable) -> None:
    """Exercise: (logits (T − 1, V), ids (T,)) → log P(ids[1:] | ids[0]) by the chain rule, where
    logits[t] are the model's scores for ids[t + 1]."""

    def make(gen):
        T, V = rand_int(gen, 2, 10), rand_int(gen, 2, 12)
        return torch.randn(T - 1, V, generator=gen) * 3, torch.randint(0, V, (T,), generator=gen)

    check_function(
        fn,
        _reference_chain_rule,
        make,
        name="chain_rule_log_prob",
        trials=8,
        concept="the chain rule scores a sentence as the sum, over positions, of the log-probability the model gave "
        "to the token that actually came next; one number for the whole sentence",
        hint="take the log-probabilities with a log-softmax over the vocabulary (the log of a softmax underflows); "
        "row t scores the token that came next, the one at position t + 1, and the answer is the sum of those T − 1 "
        "entries, a tensor of shape ()",
    )


def _reference_independent_masks(joint, a, b):
    first = sum(p for (x, _), p in joint.items() if x == a)
    second = sum(p for (_, y), p in joint.items() if y == b)
    return first * second


def check_independent_masks(fn: Callable) -> None:
    """Exercise: (joint {(first word, second word): probability}, a, b) → the probability that
    predicting each of two masks on its own (from the marginals) gives the pair (a, b)."""
    words = ("new", "los", "san", "york", "angeles", "francisco", "diego", "jose")

    def make(gen):
        n = rand_int(gen, 1, 6)
        pairs = {(words[rand_int(gen, 0, 3)], words[rand_int(gen, 3, 8)]) for _ in range(n)}
        weights = torch.rand(len(pairs), generator=gen) + 0.1
        joint = {pair: float(w / weights.sum()) for pair, w in zip(sorted(pairs), weights)}
        return joint, words[rand_int(gen, 0, 3)], words[rand_int(gen, 3, 8)]

    check_function(
        fn,
        _reference_independent_masks,
        make,
        name="independent_masks",
        trials=10,
        concept="two masks filled in one pass are predicted independently: each blank only knows its own marginal "
        "probability, and the pair's probability is the product of the two marginals, not the joint",
        hint="each mask on its own only knows its marginal: P(first = a) is the sum of the joint probabilities of all "
        "pairs starting with a, P(second = b) the sum over pairs ending in b. Predicted independently, the pair gets "
        "their product (a float), even when the pair itself never occurs",
    )


def check_induction_score(fn: Callable) -> None:
    """Exercise: (weights (H, T, T) one layer's attention, length, prefix) on `prefix` random tokens
    followed by `length` random tokens twice → (H,): per head, the mean attention that a query in
    the second copy pays to the token right after the earlier occurrence of its own token."""
    from onehot2gpt.lookinside import induction_scores

    def make(gen):
        H, length, prefix = rand_int(gen, 1, 4), rand_int(gen, 2, 6), rand_int(gen, 0, 3)
        T = prefix + 2 * length
        scores = torch.randn(H, T, T, generator=gen) * 2
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(scores, -1), length, prefix

    check_function(
        fn,
        induction_scores,
        make,
        name="induction_score",
        trials=10,
        concept="in the second copy, the token at position t appeared first at t − length; the token that followed it "
        "then sits at t − length + 1, and that is where an induction head looks. Average that weight over the queries "
        "of the second copy (positions prefix + length … T − 1), one number per head",
        hint="the queries of the second copy are the positions t = prefix + length … T − 1, and each one's key of "
        "interest is t − length + 1: average the weights at those (query, key) pairs, per head, which gives shape "
        "(H,)",
    )


# Exercise 4: one layer of XLNet's two-stream attention (the query stream)


def _make_attend(gen: torch.Generator, D: int):
    """One attention head with random weights, as the notebook's ``attend(queries, h, mask)``:
    queries (N, D) read h (T, D) where mask (N, T) allows. Rebuilt with only the globals its code
    names, so that a student's code holding it reaches none of this module's helpers."""
    from .checking import confine

    W_q, W_k, W_v = (torch.randn(D, D, generator=gen) / D**0.5 for _ in range(3))

    def attend(queries, h, mask):
        scores = (queries @ W_q) @ (h @ W_k).T / D**0.5
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ (h @ W_v)

    attend.__module__ = __name__
    return confine(attend)


def _reference_two_stream(h, g, order, attend, *, query_self=False, content_self=True, query_kv="h", zero_first=True):
    from onehot2gpt.attention import permutation_mask

    content_mask = permutation_mask(order, include_self=content_self)
    query_mask = permutation_mask(order, include_self=query_self)
    reads = query_mask.any(-1) if zero_first else torch.ones(len(order), dtype=torch.bool)
    g_new = torch.zeros_like(g)
    g_new[reads] = attend(g[reads], h if query_kv == "h" else g, query_mask[reads])
    return attend(h, h, content_mask), g_new


def check_two_stream_layer(fn: Callable) -> None:
    """Exercise: (h (T, D) content stream, g (T, D) query stream, order (a permutation of
    0 … T−1), attend(queries, h, mask)) → the new (h, g) after one layer of two-stream attention:
    the content stream reads the positions up to and including itself in the order, the query
    stream those strictly before it, keys and values always from the content stream; the order's
    first position has no query-stream output (its row stays 0)."""
    from .checking import close, same_shape

    def make(gen):
        T, D = rand_int(gen, 2, 8), rand_int(gen, 2, 7)
        order = torch.randperm(T, generator=gen).tolist()
        h, g = torch.randn(T, D, generator=gen), torch.randn(T, D, generator=gen)
        return h, g, order, _make_attend(gen, D)

    def diagnose(got, expected, h, g, order, attend):
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return "return two tensors: the new content stream h and the new query stream g"
        if not all(same_shape(a, b) for a, b in zip(got, expected)):
            return None
        new_h, new_g = got
        if close(new_h, expected[0]) and bool(new_g[order[0]].isnan().any()):
            return (
                "the order's first position reads nothing: a softmax over no keys is NaN; leave its query row 0 "
                "and attend only for the positions that read something"
            )
        for change, words in (
            (dict(query_self=True), "the query stream sees its own position: it must not see the token it predicts"),
            (dict(content_self=False), "the content stream does not see its own position: it carries its token"),
            (
                dict(query_kv="g"),
                "the query stream read keys and values from g; they always come from the content "
                "stream h (g holds only positions)",
            ),
        ):
            wrong = _reference_two_stream(h, g, order, attend, **change)
            if all(torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True) for a, b in zip(got, wrong)):
                return words
        return None

    check_function(
        fn,
        _reference_two_stream,
        make,
        name="two_stream_layer",
        trials=8,
        diagnose=diagnose,
        concept="two-stream attention: both streams use the same attention; the content stream at z_t reads the "
        "content of z_1 … z_t (itself included), the query stream at z_t reads the content of z_1 … z_(t−1) (never "
        "itself, whose token it predicts); the query stream of the order's first position reads nothing",
        hint="both masks come from the order's ranks (exercise 3): with the diagonal for the content stream, without "
        "it for the query stream. The queries of the content stream are h, those of the query stream g; the keys "
        "and values are h for both. Which query row has no True in its mask, and what should it hold?",
    )


def library_two_stream_layer(h, g, order, attend):
    """The stand-in for an unsolved exercise 4: one layer of two-stream attention with the
    library's permutation masks (the check's reference)."""
    return _reference_two_stream(h, g, order, attend)


def library_chain_rule_log_prob(logits, ids):
    """The stand-in for an unsolved exercise 1 (the check's reference)."""
    return _reference_chain_rule(logits, ids)


def library_independent_masks(joint, a, b):
    """The stand-in for an unsolved exercise 2 (the check's reference)."""
    return _reference_independent_masks(joint, a, b)
