"""Checks for notebook 08 (BERT fine-tuning)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from .checking import check_function, keeps_rng, rand_int, require_callable, without_grad


def check_first_piece_labels(fn: Callable) -> None:
    """Exercise: (word_index, tags) → one label per token: the word's tag on its first piece, -100 else."""

    def make(gen):
        n_words = rand_int(gen, 1, 6)
        index: list = [None]
        for w in range(n_words):
            index += [w] * rand_int(gen, 1, 4)
        index.append(None)
        if rand_int(gen, 0, 3) == 0:  # padding after [SEP]
            index += [None] * rand_int(gen, 1, 3)
        return index, [rand_int(gen, 0, 17) for _ in range(n_words)]

    check_function(
        fn,
        library_first_piece_labels,
        make,
        name="first_piece_labels",
        trials=30,
        concept="a tag belongs to a word, and a word may be split into several pieces: only the piece that STARTS a "
        "word carries its tag; its later pieces, [CLS], [SEP] and padding get the ignore value -100 so that the loss "
        "skips them",
        hint="token t starts word w when its word index is w (not None) and token t − 1 belongs to another word (or t "
        "is 0): that token gets word w's tag, and every other token ([CLS], [SEP], padding, ## continuation pieces) "
        "gets −100. Return a list",
    )


def check_best_span(fn: Callable) -> None:
    """Exercise: (start_logits (T,), end_logits (T,), max_len) → the (s, e) with the best start + end."""
    from onehot2gpt.bert import best_span

    def make(gen):
        t = rand_int(gen, 1, 12)
        return torch.randn(t, generator=gen), torch.randn(t, generator=gen), rand_int(gen, 1, 5)

    def reference(start_logits, end_logits, max_len):
        return best_span(start_logits, end_logits, max_len)[:2]

    def as_ints(*args):  # accept whole numbers of any kind inside the pair: Python, numpy or 0-d tensor ints
        got = fn(*args)
        try:
            pair = list(got)
        except TypeError:
            return got
        for x in pair:
            whole = isinstance(x, int) or (hasattr(x, "dtype") and "int" in str(x.dtype) and getattr(x, "ndim", 1) == 0)
            if isinstance(x, bool) or not whole:
                raise TypeError(
                    f"returned {got!r}: the start and the end are positions, whole numbers (ints), not "
                    f"{type(x).__name__} {x!r}"
                )
        return tuple(int(x) for x in pair)

    require_callable(fn)
    check_function(
        as_ints,
        reference,
        make,
        name="best_span",
        trials=40,
        concept="an answer span is a start and an end scored together (start score + end score): the end may not come "
        "before the start (a one-token span is fine) and the span may be at most max_len tokens long; the best pair "
        "is not simply the best start with the best end",
        hint="score every pair s ≤ e < s + max_len by the start logit at s plus the end logit at e, and return the "
        "best (s, e) as two ints; a one-token span (s = e) is allowed",
    )


def check_token_f1(fn: Callable) -> None:
    """Exercise: (prediction, gold) strings → SQuAD's token-overlap F1 after normalisation."""
    from onehot2gpt.qa import token_f1

    words = ["the", "a", "an", "Denver", "broncos", "Broncos", "Super", "bowl", "50", "in", "1990"]
    punct = ["", "", ",", ".", "!", "'s"]

    def phrase(gen):
        return " ".join(
            words[rand_int(gen, 0, len(words))] + punct[rand_int(gen, 0, len(punct))]
            for _ in range(rand_int(gen, 0, 6))
        )

    def make(gen):
        return phrase(gen), phrase(gen)

    check_function(
        fn,
        token_f1,
        make,
        name="token_f1",
        trials=40,
        concept="SQuAD's F1 compares bags of words after normalising both answers (case, punctuation and the articles "
        "a/an/the do not count): precision is the share of predicted words that are shared, recall the share of gold "
        "words, a repeated word counts as often as it occurs in both, and no overlap (or an empty answer) scores 0",
        hint="normalise both answers with the given normaliser (lower case, no punctuation, no a/an/the) and split "
        "them into words; shared = Σ_w min(count of w in the prediction, count of w in the gold), P = shared / "
        "predicted words, R = shared / gold words, F1 = 2PR / (P + R), and 0.0 when nothing is shared",
    )


# Exercise 4: the loss of extractive question answering


