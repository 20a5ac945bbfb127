"""BERT: a bidirectional Transformer encoder, its pre-training heads, and its fine-tuning heads.

Taught in notebooks 07 (pre-training: masked language modelling and next-sentence prediction)
and 08 (fine-tuning on sentences, sentence pairs, tokens and question answering). Follows Devlin
et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
(2018): token + segment + learned position embeddings, LayerNorm, then the post-norm encoder of
notebook 06 with GELU (the same :class:`~onehot2gpt.transformer.Encoder`, eps 1e-12).

Our weights have readable names (``tok_emb``, ``self_attn.in_proj``); the one key map to Hugging
Face's names and its loaders (``load_hf_bert``, ``load_hf_pretraining``), downloads
(``from_pretrained``) and the offline MiniLM (``minilm_bert``) live in :mod:`onehot2gpt.pretrained`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import padding_mask
from .checkpoints import CheckpointError, config_from_record, fill_module, save_checkpoint
from .transformer import Encoder
from .utils import IGNORE_INDEX, as_ids, check_choice, check_int, check_number, check_tensor, check_text, evaluating

_MASK = "1 = real token, 0 = padding, e.g. (input_ids != tokenizer.pad_id).long()"


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT. The defaults are the course's size (= :meth:`course`); :meth:`tiny` is a
    test size; the paper's sizes as presets."""

    vocab_size: int = 8000  # WordPiece vocabulary; the paper's is 30,522 (uncased English)
    d_model: int = 128  # "hidden size" H
    n_layers: int = 4  # L
    n_heads: int = 4  # A; d_model / n_heads = 32 features per head
    d_ff: int = 512  # 4 H, as in the paper
    max_len: int = 128  # learned positions: the model cannot read longer inputs
    type_vocab_size: int = 2  # segments A and B (sentence pairs)
    dropout: float = 0.1  # on embeddings, attention weights and every residual branch
    eps: float = 1e-12  # LayerNorm epsilon of the original TensorFlow code
    pad_id: int = 0  # [PAD] is 0 in BERT's vocab.txt and in the course's Vocab

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside the vocabulary 0…{self.vocab_size - 1}")

    @classmethod
    def course(cls, **overrides) -> BertConfig:
        """The course's size: 4 layers, 128 wide, 4 heads, 128 positions; pre-trains on a CPU."""
        return cls(**overrides)

    @classmethod
    def tiny(cls, vocab_size: int = 50, **overrides) -> BertConfig:
        """Tests: 2 layers, 32 wide, 4 heads, 16 positions (as :meth:`GPTConfig.tiny <onehot2gpt.gpt.GPTConfig.tiny>`)."""
        return cls(
            **{**dict(vocab_size=vocab_size, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=16), **overrides}
        )

    @classmethod
    def base(cls, **overrides) -> BertConfig:
        """BERT-Base (110M parameters): 12 layers, 768 wide, 12 heads."""
        return cls(
            **{**dict(vocab_size=30522, d_model=768, n_layers=12, n_heads=12, d_ff=3072, max_len=512), **overrides}
        )

    @classmethod
    def large(cls, **overrides) -> BertConfig:
        """BERT-Large (340M parameters): 24 layers, 1024 wide, 16 heads."""
        return cls(
            **{**dict(vocab_size=30522, d_model=1024, n_layers=24, n_heads=16, d_ff=4096, max_len=512), **overrides}
        )

    @classmethod
    def from_hf(cls, hf_config) -> BertConfig:
        """Convert a `transformers.BertConfig`. Raises ValueError for variants we do not build."""
        fix = "only BERT checkpoints convert: other models lay out their weights or positions differently"
        check_choice(getattr(hf_config, "model_type", "bert"), "model_type", ("bert",), fix=fix)
        check_choice(getattr(hf_config, "hidden_act", "gelu"), "hidden_act", ("gelu",), fix="our GELU is the exact one")
        positions = getattr(hf_config, "position_embedding_type", "absolute")
        check_choice(positions, "position_embedding_type", ("absolute",), fix="only learned positions are supported")
        return cls(
            vocab_size=hf_config.vocab_size,
            d_model=hf_config.hidden_size,
            n_layers=hf_config.num_hidden_layers,
            n_heads=hf_config.num_attention_heads,
            d_ff=hf_config.intermediate_size,
            max_len=hf_config.max_position_embeddings,
            type_vocab_size=hf_config.type_vocab_size,
            dropout=hf_config.hidden_dropout_prob,
            eps=hf_config.layer_norm_eps,
            pad_id=getattr(hf_config, "pad_token_id", None) or 0,  # None: BERT's [PAD] is 0
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _init_weights(root: nn.Module):
    """BERT's initialisation of every layer in `root`: N(0, 0.02²) weights, zero biases, LayerNorm at
    identity, zero [PAD] row. Small weights make every token equally likely at first: MLM loss ≈ ln(vocab_size)."""
    for m in root.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            with torch.no_grad():
                m.weight[m.padding_idx].zero_()
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


# ------------------------------------------------------------------------------------- The encoder


class BertEmbeddings(nn.Module):
    """ids (B, T), segment ids (B, T) or None → LayerNorm(token + segment + position) (B, T, D)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.seg_emb = nn.Embedding(c.type_vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids, token_type_ids=None):
        c = self.config
        input_ids = as_ids(input_ids, c.vocab_size, dims=2, name="input_ids")
        T = input_ids.size(1)
        if T > c.max_len:
            raise ValueError(
                f"the input has {T} tokens but this BERT reads at most max_len={c.max_len} "
                f"(it learned one position vector per slot); truncate it, e.g. "
                f"tokenizer(text, truncation=True, max_length={c.max_len})"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # one segment: all "A"
        else:
            token_type_ids = as_ids(token_type_ids, c.type_vocab_size, name="token_type_ids", allow_empty=True)
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(
                    f"token_type_ids must have the shape of input_ids "
                    f"{tuple(input_ids.shape)}; got {tuple(token_type_ids.shape)}"
                )
        positions = torch.arange(T, device=input_ids.device)  # (T,)
        x = self.tok_emb(input_ids) + self.seg_emb(token_type_ids) + self.pos_emb(positions)  # (B, T, D)
        return self.dropout(self.norm(x))


class BertOutput(NamedTuple):
    """What :class:`BertModel` returns (the field names are Hugging Face's)."""

    last_hidden_state: torch.Tensor  # (B, T, D)
    pooled: torch.Tensor | None  # (B, D): tanh(W h_[CLS] + b); None without a pooler
    hidden_states: tuple[torch.Tensor, ...] | None  # n_layers + 1 × (B, T, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # n_layers × (B, H, T, T)


class BertModel(nn.Module):
    """Embeddings → post-norm GELU Encoder → (pooler on [CLS]).

    forward(input_ids (B, T), token_type_ids=None, attention_mask=None, output_hidden_states=False,
    output_attentions=False) → :class:`BertOutput`. `attention_mask` is Hugging Face's: (B, T), 1 for
    real tokens, 0 for padding; by default every token that is not pad_id is real.
    """

    def __init__(self, config: BertConfig, add_pooler: bool = True):
        super().__init__()
        self.config = c = config
        self.embeddings = BertEmbeddings(c)
        self.encoder = Encoder(
            c.n_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, norm_first=False, activation="gelu", eps=c.eps
        )
        self.pooler = nn.Linear(c.d_model, c.d_model) if add_pooler else None
        _init_weights(self)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertOutput:
        # 1. Which keys each query may see: the real tokens.
        input_ids = as_ids(input_ids, self.config.vocab_size, dims=2, name="input_ids")
        if attention_mask is None:
            mask = padding_mask(input_ids, self.config.pad_id)  # (B, 1, 1, T)
        elif check_tensor(attention_mask, "attention_mask", fix=_MASK).shape != input_ids.shape:
            raise ValueError(
                f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)} "
                f"(1 = real token, 0 = padding); got {tuple(attention_mask.shape)}"
            )
        elif not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError(
                f"attention_mask holds values other than 0 and 1 ({attention_mask.unique()[:5].tolist()}); {_MASK}"
            )
        else:
            mask = (attention_mask != 0)[:, None, None, :]  # (B, 1, 1, T)
        # 2. Embeddings, then the encoder; without maps it takes the fused attention kernel.
        x = self.embeddings(input_ids, token_type_ids)
        if output_hidden_states:
            hidden, maps = [x], []
            for layer in self.encoder.layers:
                x, w = layer(x, mask, need_weights=output_attentions)
                hidden.append(x)
                maps.append(w)
            hidden, maps = tuple(hidden), (tuple(maps) if output_attentions else None)
        else:
            x, maps = self.encoder(x, mask, need_weights=output_attentions)
            hidden = None
        # 3. The pooler summarises the sequence by the [CLS] vector (position 0).
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None
        return BertOutput(x, pooled, hidden, maps)


