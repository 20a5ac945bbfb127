"""ELMo: a deep bidirectional LSTM language model whose layers become contextual word vectors.

Taught in notebook 04, following Peters et al. (2018), "Deep contextualized word representations".
A :class:`BiLM` holds two independent LSTM language models that share only the token layer and the
softmax: the forward LM predicts the next token, the backward LM (reading right to left) the
previous one. For token k it yields L+1 layers of size 2·hidden: ``layers[:, k, 0]`` is the token
vector x_k twice, ``layers[:, k, j]`` is [forward_j ; backward_j]. A downstream task freezes the
biLM (:class:`ElmoFeatures`) and learns only a :class:`ScalarMix`,
ELMo_k = γ · Σ_j softmax(s)_j · h_{k,j}.

Choices, with ELMo's own in brackets:

* token layer: a word embedding projected to hidden [a character CNN]; unknown words share <unk>;
* each direction: ``n_layers`` separate ``nn.LSTM``s (so every layer's states are visible), a
  residual connection around every layer after the first [2 layers, 4096 cells projected to 512];
* softmax: the top state projected to d_model, then a full softmax tied to the word embedding or
  an adaptive softmax (Grave et al. 2017; the course checkpoint) [sampled softmax].

Batches are right-padded (``mask`` marks real tokens); the backward LM reverses only each row's
real tokens (:func:`reverse_padded`). Checkpoint: ``python recipes/bilm-wikitext2.py --out DIR``.

Example:
    >>> from onehot2gpt.checkpoints import load
    >>> bilm, vocab, config, info = load("bilm-wikitext2")
    >>> layers, mask = ElmoFeatures(bilm, vocab).encode([["the", "river", "bank"]])
    >>> layers.shape    # (sentences, words, layers, features)
    torch.Size([1, 3, 3, 448])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from onehot2gpt.checkpoints import config_from_record, fill_module, save_checkpoint
from onehot2gpt.utils import as_ids, check_choice, check_int, check_number, evaluating
from onehot2gpt.vocab import BOS, EOS, PAD, Vocab


@dataclass(frozen=True)
class BiLMConfig:
    """Sizes of a :class:`BiLM`; the defaults are those of the course checkpoint."""

    vocab_size: int = 20_004  # 20k words + <pad>, <unk>, <bos>, <eos>
    d_model: int = 128  # word-vector size (the embedding is the big matrix: keep it small)
    hidden: int = 224  # LSTM width per direction; every layer (0 too) is 2·hidden wide
    n_layers: int = 2  # LSTM layers per direction, L: 2L+1 vectors per token
    dropout: float = 0.1  # on each LSTM's input and on the softmax input
    max_len: int = 256  # longest sequence, <bos> and <eos> included, that encode accepts
    softmax: str = "adaptive"  # "full" (tied to the embedding, exact) or "adaptive" (fast)
    cutoffs: tuple[int, ...] = (2_000, 10_000)  # adaptive softmax: frequent-word head, then tails

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "hidden", "n_layers"):
            check_int(getattr(self, name), f"BiLMConfig.{name}", 1)
        check_int(self.max_len, "max_len", 3, fix="leave room for <bos>, one token and <eos>")
        check_number(self.dropout, "dropout", 0, 1, high_open=True)
        check_choice(self.softmax, "softmax", ("full", "adaptive"))
        object.__setattr__(self, "cutoffs", tuple(int(c) for c in self.cutoffs))
        bounds = (0, *self.cutoffs, self.vocab_size)
        if self.softmax == "adaptive" and (not self.cutoffs or any(a >= b for a, b in zip(bounds, bounds[1:]))):
            raise ValueError(
                f"adaptive softmax cutoffs must increase strictly between 0 and "
                f"vocab_size={self.vocab_size}, got {self.cutoffs}"
            )

    @property
    def output_dim(self) -> int:
        """Size of one layer's vector, and of an ELMo vector: 2·hidden."""
        return 2 * self.hidden

    @classmethod
    def tiny(cls, vocab_size: int = 50) -> BiLMConfig:
        """A few thousand parameters, for tests and for watching one step by hand."""
        return cls(vocab_size=vocab_size, d_model=16, hidden=24, n_layers=2, dropout=0.0, max_len=64, softmax="full")


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first lengths[b] positions of each row of x (B, T, ...); padding stays put.

    Example:
        >>> reverse_padded(torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]]), torch.tensor([3, 2]))
        tensor([[3, 2, 1, 0],
                [5, 4, 0, 0]])
    """
    B, T = x.shape[:2]
    t = torch.arange(T, device=x.device).expand(B, T)  # (B, T)
    lengths = lengths.to(x.device).view(B, 1)
    idx = torch.where(t < lengths, lengths - 1 - t, t)  # (B, T)
    idx = idx.view(B, T, *([1] * (x.dim() - 2))).expand_as(x)  # (B, T, ...)
    return x.gather(1, idx)


class BiLM(nn.Module):
    """Forward and backward LSTM language models sharing the token layer and the softmax."""

    def __init__(self, config: BiLMConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.tok_proj = nn.Linear(c.d_model, c.hidden)  # token layer x_k: (hidden,)
        self.fwd_layers = nn.ModuleList(nn.LSTM(c.hidden, c.hidden, batch_first=True) for _ in range(c.n_layers))
        self.bwd_layers = nn.ModuleList(nn.LSTM(c.hidden, c.hidden, batch_first=True) for _ in range(c.n_layers))
        self.drop = nn.Dropout(c.dropout)
        self.out_proj = nn.Linear(c.hidden, c.d_model)  # softmax input, shared by both LMs
        nn.init.normal_(self.tok_emb.weight, std=c.d_model**-0.5)  # as in LSTMLM
        if c.softmax == "full":
            self.out_bias = nn.Parameter(torch.zeros(c.vocab_size))  # weight: tok_emb (tied)
        else:
            self.softmax = nn.AdaptiveLogSoftmaxWithLoss(
                c.d_model, c.vocab_size, list(c.cutoffs), div_value=4.0, head_bias=True
            )
            # Start every word near probability 1/V: a cluster's head logit is log(its size).
            sizes = torch.tensor(list(c.cutoffs[1:]) + [c.vocab_size]) - torch.tensor(c.cutoffs)
            with torch.no_grad():
                self.softmax.head.bias.zero_()
                self.softmax.head.bias[c.cutoffs[0] :] = sizes.float().log()

    # ----------------------------------------------------------------------------- internals

    def _stack(self, lstms: nn.ModuleList, x: torch.Tensor) -> list[torch.Tensor]:
        """Run one direction's LSTM layers over x (B, T, H); returns each layer's states (B, T, H)."""
        states, h = [], x
        for j, lstm in enumerate(lstms):
            out, _ = lstm(self.drop(h))  # (B, T, H)
            h = out + h if j > 0 else out  # residual around layers 2..L
            states.append(h)
        return states

    def _run(self, ids: torch.Tensor, mask: torch.Tensor):
        """Token layer and both stacks: x (B, T, H) and two lists of L tensors (B, T, H)."""
        x = self.tok_proj(self.tok_emb(ids))  # (B, T, H)
        return (x, *self._directions(x, mask.sum(1)))

    def _directions(self, x: torch.Tensor, lengths: torch.Tensor):
        """Both stacks over the token layer x (B, T, H): forward and backward states, two lists of
        L tensors (B, T, H), each in sentence order."""
        fwd = self._stack(self.fwd_layers, x)
        # 1. reverse each row's real tokens, 2. read them left to right, 3. put states back in place
        bwd = [reverse_padded(h, lengths) for h in self._stack(self.bwd_layers, reverse_padded(x, lengths))]
        return fwd, bwd

    def _log_probs(self, h: torch.Tensor) -> torch.Tensor:
        """Top states (..., H) → log-probabilities of the next (or previous) token (..., V)."""
        z = self.out_proj(self.drop(h))  # (..., D)
        if self.config.softmax == "full":
            return F.log_softmax(z @ self.tok_emb.weight.T + self.out_bias, dim=-1)
        return self.softmax.log_prob(z.reshape(-1, z.shape[-1])).view(*z.shape[:-1], -1)

    def _nll(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of targets (N,) given top states (N, H)."""
        if targets.numel() == 0:
            return h.sum() * 0.0
        z = self.out_proj(self.drop(h))  # (N, D)
        if self.config.softmax == "full":
            return F.cross_entropy(z @ self.tok_emb.weight.T + self.out_bias, targets, reduction="sum")
        return -self.softmax(z, targets).output.sum()  # output: log p(target), computed per cluster

    def _layers(self, x, fwd, bwd, mask) -> torch.Tensor:
        layers = [torch.cat([x, x], -1)] + [torch.cat([f, b], -1) for f, b in zip(fwd, bwd)]
        return torch.stack(layers, dim=2) * mask[:, :, None, None]  # (B, T, L+1, 2H)

    # ----------------------------------------------------------------------------- public

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """ids (B, T), mask (B, T) (1 = real token, right padding; None = no padding) → dict of

        * ``fwd_logits`` (B, T, V): at t, scores for token t+1 (log-probabilities, which softmax
          leaves unchanged),
        * ``bwd_logits`` (B, T, V): at t, scores for token t−1,
        * ``layers`` (B, T, L+1, 2H): the token layer [x; x], then [forward_j; backward_j];
          padded positions are 0.
        """
        ids, mask = _check_inputs(ids, mask, self.config.vocab_size)
        x, fwd, bwd = self._run(ids, mask)
        return {
            "fwd_logits": self._log_probs(fwd[-1]),
            "bwd_logits": self._log_probs(bwd[-1]),
            "layers": self._layers(x, fwd, bwd, mask),
        }

    def representations(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, T) → layers (B, T, L+1, 2H), without computing any softmax."""
        ids, mask = _check_inputs(ids, mask, self.config.vocab_size)
        return self._layers(*self._run(ids, mask), mask)

    def nll(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Summed NLL of the forward LM, of the backward LM, and the number of tokens each predicted.

        Each row of length n gives n−1 predictions per direction: tokens 1..n−1 from the left,
        tokens 0..n−2 from the right.
        """
        ids, mask = _check_inputs(ids, mask, self.config.vocab_size)
        _, fwd, bwd = self._run(ids, mask)
        has_target = mask[:, 1:]  # (B, T-1)
        fwd_sum = self._nll(fwd[-1][:, :-1][has_target], ids[:, 1:][has_target])
        bwd_sum = self._nll(bwd[-1][:, 1:][has_target], ids[:, :-1][has_target])
        return fwd_sum, bwd_sum, int(has_target.sum())

    def lm_loss(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Mean of the forward and backward next-token NLL per predicted token (a scalar)."""
        fwd_sum, bwd_sum, n = self.nll(ids, mask)
        if n == 0:
            raise ValueError("no token to predict: every row needs at least two real tokens")
        return (fwd_sum + bwd_sum) / (2 * n)


def _check_inputs(ids, mask, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ids (B, T) and a right-padding mask for a biLM of `vocab_size`; return (ids, bool mask)."""
    ids = as_ids(ids, vocab_size, dims=2)
    if mask is None:
        return ids, torch.ones_like(ids, dtype=torch.bool)
    mask = torch.as_tensor(mask, device=ids.device)
    if mask.shape != ids.shape:
        raise ValueError(f"mask must have the shape of ids {tuple(ids.shape)}, got {tuple(mask.shape)}")
    mask = mask.bool()
    lengths = mask.sum(1, keepdim=True)
    if not torch.equal(mask, torch.arange(ids.shape[1], device=ids.device) < lengths):
        raise ValueError(
            "mask must be 1 for a row's real tokens and 0 for the padding after "
            "them (right padding); got a mask with holes or left padding"
        )
    return ids, mask


class ScalarMix(nn.Module):
    """ELMo_k = γ · Σ_j softmax(s)_j · h_{k,j}: a learned weighted average of the biLM layers.

    s starts at 0 (a plain average) and γ at 1. :meth:`penalty` is λ·‖s − mean(s)‖² (ELMo's code:
    λ·‖s‖², the same pull since softmax ignores a shift of s), towards the plain average. With
    ``layer_norm=True`` each layer is first normalised over its real positions and features.
    """

    def __init__(self, n_layers: int, l2_lambda: float = 0.0, gamma: bool = True, layer_norm: bool = False):
        super().__init__()
        check_int(n_layers, "n_layers", 1)
        check_number(l2_lambda, "l2_lambda", 0)
        self.n_layers, self.l2_lambda, self.layer_norm = n_layers, l2_lambda, layer_norm
        self.s = nn.Parameter(torch.zeros(n_layers))
        if gamma:
            self.gamma = nn.Parameter(torch.ones(()))
        else:
            self.register_buffer("gamma", torch.ones(()))

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers (..., n_layers, D) → (..., D); mask (...) is used only by the layer norm."""
        if layers.dim() < 2 or layers.shape[-2] != self.n_layers:
            raise ValueError(f"expected layers of shape (..., {self.n_layers}, D), got {tuple(layers.shape)}")
        if self.layer_norm:
            layers = self._normalise(layers, mask)
        w = F.softmax(self.s, dim=0)  # (n_layers,)
        return self.gamma * (layers * w[:, None]).sum(-2)

    @staticmethod
    def _normalise(layers: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        m = torch.ones(layers.shape[:-2], device=layers.device) if mask is None else mask.float()
        m = m[..., None, None]  # (..., 1, 1)
        dims = tuple(range(layers.dim() - 2)) + (layers.dim() - 1,)  # all but the layer dim
        n = (m.sum() * layers.shape[-1]).clamp_min(1.0)
        mean = (layers * m).sum(dims, keepdim=True) / n
        var = (((layers - mean) * m) ** 2).sum(dims, keepdim=True) / n
        return (layers - mean) / torch.sqrt(var + 1e-12)

    def weights(self) -> torch.Tensor:
        """softmax(s): the layer weights (n_layers,), summing to 1 (detached, for plotting)."""
        return F.softmax(self.s.detach(), dim=0)

    def penalty(self) -> torch.Tensor:
        """λ·‖s − mean(s)‖²: add it to the task loss."""
        return self.l2_lambda * ((self.s - self.s.mean()) ** 2).sum()


class ElmoFeatures:
    """A frozen biLM as a feature extractor: sentences (token lists) → layers and mask.

    Tokens are lower-cased (``lower=True``, as the course vocabulary is) and looked up in
    `vocab` (unknown ones become <unk>); each sentence is wrapped in <bos> … <eos> as in
    training, and those two positions are dropped from the output. Runs in eval mode.
    """

    def __init__(self, bilm: BiLM, vocab: Vocab, lower: bool = True, batch_size: int = 64):
        if len(vocab) != bilm.config.vocab_size:
            raise ValueError(
                f"the vocabulary has {len(vocab)} tokens but the biLM was built for "
                f"{bilm.config.vocab_size}: load both from the same checkpoint"
            )
        self.bilm, self.vocab, self.lower, self.batch_size = bilm.eval(), vocab, lower, batch_size

    @property
    def n_layers(self) -> int:
        """Number of layers per token, L+1 (the size a ScalarMix needs)."""
        return self.bilm.config.n_layers + 1

    def ids(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentences → right-padded ids (B, T+2) with <bos>/<eos>, and the mask (B, T+2)."""
        if isinstance(sentences, str) or not isinstance(sentences, Sequence):
            raise TypeError("encode takes a list of token lists, e.g. [['the', 'bank'], ['a', 'river']]")
        if len(sentences) == 0:
            raise ValueError("no sentences given: pass at least one token list")
        limit = self.bilm.config.max_len - 2
        rows = []
        for i, tokens in enumerate(sentences):
            if isinstance(tokens, str):
                raise TypeError(f"sentence {i} is a string; tokenize it first, e.g. tokenize_words(text)")
            if len(tokens) == 0:
                raise ValueError(f"sentence {i} is empty: every sentence needs at least one token")
            if len(tokens) > limit:
                raise ValueError(
                    f"sentence {i} has {len(tokens)} tokens; this biLM encodes at most "
                    f"{limit} (max_len={self.bilm.config.max_len} with <bos> and <eos>). "
                    "Split it into shorter pieces"
                )
            words = [t.lower() for t in tokens] if self.lower else list(tokens)
            rows.append(torch.tensor([self.vocab[BOS]] + self.vocab.encode_tokens(words) + [self.vocab[EOS]]))
        ids = nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=self.vocab.stoi.get(PAD, 0))
        return ids, torch.arange(ids.shape[1]) < torch.tensor([len(r) for r in rows])[:, None]

    @torch.no_grad()
    def encode(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """List of token lists → (layers (B, T, L+1, 2H), mask (B, T) bool), T = longest sentence.
        The sentences run in batches of similar length and come back in the order given."""
        ids, mask = self.ids(sentences)
        device = next(self.bilm.parameters()).device
        lengths = mask.sum(1)
        order = lengths.argsort(stable=True)  # similar lengths share a batch
        layers = None
        with evaluating(self.bilm):
            for i in range(0, len(ids), self.batch_size):
                rows = order[i : i + self.batch_size]
                n = int(lengths[rows].max())
                part = self.bilm.representations(ids[rows, :n].to(device), mask[rows, :n].to(device)).cpu()
                if layers is None:
                    layers = part.new_zeros(len(ids), ids.shape[1], *part.shape[2:])
                layers[rows, :n] = part
        layers = layers[:, 1:-1]  # drop <bos>, last <eos>
        # Row b has its <eos> at position len_b (after dropping <bos>): mask it out.
        real = mask[:, 2:]  # (B, T)
        return layers * real[:, :, None, None], real

    __call__ = encode


def save_bilm(bilm: BiLM, vocab: Vocab, directory: str | Path, *, half: bool = True, info: dict | None = None) -> Path:
    """Write a checkpoint folder (:mod:`onehot2gpt.checkpoints`): ``weights.safetensors`` (float16
    if `half`), ``vocab.json``, and ``config.json`` with the config, `info` and the files' sha256."""
    if len(vocab) != bilm.config.vocab_size:
        raise ValueError(f"vocabulary size {len(vocab)} != config.vocab_size {bilm.config.vocab_size}")
    return save_checkpoint(
        directory,
        "bilm",
        "BiLM",
        asdict(bilm.config),
        dict(bilm.named_parameters()),
        tokenizer=vocab,
        info=info,
        dtype=torch.float16 if half else torch.float32,
    )


def bilm_from_checkpoint(record: dict, weights: dict, tokenizer=None) -> BiLM:
    """A BiLM built from a checkpoint's config.json `record`, filled (as float32) with its checked
    `weights` (what :func:`onehot2gpt.checkpoints.load` calls for kind "bilm")."""
    return fill_module(BiLM(config_from_record(BiLMConfig, record)), weights)


def split_sentences(paragraph: Sequence[str]) -> list[list[str]]:
    """Cut a WikiText paragraph (token list) after every "." token.

    Example:
        >>> split_sentences(["a", "b", ".", "c", "."])
        [['a', 'b', '.'], ['c', '.']]
    """
    sentences, current = [], []
    for token in paragraph:
        current.append(token)
        if token == ".":
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences
