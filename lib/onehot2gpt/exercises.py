"""Checked exercises: compare a student's function with the library's reference, and make
student notebooks.

Every notebook ends its sections with exercises. An exercise cell (tagged ``exercise``) holds a
function whose body sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the next cell
(tagged ``check``) calls one of the ``check_*`` functions below. A check runs the student's
function and the reference on fresh random inputs and raises an ``AssertionError`` with a hint
until they agree.

Student versions are generated, never edited by hand::

    python -m onehot2gpt.exercises notebooks/01_onehot.ipynb --out notebooks/student

replaces every solution block with ``raise NotImplementedError`` and clears all outputs.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Your turn: replace this line with your code")'
GENERATED_NOTE = ("**Student version.** Generated from `notebooks/{name}` by "
                  "`python -m onehot2gpt.exercises`; the exercises are yours to write.")


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

def _fail(name: str, message: str, hint: str) -> AssertionError:
    text = f"{name}: {message}"
    if hint:
        text += f"\nHint: {hint}"
    return AssertionError(text)


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"[:200]


def assert_same(got, expected, name: str = "your answer", hint: str = "",
                rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Raise an AssertionError with a hint unless `got` matches `expected` (tensors, numbers,
    sequences and dicts, compared recursively; floats to the given tolerance)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise _fail(name, f"expected a tensor, got {_describe(got)}", hint)
        if got.shape != expected.shape:
            raise _fail(name, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}", hint)
        if expected.is_floating_point() or got.is_floating_point():
            ok = torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol)
        else:
            ok = torch.equal(got, expected)
        if not ok:
            g, e = got.double(), expected.double()
            same = (g == e) | (g.isnan() & e.isnan())                # equal infinities count as equal
            diff = (g - e).abs().nan_to_num(nan=float("inf")).masked_fill(same, 0.0)
            where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
            raise _fail(name, f"values differ; largest difference {diff.max().item():.3g} at "
                        f"index {where}: got {got[where].item():.6g}, expected "
                        f"{expected[where].item():.6g}", hint)
        return
    if isinstance(expected, float) or (isinstance(expected, int) and isinstance(got, float)):
        if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            raise _fail(name, f"expected a number, got {_describe(got)}", hint)
        got = float(got)
        if not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            raise _fail(name, f"got {got:.6g}, expected {expected:.6g}", hint)
        return
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise _fail(name, f"expected a dict with keys {sorted(expected)}, got {_describe(got)}", hint)
        for key in expected:
            assert_same(got[key], expected[key], f"{name}[{key!r}]", hint, rtol, atol)
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            raise _fail(name, f"expected a {type(expected).__name__}, got {_describe(got)}", hint)
        if len(got) != len(expected):
            raise _fail(name, f"expected {len(expected)} items, got {len(got)}", hint)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{name}[{i}]", hint, rtol, atol)
        return
    if got != expected:
        raise _fail(name, f"got {_describe(got)}, expected {_describe(expected)}", hint)


def check_function(student_fn: Callable, reference_fn: Callable,
                   make_inputs: Callable[[torch.Generator], tuple], *, name: str | None = None,
                   hint: str = "", trials: int = 5, seed: int = 0,
                   rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Call `student_fn` and `reference_fn` on `trials` fresh random inputs from
    `make_inputs(generator)` (a tuple of arguments) and assert they agree. Prints one line on
    success; raises AssertionError with `hint` otherwise."""
    if not callable(student_fn):
        raise TypeError(f"pass your function itself (without calling it), got {_describe(student_fn)}")
    name = name or getattr(student_fn, "__name__", "your function")
    gen = torch.Generator().manual_seed(seed)
    for trial in range(trials):
        args = make_inputs(gen)
        expected = reference_fn(*copy.deepcopy(args))
        try:
            got = student_fn(*copy.deepcopy(args))
        except NotImplementedError:
            raise _fail(name, "not written yet: replace the `raise NotImplementedError` line "
                        "with your code, run that cell, then run this check again", hint) from None
        except Exception as exc:  # the student's code raised: show what and on which input
            raise _fail(name, f"raised {type(exc).__name__}: {exc}\n  on input "
                        f"{', '.join(_describe(a) for a in args)}", hint) from exc
        assert_same(got, expected, f"{name} (test {trial + 1} of {trials})", hint, rtol, atol)
    print(f"✓ {name}: matches the reference on {trials} random inputs")


# --------------------------------------------------------------------------------------------
# Notebook 01: one-hot and the vocabulary
# --------------------------------------------------------------------------------------------

def _rand_int(gen: torch.Generator, low: int, high: int) -> int:
    """One random integer in low..high-1 from `gen` (the inputs of every check are seeded)."""
    return int(torch.randint(low, high, (1,), generator=gen))


def _random_ids(gen: torch.Generator, max_len: int = 12, max_vocab: int = 20):
    vocab_size = _rand_int(gen, 2, max_vocab)
    length = _rand_int(gen, 1, max_len)
    return torch.randint(0, vocab_size, (length,), generator=gen), vocab_size


def check_one_hot(fn: Callable) -> None:
    """Exercise: ids (T,) and vocab_size → one-hot matrix (T, vocab_size)."""
    from .vocab import one_hot
    check_function(fn, one_hot, lambda g: _random_ids(g), name="one_hot",
                   hint="start from torch.zeros(len(ids), vocab_size) and put a 1.0 in row t, "
                        "column ids[t]; the result should be float")


