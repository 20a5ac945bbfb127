import onehot2gpt_exercises as ex
import pytest
import torch
from exercise_helpers import assert_rejects, top_k_lowest_ids
from onehot2gpt.vocab import bag_of_words, cosine_similarity, one_hot


def test_check_passes_the_reference_itself(capsys):
    ex.check_one_hot(one_hot)
    ex.check_bag_of_words(bag_of_words)
    ex.check_cosine_similarity(lambda a, b: cosine_similarity(a, b))
    ex.check_encode(lambda tokens, stoi, unk: [stoi.get(t, unk) for t in tokens])
    assert capsys.readouterr().out.count("✓") == 4


@pytest.mark.parametrize(
    "check, wrong",
    [
        (ex.check_one_hot, lambda ids, v: one_hot(ids, v + 1)),  # wrong width
        (ex.check_bag_of_words, lambda ids, v: one_hot(ids, v).max(0).values),  # presence, not counts
        (ex.check_encode, lambda tokens, stoi, unk: [stoi.get(t, 0) for t in tokens]),  # <pad> for unk
        (ex.check_cosine_similarity, lambda a, b: float(a @ b)),  # not normalised
    ],
)
def test_check_rejects_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


def test_unwritten_exercise_gets_a_friendly_assertion():
    def stub(ids, vocab_size):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        ex.check_one_hot(stub)


def test_crashing_exercise_reports_the_input():
    with pytest.raises(AssertionError, match="raised ZeroDivisionError"):
        ex.check_one_hot(lambda ids, v: 1 / 0)


def test_passing_the_result_instead_of_the_function():
    with pytest.raises(TypeError, match="without calling it"):
        ex.check_one_hot(one_hot(torch.tensor([1]), 3))