# ---------------------------------- Pre-training: masked language model + next-sentence prediction


class BertMLMHead(nn.Module):
    """hidden (B, T, D) → logits over the vocabulary (B, T, V): Linear, GELU, LayerNorm, then a
    decoder whose weight *is* the token embedding (tied) with its own bias."""

    def __init__(self, config: BertConfig, tok_emb: nn.Embedding):
        super().__init__()
        c = config
        self.dense = nn.Linear(c.d_model, c.d_model)
        self.activation = nn.GELU()
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.decoder = nn.Linear(c.d_model, c.vocab_size)
        _init_weights(self)
        self.decoder.weight = tok_emb.weight  # tied: one (V, D) matrix reads tokens in and out

    def forward(self, hidden):
        return self.decoder(self.norm(self.activation(self.dense(hidden))))


class PreTrainingOutput(NamedTuple):
    mlm_logits: torch.Tensor  # (B, T, V)
    nsp_logits: torch.Tensor  # (B, 2): 0 = B follows A ("IsNext"), 1 = random sentence
    loss: torch.Tensor | None  # mlm_loss + nsp_loss (those whose labels were given)
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None


class BertForPreTraining(nn.Module):
    """BertModel + MLM head + NSP head (Linear(D, 2) on the pooled [CLS]).

    forward(input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None (B, T) with IGNORE_INDEX (-100)
    at positions not to predict, nsp_labels=None (B,)) → :class:`PreTrainingOutput`.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = BertMLMHead(config, self.bert.embeddings.tok_emb)
        self.nsp = nn.Linear(config.d_model, 2)
        _init_weights(self.nsp)

    def forward(
        self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None, nsp_labels=None
    ) -> PreTrainingOutput:
        out = self.bert(input_ids, token_type_ids, attention_mask)
        mlm_logits, nsp_logits = self.mlm(out.last_hidden_state), self.nsp(out.pooled)
        mlm_loss = nsp_loss = None
        if mlm_labels is not None:
            if mlm_labels.shape != input_ids.shape:
                raise ValueError(
                    f"mlm_labels must have the shape of input_ids {tuple(input_ids.shape)}; "
                    f"got {tuple(mlm_labels.shape)}"
                )
            mlm_loss = F.cross_entropy(mlm_logits.flatten(0, 1), mlm_labels.flatten(), ignore_index=IGNORE_INDEX)
        if nsp_labels is not None:
            nsp_loss = F.cross_entropy(nsp_logits, nsp_labels)
        losses = [l for l in (mlm_loss, nsp_loss) if l is not None]
        return PreTrainingOutput(mlm_logits, nsp_logits, sum(losses) if losses else None, mlm_loss, nsp_loss)


# ---------------------------------- Fine-tuning: one small head per kind of task (paper, figure 4)


def freeze(module: nn.Module, frozen: bool = True) -> nn.Module:
    """Stop (or restart) training `module`'s parameters: requires_grad = not frozen. Returns it."""
    for p in module.parameters():
        p.requires_grad_(not frozen)
    return module


