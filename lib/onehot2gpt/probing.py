"""Probing frozen representations: which layers does a task use?

A probe is a small classifier trained on top of a frozen model's layers. Ours is the one ELMo uses
for downstream tasks (Peters et al. 2018, section 3.2) and Tenney et al. (2019) use to ask what
BERT learns: a learned scalar mix γ · Σ_j softmax(s)_j · h_j over the layers, then a linear layer.
After training, softmax(s) says how much the task relies on each layer.

Taught in notebook 04 (ELMo's layer weights for part-of-speech tagging and sentiment) and reused
in notebook 08 (the same plot for BERT). Features are tensors of shape (N, n_layers, D): one row
per token for token tasks (:func:`token_features`) or per sentence for sentence tasks
(:func:`sentence_features`, mean-pooled). A one-layer representation is just n_layers = 1, and a
one-hot representation is given as ids (N,) with ``onehot_size``.

Before any probe, notebook 04 simply looks: :func:`contextual_vectors` takes one word's vector at
every layer of a BERT encoder in several sentences ("bank" by a river, "bank" for money), and
:func:`sense_grouping_score` says how much more alike the same-sense vectors are than the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .elmo import ScalarMix
from .subword import pretokenize
from .utils import check_finite_loss, seeded


def token_features(layers: Tensor, mask: Tensor) -> Tensor:
    """Layers (B, T, L, D) and mask (B, T) → the real tokens' layers, (N, L, D)."""
    if layers.dim() != 4 or mask.shape != layers.shape[:2]:
        raise ValueError(f"expected layers (B, T, L, D) and mask (B, T); got {tuple(layers.shape)} "
                         f"and {tuple(mask.shape)}")
    return layers[mask.bool()]


def sentence_features(layers: Tensor, mask: Tensor) -> Tensor:
    """Layers (B, T, L, D) and mask (B, T) → each sentence's mean over its real tokens, (B, L, D)."""
    if layers.dim() != 4 or mask.shape != layers.shape[:2]:
        raise ValueError(f"expected layers (B, T, L, D) and mask (B, T); got {tuple(layers.shape)} "
                         f"and {tuple(mask.shape)}")
    m = mask.to(layers.dtype)[:, :, None, None]                                 # (B, T, 1, 1)
    return (layers * m).sum(1) / m.sum(1).clamp_min(1.0)


@torch.no_grad()
def encoder_layers(bert, features: dict, batch_size: int = 64) -> Tensor:
    """Every layer of a BERT encoder (our BertModel, a BertFor… model's ``.bert``, or Hugging Face's
    BertModel) for an ``onehot2gpt.bert_tasks.encode_*`` dict → (B, T, n_layers + 1, D): the
    embeddings, then each layer.
    Sentences are batched by length and each batch runs only up to its longest real sequence;
    the padding positions after it stay zero.

    Feed the result to :func:`token_features` (mask: ``features["labels"] != -100``, the first
    pieces) or :func:`sentence_features` (mask: ``features["attention_mask"]``).
    """
    bert = getattr(bert, "bert", bert)
    for key in ("input_ids", "attention_mask"):
        if key not in features:
            raise ValueError(f"features need {key!r}: build them with onehot2gpt.bert_tasks.encode_sentences, "
                             f"encode_pairs or encode_tagged")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    was_training = bert.training
    bert.eval()
    device = next(bert.parameters()).device
    n, T = features["input_ids"].shape
    lengths = features["attention_mask"].sum(1)
    order = lengths.argsort()                                   # similar lengths share a batch
    result = None
    for start in range(0, n, batch_size):
        rows = order[start:start + batch_size]
        longest = max(1, int(lengths[rows].max()))              # skip the batch's pure padding
        part = {k: features[k][rows, :longest].to(device)
                for k in ("input_ids", "token_type_ids", "attention_mask") if k in features}
        # By name: Hugging Face's BertModel takes attention_mask second, ours token_type_ids.
        out = bert(input_ids=part["input_ids"], token_type_ids=part.get("token_type_ids"),
                   attention_mask=part["attention_mask"], output_hidden_states=True)
        layers = torch.stack(out.hidden_states, dim=2).cpu()   # (b, longest, L+1, D)
        if result is None:
            result = layers.new_zeros(n, T, *layers.shape[2:])
        result[rows, :longest] = layers
    bert.train(was_training)
    return result