def check_bag_of_words(fn: Callable) -> None:
    """Exercise: ids (T,) and vocab_size → count vector (vocab_size,)."""
    from .vocab import bag_of_words
    check_function(fn, bag_of_words, lambda g: _random_ids(g), name="bag_of_words",
                   hint="a bag of words is the sum of the one-hot rows: order is lost, "
                        "counts are kept; return floats of shape (vocab_size,)")


def _reference_encode(tokens, stoi, unk_id):
    return [stoi.get(t, unk_id) for t in tokens]


def check_encode(fn: Callable) -> None:
    """Exercise: tokens, a token→id dict and the <unk> id → list of ids."""
    words = ["the", "cat", "dog", "sat", "on", "mat", "a", "bird", "car", "bank"]

    def make(gen):
        known = [words[i] for i in torch.randperm(len(words), generator=gen)[:5].tolist()]
        stoi = {"<pad>": 0, "<unk>": 1, **{w: i + 2 for i, w in enumerate(known)}}
        n = _rand_int(gen, 1, 10)
        tokens = [words[i] for i in torch.randint(0, len(words), (n,), generator=gen).tolist()]
        return tokens, stoi, 1

    check_function(fn, _reference_encode, make, name="encode",
                   hint="look each token up in the dict; a token that is not there gets unk_id "
                        "(dict.get(token, default) does exactly this)")


def check_cosine_similarity(fn: Callable) -> None:
    """Exercise: two vectors (D,) → their cosine similarity (a float or 0-d tensor)."""
    from .vocab import cosine_similarity

    def make(gen):
        d = _rand_int(gen, 2, 10)
        return torch.randn(d, generator=gen), torch.randn(d, generator=gen)

    check_function(fn, lambda a, b: float(cosine_similarity(a, b)), make,
                   name="cosine_similarity",
                   hint="cos(a, b) = a·b / (|a| |b|); torch.dot and torch.linalg.norm help")


# --------------------------------------------------------------------------------------------
# Notebook 02: word2vec
# --------------------------------------------------------------------------------------------

def _reference_skipgram_pairs(ids, window):
    from .word2vec import skipgram_pairs
    centres, contexts = skipgram_pairs(torch.as_tensor(ids), window, shrink=False)
    return list(zip(centres.tolist(), contexts.tolist()))


def check_skipgram_pairs(fn: Callable) -> None:
    """Exercise: ids (list of ints) and window → list of (centre, context) pairs, all offsets
    1..window on both sides, centre by centre, contexts left to right."""
    def make(gen):
        n = _rand_int(gen, 1, 12)
        return torch.randint(0, 50, (n,), generator=gen).tolist(), _rand_int(gen, 1, 4)

    check_function(fn, _reference_skipgram_pairs, make, name="skipgram_pairs",
                   hint="for each position i, for each j from i - window to i + window, skip j == i "
                        "and j outside 0..len(ids)-1, and append (ids[i], ids[j]); return tuples of ints")


def check_negative_sampling_loss(fn: Callable) -> None:
    """Exercise: centre vectors (B, D), context vectors (B, D), noise vectors (B, K, D) → mean loss."""
    from .word2vec import negative_sampling_loss

    def make(gen):
        b, d, k = (_rand_int(gen, 1, 6) for _ in range(3))
        return (torch.randn(b, d, generator=gen), torch.randn(b, d, generator=gen),
                torch.randn(b, k, d, generator=gen))

    check_function(fn, lambda v, u, n: float(negative_sampling_loss(v, u, n)), make,
                   name="negative_sampling_loss",
                   hint="per example: -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c); F.logsigmoid is the "
                        "stable log σ; torch.bmm(noise, centre.unsqueeze(2)) gives the K scores; "
                        "then average over the batch")


def _reference_analogy(unit_vectors, a, b, c):
    target = unit_vectors[b] - unit_vectors[a] + unit_vectors[c]
    scores = unit_vectors @ target
    scores[[a, b, c]] = -float("inf")
    return int(scores.argmax())


def check_analogy(fn: Callable) -> None:
    """Exercise: unit-length vectors (V, D) and ids a, b, c → id of the best d (3CosAdd)."""
    def make(gen):
        v = torch.randn(30, 8, generator=gen)
        a, b, c = torch.randperm(30, generator=gen)[:3].tolist()
        return v / v.norm(dim=1, keepdim=True), a, b, c

    check_function(fn, _reference_analogy, make, name="analogy",
                   hint="score every word by its dot product with b - a + c (the vectors are unit "
                        "length, so that is cosine up to a constant), rule out a, b and c "
                        "themselves, and return the id with the highest score as an int")


def check_noise_distribution(fn: Callable) -> None:
    """Exercise: word counts (V,) → noise probabilities (V,) ∝ count^0.75."""
    from .word2vec import noise_distribution
    check_function(fn, noise_distribution,
                   lambda g: (torch.randint(1, 1000, (_rand_int(g, 2, 20),),
                                            generator=g).float(),),
                   name="noise_distribution",
                   hint="raise the counts to the power 0.75, then divide by their sum")


# --------------------------------------------------------------------------------------------
# Notebook 03: language models
# --------------------------------------------------------------------------------------------

_WORDS = ["潮水", "退了", "就", "知道", "誰", "沒穿", "褲子", "the", "tide", "goes", "out"]


def _reference_next_token_pairs(tokens):
    padded = ["<bos>"] + list(tokens) + ["<eos>"]
    return [(tuple(padded[:t]), padded[t]) for t in range(1, len(padded))]


