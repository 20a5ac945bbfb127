"""Probing frozen representations: which layers does a task use?

A probe (ELMo's downstream model, Peters et al. 2018; Tenney et al. 2019 for BERT) is a learned
scalar mix γ · Σ_j softmax(s)_j · h_j over a frozen model's layers, then a linear layer; softmax(s)
says how much the task relies on each layer. Taught in notebook 04 and reused in notebook 08.
Features are (N, n_layers, D): one row per token (:func:`token_features`) or per sentence
(:func:`sentence_features`); a one-hot representation is ids (N,) with ``onehot_size``.

:func:`contextual_vectors` takes one word's vector at every layer of a BERT encoder in several
sentences; :func:`sense_grouping_score`, :func:`sense_pair_accuracy` and
:func:`nearest_sense_accuracy` score how they group by sense, and :func:`shuffled_labels_p_value`
how often shuffled sense labels score as high.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .elmo import ScalarMix
from .progress import progress_bar
from .subword import pretokenize
from .utils import check_finite_loss, check_int, check_number, check_tensor, evaluating, seeded


def _check_layers(layers: Tensor, mask: Tensor) -> None:
    check_tensor(layers, "layers", floating=True), check_tensor(mask, "mask", fix="(B, T), 1 = a real token")
    if layers.dim() != 4 or mask.shape != layers.shape[:2]:
        raise ValueError(
            f"expected layers (B, T, L, D) and mask (B, T); got {tuple(layers.shape)} and {tuple(mask.shape)}"
        )
    bad = mask[(mask != 0) & (mask != 1)]  # NaN too
    if bad.numel():
        raise ValueError(f"mask holds {bad[0].item()}: it must be 0 (padding) or 1 (a real token), or bool")


def token_features(layers: Tensor, mask: Tensor) -> Tensor:
    """Layers (B, T, L, D) and mask (B, T) → the real tokens' layers, (N, L, D)."""
    _check_layers(layers, mask)
    return layers[mask.bool()]


def sentence_features(layers: Tensor, mask: Tensor) -> Tensor:
    """Layers (B, T, L, D) and mask (B, T) → each sentence's mean over its real tokens, (B, L, D)."""
    _check_layers(layers, mask)
    m = mask.to(layers.dtype)[:, :, None, None]  # (B, T, 1, 1)
    return (layers * m).sum(1) / m.sum(1).clamp_min(1.0)


@torch.no_grad()
def encoder_layers(bert, features: dict, batch_size: int = 64) -> Tensor:
    """Every layer of a BERT encoder (our BertModel, a BertFor… model's ``.bert``, or Hugging Face's
    BertModel) for an ``onehot2gpt.bert_tasks.encode_*`` dict → (B, T, n_layers + 1, D): the
    embeddings, then each layer. Sentences are batched by length, each batch cut at its longest
    real sequence; the padding positions after it stay zero.

    Feed the result to :func:`token_features` (mask: ``features["labels"] != -100``, the first
    pieces) or :func:`sentence_features` (mask: ``features["attention_mask"]``).
    """
    bert = getattr(bert, "bert", bert)
    for key in ("input_ids", "attention_mask"):
        if key not in features:
            raise ValueError(
                f"features need {key!r}: build them with onehot2gpt.bert_tasks.encode_sentences, "
                f"encode_pairs or encode_tagged"
            )
    check_int(batch_size, "batch_size", 1)
    with evaluating(bert):
        device = next(bert.parameters()).device
        n, T = features["input_ids"].shape
        lengths = features["attention_mask"].sum(1)
        order = lengths.argsort()  # similar lengths share a batch
        result = None
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            longest = max(1, int(lengths[rows].max()))  # skip the batch's pure padding
            keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in features]
            # By name: Hugging Face's BertModel takes attention_mask second, ours token_type_ids.
            out = bert(**{k: features[k][rows, :longest].to(device) for k in keys}, output_hidden_states=True)
            layers = torch.stack(out.hidden_states, dim=2).cpu()  # (b, longest, L+1, D)
            if result is None:
                result = layers.new_zeros(n, T, *layers.shape[2:])
            result[rows, :longest] = layers
    return result


def _pieces_of_words(tokenizer, words: list[str]) -> tuple[list[int], list[int | None]]:
    """Words → ids ``[CLS] … [SEP]`` and, per id, the index of its word (None for the specials)."""
    if hasattr(tokenizer, "encode_words"):  # onehot2gpt.subword.WordPieceTokenizer
        enc = tokenizer.encode_words(words)
        return enc["input_ids"], enc["word_index"]
    if hasattr(tokenizer, "is_fast") and tokenizer.is_fast:  # a Hugging Face fast tokenizer
        enc = tokenizer(words, is_split_into_words=True)
        return enc["input_ids"], enc.word_ids()
    raise TypeError(
        f"expected onehot2gpt.subword.WordPieceTokenizer or a Hugging Face fast tokenizer "
        f"(it can tell which word each piece came from), got {type(tokenizer).__name__}"
    )


