"""Checks for notebook 08 (BERT fine-tuning)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .checking import check_function, rand_int, require_callable, without_grad


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

    def reference(word_index, tags):
        labels = []
        for t, w in enumerate(word_index):
            first = w is not None and (t == 0 or word_index[t - 1] != w)
            labels.append(tags[w] if first else -100)
        return labels

    check_function(
        fn,
        reference,
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

    def as_ints(*args):  # accept tensors or numpy ints inside the pair
        got = fn(*args)
        try:
            return tuple(int(x) for x in got)
        except (TypeError, ValueError):
            return got

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