def check_next_token_pairs(fn: Callable) -> None:
    """Exercise: a sentence (list of tokens) → [(context tuple, next token)], from <bos> to <eos>."""
    def make(gen):
        n = _rand_int(gen, 0, 7)
        return ([_WORDS[i] for i in torch.randint(0, len(_WORDS), (n,), generator=gen).tolist()],)

    check_function(fn, _reference_next_token_pairs, make, name="next_token_pairs",
                   hint="put '<bos>' in front and '<eos>' at the end; for t = 1 .. len(padded) - 1 "
                        "the context is tuple(padded[:t]) and the target is padded[t]")


def check_perplexity(fn: Callable) -> None:
    """Exercise: natural-log probabilities of the predicted tokens (N,) → perplexity (a float)."""
    def make(gen):
        n = _rand_int(gen, 1, 30)
        return (torch.rand(n, generator=gen).clamp_min(1e-3).log(),)

    check_function(fn, lambda lp: float(torch.exp(-lp.double().mean())), make, name="perplexity",
                   hint="perplexity = exp(-mean(log_probs)): the exponential of the average "
                        "negative log-probability per token")


def _reference_bigram_prob(pair_counts, prev, word):
    total = sum(c for (p, _), c in pair_counts.items() if p == prev)
    return pair_counts.get((prev, word), 0) / total if total else 0.0


def check_bigram_prob(fn: Callable) -> None:
    """Exercise: bigram counts {(prev, word): count}, prev, word → P(word | prev) by counting."""
    words = ["the", "cat", "dog", "sat", "ran"]

    def make(gen):
        counts = {}
        for _ in range(_rand_int(gen, 3, 15)):
            a, b = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
            counts[(a, b)] = counts.get((a, b), 0) + _rand_int(gen, 1, 5)
        prev, word = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
        return counts, prev, word

    check_function(fn, _reference_bigram_prob, make, name="bigram_prob", trials=20,
                   hint="P(word | prev) = count(prev, word) / Σ_w count(prev, w); return 0.0 when "
                        "prev was never seen (that zero is exactly why n-gram LMs need smoothing)")


# --------------------------------------------------------------------------------------------
# Notebook 04: ELMo
# --------------------------------------------------------------------------------------------

def check_reverse_padded(fn: Callable) -> None:
    """Exercise: ids (B, T) right-padded, lengths (B,) → each row's real tokens reversed, padding kept."""
    from .elmo import reverse_padded

    def make(gen):
        b, t = _rand_int(gen, 1, 5), _rand_int(gen, 1, 8)
        lengths = torch.randint(1, t + 1, (b,), generator=gen)
        ids = torch.randint(4, 50, (b, t), generator=gen)
        ids[torch.arange(t)[None, :] >= lengths[:, None]] = 0                 # <pad>
        return ids, lengths

    check_function(fn, reverse_padded, make, name="reverse_padded",
                   hint="for row b, positions 0..lengths[b]-1 take the tokens in reverse order, "
                        "e.g. ids[b, :n].flip(0); positions from lengths[b] on keep their <pad>")


def check_scalar_mix(fn: Callable) -> None:
    """Exercise: layers (B, T, L, D), s (L,), gamma → γ · Σ_j softmax(s)_j · layers[..., j, :]."""
    def make(gen):
        b, t, n_layers, d = (_rand_int(gen, 1, 5) for _ in range(4))
        return (torch.randn(b, t, n_layers, d, generator=gen), torch.randn(n_layers, generator=gen),
                float(torch.rand(1, generator=gen) * 2))

    def reference(layers, s, gamma):
        return gamma * torch.einsum("btld,l->btd", layers, torch.softmax(s, 0))

    check_function(fn, reference, make, name="scalar_mix",
                   hint="w = torch.softmax(s, dim=0) has one weight per layer; multiply layer j by "
                        "w[j], sum over the layer dimension (dim -2), then scale by gamma")


def check_sense_score(fn: Callable) -> None:
    """Exercise: vectors (N, D) and sense labels (N,) → mean cosine within senses − across senses."""
    def make(gen):
        n = _rand_int(gen, 3, 9)
        labels = torch.randint(0, 2, (n,), generator=gen)
        labels[0], labels[1] = 0, 1                                          # both kinds of pair exist
        labels[2] = labels[_rand_int(gen, 0, 2)]
        return torch.randn(n, 4, generator=gen), labels

    from .probing import sense_grouping_score as reference

    check_function(fn, reference, make, name="sense_score",
                   hint="normalise the rows, take all pairwise cosines, average those of pairs with "
                        "the same label (leaving out each vector with itself) and subtract the "
                        "average over pairs with different labels")


# --------------------------------------------------------------------------------------------
# Notebook 05: attention
# --------------------------------------------------------------------------------------------

def check_attention_with_loops(fn: Callable) -> None:
    """Exercise: q (T_q, d), K (T_k, d), V (T_k, d_v) → (output (T_q, d_v), weights (T_q, T_k))."""
    from .attention import scaled_dot_product_attention

    def make(gen):
        tq, tk, d, dv = (_rand_int(gen, 1, 6) for _ in range(4))
        return (torch.randn(tq, d, generator=gen), torch.randn(tk, d, generator=gen),
                torch.randn(tk, dv, generator=gen))

    check_function(fn, scaled_dot_product_attention, make, name="attention_with_loops",
                   hint="for each query i: scores[j] = q[i]·K[j] / sqrt(d) for every key j; "
                        "weights = softmax over j; output[i] = sum_j weights[j] * V[j]. "
                        "Return (output, weights)")