def contextual_vectors(bert, tokenizer, sentences: Sequence[str], word: str) -> Tensor:
    """One word's vectors in N sentences at every layer of a BERT encoder → (N, n_layers + 1, D):
    the embeddings, then each layer, as :func:`encoder_layers` gives them.

    `tokenizer` is our WordPieceTokenizer or a Hugging Face fast tokenizer. Sentences are split
    into words where BERT splits them; the first word equal to `word`, ignoring case, is used, and
    a word cut into several WordPieces gets their mean.

    Example:
        >>> from onehot2gpt.checkpoints import load
        >>> minilm, tok, config, info = load("all-MiniLM-L6-v2")   # 6 layers, 384 wide
        >>> contextual_vectors(minilm, tok, ["a bank loan", "a river bank"], "bank").shape
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
            raise ValueError(f"sentence {i} is {len(ids)} tokens long but this model reads at most {limit}: shorten it")
        k = [w.lower() for w in words].index(target)
        pieces = [t for t, w in enumerate(word_index) if w == k]
        if not pieces:
            raise ValueError(f"the tokenizer gave no pieces for {words[k]!r} in sentence {i}")
        rows.append(ids)
        spans.append(pieces)
    pad = getattr(tokenizer, "pad_id", None)
    pad = tokenizer.pad_token_id if pad is None else pad
    ids = nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True, padding_value=pad)  # (N, T)
    mask = (torch.arange(ids.shape[1]) < torch.tensor([len(r) for r in rows])[:, None]).long()
    layers = encoder_layers(bert, {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)})
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
    model: nn.Module | None = field(default=None, repr=False, compare=False)

    @torch.no_grad()
    def predict_proba(self, x: Tensor) -> Tensor:
        """Features (N, n_layers, D), as the probe was trained on → class probabilities (N, C)."""
        if self.model is None:
            raise ValueError("this ProbeResult keeps no model: train it with train_probe")
        check_tensor(
            x, "x", dims=3, floating=True, finite=True, fix="give float features (N, n_layers, D) as in training"
        )
        with evaluating(self.model):
            return self.model(x).softmax(-1)

    def __repr__(self) -> str:
        w = ", ".join(f"{x:.2f}" for x in self.weights.tolist())
        return (
            f"ProbeResult(task={self.task!r}, λ={self.l2_lambda:g}, weights=[{w}], "
            f"test_accuracy={self.test_accuracy:.3f})"
        )


class MixProbe(nn.Module):
    """Scalar mix over L layers (or one chosen layer), then a linear classifier: (N, L, D) → (N, C)."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_classes: int,
        l2_lambda: float = 0.0,
        layer: int | None = None,
        layer_norm: bool = True,
    ):
        super().__init__()
        if layer is not None and not 0 <= layer < n_layers:
            raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
        self.layer = layer
        # One chosen layer is a "mix" of one: the same scaling and normalisation, weight 1.
        self.mix = ScalarMix(1 if layer is not None else n_layers, l2_lambda=l2_lambda, layer_norm=layer_norm)
        self.classify = nn.Linear(d_model, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        if self.layer is not None:
            x = x[:, self.layer : self.layer + 1]  # (N, 1, D)
        return self.classify(self.mix(x))


def _check_xy(x: Tensor, y: Tensor, name: str, onehot_size: int | None) -> None:
    if onehot_size is not None:
        if x.dim() != 1 or x.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{name}: with onehot_size give integer ids of shape (N,), got {x.dtype} {tuple(x.shape)}")
    elif x.dim() != 3:
        raise ValueError(
            f"{name}: features must have shape (N, n_layers, D), got {tuple(x.shape)}; "
            "use token_features or sentence_features, or x[:, None, :] for one layer"
        )
    if y.dim() != 1 or len(y) != len(x):
        raise ValueError(f"{name}: labels must have shape ({len(x)},), got {tuple(y.shape)}")
    if len(x) == 0:
        raise ValueError(f"{name}: no examples; give at least one")


@torch.no_grad()
def _accuracy(model: nn.Module, x: Tensor, y: Tensor, batch_size: int) -> float:
    with evaluating(model):
        correct = sum(
            int((model(x[i : i + batch_size]).argmax(-1) == y[i : i + batch_size]).sum())
            for i in range(0, len(x), batch_size)
        )
    return correct / len(x)


def train_probe(
    train_x: Tensor,
    train_y: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    n_classes: int | None = None,
    l2_lambda: float = 0.0,
    layer: int | None = None,
    onehot_size: int | None = None,
    layer_norm: bool = True,
    epochs: int = 10,
    lr: float = 1e-2,
    batch_size: int = 512,
    weight_decay: float = 0.0,
    seed: int = 0,
    task: str = "",
    progress: bool = False,
) -> ProbeResult:
    """Train a probe on frozen features (N, L, D) with labels (N,); evaluate on the test split.

    ``l2_lambda`` pulls the mix towards the plain average of the layers; ``layer=j`` uses layer j
    alone (the "last layer only" baseline of the ELMo paper's ablation). With ``onehot_size=V``
    the features are ids (N,) of one-hot vectors of size V (a linear layer on them is a table
    with one row of class scores per word).
    """
    _check_xy(train_x, train_y, "train", onehot_size)
    _check_xy(test_x, test_y, "test", onehot_size)
    n_classes = n_classes or int(max(train_y.max(), test_y.max())) + 1
    with seeded(seed):  # the caller's own randomness is left as it was
        if onehot_size is not None:
            model: nn.Module = nn.Embedding(onehot_size, n_classes)  # == Linear on one-hot
            mix = None
        else:
            model = MixProbe(train_x.shape[1], train_x.shape[2], n_classes, l2_lambda, layer, layer_norm)
            mix = model.mix
        optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        generator = torch.Generator().manual_seed(seed)
        losses = []
        step = 0
        # a new probe starts near ln(n_classes) (higher on large unnormalised features: then its first
        # loss); 1000× that is a run exploding
        level = math.log(n_classes)
        for _ in progress_bar(range(epochs), desc=task or "probe", disable=not progress):
            model.train()
            order = torch.randperm(len(train_x), generator=generator)
            total = 0.0
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
                if mix is not None and layer is None:
                    loss = loss + mix.penalty()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                if step == 0 and math.isfinite(value := float(loss.detach())):
                    level = max(level, value)
                what = f"{task or 'probe'} training"
                total += check_finite_loss(loss, step, lr=lr, what=what, start=level) * len(idx)
                step += 1
            losses.append(total / len(train_x))
        if mix is None:
            weights = torch.ones(1)
        elif layer is not None:
            weights = F.one_hot(torch.tensor(layer), train_x.shape[1]).float()
        else:
            weights = mix.weights()
        return ProbeResult(
            task=task,
            l2_lambda=l2_lambda,
            weights=weights,
            gamma=mix.gamma.item() if mix is not None else 1.0,
            train_accuracy=_accuracy(model, train_x, train_y, batch_size),
            test_accuracy=_accuracy(model, test_x, test_y, batch_size),
            layer=layer,
            losses=losses,
            model=model,
        )


def sense_grouping_score(vectors: Tensor, labels: Tensor) -> float:
    """Vectors (N, D) and sense labels (N,) → mean cosine of same-sense pairs (i ≠ j) minus mean
    cosine of different-sense pairs; 0 means the vectors do not group by sense."""
    sims, labels = _sense_inputs(vectors, labels)
    same, other = _same_and_other(labels)
    return float(sims[same].mean() - sims[other].mean())


def _sense_inputs(vectors: Tensor, labels) -> tuple[Tensor, Tensor]:
    """Check vectors (N, D) and labels (N,); return the cosine matrix (N, N) and the labels."""
    labels = torch.as_tensor(labels)
    check_tensor(vectors, "vectors", dims=2, floating=True, finite=True, fix="give a float tensor (N, D)")
    if labels.dim() != 1 or len(labels) != len(vectors) or labels.is_floating_point():
        raise ValueError(
            f"labels must be integer sense ids, one per vector ({len(vectors)},), got "
            f"{labels.dtype} {tuple(labels.shape)}"
        )
    if (vectors.norm(dim=1) == 0).any():
        raise ValueError("a vector is all zeros, so it has no direction to compare: leave it out")
    unit = vectors / vectors.norm(dim=1, keepdim=True)
    return unit @ unit.T, labels


def _same_and_other(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Labels (N,) → masks (N, N) of the same-sense pairs (i ≠ j) and of the different-sense pairs."""
    same = labels[:, None] == labels[None, :]
    same_pairs = same & ~torch.eye(len(labels), dtype=torch.bool)
    if not same_pairs.any() or same.all():
        raise ValueError(f"need at least two vectors of one sense and one of another, got labels {labels.tolist()}")
    return same_pairs, ~same


def _pair_accuracy(sims: Tensor, labels: Tensor) -> Tensor:
    """Cosines (N, N) and one or more labellings (..., N) → the pair accuracy of each (...)."""
    same = labels[..., :, None] == labels[..., None, :]  # (..., N, N)
    other = torch.eye(sims.shape[0], dtype=torch.bool)
    nearer = (sims[:, :, None] > sims[:, None, :]).double() + 0.5 * (sims[:, :, None] == sims[:, None, :]).double()
    valid = ((same & ~other)[..., :, :, None] & (~same)[..., :, None, :]).double()  # (..., i, j, k)
    return (nearer * valid).sum((-3, -2, -1)) / valid.sum((-3, -2, -1))


def sense_pair_accuracy(vectors: Tensor, labels) -> float:
    """Vectors (N, D) of one word in N sentences and their sense labels (N,) → the share of
    comparisons "i with a same-sense j" against "i with a different-sense k" in which j is the more
    similar (cosine; ties count half). 1 means every same-sense pair is nearer, 0.5 is chance.

    Example:
        >>> v = torch.tensor([[1.0, 0.1], [1.0, 0.2], [0.1, 1.0], [0.2, 1.0]])
        >>> sense_pair_accuracy(v, torch.tensor([0, 0, 1, 1]))
        1.0
    """
    sims, labels = _sense_inputs(vectors, labels)
    _same_and_other(labels)
    return float(_pair_accuracy(sims, labels))


def nearest_sense_accuracy(vectors: Tensor, labels) -> float:
    """Vectors (N, D) and sense labels (N,) → the share of vectors whose most similar other vector
    (cosine) has the same sense. A vector whose sense occurs only once is left out.

    Example:
        >>> v = torch.tensor([[1.0, 0.1], [1.0, 0.2], [0.1, 1.0], [0.2, 1.0]])
        >>> nearest_sense_accuracy(v, torch.tensor([0, 0, 1, 1]))
        1.0
    """
    sims, labels = _sense_inputs(vectors, labels)
    has_partner = (labels[:, None] == labels[None, :]).sum(1) > 1
    if not has_partner.any() or len(labels.unique()) < 2:
        raise ValueError(f"need at least two senses, one of them twice, got labels {labels.tolist()}")
    nearest = sims.fill_diagonal_(-2.0).argmax(1)
    return float((labels[nearest] == labels)[has_partner].float().mean())


def _relabelings(labels: Tensor) -> list[list[int]]:
    """Every distinct way to give N positions the same multiset of labels."""
    counts = [(int(s), int(c)) for s, c in zip(*labels.unique(return_counts=True))]
    out = []

    def place(free: list[int], todo: list[tuple[int, int]], current: dict[int, int]):
        if not todo:
            out.append([current[i] for i in range(len(labels))])
            return
        (sense, count), rest = todo[0], todo[1:]
        for chosen in itertools.combinations(free, count):
            taken = set(chosen)
            place([i for i in free if i not in taken], rest, {**current, **{i: sense for i in chosen}})

    place(list(range(len(labels))), counts, {})
    return out


def shuffled_labels_p_value(
    vectors: Tensor, labels, score: Callable = sense_pair_accuracy, max_relabelings: int = 20_000, seed: int = 0
) -> float:
    """How often sense labels given at random (the same number of each sense) score at least as
    high as the true ones: a p-value. Small (say < 0.05): the vectors group by sense; large: their
    score is what chance gives. Every distinct relabelling is tried when there are at most
    `max_relabelings` of them (10 vectors, 5 and 5: 252), otherwise that many random ones.
    `score(vectors, labels) -> float` (default :func:`sense_pair_accuracy`): higher = better grouping.
    """
    sims, labels = _sense_inputs(vectors, labels)
    check_int(max_relabelings, "max_relabelings", 1)
    observed = score(vectors, labels)
    sizes = labels.unique(return_counts=True)[1].tolist()
    exact = math.factorial(len(labels)) // math.prod(math.factorial(c) for c in sizes) <= max_relabelings
    if exact:
        shuffled = torch.tensor(_relabelings(labels))  # (n_distinct, N), all
    else:
        generator = torch.Generator().manual_seed(seed)
        shuffled = torch.stack(
            [labels[torch.randperm(len(labels), generator=generator)] for _ in range(max_relabelings)]
        )
    if score is sense_pair_accuracy:
        scores = torch.cat([_pair_accuracy(sims, part) for part in shuffled.split(256)])
    else:
        scores = torch.tensor([score(vectors, s) for s in shuffled])
    at_least = int((scores >= observed - 1e-6).sum())
    # The true labelling is one of the exact set; a random sample adds it (Phipson & Smyth 2010).
    return at_least / len(shuffled) if exact else (at_least + 1) / (len(shuffled) + 1)


def chance_p_value(correct: int, total: int, chance: float = 0.5) -> float:
    """The probability that guessing right with probability `chance` gets at least `correct` of
    `total` (one-sided binomial test): small means better than guessing.

    Example:
        >>> round(chance_p_value(15, 20), 3)
        0.021
    """
    total = check_int(total, "total", 1)
    correct = check_int(correct, "correct", 0, total, fix="at most total")
    chance = check_number(chance, "chance", 0, 1, low_open=True, high_open=True)
    return float(sum(math.comb(total, k) * chance**k * (1 - chance) ** (total - k) for k in range(correct, total + 1)))