def test_assert_same_reports_shape_and_position():
    with pytest.raises(AssertionError, match="expected shape"):
        ex.assert_same(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(AssertionError, match=r"index \(1, 2\)"):
        ex.assert_same(torch.tensor([[0.0, 0, 0], [0, 0, 5]]), torch.zeros(2, 3))
    ex.assert_same({"a": [1.0, 2]}, {"a": [1.0 + 1e-7, 2]})


def _pairs_by_hand(ids, window):
    return [
        (ids[i], ids[j])
        for i in range(len(ids))
        for j in range(i - window, i + window + 1)
        if j != i and 0 <= j < len(ids)
    ]


def _loss_by_hand(v, u, noise):
    import torch.nn.functional as F

    positive = (u * v).sum(-1)
    negative = torch.bmm(noise, v.unsqueeze(2)).squeeze(2)
    return (-F.logsigmoid(positive) - F.logsigmoid(-negative).sum(-1)).mean()


def test_word2vec_checks_accept_independent_solutions(capsys):
    ex.check_skipgram_pairs(_pairs_by_hand)
    ex.check_negative_sampling_loss(_loss_by_hand)
    ex.check_noise_distribution(lambda c: c**0.75 / (c**0.75).sum())

    def analogy(unit, a, b, c):
        scores = unit @ (unit[b] - unit[a] + unit[c])
        for i in (a, b, c):
            scores[i] = -1e9
        return int(scores.argmax())

    ex.check_analogy(analogy)

    def ngrams(word, lo, hi):
        marked, out = f"<{word}>", []
        for n in range(lo, hi + 1):
            start = 0
            while start + n <= len(marked):
                out.append(marked[start : start + n])
                start += 1
        return out

    ex.check_char_ngrams(ngrams)
    assert capsys.readouterr().out.count("✓") == 5


@pytest.mark.parametrize(
    "check, wrong",
    [
        (ex.check_skipgram_pairs, lambda ids, w: _pairs_by_hand(ids, w)[::-1]),  # wrong order
        (ex.check_skipgram_pairs, lambda ids, w: [p for p in _pairs_by_hand(ids, w + 1)]),  # window too wide
        (ex.check_negative_sampling_loss, lambda v, u, n: _loss_by_hand(v, u, n) * len(v)),  # sum, not mean
        (ex.check_negative_sampling_loss, lambda v, u, n: _loss_by_hand(v, u, -n)),  # sign of noise
        (ex.check_noise_distribution, lambda c: c / c.sum()),  # no 0.75
        (
            ex.check_analogy,
            lambda unit, a, b, c: int((unit @ (unit[b] - unit[a] + unit[c])).argmax()),
        ),  # a,b,c not excluded
        (
            ex.check_char_ngrams,
            lambda w, lo, hi: [w[i : i + n] for n in range(lo, hi + 1) for i in range(len(w) - n + 1)],
        ),  # no < >
        (
            ex.check_char_ngrams,
            lambda w, lo, hi: [
                f"<{w}>"[i : i + n] for i in range(len(w) + 2) for n in range(lo, hi + 1) if i + n <= len(w) + 2
            ],
        ),  # order
    ],
)
def test_word2vec_checks_reject_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


def _pairs_03(tokens):
    padded = ["<bos>", *tokens, "<eos>"]
    return [(tuple(padded[:t]), padded[t]) for t in range(1, len(padded))]


def _bigram(counts, prev, word):
    total = sum(c for (p, _), c in counts.items() if p == prev)
    return counts.get((prev, word), 0) / total if total else 0.0


def _reverse(ids, lengths):
    out = ids.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = ids[b, :n].flip(0)
    return out


def _mix(layers, s, gamma):
    w = torch.softmax(s, 0)
    return gamma * sum(w[j] * layers[..., j, :] for j in range(len(w)))


def _sense(vectors, labels):
    import itertools

    unit = vectors / vectors.norm(dim=1, keepdim=True)
    same, diff = [], []
    for i, j in itertools.combinations(range(len(labels)), 2):
        (same if labels[i] == labels[j] else diff).append(float(unit[i] @ unit[j]))
    return sum(same) / len(same) - sum(diff) / len(diff)


def _stlr(step, total, lr_max, cut_frac, ratio):
    """STLR as Howard & Ruder write it, with the fall's length as the remaining steps."""
    cut = max(1, int(total * cut_frac))
    p = step / cut if step < cut else 1 - (step - cut) / (total - cut)
    return lr_max * (1 + p * (ratio - 1)) / ratio


def test_lm_and_elmo_checks_accept_independent_solutions(capsys):
    ex.check_next_token_pairs(_pairs_03)
    ex.check_perplexity(lambda lp: float(torch.exp(-lp.mean())))
    ex.check_bigram_prob(_bigram)
    ex.check_reverse_padded(_reverse)
    ex.check_scalar_mix(_mix)
    ex.check_sense_score(_sense)
    ex.check_slanted_triangular_lr(_stlr)
    assert capsys.readouterr().out.count("✓") == 7


@pytest.mark.parametrize(
    "check, wrong",
    [
        (ex.check_next_token_pairs, lambda tokens: _pairs_03(tokens)[:-1]),  # no <eos>
        (ex.check_perplexity, lambda lp: float(torch.exp(-lp.sum()))),  # sum, not mean
        (ex.check_bigram_prob, lambda c, p, w: c.get((p, w), 0) / max(sum(c.values()), 1)),  # joint, not conditional
        (ex.check_reverse_padded, lambda ids, lengths: ids.flip(1)),  # reverses padding too
        (ex.check_scalar_mix, lambda layers, s, g: g * layers.mean(-2)),  # ignores s
        (ex.check_sense_score, lambda v, labels: _sense(v, labels) + 0.1),
        (
            ex.check_slanted_triangular_lr,
            lambda t, T, lr, cf, r: lr * min(t / max(1, int(T * cf)), 1),
        ),  # from 0, no fall
        (ex.check_slanted_triangular_lr, lambda t, T, lr, cf, r: _stlr(t, T, lr, cf, r) if t < T // 2 else lr / r),
        (
            ex.check_slanted_triangular_lr,
            lambda t, T, lr, cf, r: _stlr(min(t + 1, T - 1), T, lr, cf, r),
        ),  # one step early
    ],
)
def test_lm_and_elmo_checks_reject_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


# Notebooks 05–06: written the way a student would, without the library's functions.


def _loops(q, K, V):
    out, weights = torch.zeros(q.shape[0], V.shape[1]), torch.zeros(q.shape[0], K.shape[0])
    for i in range(q.shape[0]):
        scores = torch.stack([q[i] @ K[j] for j in range(K.shape[0])]) / q.shape[1] ** 0.5
        weights[i] = torch.softmax(scores, 0)
        out[i] = sum(weights[i, j] * V[j] for j in range(K.shape[0]))
    return out, weights


def _split(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D // h).permute(0, 2, 1, 3)


def _pe(max_len, d):
    import math

    table = torch.zeros(max_len, d)
    for pos in range(max_len):
        for i in range(d // 2):
            table[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / d))
            table[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / d))
    return table


def _ln(x, g, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return g * (x - mean) / torch.sqrt(var + eps) + b


def _greedy(model, src, bos, eos, max_new):
    memory, memory_mask, _ = model.encode(src)
    out = [bos]
    for _ in range(max_new):
        logits, _, _ = model.decode(torch.tensor([out]), memory, memory_mask)
        out.append(int(logits[0, -1].argmax()))
        if out[-1] == eos:
            break
    return torch.tensor(out[1:])


def test_checks_05_06_pass_independent_solutions(capsys):
    ex.check_attention_with_loops(_loops)
    ex.check_causal_mask(lambda t: torch.tensor([[j <= i for j in range(t)] for i in range(t)]))
    ex.check_split_heads(_split)
    ex.check_positional_encoding(_pe)
    ex.check_layer_norm(_ln)
    ex.check_greedy_decode(_greedy)
    assert capsys.readouterr().out.count("✓") == 6


@pytest.mark.parametrize(
    "check, wrong",
    [
        (
            ex.check_attention_with_loops,
            lambda q, K, V: (torch.softmax(q @ K.T, -1) @ V, torch.softmax(q @ K.T, -1)),
        ),  # no √d
        (ex.check_causal_mask, lambda t: torch.ones(t, t, dtype=torch.bool).triu()),  # looks ahead
        (ex.check_split_heads, lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),  # mixes T and D
        (ex.check_positional_encoding, lambda n, d: _pe(n, d).flip(1)),  # cos/sin swapped
        (
            ex.check_layer_norm,
            lambda x, g, b, e: g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + e) + b,
        ),  # unbiased variance
        (ex.check_greedy_decode, lambda m, s, bos, eos, n: _greedy(m, s, bos, -1, n)),  # ignores <eos>
    ],
)
def test_checks_05_06_reject_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


# Notebook 07, again written without the library.


def _wordpiece(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


def _segments(tokens):
    ids, segment = [], 0
    for t in tokens:
        ids.append(segment)
        if t == "[SEP]":
            segment = 1
    return ids


def _masking(ids, chosen, action, random_ids, mask_id):
    inputs, labels = ids.clone(), torch.full_like(ids, -100)
    for i in range(ids.shape[0]):
        for j in range(ids.shape[1]):
            if chosen[i, j]:
                labels[i, j] = ids[i, j]
                if action[i, j] < 0.8:
                    inputs[i, j] = mask_id
                elif action[i, j] < 0.9:
                    inputs[i, j] = random_ids[i, j]
    return inputs, labels


def test_checks_07_pass_independent_solutions(capsys):
    ex.check_wordpiece(_wordpiece)
    ex.check_segment_ids(_segments)
    ex.check_apply_masking(_masking)
    assert capsys.readouterr().out.count("✓") == 3


def _shortest_first(word, vocab):  # takes the SHORTEST piece: a classic slip
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


@pytest.mark.parametrize(
    "check, wrong",
    [
        (ex.check_wordpiece, _shortest_first),
        (
            ex.check_segment_ids,
            lambda tokens: [0] * tokens.index("[SEP]") + [1] * (len(tokens) - tokens.index("[SEP]")),
        ),
        (
            ex.check_apply_masking,
            lambda ids, chosen, action, r, m: (
                torch.where(chosen, torch.full_like(ids, m), ids),
                torch.where(chosen, ids, torch.full_like(ids, -100)),
            ),
        ),
    ],
)
def test_checks_07_reject_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


def _first_pieces(word_index, tags):
    out, seen = [], set()
    for w in word_index:
        out.append(-100 if w is None or w in seen else tags[w])
        if w is not None:
            seen.add(w)
    return out


def _span_by_loops(start, end, max_len):
    best = None
    for s in range(len(start)):
        for e in range(s, min(len(end), s + max_len)):
            score = float(start[s] + end[e])
            if best is None or score > best[0]:
                best = (score, s, e)
    return torch.tensor(best[1]), best[2]  # a tensor int is accepted


def _f1_by_hand(prediction, gold):
    from collections import Counter

    from onehot2gpt.bert_tasks import squad_normalize

    p, g = squad_normalize(prediction).split(), squad_normalize(gold).split()
    same = sum((Counter(p) & Counter(g)).values())
    return 0.0 if same == 0 else 2 * same / (len(p) + len(g))


def test_checks_08_pass_independent_solutions(capsys):
    ex.check_first_piece_labels(_first_pieces)
    ex.check_best_span(_span_by_loops)
    ex.check_token_f1(_f1_by_hand)
    assert capsys.readouterr().out.count("✓") == 3


def _f1_without_normalising(prediction, gold):
    from collections import Counter

    p, g = prediction.split(), gold.split()
    same = sum((Counter(p) & Counter(g)).values())
    return 0.0 if same == 0 else 2 * same / (len(p) + len(g))


@pytest.mark.parametrize(
    "check, wrong",
    [
        (ex.check_first_piece_labels, lambda index, tags: [-100 if w is None else tags[w] for w in index]),
        (ex.check_best_span, lambda s, e, m: (int(s.argmax()), int(e.argmax()))),  # ignores s ≤ e and the limit
        (ex.check_token_f1, _f1_without_normalising),
        (ex.check_token_f1, lambda p, g: float(p == g)),
    ],
)
def test_checks_08_reject_wrong_answers(check, wrong):
    assert_rejects(check, wrong)


def test_check_best_span_says_when_it_is_not_written():
    def todo(start, end, max_len):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        ex.check_best_span(todo)


# Notebook 09, written without the library: loops and plain sorting, as a student might.


def _top_p_by_loops(logits, p, strict=False, force_top=True, extra=0):
    out = logits.clone()
    for row in out.view(-1, out.shape[-1]):
        probs = torch.softmax(row.double(), 0).tolist()
        order = sorted(range(len(probs)), key=lambda i: -probs[i])
        kept, total = [], 0.0
        for i in order:
            if strict:  # slip: stop before the token that takes the sum past p
                if total + probs[i] > p:
                    break
            elif total >= p:  # right: stop once the kept mass has reached p
                break
            kept.append(i)
            total += probs[i]
        if force_top and not kept:
            kept = [order[0]]
        kept = order[: len(kept) + extra]
        for i in range(len(probs)):
            if i not in kept:
                row[i] = float("-inf")
    return out


def _kv_step(q_new, k_new, v_new, k_cache, v_cache, scale=True, append=True):
    k_all = torch.cat([k_cache, k_new], dim=2) if append else k_cache
    v_all = torch.cat([v_cache, v_new], dim=2) if append else v_cache
    scores = torch.einsum("bhqd,bhkd->bhqk", q_new, k_all)
    if scale:
        scores = scores / q_new.shape[-1] ** 0.5
    weights = scores.exp() / scores.exp().sum(-1, keepdim=True)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v_all), k_all, v_all


def test_checks_09_pass_independent_solutions(capsys):
    ex.check_top_k_filter(top_k_lowest_ids)
    ex.check_top_p_filter(_top_p_by_loops)
    ex.check_kv_cache_step(_kv_step)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    "check, wrong, reason",
    [
        (ex.check_top_k_filter, lambda logits, k: top_k_lowest_ids(logits, k + 1), "kept tokens"),  # k + 1
        (
            ex.check_top_k_filter,
            lambda logits, k: top_k_lowest_ids(logits, k).clamp_min(-1e9),
            "kept tokens",
        ),  # -1e9, not -inf
        (
            ex.check_top_k_filter,
            lambda logits, k: torch.softmax(top_k_lowest_ids(logits, k), -1),
            "kept tokens",
        ),  # probabilities
        (
            ex.check_top_k_filter,
            lambda logits, k: logits.masked_fill(logits < logits.max(), 0.0),
            "kept tokens",
        ),  # 0, not -inf
        (ex.check_top_k_filter, lambda logits, k: torch.topk(logits, k).values, "shaped like `logits`"),
        (
            ex.check_top_p_filter,
            lambda logits, p: _top_p_by_loops(logits, p, strict=True, force_top=False),
            "kept tokens",
        ),  # > p: may keep none
        (
            ex.check_top_p_filter,
            lambda logits, p: _top_p_by_loops(logits, p, strict=True),
            "kept tokens",
        ),  # drops the crossing token
        (ex.check_top_p_filter, lambda logits, p: _top_p_by_loops(logits, p, extra=1), "kept tokens"),
        (ex.check_top_p_filter, lambda logits, p: _top_p_by_loops(logits * 0.9, p), "kept logits"),  # rescaled
        (ex.check_kv_cache_step, lambda *a: _kv_step(*a, scale=False), r"\['out'\]: values differ"),  # no 1/√hs
        (ex.check_kv_cache_step, lambda *a: _kv_step(*a, append=False), r"\['out'\]"),  # cache not extended
        (
            ex.check_kv_cache_step,
            lambda q, k, v, kc, vc: (_kv_step(q, k, v, kc, vc)[0], torch.cat([k, kc], 2), torch.cat([v, vc], 2)),
            r"\['k_all'\]",
        ),  # prepended
        (ex.check_kv_cache_step, lambda q, k, v, kc, vc: _kv_step(q, k, v, kc, vc)[0], "three tensors"),
    ],
)
def test_checks_09_reject_wrong_answers(check, wrong, reason):
    assert_rejects(check, wrong, reason)


@pytest.mark.parametrize("check", [ex.check_top_k_filter, ex.check_top_p_filter, ex.check_kv_cache_step])
def test_checks_09_say_when_not_written(check):
    def todo(*args):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not written yet"):
        check(todo)


def test_check_top_p_covers_small_p_and_p_near_one(monkeypatch):
    """The random cases include a p that only the top token meets and a p close to 1."""
    from onehot2gpt import sampling

    seen = []

    def spy(logits, p):
        seen.append((p, int((sampling.filter_top_p(logits, p) > float("-inf")).sum(-1).max())))
        return sampling.filter_top_p(logits, p)

    ex.check_top_p_filter(spy)
    assert any(kept == 1 for _, kept in seen) and any(p > 0.95 for p, _ in seen)
    assert any(0.2 < p < 0.9 and kept > 1 for p, kept in seen)


def test_check_kv_cache_step_includes_an_empty_cache():
    lengths = []

    def spy(q, k, v, k_cache, v_cache):
        lengths.append(k_cache.shape[2])
        return _kv_step(q, k, v, k_cache, v_cache)

    ex.check_kv_cache_step(spy)
    assert 0 in lengths and max(lengths) > 1


def test_assert_same_explains_a_difference_next_to_infinities_and_nans():
    expected = torch.tensor([float("-inf"), 1.0, 2.0])
    with pytest.raises(AssertionError, match="index \\(2,\\)"):
        ex.assert_same(torch.tensor([float("-inf"), 1.0, 3.0]), expected, hint="h")
    with pytest.raises(AssertionError, match="index \\(1,\\)"):
        ex.assert_same(torch.tensor([float("-inf"), float("nan"), 2.0]), expected, hint="h")
    ex.assert_same(expected.clone(), expected)  # equal infinities are equal


# -- notebook 10 -----------------------------------------------------------------------------


def _qa_prompt_by_lines(passage, question, examples=()):
    lines = []
    for p, q, a in examples:
        lines += [p, "q : " + q, "a : " + a + " ."]
    return "\n".join(lines + [passage, "q : " + question, "a :"])


def _greedy_with_cache(model, ids, newline_id, max_new):
    out = model(torch.tensor([ids]), use_cache=True)
    new = []
    for _ in range(max_new):
        nxt = int(out.logits[0, -1].argmax())
        new.append(nxt)
        if nxt == newline_id:
            break
        out = model(torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True)
    return new


def _matches_by_loop(logits, start, answer_ids):
    return all(int(logits[start - 1 + i].argmax()) == a for i, a in enumerate(answer_ids))


def test_checks_10_pass_independent_solutions(capsys):
    ex.check_qa_prompt(_qa_prompt_by_lines)
    with torch.no_grad():
        ex.check_greedy_until_newline(_greedy_with_cache)
    ex.check_answer_matches(_matches_by_loop)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    "check, wrong, reason",
    [
        (ex.check_qa_prompt, lambda p, q, e=(): _qa_prompt_by_lines(p, q, e) + " ", "qa_prompt"),  # "a : " + space
        (ex.check_qa_prompt, lambda p, q, e=(): _qa_prompt_by_lines(p, q, []), "qa_prompt"),  # examples dropped
        (ex.check_qa_prompt, lambda p, q, e=(): _qa_prompt_by_lines(p, q, e).replace("q : ", "Q: "), "qa_prompt"),
        (ex.check_greedy_until_newline, lambda m, i, n, k: _greedy_with_cache(m, i, -1, k), "greedy_until_newline"),
        (
            ex.check_greedy_until_newline,
            lambda m, i, n, k: _greedy_with_cache(m, i, n, k)[:-1] or [0],
            "greedy_until_newline",
        ),  # drops the last token
        (
            ex.check_answer_matches,
            lambda l, s, a: _matches_by_loop(l, s + 1, a) if s + len(a) < len(l) else True,
            "answer_matches",
        ),  # off by one
        (ex.check_answer_matches, lambda l, s, a: _matches_by_loop(l, s, a[:1]), "answer_matches"),  # first only
    ],
)
def test_checks_10_reject_wrong_answers(check, wrong, reason):
    with torch.no_grad():
        assert_rejects(check, wrong, reason)