def check_causal_mask(fn: Callable) -> None:
    """Exercise: T → (T, T) bool mask, True where query i may attend to key j (j ≤ i)."""
    from .attention import causal_mask

    check_function(fn, causal_mask, lambda gen: (_rand_int(gen, 1, 9),), name="causal_mask",
                   hint="position i may look at positions 0..i only: True on and below the "
                        "diagonal, e.g. torch.ones(T, T, dtype=torch.bool).tril()")


def check_split_heads(fn: Callable) -> None:
    """Exercise: x (B, T, D), n_heads → (B, n_heads, T, D / n_heads)."""
    from .attention import split_heads

    def make(gen):
        b, t, h, hs = (_rand_int(gen, 1, 5) for _ in range(4))
        return torch.randn(b, t, h * hs, generator=gen), h

    check_function(fn, split_heads, make, name="split_heads",
                   hint="view the last dimension as (n_heads, D // n_heads): x.view(B, T, H, hs), "
                        "then swap the T and H axes with .transpose(1, 2); head h must hold "
                        "features h*hs … (h+1)*hs - 1")


# --------------------------------------------------------------------------------------------
# Notebook 06: the Transformer
# --------------------------------------------------------------------------------------------

def check_positional_encoding(fn: Callable) -> None:
    """Exercise: (max_len, d_model) → the sinusoidal table of Vaswani et al. (2017)."""
    from .transformer import sinusoidal_positions

    def make(gen):
        return _rand_int(gen, 1, 30), 2 * _rand_int(gen, 1, 9)

    check_function(fn, sinusoidal_positions, make, name="positional_encoding",
                   hint="PE[pos, 2i] = sin(pos / 10000**(2i / d_model)) and PE[pos, 2i+1] = "
                        "cos(pos / 10000**(2i / d_model)); i runs over 0 … d_model/2 - 1, and "
                        "both columns of a pair share the same frequency")


def check_layer_norm(fn: Callable) -> None:
    """Exercise: x (…, D), gain (D,), bias (D,), eps → LayerNorm over the last dimension."""
    import torch.nn.functional as F

    def make(gen):
        shape = tuple(_rand_int(gen, 1, 5) for _ in range(_rand_int(gen, 1, 4)))
        d = _rand_int(gen, 2, 8)
        return (3 * torch.randn(*shape, d, generator=gen) + 1, torch.randn(d, generator=gen),
                torch.randn(d, generator=gen), 1e-5)

    def reference(x, gain, bias, eps):
        return F.layer_norm(x, x.shape[-1:], gain, bias, eps)

    check_function(fn, reference, make, name="layer_norm",
                   hint="mean and variance over the last dimension only (keepdim=True); use the "
                        "biased variance (unbiased=False, divide by D) and put eps inside the "
                        "square root: gain * (x - mean) / sqrt(var + eps) + bias")


def check_greedy_decode(fn: Callable) -> None:
    """Exercise: (model, src (1, S), bos_id, eos_id, max_new) → generated ids (≤ max_new,), no <bos>."""
    from .transformer import Seq2SeqTransformer, TransformerConfig

    torch.manual_seed(0)
    model = Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=12, tgt_vocab_size=6,
                                                      dropout=0.0)).eval()
    with torch.no_grad():  # favour <eos> a little, so some trials stop early and some run to max_new
        model.lm_head.bias[3] += 0.6

    def make(gen):
        return model, torch.randint(4, 12, (1, _rand_int(gen, 2, 9)), generator=gen), 2, 3, 8

    def reference(model, src, bos_id, eos_id, max_new):
        return model.greedy_decode(src, bos_id, eos_id, max_new)[0]

    check_function(fn, reference, make, name="greedy_decode", trials=8,
                   hint="encode once (memory, memory_mask, _ = model.encode(src)); start from "
                        "[[bos_id]]; repeat: logits, _, _ = model.decode(out, memory, memory_mask), "
                        "append logits[0, -1].argmax(), stop after eos_id or max_new tokens; "
                        "return the new ids without <bos> as a 1-D tensor")


# --------------------------------------------------------------------------------------------
# Notebook 07: BERT pre-training
# --------------------------------------------------------------------------------------------

_LETTERS = "abcdefgh"


def check_wordpiece(fn: Callable) -> None:
    """Exercise: (word, vocab: set of pieces) → greedy longest-match-first pieces, ["[UNK]"] if stuck."""
    from .subword import WordPieceTokenizer

    def make(gen):
        pieces = {"[UNK]"}
        for _ in range(_rand_int(gen, 3, 15)):
            length = _rand_int(gen, 1, 4)
            piece = "".join(_LETTERS[_rand_int(gen, 0, 4)] for _ in range(length))
            pieces.add(piece if _rand_int(gen, 0, 2) else "##" + piece)
        word = "".join(_LETTERS[_rand_int(gen, 0, 4)] for _ in range(_rand_int(gen, 1, 8)))
        return word, pieces

    def reference(word, vocab):
        return WordPieceTokenizer(sorted(vocab)).wordpiece(word)

    check_function(fn, reference, make, name="wordpiece", trials=30,
                   hint="start at position 0; take the LONGEST piece word[start:end] that is in the "
                        "vocabulary (prefix '##' unless start == 0), then continue from `end`; if no "
                        "piece fits at some position the whole word becomes ['[UNK]']")