def train_top_layers(model: nn.Module, top_layers: int) -> list[str]:
    """Train only the top `top_layers` encoder layers of `model` (a BertFor… model) and its head:
    the embeddings, the pooler and the lower layers are frozen and their dropout is switched off,
    so they act as a fixed feature extractor. → the names of the parameters left trainable."""
    bert = getattr(model, "bert", None)
    if not isinstance(bert, BertModel) or isinstance(model, BertModel):
        raise TypeError(f"pass a BertFor… model (a BertModel with a head on top); got {type(model).__name__}")
    layers = list(bert.encoder.layers)
    check_int(top_layers, "top_layers", 0, len(layers), fix="the number of top encoder layers to train")
    freeze(model, False)
    frozen = [bert.embeddings] + layers[: len(layers) - top_layers]
    if bert.pooler is not None and getattr(model, "pooling", "pooler") != "pooler":
        frozen.append(bert.pooler)  # a head that reads the mean never uses the pooler
    for part in frozen:
        set_dropout(freeze(part), 0.0)
    return [k for k, p in model.named_parameters() if p.requires_grad]


def set_dropout(module: nn.Module, p: float) -> nn.Module:
    """Set every dropout rate inside `module` to `p`: the nn.Dropout layers and the attention
    weights' dropout. For fine-tuning with dropout a checkpoint pre-trained without it (or the
    reverse). Returns `module`."""
    check_number(p, "p", 0, 1, high_open=True, fix="a dropout rate")
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = float(p)
        elif hasattr(m, "dropout") and isinstance(m.dropout, float):  # attention weights
            m.dropout = float(p)
    return module