# -- notebook 11 -----------------------------------------------------------------------------


def _mask_by_loops(order, include_self=False):
    T = len(order)
    out = torch.zeros(T, T, dtype=torch.bool)
    for k, i in enumerate(order):
        for j in order[: k + (1 if include_self else 0)]:
            out[i, j] = True
    return out


def _chain_rule_by_loop(logits, ids):
    return sum(torch.log(torch.softmax(logits[t], -1)[ids[t + 1]]) for t in range(len(ids) - 1))


def _independent_by_marginals(joint, a, b):
    first, second = {}, {}
    for (x, y), p in joint.items():
        first[x] = first.get(x, 0.0) + p
        second[y] = second.get(y, 0.0) + p
    return first.get(a, 0.0) * second.get(b, 0.0)


def test_checks_11_pass_independent_solutions(capsys):
    ex.check_permutation_mask(_mask_by_loops)
    ex.check_chain_rule_log_prob(_chain_rule_by_loop)
    ex.check_independent_masks(_independent_by_marginals)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize(
    "check, wrong, reason",
    [
        (ex.check_permutation_mask, lambda o: _mask_by_loops(o, include_self=True), "permutation_mask"),
        (ex.check_permutation_mask, lambda o: _mask_by_loops(o).T, "permutation_mask"),  # rows and columns swapped
        (ex.check_chain_rule_log_prob, lambda l, i: _chain_rule_by_loop(l, i) / (len(i) - 1), "chain_rule"),  # a mean
        (
            ex.check_chain_rule_log_prob,
            lambda l, i: sum(torch.log_softmax(l[t], -1)[i[t]] for t in range(len(i) - 1)),
            "chain_rule",
        ),  # scores the current token, not the next
        (ex.check_independent_masks, lambda j, a, b: j.get((a, b), 0.0), "independent_masks"),  # the joint
    ],
)
def test_checks_11_reject_wrong_answers(check, wrong, reason):
    assert_rejects(check, wrong, reason)