def check_segment_ids(fn: Callable) -> None:
    """Exercise: tokens of "[CLS] A [SEP]" or "[CLS] A [SEP] B [SEP]" → segment ids (0 for A's part)."""
    def make(gen):
        tokens = ["[CLS]"] + ["a"] * _rand_int(gen, 0, 5) + ["[SEP]"]
        if _rand_int(gen, 0, 3):
            tokens += ["b"] * _rand_int(gen, 0, 5) + ["[SEP]"]
        return (tokens,)

    def reference(tokens):
        first = tokens.index("[SEP]")
        return [0] * (first + 1) + [1] * (len(tokens) - first - 1)

    check_function(fn, reference, make, name="segment_ids", trials=12,
                   hint="everything up to and including the FIRST [SEP] is segment 0 ([CLS] too); "
                        "everything after it (sentence B and its [SEP]) is segment 1. Return a list")


def check_apply_masking(fn: Callable) -> None:
    """Exercise: (ids, chosen, action, random_ids, mask_id) → (inputs, labels) by the 80/10/10 rule."""
    def make(gen):
        b, t = _rand_int(gen, 1, 4), _rand_int(gen, 2, 10)
        ids = torch.randint(5, 50, (b, t), generator=gen)
        chosen = torch.rand(b, t, generator=gen) < 0.4
        return (ids, chosen, torch.rand(b, t, generator=gen),
                torch.randint(5, 50, (b, t), generator=gen), 4)

    def reference(ids, chosen, action, random_ids, mask_id):
        inputs = ids.clone()
        inputs[chosen & (action < 0.8)] = mask_id
        swap = chosen & (action >= 0.8) & (action < 0.9)
        inputs[swap] = random_ids[swap]
        return inputs, torch.where(chosen, ids, torch.full_like(ids, -100))

    check_function(fn, reference, make, name="apply_masking",
                   hint="at chosen positions: action < 0.8 → mask_id; 0.8 ≤ action < 0.9 → the id from "
                        "random_ids; otherwise keep the token. labels = the ORIGINAL id at chosen "
                        "positions and -100 everywhere else. Don't modify ids in place (clone it)")


def check_first_piece_labels(fn: Callable) -> None:
    """Exercise: (word_index, tags) → one label per token: the word's tag on its first piece, -100 else."""
    def make(gen):
        n_words = _rand_int(gen, 1, 6)
        index: list = [None]
        for w in range(n_words):
            index += [w] * _rand_int(gen, 1, 4)
        index.append(None)
        if _rand_int(gen, 0, 3) == 0:                       # padding after [SEP]
            index += [None] * _rand_int(gen, 1, 3)
        return index, [_rand_int(gen, 0, 17) for _ in range(n_words)]

    def reference(word_index, tags):
        labels = []
        for t, w in enumerate(word_index):
            first = w is not None and (t == 0 or word_index[t - 1] != w)
            labels.append(tags[w] if first else -100)
        return labels

    check_function(fn, reference, make, name="first_piece_labels", trials=30,
                   hint="walk over word_index; a token starts word w when word_index[t] is w (not None) "
                        "and the token before it belongs to another word; put tags[w] there and -100 on "
                        "every other token ([CLS], [SEP], padding, '##' continuation pieces). Return a list")


def check_best_span(fn: Callable) -> None:
    """Exercise: (start_logits (T,), end_logits (T,), max_len) → the (s, e) with the best start + end."""
    from .bert import best_span

    def make(gen):
        t = _rand_int(gen, 1, 12)
        return torch.randn(t, generator=gen), torch.randn(t, generator=gen), _rand_int(gen, 1, 5)

    def reference(start_logits, end_logits, max_len):
        return best_span(start_logits, end_logits, max_len)[:2]

    def as_ints(*args):  # accept tensors or numpy ints inside the pair
        got = fn(*args)
        try:
            return tuple(int(x) for x in got)
        except (TypeError, ValueError):
            return got

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {_describe(fn)}")
    check_function(as_ints, reference, make, name="best_span", trials=40,
                   hint="score every pair s ≤ e < s + max_len by start_logits[s] + end_logits[e] and "
                        "return the best (s, e) as a pair of ints; a one-token span (s == e) is allowed")


def check_token_f1(fn: Callable) -> None:
    """Exercise: (prediction, gold) strings → SQuAD's token-overlap F1 after normalisation."""
    from .tasks import _f1

    words = ["the", "a", "an", "Denver", "broncos", "Broncos", "Super", "bowl", "50", "in", "1990"]
    punct = ["", "", ",", ".", "!", "'s"]

    def phrase(gen):
        return " ".join(words[_rand_int(gen, 0, len(words))] + punct[_rand_int(gen, 0, len(punct))]
                        for _ in range(_rand_int(gen, 0, 6)))

    def make(gen):
        return phrase(gen), phrase(gen)

    check_function(fn, _f1, make, name="token_f1", trials=40,
                   hint="normalise both strings with squad_normalize (lower case, no punctuation, no "
                        "a/an/the), split on spaces, count the shared tokens with collections.Counter "
                        "(min of the two counts per token); F1 = 2PR/(P+R) with P = shared/len(pred), "
                        "R = shared/len(gold); 0.0 when nothing is shared")


# --------------------------------------------------------------------------------------------
# Notebook 09: GPT and decoding
# --------------------------------------------------------------------------------------------

