"""Checks for notebook 03 (language models), and the torch LSTM cell and language model that stand
in for the student's own in the notebook's later cells until they are written."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .checking import (
    check_function,
    close,
    describe,
    filled_module,
    rand_int,
    require_callable,
    same_shape,
    without_grad,
)

_WORDS = ["潮水", "退了", "就", "知道", "誰", "沒穿", "褲子", "the", "tide", "goes", "out"]


def _reference_next_token_pairs(tokens):
    padded = ["<bos>"] + list(tokens) + ["<eos>"]
    return [(tuple(padded[:t]), padded[t]) for t in range(1, len(padded))]


def library_next_token_pairs(tokens):
    """What notebook 03's cells after exercise 1 use while `my_next_token_pairs` does not pass its
    check yet: every (context, next token) of a sentence, from <bos> to <eos>."""
    return _reference_next_token_pairs(tokens)


def check_next_token_pairs(fn: Callable) -> None:
    """Exercise: a sentence (list of tokens) → [(context tuple, next token)], from <bos> to <eos>."""

    def make(gen):
        n = rand_int(gen, 0, 7)  # 0: the empty sentence
        return ([_WORDS[i] for i in torch.randint(0, len(_WORDS), (n,), generator=gen).tolist()],)

    def diagnose(got, expected, tokens):
        padded = ["<bos>", *tokens, "<eos>"]
        for wrong, words in (
            (
                [(tuple(padded[: t + 1]), padded[t]) for t in range(1, len(padded))],
                "each context already holds its target: the target is the item right after the context, so the "
                "targets are the items shifted by one",
            ),
            (
                [(tuple(padded[:t]), padded[t - 1]) for t in range(1, len(padded))],
                "each target is the last item of its own context, not the next one: shift the targets by one",
            ),
            (
                [(tuple(padded[:t]), padded[t]) for t in range(1, len(padded) - 1)],
                "the last prediction is missing: after the last token the model must predict <eos>",
            ),
            (
                [(tuple(padded[1:t]), padded[t]) for t in range(2, len(padded))],
                "the contexts do not start at <bos>: the first token is predicted from <bos> alone",
            ),
        ):
            if got == wrong or (
                isinstance(got, list) and [tuple(p) for p in got if isinstance(p, (list, tuple))] == wrong
            ):
                return words
        return None

    check_function(
        fn,
        _reference_next_token_pairs,
        make,
        name="next_token_pairs",
        diagnose=diagnose,
        concept="every position of the sentence, and its end, is one prediction: the context is everything before it, "
        "starting at the sentence-start marker, and the last thing to predict is the end marker (an empty sentence "
        "still has one pair: start → end)",
        hint="with <bos> in front and <eos> at the end, a sentence of n tokens becomes n + 2 items and gives n + 1 "
        "pairs: for the item at place t (t = 1 … n + 1), the context is the tuple of every item before it and the "
        "target is that item",
    )


def library_perplexity(log_probs) -> float:
    """What notebook 03's cells after exercise 3 use while `my_perplexity` does not pass its check
    yet: exp of the mean negative log-probability per token (``NGramLM.perplexity``'s formula)."""
    return float(torch.exp(-torch.as_tensor(log_probs).double().mean()))


def check_perplexity(fn: Callable) -> None:
    """Exercise: natural-log probabilities of the predicted tokens (N,) → perplexity (a float)."""

    def make(gen):
        n = rand_int(gen, 1, 30)
        return (torch.rand(n, generator=gen).clamp_min(1e-3).log(),)

    check_function(
        fn,
        lambda lp: float(torch.exp(-lp.double().mean())),
        make,
        name="perplexity",
        concept="perplexity is an average per token turned back into a number of choices: average the negative "
        "log-probabilities over the tokens (not their total), then undo the logarithm",
        hint="perplexity = exp(−(1/N) Σ_t log p_t): the exponential of the average negative log-probability per "
        "token, returned as a Python float",
    )


def _reference_bigram_prob(pair_counts, prev, word):
    total = sum(c for (p, _), c in pair_counts.items() if p == prev)
    return pair_counts.get((prev, word), 0) / total if total else 0.0


def library_bigram_prob(pair_counts, prev, word):
    """What notebook 03's cells after exercise 2 use while `my_bigram_prob` does not pass its check
    yet: P(word | prev) by counting, 0.0 for a `prev` never seen."""
    return _reference_bigram_prob(pair_counts, prev, word)


def check_bigram_prob(fn: Callable) -> None:
    """Exercise: bigram counts {(prev, word): count}, prev, word → P(word | prev) by counting."""
    words = ["the", "cat", "dog", "sat", "ran"]
    trial = iter(range(10**6))

    def make(gen):
        counts = {}
        for _ in range(rand_int(gen, 3, 15)):
            a, b = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
            counts[(a, b)] = counts.get((a, b), 0) + rand_int(gen, 1, 5)
        prev, word = (words[i] for i in torch.randint(0, len(words), (2,), generator=gen).tolist())
        if next(trial) % 5 == 0:  # a context never seen
            prev = "zebra"
        return counts, prev, word

    check_function(
        fn,
        _reference_bigram_prob,
        make,
        name="bigram_prob",
        trials=20,
        concept="a conditional probability counts only among the pairs that start with the given previous word: how "
        "often this word follows it, out of everything that follows it. A previous word never seen has no counts at "
        "all",
        hint="P(word | prev) = count(prev, word) / Σ_w count(prev, w); return 0.0 when prev was never seen (that zero "
        "is exactly why n-gram LMs need smoothing)",
    )


# Exercise 4: the LSTM cell


def torch_lstm_cell(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """One step of ``torch.nn.LSTMCell`` with the given weights: x (B, in), h, c (B, H) →
    (h_new, c_new), each (B, H). The reference of :func:`check_lstm_cell`, and the stand-in for
    the student's cell while it is unwritten."""
    H = h.shape[-1]
    cell = nn.LSTMCell(x.shape[-1], H).to(x.dtype)
    with torch.no_grad():
        for name, w in (("weight_ih", weight_ih), ("weight_hh", weight_hh), ("bias_ih", bias_ih), ("bias_hh", bias_hh)):
            getattr(cell, name).copy_(w)
    return cell(x, (h, c))


def _lstm_cell_variants(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """Typical wrong cells, by name: what each gives (for the diagnosis)."""
    H = h.shape[-1]
    gates = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    a, b, g_, d = gates.split(H, dim=-1)
    sig, tanh = torch.sigmoid, torch.tanh

    def cell(i, f, g, o, c_new=None):
        c_new = f * c + i * g if c_new is None else c_new
        return o * tanh(c_new), c_new

    return {
        "the gates are taken in the order i, f, o, g; torch stacks them as i, f, g, o": cell(
            sig(a), sig(b), tanh(d), sig(g_)
        ),
        "the candidate g is squashed with a sigmoid; it is the one part that uses tanh, so it can be negative": cell(
            sig(a), sig(b), sig(g_), sig(d)
        ),
        "the forget gate multiplies the candidate and the input gate the old cell: f keeps the old memory, i admits "
        "the new": cell(sig(b), sig(a), tanh(g_), sig(d)),
        "the new cell forgets the old one entirely: c_t must add f ⊙ c_{t-1}": cell(
            sig(a), sig(b), tanh(g_), sig(d), sig(a) * tanh(g_)
        ),
        "h_t uses the new cell without tanh: h_t = o ⊙ tanh(c_t)": (
            sig(d) * (sig(b) * c + sig(a) * tanh(g_)),
            sig(b) * c + sig(a) * tanh(g_),
        ),
        "one of the two biases is missing: both bias_ih and bias_hh are added": _cell_from_gates(
            x @ weight_ih.T + bias_ih + h @ weight_hh.T, c, H
        ),
    }


def _cell_from_gates(gates, c, H):
    i, f, g, o = gates.split(H, dim=-1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


def _lstm_cell_diagnose(got, expected, *args):
    h_got, c_got = got["h_new"], got["c_new"]
    if not (same_shape(h_got, expected["h_new"]) and same_shape(c_got, expected["c_new"])):
        return None
    if close(h_got, expected["c_new"]) and close(c_got, expected["h_new"]):
        return "the two results come back swapped: return the hidden state h first, then the cell c"
    for mistake, (h, c) in _lstm_cell_variants(*args).items():
        if close(h_got, h) and close(c_got, c):
            return mistake
    return None


def check_lstm_cell(fn: Callable) -> None:
    """Exercise: one LSTM step from the gate equations, x (B, in), h, c (B, H) and torch's stacked
    weights weight_ih (4H, in), weight_hh (4H, H), bias_ih, bias_hh (4H,) → (h_new, c_new), each
    (B, H); compared with ``torch.nn.LSTMCell`` holding the same weights."""

    def make(gen):
        b, n_in, H = rand_int(gen, 1, 5), rand_int(gen, 1, 7), rand_int(gen, 1, 6)
        shapes = (b, n_in), (b, H), (b, H), (4 * H, n_in), (4 * H, H), (4 * H,), (4 * H,)  # x, h, c, the weights
        return tuple(torch.randn(shape, generator=gen) for shape in shapes)

    def as_dict(cell):
        cell = without_grad(cell)

        def run(*args):
            got = cell(*args)
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise TypeError(f"lstm_cell returned {describe(got)}; return two tensors: (h_new, c_new)")
            return {"h_new": got[0], "c_new": got[1]}

        return run

    check_function(
        as_dict(fn),
        as_dict(torch_lstm_cell),
        make,
        name="lstm_cell",
        trials=6,
        diagnose=_lstm_cell_diagnose,
        concept="all four gates come from one affine map of the input and the previous hidden state, cut into four "
        "equal blocks in the order input, forget, candidate, output. Three are squashed to (0, 1) as gates, the "
        "candidate to (-1, 1). The new cell keeps the gated old cell and adds the gated candidate; the new hidden "
        "state is the output gate times the squashed new cell",
        hint="the gates are x W_ihᵀ + b_ih + h W_hhᵀ + b_hh, shape (B, 4H), read as four (B, H) blocks i, f, g, o in "
        "that order; i, f, o = σ(·), g = tanh(·), then c_t = f ⊙ c_{t−1} + i ⊙ g and h_t = o ⊙ tanh(c_t), and the "
        "answer is the pair (h_t, c_t)",
    )


# Exercise 5: the LSTM language model's forward, proven on the course checkpoint


def course_bilm():
    """The course checkpoint ``bilm-wikitext2``'s library BiLM, in eval mode (its forward half is
    notebook 03's language model)."""
    from onehot2gpt.checkpoints import load

    return load("bilm-wikitext2").model.eval()


class TorchLSTMLM(nn.Module):
    """MyLSTMLM with PyTorch's own LSTM loop: what the notebook's later cells run until the
    student's model passes its check. The same constructor, parameter names and forward: ids (B, T)
    and each layer's (h, c) (or None) → log-probabilities (B, T, V) and each layer's last (h, c)."""

    def __init__(self, vocab_size, d_model=128, hidden=224, n_layers=2, cutoffs=(2_000, 10_000)):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.tok_proj = nn.Linear(d_model, hidden)
        self.fwd_layers = nn.ModuleList(nn.LSTM(hidden, hidden, batch_first=True) for _ in range(n_layers))
        self.out_proj = nn.Linear(hidden, d_model)
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(d_model, vocab_size, list(cutoffs), div_value=4.0, head_bias=True)

    def forward(self, ids, states=None):
        h = self.tok_proj(self.tok_emb(ids))
        states = states or [None] * len(self.fwd_layers)
        new_states = []
        for j, lstm in enumerate(self.fwd_layers):
            start = None if states[j] is None else (states[j][0][None], states[j][1][None])
            out, (h_last, c_last) = lstm(h, start)
            h = out + h if j > 0 else out
            new_states.append((h_last[0], c_last[0]))
        z = self.out_proj(h)
        return self.softmax.log_prob(z.reshape(-1, z.shape[-1])).view(*ids.shape, -1), new_states


def check_lstm_lm(cls) -> None:
    """Exercise: ``MyLSTMLM(vocab_size, d_model, hidden, n_layers, cutoffs)`` (its ``__init__``
    given) whose forward runs ids (B, T) through the embedding, the token projection, each LSTM
    layer step by step with the student's cell (a residual around layers 2 … L) and the adaptive
    softmax → (log-probabilities (B, T, V), states). Proven equal to the forward language model of
    the course checkpoint ``bilm-wikitext2`` on random token windows."""
    require_callable(cls)
    bilm = course_bilm()
    c = bilm.config
    state = {k: v.detach().clone() for k, v in bilm.state_dict().items() if not k.startswith("bwd_layers.")}

    def make(gen):
        B, T = rand_int(gen, 1, 4), rand_int(gen, 1, 13)
        return (torch.randint(4, c.vocab_size, (B, T), generator=gen),)

    @torch.no_grad()
    def reference(ids):
        return bilm(ids)["fwd_logits"]

    @torch.no_grad()
    def variant(ids, residual):
        h = bilm.tok_proj(bilm.tok_emb(ids))
        for j, lstm in enumerate(bilm.fwd_layers):
            out, _ = lstm(h)
            h = out + h if residual(j) else out
        return bilm._log_probs(h)

    def diagnose(got, expected, ids):
        if not same_shape(got, expected):
            return None
        for residual, words in (
            (
                lambda j: False,
                "the residual connection around layers 2 … L is missing: add each such layer's input to its output",
            ),
            (lambda j: True, "the first layer has a residual connection too; only layers 2 … L add their input"),
        ):
            if close(got, variant(ids, residual)):
                return words
        if close(got, expected.exp()):
            return "these are probabilities: the model returns log-probabilities (AdaptiveLogSoftmax's log_prob)"
        return None

    check_function(
        filled_module(
            cls, (c.vocab_size, c.d_model, c.hidden, c.n_layers, c.cutoffs), state, "MyLSTMLM", lambda out: out[0]
        ),
        reference,
        make,
        name="lstm_lm",
        trials=4,
        diagnose=diagnose,
        concept="the language model reads a window one token at a time: embedding, then the projection P up to the "
        "LSTM's width; each LSTM layer runs your cell over the positions in order, carrying (h, c) from one step to "
        "the next, and from the second layer on adds its input to its output; then Q and the adaptive softmax give "
        "log-probabilities of the next token at every position",
        hint="which tensor does layer j read: the output of layer j − 1 (after its residual); what is (h, c) before "
        "the first token when no state is given?",
    )