# -- how a failure is worded -------------------------------------------------------------------


def test_an_unwritten_exercise_gives_nothing_away():
    def stub(ids, vocab_size):
        raise NotImplementedError

    for _ in range(3):  # however often it is run
        with pytest.raises(AssertionError) as failure:
            ex.check_one_hot(stub)
        assert "Hint:" not in str(failure.value) and "Think about:" not in str(failure.value)


def test_the_code_hint_comes_after_a_second_wrong_attempt_and_a_pass_resets_it(capsys):
    wrong = lambda ids, v: one_hot(ids, v + 1)  # noqa: E731
    assert_rejects(ex.check_one_hot, wrong)  # concept, then concept + hint
    ex.check_one_hot(one_hot)  # solved: the count starts again
    with pytest.raises(AssertionError) as again:
        ex.check_one_hot(wrong)
    assert "Hint:" not in str(again.value)


def test_a_crash_counts_as_a_wrong_attempt():
    with pytest.raises(AssertionError) as first:
        ex.check_one_hot(lambda ids, v: 1 / 0)
    assert "Think about:" in str(first.value) and "Hint:" not in str(first.value)
    with pytest.raises(AssertionError, match="Hint:"):
        ex.check_one_hot(lambda ids, v: 1 / 0)


@pytest.mark.parametrize(
    "got, expected, says",
    [
        (torch.ones(3, 3), torch.ones(3, 3, dtype=torch.bool), "bool"),  # float 0/1 for a mask
        (torch.ones(2, 2, dtype=torch.long), torch.ones(2, 2), "floating point"),  # ints for a one-hot
        (torch.ones(2, dtype=torch.float64), torch.ones(2), "precision"),
        (1, True, "bool"),
    ],
)
def test_assert_same_compares_dtypes(got, expected, says):
    with pytest.raises(AssertionError, match=says):
        ex.assert_same(got, expected)


def test_a_diagnosis_names_the_mistake():
    def reference(x):
        return x * 2

    def diagnose(got, expected, x):
        return "you added instead of multiplying" if torch.equal(got, x + 2) else None

    with pytest.raises(AssertionError, match="Looks like: you added instead of multiplying"):
        ex.check_function(
            lambda x: x + 2,
            reference,
            lambda g: (torch.tensor([1.0, 3.0, 5.0]),),
            name="double",
            concept="doubling",
            diagnose=diagnose,
        )