def _as_bert(bert, freeze_bert: bool) -> BertModel:
    if isinstance(bert, BertConfig):
        bert = BertModel(bert)
    if not isinstance(bert, BertModel):
        raise TypeError(
            f"pass a BertModel (e.g. load('all-MiniLM-L6-v2').model) or a BertConfig; got {type(bert).__name__}"
        )
    return freeze(bert) if freeze_bert else bert


class BertForSequenceClassification(nn.Module):
    """Classify a sentence or a sentence pair: (B, T) ids → logits (B, n_labels).

    `pooling` says which vector the linear head reads: "pooler" (BERT's recipe: the pooled [CLS],
    tanh(W h_[CLS] + b), trained by next-sentence prediction) or "mean" (the mean of the last
    layer's vectors over the real tokens: what sentence-transformers trains, so the right choice
    for all-MiniLM-L6-v2, whose [CLS] and pooler were never trained to summarise)."""

    def __init__(
        self,
        bert: BertModel | BertConfig,
        n_labels: int,
        dropout: float | None = None,
        freeze_bert: bool = False,
        pooling: str = "pooler",
    ):
        super().__init__()
        check_choice(pooling, "pooling", ("pooler", "mean"), fix="the pooled [CLS], or the mean over real tokens")
        self.bert = _as_bert(bert, freeze_bert)
        if pooling == "pooler" and self.bert.pooler is None:
            raise ValueError(
                "sequence classification with pooling='pooler' reads the pooled [CLS]: "
                "build the BertModel with add_pooler=True, or use pooling='mean'"
            )
        self.pooling = pooling
        self.dropout = nn.Dropout(self.bert.config.dropout if dropout is None else dropout)
        self.classifier = nn.Linear(self.bert.config.d_model, n_labels)
        _init_weights(self.classifier)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.bert(input_ids, token_type_ids, attention_mask)
        if self.pooling == "pooler":
            return self.classifier(self.dropout(out.pooled))
        real = input_ids != self.bert.config.pad_id if attention_mask is None else attention_mask != 0
        real = real.unsqueeze(-1).to(out.last_hidden_state.dtype)  # (B, T, 1)
        mean = (out.last_hidden_state * real).sum(1) / real.sum(1).clamp(min=1)  # (B, D)
        return self.classifier(self.dropout(mean))


class BertForTokenClassification(nn.Module):
    """Tag every token (e.g. named entities): (B, T) ids → logits (B, T, n_labels)."""

    def __init__(
        self, bert: BertModel | BertConfig, n_labels: int, dropout: float | None = None, freeze_bert: bool = False
    ):
        super().__init__()
        self.bert = _as_bert(bert, freeze_bert)
        self.dropout = nn.Dropout(self.bert.config.dropout if dropout is None else dropout)
        self.classifier = nn.Linear(self.bert.config.d_model, n_labels)
        _init_weights(self.classifier)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        hidden = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        return self.classifier(self.dropout(hidden))