def _distinct_logits(gen: torch.Generator, max_vocab: int = 12):
    """Logits (V,) or (B, V) with no two equal in a row, so "the k largest" has one answer."""
    v = _rand_int(gen, 3, max_vocab + 1)
    shape = (v,) if _rand_int(gen, 0, 2) else (_rand_int(gen, 1, 4), v)
    rows = torch.stack([torch.randperm(v, generator=gen) for _ in range(shape[0] if len(shape) == 2 else 1)])
    logits = (rows + 0.9 * torch.rand(rows.shape, generator=gen)) * (0.3 + 1.2 * torch.rand(1, generator=gen))
    return logits.reshape(shape)


def _filter_outcome(fn: Callable, name: str) -> Callable:
    """Wrap a filter so that checks compare which tokens it keeps (by id), then the kept logits.

    Comparing the -inf tensors directly would report "nan" differences; a list of kept ids says
    what went wrong. A result that is not a tensor shaped like the logits is reported as such.
    """
    def outcome(logits, arg):
        out = fn(logits, arg)
        if not isinstance(out, torch.Tensor) or out.shape != logits.shape:
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise TypeError(f"{name} returned {got}; return the filtered logits: a tensor shaped like "
                            f"`logits` {tuple(logits.shape)}")
        kept = out > float("-inf")  # NaN counts as removed
        rows = kept.reshape(-1, kept.shape[-1]).tolist()
        ids = [[i for i, k in enumerate(row) if k] for row in rows]
        listed = (f"keeps token ids {ids[0]}" if logits.dim() == 1 else
                  "keeps " + "; ".join(f"row {b}: token ids {r}" for b, r in enumerate(ids)))
        return {"kept tokens": listed, "kept logits": out.detach().double().masked_fill(~kept, 0.0)}
    return outcome


def check_top_k_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), k) → logits with all but the k largest per row set to -inf."""
    from .sampling import filter_top_k

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {_describe(fn)}")

    def make(gen):
        logits = _distinct_logits(gen)
        return logits, _rand_int(gen, 1, logits.shape[-1] + 1)

    check_function(_filter_outcome(fn, "top_k_filter"), _filter_outcome(filter_top_k, "filter_top_k"),
                   make, name="top_k_filter", trials=12,
                   hint="keep exactly the k largest logits of each row (the last dimension) and set every "
                        "other entry to float('-inf'), leaving the kept logits unchanged: "
                        "torch.topk(logits, k, dim=-1).values[..., -1:] is each row's k-th largest, and "
                        "logits < that threshold marks the rest. Return a new tensor shaped like logits")


def check_top_p_filter(fn: Callable) -> None:
    """Exercise: (logits (V,) or (B, V), p) → logits with -inf outside the smallest most-likely set
    of probability mass ≥ p (the nucleus)."""
    from .sampling import filter_top_p

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {_describe(fn)}")
    trial = iter(range(10**6))

    def make(gen):
        kind = next(trial) % 3  # p below the top token's probability, p near 1, p in between
        while True:
            logits = _distinct_logits(gen)
            mass = torch.softmax(logits.double(), -1).sort(-1, descending=True).values.cumsum(-1)
            if kind == 0:
                p = float(mass[..., 0].min()) * (0.2 + 0.6 * float(torch.rand(1, generator=gen)))
            else:
                low, high = (0.95, 0.999) if kind == 1 else (0.2, 0.9)
                p = low + (high - low) * float(torch.rand(1, generator=gen))
            if float((mass - p).abs().min()) > 1e-3:  # no row reaches p so narrowly that rounding decides
                return logits, p

    check_function(_filter_outcome(fn, "top_p_filter"), _filter_outcome(filter_top_p, "filter_top_p"),
                   make, name="top_p_filter", trials=12,
                   hint="turn the logits into probabilities (softmax over the last dimension), sort them "
                        "from most to least likely and take the running sum; keep a token while the tokens "
                        "MORE likely than it add up to less than p. So the token whose probability takes the "
                        "sum to p or beyond is kept too, and the most likely token always is. Set the others "
                        "to float('-inf') in the original order (scatter back through the sort indices), "
                        "leaving the kept logits unchanged")


def check_kv_cache_step(fn: Callable) -> None:
    """Exercise: (q_new, k_new, v_new (B, H, 1, hs), k_cache, v_cache (B, H, T, hs)) →
    (out (B, H, 1, hs), k_all, v_all (B, H, T + 1, hs)): one attention step with a key/value cache."""
    from .attention import scaled_dot_product_attention

    if not callable(fn):
        raise TypeError(f"pass your function itself (without calling it), got {_describe(fn)}")
    trial = iter(range(10**6))

    def make(gen):
        b, h, hs = _rand_int(gen, 1, 4), _rand_int(gen, 1, 4), _rand_int(gen, 2, 9)
        t = 0 if next(trial) % 4 == 0 else _rand_int(gen, 1, 7)  # every 4th test starts with an empty cache
        new = [torch.randn(b, h, 1, hs, generator=gen) for _ in range(3)]
        return (*new, torch.randn(b, h, t, hs, generator=gen), torch.randn(b, h, t, hs, generator=gen))

    def reference(q_new, k_new, v_new, k_cache, v_cache):
        k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
        return {"out": scaled_dot_product_attention(q_new, k_all, v_all)[0], "k_all": k_all, "v_all": v_all}

    def student(*args):
        got = fn(*args)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise TypeError(f"kv_cache_step returned {_describe(got)}; return three tensors: "
                            f"(out, k_all, v_all)")
        return dict(zip(("out", "k_all", "v_all"), got))

    check_function(student, reference, make, name="kv_cache_step", trials=8,
                   hint="append the new key and value after the cached ones along the time axis: "
                        "k_all = torch.cat([k_cache, k_new], dim=2), the same for v (this works for an "
                        "empty cache, T = 0, too); then scores = q_new @ k_all.transpose(-2, -1) / "
                        "sqrt(hs), shape (B, H, 1, T + 1); out = softmax(scores, dim=-1) @ v_all. No mask: "
                        "the newest token may see every earlier one. Return (out, k_all, v_all)")


# --------------------------------------------------------------------------------------------
# Notebook 10: zero-shot prompting
# --------------------------------------------------------------------------------------------

_WORDS = ("mira", "tolvan", "lives", "in", "keeps", "a", "goat", "baker", "is", "where", "does", "live",
          "what", "owl", "the", "cat", "sailor", "brisk")


def _random_sentence(gen: torch.Generator, low: int = 2, high: int = 7) -> str:
    return " ".join(_WORDS[_rand_int(gen, 0, len(_WORDS))] for _ in range(_rand_int(gen, low, high)))


def _reference_qa_prompt(passage, question, examples=()):
    shots = "".join(f"{p}\nq : {q}\na : {a} .\n" for p, q, a in examples)
    return f"{shots}{passage}\nq : {question}\na :"


def check_qa_prompt(fn: Callable) -> None:
    """Exercise: (passage, question, examples=[(passage, question, answer), …]) → the prompt in
    the pre-training corpus's Q/A shape, ending with "a :"."""
    def make(gen):
        examples = [(_random_sentence(gen), _random_sentence(gen) + " ?", _random_sentence(gen, 1, 3))
                    for _ in range(_rand_int(gen, 0, 3))]
        return _random_sentence(gen) + " .", _random_sentence(gen) + " ?", examples

    check_function(fn, _reference_qa_prompt, make, name="qa_prompt", trials=8,
                   hint="each solved example is its passage, a line break, 'q : ' + question, a line "
                        "break, 'a : ' + answer + ' .' and a line break; after all examples comes the new "
                        "passage, '\\nq : ' + question and '\\na :' (no space after the colon: the model "
                        "writes the answer's first word, space included, itself). Print the corpus's "
                        "Q/A document above and copy its shape exactly")