def _pieces_of_words(tokenizer, words: list[str]) -> tuple[list[int], list[int | None]]:
    """Words → ids ``[CLS] … [SEP]`` and, per id, the index of its word (None for the specials)."""
    if hasattr(tokenizer, "encode_words"):                      # onehot2gpt.subword.WordPieceTokenizer
        enc = tokenizer.encode_words(words)
        return enc["input_ids"], enc["word_index"]
    if hasattr(tokenizer, "is_fast") and tokenizer.is_fast:     # a Hugging Face fast tokenizer
        enc = tokenizer(words, is_split_into_words=True)
        return enc["input_ids"], enc.word_ids()
    raise TypeError(f"expected onehot2gpt.subword.WordPieceTokenizer or a Hugging Face fast tokenizer "
                    f"(it can tell which word each piece came from), got {type(tokenizer).__name__}")


def contextual_vectors(bert, tokenizer, sentences: Sequence[str], word: str) -> Tensor:
    """One word's vectors in N sentences at every layer of a BERT encoder → (N, n_layers + 1, D):
    the embeddings, then each layer, as :func:`encoder_layers` gives them.

    `bert` is our BertModel (or a BertFor… model) or Hugging Face's BertModel, `tokenizer` our
    WordPieceTokenizer or a Hugging Face fast tokenizer with the model's vocabulary. Sentences are
    split into words where BERT splits them (spaces and punctuation); the first word equal to
    `word`, ignoring case, is used, and a word cut into several WordPieces gets their mean.

    Example:
        >>> minilm, tok = minilm_bert()          # 6 layers, 384 wide          # doctest: +SKIP
        >>> contextual_vectors(minilm, tok, ["a bank loan", "a river bank"], "bank").shape  # doctest: +SKIP
        torch.Size([2, 7, 384])
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(f"sentences must be a list of strings, e.g. [{str(sentences)[:40]!r}]")
    if len(sentences) == 0:
        raise ValueError("no sentences given: pass at least one sentence that contains the word")
    if not isinstance(word, str) or len(pretokenize(word, lower=False)) != 1:
        raise ValueError(f"word must be one word, without spaces or punctuation, got {word!r}")
    target = word.strip().lower()
    config = getattr(bert, "bert", bert).config
    limit = getattr(config, "max_len", None) or getattr(config, "max_position_embeddings", None)
    rows, spans = [], []
    for i, text in enumerate(sentences):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"sentence {i} is empty: every sentence needs the word {word!r}")
        words = pretokenize(text, lower=False)
        if target not in (w.lower() for w in words):
            raise ValueError(f"sentence {i} ({text!r}) has no word {word!r}; its words are {words}")
        ids, word_index = _pieces_of_words(tokenizer, words)
        if limit is not None and len(ids) > limit:
            raise ValueError(f"sentence {i} is {len(ids)} tokens long but this model reads at most "
                             f"{limit}: shorten it")
        k = [w.lower() for w in words].index(target)
        pieces = [t for t, w in enumerate(word_index) if w == k]
        if not pieces:
            raise ValueError(f"the tokenizer gave no pieces for {words[k]!r} in sentence {i}")
        rows.append(ids)
        spans.append(pieces)
    T = max(map(len, rows))
    pad = getattr(tokenizer, "pad_id", None)
    pad = tokenizer.pad_token_id if pad is None else pad
    features = {"input_ids": torch.tensor([r + [pad] * (T - len(r)) for r in rows]),
                "attention_mask": torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows])}
    features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    layers = encoder_layers(bert, features)                                   # (N, T, L+1, D)
    return torch.stack([layers[b, pieces].mean(0) for b, pieces in enumerate(spans)])


@dataclass
class ProbeResult:
    """What a trained probe found: layer weights softmax(s), γ, accuracies, the loss curve."""

    task: str
    l2_lambda: float
    weights: Tensor
    gamma: float
    train_accuracy: float
    test_accuracy: float
    layer: int | None = None
    losses: list[float] = field(default_factory=list)

    def __repr__(self) -> str:
        w = ", ".join(f"{x:.2f}" for x in self.weights.tolist())
        return (f"ProbeResult(task={self.task!r}, λ={self.l2_lambda:g}, weights=[{w}], "
                f"test_accuracy={self.test_accuracy:.3f})")


class MixProbe(nn.Module):
    """Scalar mix over L layers (or one chosen layer), then a linear classifier: (N, L, D) → (N, C)."""

    def __init__(self, n_layers: int, dim: int, n_classes: int, l2_lambda: float = 0.0,
                 layer: int | None = None, layer_norm: bool = True):
        super().__init__()
        if layer is not None and not 0 <= layer < n_layers:
            raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
        self.layer = layer
        # One chosen layer is a "mix" of one: the same scaling and normalisation, weight 1.
        self.mix = ScalarMix(1 if layer is not None else n_layers, l2_lambda=l2_lambda,
                             layer_norm=layer_norm)
        self.classify = nn.Linear(dim, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        if self.layer is not None:
            x = x[:, self.layer: self.layer + 1]                                   # (N, 1, D)
        return self.classify(self.mix(x))


def _check_xy(x: Tensor, y: Tensor, name: str, onehot_size: int | None) -> None:
    if onehot_size is not None:
        if x.dim() != 1 or x.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{name}: with onehot_size give integer ids of shape (N,), got "
                             f"{x.dtype} {tuple(x.shape)}")
    elif x.dim() != 3:
        raise ValueError(f"{name}: features must have shape (N, n_layers, D), got {tuple(x.shape)}; "
                         "use token_features or sentence_features, or x[:, None, :] for one layer")
    if y.dim() != 1 or len(y) != len(x):
        raise ValueError(f"{name}: labels must have shape ({len(x)},), got {tuple(y.shape)}")
    if len(x) == 0:
        raise ValueError(f"{name}: no examples; give at least one")


@torch.no_grad()
def _accuracy(model: nn.Module, x: Tensor, y: Tensor, batch_size: int) -> float:
    model.eval()
    correct = sum(int((model(x[i:i + batch_size]).argmax(-1) == y[i:i + batch_size]).sum())
                  for i in range(0, len(x), batch_size))
    return correct / len(x)


def train_probe(train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, *,
                n_classes: int | None = None, l2_lambda: float = 0.0, layer: int | None = None,
                onehot_size: int | None = None, layer_norm: bool = True, epochs: int = 10,
                lr: float = 1e-2, batch_size: int = 512, weight_decay: float = 0.0, seed: int = 0,
                task: str = "", progress: bool = False) -> ProbeResult:
    """Train a probe on frozen features (N, L, D) with labels (N,); evaluate on the test split.

    ``l2_lambda`` pulls the mix towards the plain average of the layers; ``layer=j`` uses layer j
    alone (the "last layer only" baseline of the ELMo paper's ablation). With ``onehot_size=V``
    the features are ids (N,) of one-hot vectors of size V (a linear layer on them is a table
    with one row of class scores per word).
    """
    from tqdm.auto import tqdm

    _check_xy(train_x, train_y, "train", onehot_size)
    _check_xy(test_x, test_y, "test", onehot_size)
    n_classes = n_classes or int(max(train_y.max(), test_y.max())) + 1
    with seeded(seed):  # the caller's own randomness is left as it was
        if onehot_size is not None:
            model: nn.Module = nn.Embedding(onehot_size, n_classes)         # == Linear on one-hot
            mix = None
        else:
            model = MixProbe(train_x.shape[1], train_x.shape[2], n_classes, l2_lambda, layer, layer_norm)
            mix = model.mix
        optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        generator = torch.Generator().manual_seed(seed)
        losses = []
        step = 0
        for _ in tqdm(range(epochs), desc=task or "probe", disable=not progress):
            model.train()
            order = torch.randperm(len(train_x), generator=generator)
            total = 0.0
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
                if mix is not None and layer is None:
                    loss = loss + mix.penalty()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += check_finite_loss(loss, step, lr=lr, what=f"{task or 'probe'} training") * len(idx)
                step += 1
            losses.append(total / len(train_x))
        if mix is None:
            weights = torch.ones(1)
        elif layer is not None:
            weights = F.one_hot(torch.tensor(layer), train_x.shape[1]).float()
        else:
            weights = mix.weights()
        return ProbeResult(task=task, l2_lambda=l2_lambda, weights=weights,
                           gamma=mix.gamma.item() if mix is not None else 1.0,
                           train_accuracy=_accuracy(model, train_x, train_y, batch_size),
                           test_accuracy=_accuracy(model, test_x, test_y, batch_size),
                           layer=layer, losses=losses)


def sense_grouping_score(vectors: Tensor, labels: Tensor) -> float:
    """Vectors (N, D) and sense labels (N,) → mean cosine of same-sense pairs (i ≠ j) minus mean
    cosine of different-sense pairs; 0 means the vectors do not group by sense."""
    labels = torch.as_tensor(labels)
    if vectors.dim() != 2 or labels.shape != (len(vectors),):
        raise ValueError(f"expected vectors (N, D) and labels (N,), got {tuple(vectors.shape)} "
                         f"and {tuple(labels.shape)}")
    same = labels[:, None] == labels[None, :]
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool)
    if not (same & off_diagonal).any() or not (~same).any():
        raise ValueError("need at least two vectors of one sense and one of another")
    unit = vectors / vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
    sims = unit @ unit.T
    return float(sims[same & off_diagonal].mean() - sims[~same].mean())