class BertForQuestionAnswering(nn.Module):
    """Extractive QA: a learned start vector S and end vector E (rows of `qa`, Linear(D, 2)).

    forward(input_ids, token_type_ids=None, attention_mask=None, span_mask=None) → (start_logits,
    end_logits), each (B, T) = S·h_t (E·h_t), set to -inf at padding and wherever `span_mask`
    (bool (B, T), True where the answer may lie, e.g. the document's tokens) is False.
    """

    def __init__(self, bert: BertModel | BertConfig, freeze_bert: bool = False):
        super().__init__()
        self.bert = _as_bert(bert, freeze_bert)
        self.qa = nn.Linear(self.bert.config.d_model, 2)
        _init_weights(self.qa)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, span_mask=None):
        hidden = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        start, end = self.qa(hidden).unbind(-1)  # 2 × (B, T)
        allowed = input_ids != self.bert.config.pad_id if attention_mask is None else attention_mask != 0
        if span_mask is not None:
            if span_mask.shape != input_ids.shape:
                raise ValueError(
                    f"span_mask must have the shape of input_ids {tuple(input_ids.shape)}; got {tuple(span_mask.shape)}"
                )
            allowed = allowed & span_mask.bool()
        return start.masked_fill(~allowed, float("-inf")), end.masked_fill(~allowed, float("-inf"))


def best_span(start_logits, end_logits, max_answer_len: int = 30, allowed=None):
    """start, end logits (T,) → (s, e, score) maximising start[s] + end[e] over s ≤ e < s + max_answer_len
    with both ends allowed (bool (T,), default all); None when no span qualifies.

    Example:
        >>> best_span(torch.tensor([0., 5., 1.]), torch.tensor([0., 1., 4.]))
        (1, 2, 9.0)
    """
    for name, logits in (("start_logits", start_logits), ("end_logits", end_logits)):
        if not isinstance(logits, torch.Tensor):
            raise TypeError(f"best_span: {name} must be a tensor of scores (T,), got {type(logits).__name__}")
    if start_logits.dim() != 1 or start_logits.shape != end_logits.shape:
        raise ValueError(
            f"best_span takes one example: start and end logits shaped (T,); got "
            f"{tuple(start_logits.shape)} and {tuple(end_logits.shape)}"
        )
    check_int(max_answer_len, "max_answer_len", 1)
    for name, logits in (("start_logits", start_logits), ("end_logits", end_logits)):
        if not logits.is_floating_point():
            raise TypeError(f"best_span: {name} must be float scores, got dtype {logits.dtype}")
        broken = torch.isnan(logits) | torch.isposinf(logits)  # -inf is fine: a position ruled out
        if broken.any():
            kinds = " and ".join(k for k, m in (("NaN", logits.isnan()), ("+inf", logits.isposinf())) if m.any())
            raise ValueError(
                f"best_span: {name} holds {kinds} at positions {broken.nonzero().flatten()[:5].tolist()}: "
                f"the model's output is broken (check its weights and inputs); no span can be chosen"
            )
    T = start_logits.size(0)
    scores = start_logits[:, None].float() + end_logits[None, :].float()  # (T_s, T_e)
    ones = torch.ones(T, T, dtype=torch.bool, device=scores.device)
    valid = ones.triu() & ~ones.triu(max_answer_len)  # s ≤ e ≤ s + len − 1
    if allowed is not None:
        if not isinstance(allowed, torch.Tensor) or allowed.shape != (T,):
            got = tuple(allowed.shape) if isinstance(allowed, torch.Tensor) else type(allowed).__name__
            raise ValueError(f"best_span: allowed must be a bool tensor shaped like the logits ({T},), got {got}")
        if allowed.is_floating_point() or allowed.is_complex() or not bool(((allowed == 0) | (allowed == 1)).all()):
            raise TypeError(
                f"best_span: allowed must be a mask of True/False (or 0/1) per position, got dtype {allowed.dtype} "
                f"with values {allowed.unique()[:5].tolist()}; pass e.g. context_mask.bool()"
            )
        allowed = allowed.bool()
        valid &= allowed[:, None] & allowed[None, :]
    scores = scores.masked_fill(~valid, float("-inf"))
    best = int(scores.argmax())
    score = float(scores.flatten()[best])
    return None if score == float("-inf") else (best // T, best % T, score)


def _require_mlm_head(model, what: str, parts: tuple[str, ...] = ()) -> None:
    """The masked-LM utilities need the MLM head: a BertModel (an encoder alone) has none. Other
    models pass if they have the attributes `parts` that `what` reads (duck typing)."""
    if isinstance(model, BertModel) or not all(hasattr(model, p) for p in parts):
        raise TypeError(
            f"{what} needs a model with an MLM head (a BertForPreTraining); got a {type(model).__name__}. An "
            f"encoder alone, as load('all-MiniLM-L6-v2') gives, cannot score words: use the course BERT "
            f"(checkpoints.load('bert-wikitext2')), or a Hugging Face BertForPreTraining through load_hf_pretraining"
        )


def fill_mask(model: BertForPreTraining, tokenizer, text: str, top_k: int = 5):
    """Predict every ``[MASK]`` in `text` → list of (position, [(token, probability), …] best
    first). `tokenizer` is a :class:`onehot2gpt.subword.WordPieceTokenizer` (or anything with
    its ``encode`` / ``convert_ids_to_tokens``).

    Example:
        >>> from onehot2gpt.checkpoints import load
        >>> model, tokenizer, config, info = load("bert-wikitext2")
        >>> [(position, best)] = fill_mask(model, tokenizer, "he was born in the united [MASK] .", top_k=3)
        >>> position, [token for token, probability in best]
        (7, ['states', 'kingdom', 'nations'])
    """
    _require_mlm_head(model, "fill_mask", ("bert", "mlm"))
    check_text(text, "text", fix="type a sentence with [MASK] where a word is missing, e.g. 'the cat [MASK] .'")
    enc = tokenizer(text)
    ids = enc["input_ids"]
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
    if not positions:
        raise ValueError(
            "no [MASK] in the text: write [MASK] (upper case, in square brackets) where the model should guess a word"
        )
    if len(ids) > model.config.max_len:
        raise ValueError(
            f"the text has {len(ids)} tokens but the model reads at most {model.config.max_len}; shorten it"
        )
    check_int(top_k, "top_k", 1, model.config.vocab_size)
    with evaluating(model):
        out = model.bert(torch.tensor([ids]), torch.tensor([enc["token_type_ids"]]))
        probs = torch.softmax(model.mlm(out.last_hidden_state[0, positions]), dim=-1)  # (n masks, V)
    values, index = probs.topk(top_k)  # (n masks, top_k), best first
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in index.tolist()]
    return [(pos, list(zip(t, p))) for pos, t, p in zip(positions, tokens, values.tolist())]