def _tiny_lm(gen: torch.Generator):
    from .gpt import GPT, GPTConfig
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    model = GPT(GPTConfig.tiny(vocab_size=_rand_int(gen, 5, 12), max_len=32)).eval()
    with torch.no_grad():
        model.tok_emb.weight.mul_(10.0)        # spread the logits, so greedy choices are clear-cut
    return model


def _reference_greedy_until_newline(model, ids, newline_id, max_new):
    ids, new = list(ids), []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            new.append(nxt)
            ids.append(nxt)
            if nxt == newline_id:
                break
    return new


def check_greedy_until_newline(fn: Callable) -> None:
    """Exercise: (model, prompt ids, newline id, max_new) → the greedily chosen new ids, the line
    break included, at most max_new of them."""
    def make(gen):
        model = _tiny_lm(gen)
        ids = torch.randint(0, model.config.vocab_size, (_rand_int(gen, 1, 8),), generator=gen).tolist()
        free = _reference_greedy_until_newline(model, ids, -1, 8)
        # Half the tests stop at a line break the model does write, the others run to max_new.
        newline = free[_rand_int(gen, 0, 8)] if _rand_int(gen, 0, 2) else model.config.vocab_size - 1
        return model, ids, newline, _rand_int(gen, 1, 9)

    check_function(fn, _reference_greedy_until_newline, make, name="greedy_until_newline", trials=8,
                   hint="loop at most max_new times: run the model on all ids so far (a (1, T) tensor), "
                        "take the arg-max of the last position's logits, append it to both the ids and "
                        "the list you return, and stop right after appending newline_id. Return a list "
                        "of ints (.item() or int(...)), not tensors")


def _reference_answer_matches(logits, start, answer_ids):
    predicted = logits[start - 1:start - 1 + len(answer_ids)].argmax(-1)
    return bool((predicted == torch.as_tensor(answer_ids)).all())


def check_answer_matches(fn: Callable) -> None:
    """Exercise: (logits (T, V) of prompt + answer, start = the answer's first position, answer ids)
    → would greedy decoding after the prompt write exactly the answer?"""
    def make(gen):
        T, V = _rand_int(gen, 4, 12), _rand_int(gen, 3, 10)
        logits = torch.randn(T, V, generator=gen)
        start = _rand_int(gen, 1, T)
        greedy = logits[start - 1:T - 1].argmax(-1).tolist()
        answer = list(greedy)
        if _rand_int(gen, 0, 2):               # half the tests: one answer token differs from greedy
            k = _rand_int(gen, 0, len(answer))
            answer[k] = (answer[k] + 1) % V
        return logits, start, answer

    check_function(fn, _reference_answer_matches, make, name="answer_matches", trials=12,
                   hint="the logits at position t predict token t + 1, so the answer's first token is "
                        "predicted at position start − 1 and its last at start − 1 + len(answer_ids) − 1. "
                        "Take logits[start - 1 : start - 1 + len(answer_ids)].argmax(-1) and compare it "
                        "with the answer ids; return one Python bool (all of them equal)")


# --------------------------------------------------------------------------------------------
# Notebook 11: beyond
# --------------------------------------------------------------------------------------------