def _qa_inputs(gen):
    """A small BertForQuestionAnswering (random weights, no dropout) and one encode_squad-like
    batch: [CLS] question [SEP] document [SEP] padding, with gold start and end positions (0 =
    [CLS] for a window without the answer)."""
    from onehot2gpt.bert import BertConfig, BertForQuestionAnswering

    with torch.random.fork_rng():
        torch.manual_seed(rand_int(gen, 0, 10_000))
        model = BertForQuestionAnswering(
            BertConfig(vocab_size=30, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
        ).eval()
        with torch.no_grad():
            model.qa.weight.normal_(0, 1.0)
    B, T = rand_int(gen, 1, 5), rand_int(gen, 8, 14)
    ids = torch.randint(5, 30, (B, T), generator=gen)
    segments, attention, context = (torch.zeros(B, T, dtype=torch.long) for _ in range(3))
    context = context.bool()
    starts, ends = torch.zeros(B, dtype=torch.long), torch.zeros(B, dtype=torch.long)
    for b in range(B):
        q_len, length = rand_int(gen, 1, 3), rand_int(gen, 6, T + 1)  # real tokens: [CLS] … [SEP]
        ids[b, 0], ids[b, q_len + 1], ids[b, length - 1] = 2, 3, 3
        ids[b, length:] = 0
        attention[b, :length] = 1
        segments[b, q_len + 2 : length] = 1
        context[b, q_len + 2 : length - 1] = True
        doc = torch.nonzero(context[b]).squeeze(1)
        if rand_int(gen, 0, 4):  # the answer is in the window
            s = int(doc[rand_int(gen, 0, len(doc))])
            starts[b], ends[b] = s, min(s + rand_int(gen, 0, 3), int(doc[-1]))
    batch = {
        "input_ids": ids,
        "token_type_ids": segments,
        "attention_mask": attention,
        "context_mask": context,
        "start_positions": starts,
        "end_positions": ends,
    }
    return model, batch


def _qa_diagnose(got, expected, model, batch):
    import torch.nn.functional as F

    if not isinstance(got, torch.Tensor) or got.shape != ():
        return "return the loss as one number in a 0-dimensional tensor, averaged over the batch"
    args = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    s_pos, e_pos = batch["start_positions"], batch["end_positions"]
    with torch.no_grad():
        free = model(*args)
        context_only = model(*args, span_mask=batch["context_mask"])
        span = batch["context_mask"].clone()
        span[:, 0] = True
        start, end = model(*args, span_mask=span)

    def close(x):
        return bool(torch.isclose(got.double(), x.double(), rtol=1e-4, atol=1e-5)) or (got.isinf() and x.isinf())

    if not got.isfinite() or close(
        (F.cross_entropy(context_only[0], s_pos) + F.cross_entropy(context_only[1], e_pos)) / 2
    ):
        return (
            "the [CLS] position is not allowed: windows without the answer point at [CLS] (position 0), so it must "
            "stay a possible start and end"
        )
    if close((F.cross_entropy(free[0], s_pos) + F.cross_entropy(free[1], e_pos)) / 2):
        return "the softmax runs over every token, question included; only the document and [CLS] may be picked"
    if close(F.cross_entropy(start, s_pos) + F.cross_entropy(end, e_pos)):
        return "that is the sum of the start and end losses; the paper's loss is their mean"
    if close(F.cross_entropy(start, s_pos)):
        return "only the start is scored; the end position needs its own cross-entropy"
    return None


def check_qa_loss(fn: Callable) -> None:
    """Exercise (assembles the QA loss): (model: BertForQuestionAnswering, batch) → the mean of the
    start and end cross-entropies over the document tokens and [CLS], equal to the library's
    fine-tuning loss (:func:`onehot2gpt.bert_tasks.finetune` with task "qa") with the same weights."""
    from onehot2gpt.bert_tasks import qa_loss

    check_function(
        fn,
        without_grad(qa_loss),
        _qa_inputs,
        name="qa_loss",
        trials=6,
        diagnose=_qa_diagnose,
        concept="the start and the end are two separate choices among the tokens that may hold an answer: the "
        "document's tokens and [CLS] (which stands for 'not in this window'). Each is a softmax over those tokens "
        "only and a cross-entropy against the gold position; the loss is the mean of the two, averaged over the batch",
        hint="the allowed positions are the document's tokens (the batch's context mask) plus position 0, [CLS]; "
        "given them as its span mask the model returns start and end logits (B, T), −∞ where not allowed. Each loss "
        "is the batch mean of −log softmax at the gold position, and the answer is the average of the two",
    )


# Exercise 1: the classification head on [CLS] (and on the mean, for MiniLM)


def _course_encoder():
    from .nb07 import course_bert

    return course_bert().bert


def _sentence_batch(gen: torch.Generator, vocab_size: int, pad_id: int, max_len: int = 24):
    """ids, segments and attention mask (B, T) like encode_sentences/encode_pairs: [CLS] first, a
    padded tail on every row but the first; one batch in two has a second segment."""
    B, T = rand_int(gen, 1, 4), rand_int(gen, 3, max_len + 1)
    ids = torch.randint(5, vocab_size, (B, T), generator=gen)
    ids[:, 0] = 2
    segments, mask = torch.zeros(B, T, dtype=torch.long), torch.zeros(B, T, dtype=torch.long)
    pair = bool(rand_int(gen, 0, 2))
    for b in range(B):
        n = T if b == 0 else rand_int(gen, 2, T + 1)
        mask[b, :n] = 1
        ids[b, n:] = pad_id
        if pair and n > 2:
            segments[b, rand_int(gen, 1, n) : n] = 1
    return ids, segments, mask


@keeps_rng
def check_sequence_classifier(cls) -> None:
    """Exercise: ``MyClassifier`` (a subclass of the library's BertForSequenceClassification, its
    ``__init__`` inherited) whose forward maps (ids, segments, attention mask) → logits (B, n_labels):
    the linear head on the pooled [CLS] (``pooling="pooler"``) or on the mean of the last layer over
    the real tokens (``pooling="mean"``), after dropout. Proven on the course BERT's trained encoder
    with a seeded head, in both poolings."""
    from onehot2gpt.bert import BertForSequenceClassification

    from .checking import close, confine, filled_module, same_shape

    require_callable(cls)
    encoder = _course_encoder().eval()
    c = encoder.config
    models, references, students = {}, {}, {}
    for pooling in ("pooler", "mean"):
        with torch.random.fork_rng():
            torch.manual_seed(len(pooling))
            reference = BertForSequenceClassification(encoder, 3, None, False, pooling).eval()
            with torch.no_grad():
                reference.classifier.weight.normal_(0, 0.5)  # a head that tells the vectors apart
        state = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        models[pooling], references[pooling] = reference, without_grad(reference)
        # confined: held in a dict, it is not rebuilt with the student's function, and its frame would
        # hold this package's globals while the student's class runs
        students[pooling] = confine(
            filled_module(cls, (_course_encoder(), 3, None, False, pooling), state, "MyClassifier")
        )

    def make(gen):
        pooling = ("pooler", "mean")[rand_int(gen, 0, 2)]
        return (*_sentence_batch(gen, c.vocab_size, c.pad_id), pooling)

    def mine(ids, segments, mask, pooling):
        return students[pooling](ids, segments, mask)

    def theirs(ids, segments, mask, pooling):
        return references[pooling](ids, segments, mask)

    @torch.no_grad()
    def diagnose(got, expected, ids, segments, mask, pooling):
        if not same_shape(got, expected):
            return None
        model = models[pooling]
        out = model.bert(ids, segments, mask)
        real = (mask != 0).unsqueeze(-1).float()
        variants = {
            "the head reads h_[CLS] itself; with pooling='pooler' it reads the pooled vector, "
            "tanh(W_p h_[CLS] + b_p) (the output's `pooled`)": model.classifier(out.last_hidden_state[:, 0]),
            "the mean runs over the padding too: average only the real tokens (attention mask 1)": model.classifier(
                out.last_hidden_state.mean(1)
            ),
            "these are probabilities: forward returns the logits, the softmax comes in the loss": expected.softmax(-1),
        }
        if pooling == "pooler":
            variants["this is the mean of the tokens; with pooling='pooler' the head reads the pooled [CLS]"] = (
                model.classifier((out.last_hidden_state * real).sum(1) / real.sum(1))
            )
        else:
            variants["this reads the pooled [CLS]; with pooling='mean' the head reads the mean of the real tokens"] = (
                model.classifier(out.pooled)
            )
        for words, wrong in variants.items():
            if close(got, wrong):
                return words
        return None

    mine.__name__ = "MyClassifier"
    check_function(
        mine,
        theirs,
        make,
        name="sequence_classifier",
        trials=6,
        rtol=1e-4,
        atol=1e-5,
        diagnose=diagnose,
        concept="a sentence classifier is one linear layer on one vector per sentence: BERT's recipe reads the pooled "
        "[CLS] (the pooler's tanh(W_p h_[CLS] + b_p)); sentence-transformers' models read the mean of the last "
        "layer over the real tokens. Dropout comes before the linear layer; the logits go out as they are",
        hint="the encoder returns the last layer's vectors (B, T, D) and the pooled [CLS] vector (B, D): which one "
        "does the pooling setting ask for? For the mean, weight each position by the attention mask as a (B, T, 1) "
        "float, sum over T and divide by the number of real tokens; then dropout, then the linear layer → "
        "(B, n_labels)",
    )


# Exercise 5: the start/end head of extractive question answering


@keeps_rng
def check_qa_head(cls) -> None:
    """Exercise: ``MyQuestionAnswering`` (a subclass of the library's BertForQuestionAnswering, its
    ``__init__`` inherited: ``self.bert`` and ``self.qa``, Linear(D, 2)) whose forward gives
    (start logits, end logits), each (B, T), −∞ at padding and wherever ``span_mask`` is False;
    proven on the shipped, trained checkpoint ``minilm-qa-squad``."""
    from onehot2gpt.checkpoints import load

    from .checking import close, filled_module, same_shape

    require_callable(cls)
    reference = load("minilm-qa-squad").model.eval()
    c = reference.bert.config
    state = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    encoder = copy.deepcopy(reference.bert)  # the student's model gets its own encoder (filled from `state`)
    student = filled_module(cls, (encoder,), state, "MyQuestionAnswering")

    def make(gen):
        ids, segments, mask = _sentence_batch(gen, c.vocab_size, c.pad_id, max_len=20)
        span = None
        if rand_int(gen, 0, 3):  # two trials in three give a span mask: the second segment, say
            span = torch.rand(ids.shape, generator=gen) < 0.6
            span[:, 0] = True
        return ids, segments, mask, span

    def mine(ids, segments, mask, span):
        return student(ids, segments, mask, span)

    def theirs(ids, segments, mask, span):
        with torch.no_grad():
            return reference(ids, segments, mask, span)

    @torch.no_grad()
    def diagnose(got, expected, ids, segments, mask, span):
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return "forward returns two tensors: the start logits and the end logits, each (B, T)"
        if not all(same_shape(g, e) for g, e in zip(got, expected)):
            return None
        start, end = reference.qa(reference.bert(ids, segments, mask).last_hidden_state).unbind(-1)
        real = mask != 0
        allowed = real & span if span is not None else real

        def masked(s, e, keep, fill=float("-inf")):
            return s.masked_fill(~keep, fill), e.masked_fill(~keep, fill)

        def same(pair):
            return all(
                close(g, w) or bool((g.isinf() == w.isinf()).all() and close(g[w.isfinite()], w[w.isfinite()]))
                for g, w in zip(got, pair)
            )

        if same(masked(end, start, allowed)):
            return "start and end are swapped: the first column of self.qa's output scores starts, the second ends"
        if same((start, end)):
            return "nothing is masked: padding (and, with a span mask, the tokens outside it) must get −∞"
        if span is not None and same(masked(start, end, real)):
            return "the span mask is ignored: tokens where span_mask is False must get −∞ too"
        if same(masked(start, end, allowed, 0.0)) or same(masked(start, end, allowed, -1e4)):
            return "masked positions must get −∞ (float('-inf')), so that the softmax gives them probability 0"
        return None

    mine.__name__ = "MyQuestionAnswering"
    check_function(
        mine,
        theirs,
        make,
        name="qa_head",
        trials=5,
        rtol=1e-4,
        atol=1e-4,
        diagnose=diagnose,
        concept="extractive QA adds two vectors to BERT, S and E (the rows of self.qa): a token's start score is "
        "S·h_t, its end score E·h_t, for every token of the last layer; positions that cannot hold the answer "
        "(padding, and wherever the span mask is False) get −∞",
        hint="the linear layer turns the last layer (B, T, D) into (B, T, 2): split its last dimension into start "
        "and end, each (B, T). A position is allowed where the attention mask is not 0 and, when a span mask is "
        "given, where that mask is True; every other position gets minus infinity",
    )


def library_first_piece_labels(word_index, tags):
    """The stand-in for an unsolved exercise 2: the word's tag on its first piece, -100 elsewhere."""
    return [tags[w] if w is not None and (t == 0 or word_index[t - 1] != w) else -100 for t, w in enumerate(word_index)]