def pseudo_log_likelihood(model: BertForPreTraining, ids, mask_id: int) -> torch.Tensor:
    """Σ_t log P(x_t | every other token), masking one position at a time with `mask_id` (Salazar
    et al., 2020) for ids (T,) = [CLS] … [SEP]; the special tokens are not scored. A masked LM's nearest thing to
    a sentence probability, but *not* a probability: the terms condition on each other's answers."""
    _require_mlm_head(model, "pseudo_log_likelihood")
    ids = as_ids(ids, model.config.vocab_size, dims=1)
    check_int(mask_id, "mask_id", 0, model.config.vocab_size - 1, fix="pass tokenizer.mask_id")
    if ids.numel() < 3:
        raise ValueError(
            f"need one encoded sentence (T,) with [CLS], at least one token and [SEP]; got shape {tuple(ids.shape)}"
        )
    positions = torch.arange(1, ids.numel() - 1)
    batch = ids.repeat(len(positions), 1)  # one copy per masked position
    batch[torch.arange(len(positions)), positions] = mask_id
    with evaluating(model):
        logits = model(batch).mlm_logits[torch.arange(len(positions)), positions]  # (T − 2, V)
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[positions, None]).sum()


def mlm_continue(model: BertForPreTraining, tokenizer, text: str, n_new: int = 10) -> str:
    """Make a masked LM write: append ``[MASK]`` before the final ``[SEP]``, fill it with the most
    likely token, repeat `n_new` times. BERT was never trained to predict the *last* word with
    nothing after it, which is why this works badly; see notebook 11."""
    _require_mlm_head(model, "mlm_continue")
    check_text(text, "text", fix="the model continues it")
    check_int(n_new, "n_new", 1)
    ids = tokenizer.encode(text)[:-1]  # [CLS] … without the final [SEP]
    if len(ids) + n_new + 2 > model.config.max_len:
        raise ValueError(f"{len(ids)} tokens + {n_new} new ones do not fit the model's {model.config.max_len}")
    start = len(ids)
    with evaluating(model):
        for _ in range(n_new):
            x = torch.tensor([ids + [tokenizer.mask_id, tokenizer.sep_id]])
            ids.append(int(model(x).mlm_logits[0, len(ids)].argmax()))
    return tokenizer.decode(ids[start:])