def check_permutation_mask(fn: Callable) -> None:
    """Exercise: order (a list, a permutation of 0 … T−1) → (T, T) bool, True where position i may
    attend to position j because j is predicted before i."""
    from .attention import permutation_mask

    def make(gen):
        return (torch.randperm(_rand_int(gen, 1, 8), generator=gen).tolist(),)

    check_function(fn, permutation_mask, make, name="permutation_mask", trials=8,
                   hint="first find each position's rank, when it is predicted: rank[order[k]] = k. Then "
                        "mask[i, j] = rank[j] < rank[i] (strictly: a token does not see itself in the query "
                        "stream). Index by position, not by rank: row i is the token at position i")


def _reference_chain_rule(logits, ids):
    return torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(ids)[1:, None]).sum()


def check_chain_rule_log_prob(fn: Callable) -> None:
    """Exercise: (logits (T − 1, V), ids (T,)) → log P(ids[1:] | ids[0]) by the chain rule, where
    logits[t] are the model's scores for ids[t + 1]."""
    def make(gen):
        T, V = _rand_int(gen, 2, 10), _rand_int(gen, 2, 12)
        return torch.randn(T - 1, V, generator=gen) * 3, torch.randint(0, V, (T,), generator=gen)

    check_function(fn, _reference_chain_rule, make, name="chain_rule_log_prob", trials=8,
                   hint="turn the scores into log-probabilities with torch.log_softmax(logits, dim=-1) (not "
                        "log of softmax: it underflows), pick at row t the entry of the token that came "
                        "next, ids[t + 1], and add them up: one number, a tensor of shape ()")


def _reference_independent_masks(joint, a, b):
    first = sum(p for (x, _), p in joint.items() if x == a)
    second = sum(p for (_, y), p in joint.items() if y == b)
    return first * second


def check_independent_masks(fn: Callable) -> None:
    """Exercise: (joint {(first word, second word): probability}, a, b) → the probability that
    predicting each of two masks on its own (from the marginals) gives the pair (a, b)."""
    words = ("new", "los", "san", "york", "angeles", "francisco", "diego", "jose")

    def make(gen):
        n = _rand_int(gen, 1, 6)
        pairs = {(words[_rand_int(gen, 0, 3)], words[_rand_int(gen, 3, 8)]) for _ in range(n)}
        weights = torch.rand(len(pairs), generator=gen) + 0.1
        joint = {pair: float(w / weights.sum()) for pair, w in zip(sorted(pairs), weights)}
        return joint, words[_rand_int(gen, 0, 3)], words[_rand_int(gen, 3, 8)]

    check_function(fn, _reference_independent_masks, make, name="independent_masks", trials=10,
                   hint="each mask on its own only knows its marginal: P(first = a) is the sum of the joint "
                        "probabilities of all pairs starting with a, P(second = b) the sum over pairs ending "
                        "in b. Predicted independently, the pair gets their product (a float), even when the "
                        "pair itself never occurs")


# --------------------------------------------------------------------------------------------
# Student notebooks
# --------------------------------------------------------------------------------------------

def strip_solutions(source: str) -> str:
    """Replace every `### BEGIN SOLUTION` … `### END SOLUTION` block with a NotImplementedError
    line at the same indentation."""
    out, inside, found = [], False, False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError("nested ### BEGIN SOLUTION: close the first block first")
            inside, found = True, True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif stripped == END:
            if not inside:
                raise ValueError("### END SOLUTION without a matching ### BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("### BEGIN SOLUTION without a matching ### END SOLUTION")
    if not found:
        raise ValueError("an exercise cell must contain a ### BEGIN SOLUTION block")
    return "\n".join(out)


def cell_tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def make_student_notebook(notebook: dict, name: str) -> dict:
    """A student copy of `notebook` (nbformat JSON as a dict): solutions stubbed, outputs cleared,
    a note on top. The source notebook is left unchanged."""
    nb = copy.deepcopy(notebook)
    n_exercises = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code":
            if "exercise" in cell_tags(cell):
                src, n_exercises = strip_solutions(src), n_exercises + 1
            elif BEGIN in src:
                raise ValueError(f"{name}: a cell with a solution block must be tagged 'exercise'")
            cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = src
    if n_exercises == 0:
        raise ValueError(f"{name} has no cell tagged 'exercise'")
    note = {"cell_type": "markdown", "id": "student-note", "metadata": {"tags": ["student-note"]},
            "source": GENERATED_NOTE.format(name=name)}
    nb["cells"].insert(1, note)
    # The title's "Open in Colab" badge opens this student copy, not the course notebook.
    title = nb["cells"][0]
    if title["cell_type"] == "markdown":
        title["source"] = title["source"].replace(f"/blob/main/notebooks/{name})",
                                                  f"/blob/main/notebooks/student/{name})")
    return nb


def write_student_notebook(src: str | Path, out_dir: str | Path) -> Path:
    """Read a source notebook, write its student version into `out_dir`, return the new path."""
    src = Path(src)
    notebook = json.loads(src.read_text(encoding="utf-8"))
    student = make_student_notebook(notebook, src.name)
    out = Path(out_dir) / src.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(student, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate student notebooks (solutions removed).")
    parser.add_argument("notebooks", nargs="+", help="source notebooks, e.g. notebooks/01_onehot.ipynb")
    parser.add_argument("--out", default="notebooks/student", help="output folder")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not re.search(r"\d\d_.*\.ipynb$", path):
            print(f"skipping {path}: not a numbered course notebook", file=sys.stderr)
            continue
        print(write_student_notebook(path, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
