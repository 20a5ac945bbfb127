"""Language models: count-based n-grams and a recurrent (LSTM) network that predicts the next token.

Taught in notebook 03. A language model gives every sequence a probability, one next token at a
time: P(w_1 … w_T) = Π_t P(w_t | w_<t).

* :class:`NGramLM` estimates P(w | the previous n−1 words) by counting, smoothed with
  *interpolated Kneser–Ney* (Kneser & Ney 1995; Chen & Goodman 1998): subtract a discount D from
  every seen count and give the freed mass to the next-shorter context, whose counts are
  "continuation counts" (in how many contexts a word appears). ``kneser_ney=False`` uses plain
  counts there: interpolated absolute discounting.
* :class:`LSTMLM`: an LSTM (the recurrent LM of Mikolov et al. 2010) with input and output
  embeddings tied (Press & Wolf 2017). :func:`lm_batches`, :func:`perplexity` and :func:`train_lm`
  train and evaluate it on one long stream of ids (:func:`encode_corpus`), carrying the hidden
  state from batch to batch.

Example:
    >>> from onehot2gpt.vocab import Vocab
    >>> text = [["the", "cat", "sat"], ["the", "dog", "sat"]]
    >>> lm = NGramLM(2, Vocab.build(text)).fit(text)
    >>> round(lm.prob(["the"], "cat"), 3)      # seen once after "the", out of two
    0.215
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from onehot2gpt.progress import progress_bar
from onehot2gpt.utils import as_ids, check_finite_logits, check_finite_loss, check_int, check_number, evaluating
from onehot2gpt.vocab import BOS, EOS, PAD, UNK, Vocab


def _check_token_lists(token_lists, what: str = "token_lists") -> None:
    """Raise a helpful error unless `token_lists` is a non-empty list of token lists."""
    if isinstance(token_lists, str) or not isinstance(token_lists, Sequence):
        raise TypeError(
            f"{what} must be a list of token lists, e.g. [['the', 'cat'], ['a', 'dog']], "
            f"got {type(token_lists).__name__}"
        )
    if len(token_lists) == 0:
        raise ValueError(f"{what} is empty: give at least one sentence")
    for tokens in token_lists:
        if isinstance(tokens, str):
            raise TypeError(
                f"each item of {what} must be a list of tokens, not a string; "
                "tokenize it first, e.g. tokenize_words(text)"
            )


class NGramLM:
    """Count-based n-gram LM with interpolated Kneser–Ney smoothing (or absolute discounting).

    P(w | ctx) = max(c(ctx, w) − D, 0) / c(ctx) + D · N₁₊(ctx •) / c(ctx) · P(w | shorter ctx),
    down to a uniform distribution over the vocabulary (unknown words are <unk>), so every token
    gets a non-zero probability. N₁₊(ctx •) is the number of distinct words seen after ctx; an
    unseen context falls back to the shorter one. ``discount=0`` gives unsmoothed counts (unseen
    words get probability 0 and the perplexity is infinite: the sparsity problem).
    """

    def __init__(self, n: int, vocab: Vocab, discount: float = 0.75, kneser_ney: bool = True):
        check_int(n, "n", 1, fix="1 = unigram, 3 = trigram")
        check_number(discount, "discount", 0, 1)
        missing = [s for s in (BOS, EOS, UNK) if s not in vocab]
        if missing:
            raise ValueError(f"the vocabulary needs the special tokens {missing}; build it with Vocab.build")
        self.n, self.vocab, self.discount, self.kneser_ney = n, vocab, float(discount), kneser_ney
        self.bos, self.eos = vocab[BOS], vocab[EOS]
        # counts[k][context of k-1 ids][next id]; for k < n with Kneser–Ney: continuation counts
        self.counts: list[dict[tuple[int, ...], dict[int, int]]] = []
        self.totals: list[dict[tuple[int, ...], int]] = []

    def __repr__(self) -> str:
        kind = "Kneser-Ney" if self.kneser_ney else "absolute discounting"
        return f"NGramLM(n={self.n}, vocab_size={len(self.vocab)}, {kind}, D={self.discount})"

    def _padded_ids(self, tokens: Sequence[str]) -> list[int]:
        """<bos>·(n−1) + ids + <eos>: every real token and <eos> gets a full-length context."""
        return [self.bos] * (self.n - 1) + self.vocab.encode_tokens(tokens) + [self.eos]

    def fit(self, token_lists: Sequence[Sequence[str]], progress: bool = False) -> NGramLM:
        """Count the n-grams of sentences (token lists), each wrapped in <bos> … <eos>; refitting
        replaces the counts. Returns self. `progress` shows a bar over the sentences."""
        _check_token_lists(token_lists)
        top: dict[tuple[int, ...], Counter] = defaultdict(Counter)
        for tokens in progress_bar(token_lists, desc=f"{self.n}-gram counts", disable=not progress):
            ids = self._padded_ids(tokens)
            for i in range(self.n - 1, len(ids)):
                top[tuple(ids[i - self.n + 1 : i])][ids[i]] += 1
        counts = [dict(top)]
        for _ in range(self.n - 1):  # order k from order k+1
            lower: dict[tuple[int, ...], Counter] = defaultdict(Counter)
            for ctx, followers in counts[0].items():
                for w, c in followers.items():  # Kneser–Ney: one per distinct left extension
                    lower[ctx[1:]][w] += 1 if self.kneser_ney else c
            counts.insert(0, dict(lower))
        self.counts = [{ctx: dict(f) for ctx, f in level.items()} for level in counts]
        self.totals = [{ctx: sum(f.values()) for ctx, f in level.items()} for level in self.counts]
        return self

    def _check_fitted(self) -> None:
        if not self.counts:
            raise RuntimeError("the model has no counts yet: call fit(token_lists) first")

    def _context_ids(self, context: Sequence[str]) -> tuple[int, ...]:
        """The last n−1 ids of <bos>-padded `context` (a list of tokens)."""
        if isinstance(context, str):
            raise TypeError("context must be a list of tokens, e.g. ['the', 'cat'], not a string")
        ids = [self.bos] * (self.n - 1) + self.vocab.encode_tokens(context)
        return tuple(ids[len(ids) - (self.n - 1) :]) if self.n > 1 else ()

    def _seen_contexts(self, ctx: tuple[int, ...]) -> list[tuple[dict[int, int], int]]:
        """(followers, total) of each suffix of ctx, shortest (empty) first; unseen ones are skipped,
        so an unseen context keeps the shorter estimate."""
        subs = [ctx[len(ctx) - k :] if k else () for k in range(self.n)]  # k = context length
        return [(self.counts[k][sub], self.totals[k][sub]) for k, sub in enumerate(subs) if sub in self.counts[k]]

    def _prob_id(self, ctx: tuple[int, ...], w: int) -> float:
        """P(w | ctx) by interpolation from the uniform distribution up to order n."""
        p = 1.0 / len(self.vocab)
        for followers, total in self._seen_contexts(ctx):
            p = (max(followers.get(w, 0) - self.discount, 0.0) + self.discount * len(followers) * p) / total
        return p

    def prob(self, context: Sequence[str], token: str) -> float:
        """P(token | context), context a list of tokens (only the last n−1 are used).

        A short context is padded with <bos> on the left, as at the start of a sentence.
        """
        self._check_fitted()
        return self._prob_id(self._context_ids(context), self.vocab[token])

    def next_token_probs(self, context: Sequence[str]) -> torch.Tensor:
        """The whole next-token distribution after `context`: shape (vocab_size,), sums to 1."""
        self._check_fitted()
        ctx = self._context_ids(context)
        p = torch.full((len(self.vocab),), 1.0 / len(self.vocab), dtype=torch.float64)
        for followers, total in self._seen_contexts(ctx):
            counts = torch.zeros(len(self.vocab), dtype=torch.float64)
            counts[list(followers)] = torch.tensor(list(followers.values()), dtype=torch.float64)
            p = ((counts - self.discount).clamp_min(0) + self.discount * len(followers) * p) / total
        return p

    def log_prob_sequence(self, tokens: Sequence[str]) -> float:
        """Natural log-probability of a sentence: Σ log P(w_t | context) over its tokens and <eos>."""
        self._check_fitted()
        if isinstance(tokens, str):
            raise TypeError("tokens must be a list of tokens, not a string; tokenize it first")
        ids = self._padded_ids(tokens)
        total = 0.0
        for i in range(self.n - 1, len(ids)):
            p = self._prob_id(tuple(ids[i - self.n + 1 : i]), ids[i])
            if p <= 0.0:
                return -math.inf
            total += math.log(p)
        return total

    def perplexity(self, token_lists: Sequence[Sequence[str]]) -> float:
        """exp(mean negative log-probability per predicted token), <eos> included."""
        _check_token_lists(token_lists)
        log_p = sum(self.log_prob_sequence(tokens) for tokens in token_lists)
        n_tokens = sum(len(tokens) + 1 for tokens in token_lists)
        return math.exp(-log_p / n_tokens) if log_p > -math.inf else math.inf

    def coverage(self, token_lists: Sequence[Sequence[str]], order: int | None = None) -> float:
        """Fraction of the `order`-grams (default n) of `token_lists` that occur in the training
        text, counted the way they are predicted (padding included). Falls fast as order grows."""
        self._check_fitted()
        _check_token_lists(token_lists)
        order = check_int(self.n if order is None else order, "order", 1, self.n)
        seen = total = 0
        for tokens in token_lists:
            ids = self._padded_ids(tokens)
            for i in range(self.n - 1, len(ids)):
                followers = self.counts[order - 1].get(tuple(ids[i - order + 1 : i]), {})
                seen += ids[i] in followers
                total += 1
        return seen / total

    def generate(
        self, context: Sequence[str] = (), max_tokens: int = 30, generator: torch.Generator | None = None
    ) -> list[str]:
        """Sample tokens one at a time after `context` until <eos> or `max_tokens`; <pad> and <bos>
        are never sampled. Returns the new tokens (without <eos>)."""
        check_int(max_tokens, "max_tokens", 0)
        if isinstance(context, str):
            raise TypeError(
                f"context must be a list of tokens, e.g. {context.split()[:3]!r}, not the string {context[:30]!r}; "
                f"tokenize it first"
            )
        out: list[str] = []
        banned = [self.vocab[t] for t in (PAD, BOS) if t in self.vocab]
        for _ in range(max_tokens):
            p = self.next_token_probs(list(context) + out)
            p[banned] = 0.0
            i = int(torch.multinomial(p, 1, generator=generator))
            if i == self.eos:
                break
            out.append(self.vocab.itos[i])
        return out


class LSTMLM(nn.Module):
    """Embedding → LSTM → linear layer to next-token logits; with ``tie_weights`` the output matrix
    is the embedding (so the LSTM is d_model wide)."""

    def __init__(
        self, vocab_size: int, d_model: int = 128, n_layers: int = 2, dropout: float = 0.2, tie_weights: bool = True
    ):
        super().__init__()
        check_int(vocab_size, "vocab_size", 2)
        check_int(d_model, "d_model", 1)
        check_int(n_layers, "n_layers", 1)
        check_number(dropout, "dropout", 0, 1, high_open=True)
        self.vocab_size, self.d_model, self.n_layers = vocab_size, d_model, n_layers
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(d_model, d_model, n_layers, batch_first=True, dropout=dropout if n_layers > 1 else 0.0)
        self.lm_head = nn.Linear(d_model, vocab_size)
        # Word vectors of length about 1 (std d_model^-1/2): big enough for the LSTM to tell
        # words apart from the first step, small enough that the logits start near 0 and the
        # loss near ln(vocab_size).
        nn.init.normal_(self.tok_emb.weight, std=d_model**-0.5)
        nn.init.zeros_(self.lm_head.bias)
        if tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        else:
            nn.init.normal_(self.lm_head.weight, std=d_model**-0.5)

    def forward(
        self, ids: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """ids (B, T) → logits (B, T, vocab_size) and the final state (h, c), each (n_layers, B, d_model).

        logits[:, t] scores token t+1 given tokens 0..t (and whatever `state` summarises).
        """
        ids = as_ids(ids, self.vocab_size, dims=2)
        x = self.drop(self.tok_emb(ids))  # (B, T, D)
        h, state = self.lstm(x, state)  # (B, T, D)
        return self.lm_head(self.drop(h)), state

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        max_new_tokens: int = 30,
        temperature: float = 1.0,
        eos_id: int | None = None,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Sample one token at a time, feeding each back in with the carried state.

        prompt_ids: a non-empty list or 1-D tensor of ids (e.g. starting with <bos>). Returns the
        new ids only; stops after `eos_id` (included) or `max_new_tokens`.
        """
        check_int(max_new_tokens, "max_new_tokens", 0)
        check_number(temperature, "temperature", 0, low_open=True)
        ids = as_ids(prompt_ids, self.vocab_size, dims=1, name="prompt_ids")
        with evaluating(self):
            logits, state = self(ids.unsqueeze(0))  # read the whole prompt once
            out: list[int] = []
            for _ in range(max_new_tokens):
                check_finite_logits(logits[0, -1])
                probs = F.softmax(logits[0, -1] / temperature, dim=-1)
                nxt = int(torch.multinomial(probs, 1, generator=generator))
                out.append(nxt)
                if nxt == eos_id:
                    break
                logits, state = self(torch.tensor([[nxt]]), state)
        return out