# ---------------------------------------------------------------------- Saving our own checkpoints

_MODELS = {"BertModel": BertModel, "BertForPreTraining": BertForPreTraining}


def save_bert(
    model: BertModel | BertForPreTraining, directory: str | Path, info: dict | None = None, tokenizer=None
) -> Path:
    """Write a checkpoint folder (:mod:`onehot2gpt.checkpoints`): ``weights.safetensors`` (float32,
    tied weights once), the `tokenizer`'s ``vocab.txt`` if given, and ``config.json`` with the
    config, `info` and the files' sha256."""
    kind = type(model).__name__
    if kind not in _MODELS:
        raise TypeError(
            f"save_bert saves a BertModel or BertForPreTraining; got {kind}. For a "
            f"fine-tuned head, save its .bert and the head's state_dict separately"
        )
    bert = model if isinstance(model, BertModel) else model.bert
    # named_parameters lists a tied tensor once (safetensors refuses shared storage anyway).
    return save_checkpoint(
        directory,
        "bert",
        kind,
        model.config.to_dict(),
        dict(model.named_parameters()),
        tokenizer=tokenizer,
        info=info,
        extra={"pooler": bert.pooler is not None},
    )


def bert_from_checkpoint(record: dict, weights: dict, tokenizer=None) -> BertModel | BertForPreTraining:
    """A BertModel or BertForPreTraining (``record["model"]``) built from a checkpoint's config.json
    `record`, filled with its checked `weights` (what :func:`onehot2gpt.checkpoints.load` calls)."""
    if record.get("model") not in _MODELS:
        raise CheckpointError(
            f"config.json names model {record.get('model')!r}; a BERT checkpoint holds one of {sorted(_MODELS)}"
        )
    config = config_from_record(BertConfig, record)
    if record["model"] == "BertForPreTraining":
        return fill_module(BertForPreTraining(config), weights)
    return fill_module(BertModel(config, add_pooler=record.get("pooler", True)), weights)


def attention_source(model, tokenizer):
    """An attention source for :class:`onehot2gpt.widgets.AttentionExplorer` and
    :func:`onehot2gpt.widgets.bertviz_view`: text → (WordPiece tokens, one (1, H, T, T) map per layer).

    `model` is our BertModel or BertForPreTraining, `tokenizer` a :class:`WordPieceTokenizer`. Two
    sentences separated by " [SEP] " become segments A and B. Unknown words become [UNK], as in BERT.
    """
    bert = model.bert if hasattr(model, "bert") else model

    def source(text: str):
        if not isinstance(text, str) or not text.strip() or not tokenizer.tokenize(text.replace("[SEP]", " ")):
            raise ValueError("the text is empty: type a sentence to see its attention")
        first, _, second = text.partition("[SEP]")
        enc = tokenizer(first, second if second.strip() else None)
        ids = enc["input_ids"]
        if len(ids) > bert.config.max_len:
            raise ValueError(
                f"the text is {len(ids)} tokens long but this BERT reads at most "
                f"{bert.config.max_len} (max_len): shorten the text"
            )
        with evaluating(bert):
            out = bert(torch.tensor([ids]), torch.tensor([enc["token_type_ids"]]), output_attentions=True)
        return tokenizer.convert_ids_to_tokens(ids), out.attentions

    return source
