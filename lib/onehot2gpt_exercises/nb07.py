"""Checks for notebook 07 (BERT pre-training)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, first_match, keeps_rng, rand_int

_LETTERS = "abcdefgh"


def check_wordpiece(fn: Callable) -> None:
    """Exercise: (word, vocab: set of pieces) → greedy longest-match-first pieces, ["[UNK]"] if stuck."""

    def make(gen):
        pieces = {"[UNK]"}
        for _ in range(rand_int(gen, 3, 15)):
            length = rand_int(gen, 1, 4)
            piece = "".join(_LETTERS[rand_int(gen, 0, 4)] for _ in range(length))
            pieces.add(piece if rand_int(gen, 0, 2) else "##" + piece)
        word = "".join(_LETTERS[rand_int(gen, 0, 4)] for _ in range(rand_int(gen, 1, 8)))
        return word, pieces

    check_function(
        fn,
        library_wordpiece,
        make,
        name="wordpiece",
        trials=30,
        concept="WordPiece is greedy longest-match-first: at each position it takes the longest piece the vocabulary "
        "holds (a piece inside a word carries the '##' mark), moves past it and repeats; a word that cannot be "
        "covered completely becomes the single unknown token, not a partial split",
        hint="from the current position, try the longest remaining piece first and shorten it until the vocabulary "
        "holds it (with the ## mark unless it starts the word), then continue right after it; if no piece fits at "
        "some position, the whole word becomes the single token [UNK]",
    )


def check_segment_ids(fn: Callable) -> None:
    """Exercise: tokens of "[CLS] A [SEP]" or "[CLS] A [SEP] B [SEP]" → segment ids (0 for A's part)."""

    def make(gen):
        tokens = ["[CLS]"] + ["a"] * rand_int(gen, 0, 5) + ["[SEP]"]
        if rand_int(gen, 0, 3):
            tokens += ["b"] * rand_int(gen, 0, 5) + ["[SEP]"]
        return (tokens,)

    check_function(
        fn,
        library_segment_ids,
        make,
        name="segment_ids",
        trials=12,
        concept="segment A is [CLS], the first sentence and the [SEP] that closes it; segment B is everything after "
        "that first [SEP] (the second sentence and its own [SEP]); a single sentence is all segment A. One id per "
        "token",
        hint="everything up to and including the FIRST [SEP] is segment 0 ([CLS] too); everything after it (sentence "
        "B and its [SEP]) is segment 1. Return a list",
    )


def _masking_diagnose(got, expected, ids, chosen, action, random_ids, mask_id):
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return "return a pair (inputs, labels)"
    inputs, labels = got
    if isinstance(labels, torch.Tensor) and labels.shape == ids.shape and torch.equal(labels, expected[1]):
        if isinstance(inputs, torch.Tensor) and inputs.shape == ids.shape:
            if torch.equal(inputs[~chosen], ids[~chosen]) and torch.equal(
                inputs[chosen], torch.full_like(ids, mask_id)[chosen]
            ):
                return "every chosen token became [MASK]: the 10% random and 10% unchanged are missing"
            if not torch.equal(inputs[~chosen], ids[~chosen]):
                return "positions that were not chosen changed"
        return None
    if isinstance(labels, torch.Tensor) and labels.shape == ids.shape and torch.equal(labels[chosen], inputs[chosen]):
        return "the labels hold the corrupted inputs; they must hold the original tokens"
    return None


def check_apply_masking(fn: Callable) -> None:
    """Exercise: (ids, chosen, action, random_ids, mask_id) → (inputs, labels) by the 80/10/10 rule."""

    def make(gen):
        b, t = rand_int(gen, 1, 4), rand_int(gen, 2, 10)
        ids = torch.randint(5, 50, (b, t), generator=gen)
        chosen = torch.rand(b, t, generator=gen) < 0.4
        return (ids, chosen, torch.rand(b, t, generator=gen), torch.randint(5, 50, (b, t), generator=gen), 4)

    from onehot2gpt.bert_pretraining import apply_masking

    check_function(
        fn,
        apply_masking,
        make,
        name="apply_masking",
        diagnose=_masking_diagnose,
        concept="only the chosen positions change, and each chosen position does exactly one of three things (80% "
        "[MASK], 10% a random token, 10% left as it was); the labels keep the ORIGINAL token where the model must "
        "predict and the ignore value -100 everywhere else; the input ids stay untouched",
        hint="at chosen positions: an action below 0.8 puts mask_id, from 0.8 up to (not including) 0.9 the id from "
        "random_ids, otherwise the token stays. The labels hold the ORIGINAL id at chosen positions and -100 "
        "everywhere else; work on a copy, so that ids itself is not changed",
    )


# Exercise 4: the masked-LM loss on the chosen positions, with the output layer tied to the input


def _mlm_inputs(gen):
    """hidden (B, T, D), labels (B, T) with -100 where nothing is predicted, and the MLM head's
    weights: dense (Linear D→D), norm (LayerNorm D), the token embedding (V, D), the bias (V,)."""
    from torch import nn

    B, T, D, V = rand_int(gen, 1, 4), rand_int(gen, 2, 9), 2 * rand_int(gen, 3, 9), rand_int(gen, 10, 40)
    hidden = torch.randn(B, T, D, generator=gen)
    labels = torch.randint(0, V, (B, T), generator=gen)
    chosen = torch.rand(B, T, generator=gen) < 0.3
    chosen[rand_int(gen, 0, B), rand_int(gen, 0, T)] = True  # at least one position
    labels = labels.masked_fill(~chosen, -100)
    dense, norm = nn.Linear(D, D), nn.LayerNorm(D)
    with torch.no_grad():
        dense.weight.copy_(torch.randn(D, D, generator=gen) / D**0.5)
        dense.bias.copy_(torch.randn(D, generator=gen))
        norm.weight.copy_(1 + 0.3 * torch.randn(D, generator=gen))
        norm.bias.copy_(0.3 * torch.randn(D, generator=gen))
    embedding, bias = torch.randn(V, D, generator=gen), torch.randn(V, generator=gen)
    return hidden, labels, dense, norm, embedding, bias


def _mlm_reference(hidden, labels, dense, norm, embedding, bias):
    """The library's BertMLMHead with these weights, run on the chosen positions only (as in
    :func:`onehot2gpt.bert_pretraining.pretraining_loss`)."""
    import torch.nn.functional as F
    from onehot2gpt.bert import BertConfig, BertMLMHead

    V, D = embedding.shape
    config = BertConfig(vocab_size=V, d_model=D, n_heads=1, eps=norm.eps)
    tok_emb = torch.nn.Embedding(V, D)
    head = BertMLMHead(config, tok_emb)
    with torch.no_grad():
        tok_emb.weight.copy_(embedding)
        head.dense.load_state_dict(dense.state_dict())
        head.norm.load_state_dict(norm.state_dict())
        head.decoder.bias.copy_(bias)
    chosen = labels != -100
    with torch.no_grad():
        return F.cross_entropy(head(hidden[chosen]), labels[chosen])


def _mlm_diagnose(got, expected, hidden, labels, dense, norm, embedding, bias):
    import torch.nn.functional as F

    if not isinstance(got, torch.Tensor) or got.shape != ():
        return "return the loss as one number in a 0-dimensional tensor (the mean over the chosen positions)"
    chosen = labels != -100
    h, y = hidden[chosen], labels[chosen]
    skipped = "the transform (dense, GELU, LayerNorm) is skipped: the hidden states go straight to the output layer"
    with torch.no_grad():
        variants = {
            "the output layer's bias is missing": norm(F.gelu(dense(h))) @ embedding.T,
            "the GELU between the dense layer and the LayerNorm is missing": norm(dense(h)) @ embedding.T + bias,
            "the LayerNorm after the GELU is missing": F.gelu(dense(h)) @ embedding.T + bias,
            skipped: h @ embedding.T + bias,
        }
        losses = {problem: F.cross_entropy(logits, y) for problem, logits in variants.items()}
        right = norm(F.gelu(dense(h))) @ embedding.T + bias
        losses["that is the sum over the chosen positions; the loss is their mean"] = F.cross_entropy(
            right, y, reduction="sum"
        )
        return first_match(got, losses)


def check_mlm_loss(fn: Callable) -> None:
    """Exercise (assembles the MLM head and its loss): (hidden (B, T, D), labels (B, T) with -100,
    dense, norm, embedding (V, D), bias (V,)) → the mean cross-entropy over the chosen positions,
    equal to the library's BertMLMHead with the same weights."""
    check_function(
        fn,
        _mlm_reference,
        _mlm_inputs,
        name="mlm_loss",
        trials=8,
        diagnose=_mlm_diagnose,
        concept="the masked-LM loss is a cross-entropy at the chosen positions only (label ≠ -100), averaged over "
        "them; at each, the hidden vector goes through the head's transform (dense, then GELU, then LayerNorm) and is "
        "scored against EVERY token's input embedding (the output layer is the embedding matrix, tied) plus one bias "
        "per token",
        hint="keep only the N positions whose label is not −100: their vectors (N, D) go through dense, GELU and "
        "LayerNorm, are scored against every row of the embedding (V, D) plus the bias, giving logits (N, V), and the "
        "loss is the mean cross-entropy against their labels",
    )


# Exercise 5: the whole BERT (MyBert), built on the student's encoder block of notebook 06

_LIBRARY_TO_MINE = {  # the notebook's key map: the library's parameter names → MyBert's
    "bert.embeddings.tok_emb": "tok_emb",
    "bert.embeddings.seg_emb": "seg_emb",
    "bert.embeddings.pos_emb": "pos_emb",
    "bert.embeddings.norm": "emb_norm",
    "bert.encoder.layers": "blocks",
    "bert.pooler": "pooler",
    "nsp": "nsp",
    "mlm.dense": "mlm_dense",
    "mlm.norm": "mlm_norm",
    "mlm.decoder.bias": "mlm_bias",
}


def course_bert():
    """The course checkpoint ``bert-wikitext2``'s library BertForPreTraining, in eval mode."""
    from onehot2gpt.checkpoints import load

    return load("bert-wikitext2").model.eval()


def mine_from_library(model) -> dict:
    """A library BertForPreTraining's weights under MyBert's names (the tied decoder weight left out)."""
    state = {}
    for key, tensor in model.state_dict().items():
        if key == "mlm.decoder.weight":
            continue
        prefix = next(p for p in _LIBRARY_TO_MINE if key == p or key.startswith(p + "."))
        state[_LIBRARY_TO_MINE[prefix] + key[len(prefix) :]] = tensor.detach().clone()
    return state


@torch.no_grad()
def _bert_variant(
    model,
    ids,
    segments,
    attention_mask,
    *,
    segment=True,
    position=True,
    emb_norm=True,
    use_mask=True,
    tanh=True,
    pooler=True,
    transform=True,
    bias=True,
):
    """The course BERT's (MLM logits, NSP logits) with one step switchable to a typical mistake."""
    import torch.nn.functional as F

    e = model.bert.embeddings
    x = e.tok_emb(ids)
    if segment:
        x = x + e.seg_emb(torch.zeros_like(segments) if segment == "A" else segments)
    if position:
        x = x + e.pos_emb(torch.arange(ids.size(1)))
    if emb_norm:
        x = e.norm(x)
    keep = (attention_mask != 0)[:, None, None, :] if use_mask else None
    for layer in model.bert.encoder.layers:
        x = layer(x, keep)[0]
    cls = x[:, 0]
    pooled = (torch.tanh(model.bert.pooler(cls)) if tanh else model.bert.pooler(cls)) if pooler else cls
    h = model.mlm.norm(F.gelu(model.mlm.dense(x))) if transform else x
    mlm = h @ e.tok_emb.weight.T + (model.mlm.decoder.bias if bias else 0)
    return mlm, model.nsp(pooled)


def _pair_batch(gen: torch.Generator, config):
    """A batch as the pre-training batches are: [CLS] A [SEP] B [SEP] then padding; segment 0 up to
    the first [SEP], 1 after it; the attention mask 1 on real tokens. Random ordinary ids."""
    B, T = rand_int(gen, 1, 4), rand_int(gen, 4, min(config.max_len, 40) + 1)
    ids = torch.randint(5, config.vocab_size, (B, T), generator=gen)
    segments = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        n = T if b == 0 else rand_int(gen, 3, T + 1)  # the first row fills the window, the others may be padded
        split = rand_int(gen, 1, n - 1)
        mask[b, :n] = 1
        segments[b, split + 1 : n] = 1
        ids[b, n:] = config.pad_id
    return ids, segments, mask


@keeps_rng
def check_bert_model(cls) -> None:
    """Exercise: ``MyBert(config, encoder_block)`` (``__init__`` given) whose ``encode`` builds the
    input sum and runs the block function it is given (the library's here; in the notebook the
    student's of 06) over every layer, whose ``mlm_logits`` reads
    the hidden states with the tied token embeddings, and whose forward gives (MLM logits (B, T, V),
    NSP logits (B, 2)), proven equal to the library's BERT holding the course checkpoint
    ``bert-wikitext2`` on sentence-pair batches with padding."""
    from .checking import close, filled_module, require_callable, same_shape

    require_callable(cls)
    bert = course_bert()
    c = bert.config

    def reference(ids, segments, mask):
        with torch.no_grad():
            out = bert(ids, segments, mask)
        return out.mlm_logits, out.nsp_logits

    def diagnose(got, expected, ids, segments, mask):
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return "forward returns two things: the MLM logits (B, T, V) and the NSP logits (B, 2)"
        if isinstance(got[0], torch.Tensor) and got[0].dim() == 3 and got[0].shape[-1] == c.d_model != c.vocab_size:
            return (
                f"the MLM output has d_model = {c.d_model} columns, not one per token ({c.vocab_size}): the output "
                "layer is tied, so score each vector against every token's input embedding (the V × D matrix)"
            )
        if not all(same_shape(g, e) for g, e in zip(got, expected)):
            return None
        padded = bool((mask == 0).any())
        for change, words in (
            (dict(segment=False), "the segment embedding is missing from the input sum (token + segment + position)"),
            (dict(segment="A"), "every token got segment A's embedding: look the segment ids up in seg_emb"),
            (dict(position=False), "the position embedding is missing from the input sum (token + segment + position)"),
            (dict(emb_norm=False), "the input sum is not normalised: LayerNorm (emb_norm) comes right after the sum"),
            (dict(use_mask=False), "padding is attended to: the attention mask must reach every block"),
            (dict(tanh=False), "the pooler has no tanh: pooled = tanh(W_p h_[CLS] + b_p)"),
            (dict(pooler=False), "NSP reads h_[CLS] directly; it reads the pooler's output, tanh(W_p h_[CLS] + b_p)"),
            (dict(transform=False), "the MLM head skips its transform (dense, GELU, LayerNorm) before the tied output"),
            (dict(bias=False), "the MLM logits have no bias: add mlm_bias, one number per token"),
        ):
            if change.get("use_mask") is False and not padded:
                continue
            wrong = _bert_variant(bert, ids, segments, mask, **change)
            if all(close(g, w, 1e-3, 1e-3) for g, w in zip(got, wrong)):
                return words
        return None

    from .checking import confine
    from .nb06 import library_encoder_block

    # The block MyBert is given, confined: the module function's globals would lead the student's
    # code to the checking helpers.
    block = confine(library_encoder_block)
    check_function(
        filled_module(cls, (c, block), mine_from_library(bert), "MyBert"),
        reference,
        lambda gen: _pair_batch(gen, c),
        name="bert_model",
        trials=4,
        rtol=1e-3,
        atol=1e-4,
        diagnose=diagnose,
        concept="BERT in four parts: the input is LayerNorm(token + segment + position embeddings); the encoder is "
        "your post-norm block of notebook 06 (GELU, BERT's epsilon) once per layer, every one masking the padding; "
        "the pooler is tanh of a linear map of the [CLS] vector and NSP reads it; the MLM head transforms each "
        "vector and scores it against every token's input embedding (tied), plus a bias per token",
        hint="shapes to reach: ids, segments, mask (B, T) → x (B, T, D) → keep (B, 1, 1, T) → each block (B, T, D) "
        "→ pooled (B, D) from position 0 → NSP (B, 2); MLM: (B, T, D) → transform (B, T, D) → times the (V, D) "
        "token embedding matrix transposed → (B, T, V). Which of the given modules holds each step?",
    )


class LibraryBert(torch.nn.Module):
    """The course BERT with MyBert's interface and parameter names, for the cells after an
    unsolved check: ``encode`` (ids, segments, attention mask → hidden (B, T, D), pooled (B, D)),
    ``mlm_logits`` (hidden → (B, T, V)) and forward (→ MLM logits, NSP logits), computed by the
    library's modules."""

    def __init__(self, config, encoder_block=None):  # MyBert's encoder_block: unused, the library's blocks run
        from onehot2gpt.transformer import EncoderBlock
        from torch import nn

        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.seg_emb = nn.Embedding(c.type_vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.emb_norm, self.emb_dropout = nn.LayerNorm(c.d_model, eps=c.eps), nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, activation="gelu", eps=c.eps)
            for _ in range(c.n_layers)
        )
        self.pooler, self.nsp = nn.Linear(c.d_model, c.d_model), nn.Linear(c.d_model, 2)
        self.mlm_dense, self.mlm_norm = nn.Linear(c.d_model, c.d_model), nn.LayerNorm(c.d_model, eps=c.eps)
        self.mlm_bias = nn.Parameter(torch.zeros(c.vocab_size))

    def encode(self, ids, segments, attention_mask):
        x = self.tok_emb(ids) + self.seg_emb(segments) + self.pos_emb(torch.arange(ids.size(1)))
        x = self.emb_dropout(self.emb_norm(x))
        keep = (attention_mask != 0)[:, None, None, :]
        for block in self.blocks:
            x = block(x, keep)[0]
        return x, torch.tanh(self.pooler(x[:, 0]))

    def mlm_logits(self, hidden):
        import torch.nn.functional as F

        return self.mlm_norm(F.gelu(self.mlm_dense(hidden))) @ self.tok_emb.weight.T + self.mlm_bias

    def forward(self, ids, segments, attention_mask):
        hidden, pooled = self.encode(ids, segments, attention_mask)
        return self.mlm_logits(hidden), self.nsp(pooled)


def library_wordpiece(word, vocab):
    """The stand-in for an unsolved exercise 1: the library's WordPiece split of `word` with the
    pieces `vocab` (a set), as the check's reference."""
    from onehot2gpt.subword import WordPieceTokenizer

    return WordPieceTokenizer(sorted(vocab)).wordpiece(word)


def library_segment_ids(tokens):
    """The stand-in for an unsolved exercise 2: segment 0 up to and including the first [SEP], 1 after."""
    first = tokens.index("[SEP]")
    return [0] * (first + 1) + [1] * (len(tokens) - first - 1)