def encode_corpus(token_lists: Sequence[Sequence[str]], vocab: Vocab) -> torch.Tensor:
    """Sentences → one long 1-D LongTensor of ids, each sentence followed by <eos>.

    Example:
        >>> v = Vocab.build([["a", "b"]])
        >>> encode_corpus([["a", "b"], ["b"]], v)
        tensor([4, 5, 3, 5, 3])
    """
    _check_token_lists(token_lists)
    eos = vocab[EOS]
    ids = [i for tokens in token_lists for i in vocab.encode_tokens(tokens) + [eos]]
    return torch.tensor(ids, dtype=torch.long)


def lm_batches(ids: torch.Tensor, batch_size: int, seq_len: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Cut a 1-D id stream into BPTT batches: a list of (x, y), each (batch_size, ≤ seq_len).

    The stream is split into `batch_size` contiguous rows, so row b of batch i+1 continues row b
    of batch i and the LSTM state can be carried over. y is x shifted one token to the left.
    Example:
        >>> [x.tolist() for x, _ in lm_batches(torch.arange(9), 2, 2)]
        [[[0, 1], [4, 5]], [[2], [6]]]
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
        raise ValueError("ids must be a 1-D tensor of token ids; join sentences with encode_corpus")
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integer token ids (torch.long), got dtype {ids.dtype}")
    check_int(batch_size, "batch_size", 1)
    check_int(seq_len, "seq_len", 1)
    n_cols = len(ids) // batch_size
    if n_cols < 2:
        raise ValueError(
            f"a stream of {len(ids)} tokens is too short for {batch_size} rows: need at least {2 * batch_size} tokens"
        )
    rows = ids[: n_cols * batch_size].long().view(batch_size, n_cols)  # (B, N)
    starts = range(0, n_cols - 1, seq_len)
    return [(rows[:, i : min(i + seq_len, n_cols - 1)], rows[:, i + 1 : min(i + 1 + seq_len, n_cols)]) for i in starts]


def perplexity(model: LSTMLM, ids: torch.Tensor, batch_size: int = 16, seq_len: int = 64) -> float:
    """exp(mean next-token NLL) of `model` over a 1-D id stream, the state carried throughout."""
    total, count, state = 0.0, 0, None
    with evaluating(model):
        for x, y in lm_batches(ids, batch_size, seq_len):
            logits, state = model(x, state)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
            count += y.numel()
    return math.exp(total / count)


def train_lm(
    model: LSTMLM,
    train_ids: torch.Tensor,
    *,
    epochs: int = 1,
    batch_size: int = 32,
    seq_len: int = 64,
    lr: float = 2e-3,
    clip: float = 1.0,
    max_steps: int | None = None,
    minutes: float | None = None,
    progress: bool = True,
) -> list[float]:
    """Train with Adam and truncated backpropagation through time; returns the loss of every step.

    The state flows from batch to batch (detached, so gradients stop at the batch edge). Stops
    after `epochs`, `max_steps` steps or `minutes` of wall time, whichever comes first.
    """
    batches = lm_batches(train_ids, batch_size, seq_len)
    total = epochs * len(batches) if max_steps is None else min(max_steps, epochs * len(batches))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history: list[float] = []
    V = getattr(model, "vocab_size", None)
    uniform = math.log(V) if V else None  # a uniform guess's loss; far above it, the run is exploding
    start = time.perf_counter()
    model.train()
    with progress_bar(total=total, desc="train", disable=not progress) as bar:
        for _ in range(epochs):
            state = None
            for x, y in batches:
                logits, state = model(x, state)
                state = tuple(s.detach() for s in state)  # gradients stop at the batch edge
                loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                history.append(check_finite_loss(loss, len(history), lr=lr, what="LSTM LM training", start=uniform))
                bar.update()
                bar.set_postfix(loss=f"{history[-1]:.3f}")
                if len(history) >= total or (minutes is not None and time.perf_counter() - start > 60 * minutes):
                    return history
    return history
