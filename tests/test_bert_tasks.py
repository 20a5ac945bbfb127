"""Tests for onehot2gpt.bert_tasks: BERT's four fine-tuning formats, SQuAD's metrics, the loop.

Real data (SST-2, UD EWT, SNLI, SQuAD 1.1 dev) comes from the offline mirror and is skipped when
it cannot be had, except under CI=true. Encodings use MiniLM's real BERT vocabulary; the training
smoke tests use a 300-token vocabulary and a 16-wide, one-layer random BERT.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
import torch
from onehot2gpt import bert_tasks, data, qa
from onehot2gpt.bert import (
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from onehot2gpt.bert_tasks import (
    IGNORE_INDEX,
    SNLI_LABELS,
    UPOS_TAGS,
    encode_pairs,
    encode_sentences,
    encode_tagged,
    evaluate,
    finetune,
    select,
    tag_accuracy,
)
from onehot2gpt.subword import WordPieceTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


def _load(reader, *args):
    """Call a data reader; skip the test when the data cannot be had (fail under CI=true)."""
    try:
        return reader(*args)
    except data.DatasetUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"data not available offline: {exc}")


@pytest.fixture(scope="module")
def bert_tok():
    """MiniLM's uncased BERT vocabulary (30,522 tokens), so the pieces are realistic."""
    try:
        from onehot2gpt.pretrained import minilm_path

        return WordPieceTokenizer.load(minilm_path() / "vocab.txt")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"offline MiniLM not installed: {exc}")


@pytest.fixture(scope="module")
def squad():
    return _load(data.read_squad)


@pytest.fixture(scope="module")
def squad_200(squad, bert_tok):
    examples = squad[:200]
    return examples, qa.encode_squad(bert_tok, examples, max_len=192)


# ----------------------------------------------------------------------- SQuAD's metrics


def test_squad_normalize_follows_the_official_steps():
    assert qa.squad_normalize("The Quick, brown FOX!") == "quick brown fox"
    assert qa.squad_normalize("An apple a day") == "apple day"
    assert qa.squad_normalize("  the\ttheater  ") == "theater"  # whole words only
    assert qa.squad_normalize("U.S.-based") == "usbased"  # punctuation vanishes, no space


def test_squad_exact_match_ignores_case_articles_punctuation_and_takes_the_best_gold():
    assert qa.squad_exact_match("Denver Broncos.", ["the denver broncos"]) == 1.0
    assert qa.squad_exact_match("Denver", ["Denver Broncos"]) == 0.0
    assert qa.squad_exact_match("Broncos", ["Denver Broncos", "the Broncos"]) == 1.0
    assert qa.squad_exact_match("The", ["a"]) == 1.0  # both normalise to ""


def test_squad_f1_by_hand():
    # "cat sat on mat" against "cat on mat": 3 shared words, P = 3/4, R = 3/3 → F1 = 6/7.
    assert qa.squad_f1("the cat sat on the mat", ["a cat on a mat"]) == pytest.approx(6 / 7)
    # Repeated words count as often as both sides have them: "x" twice, P = R = 2/3.
    assert qa.squad_f1("x x y", ["x x z"]) == pytest.approx(2 / 3)
    assert qa.squad_f1("dog", ["cat"]) == 0.0
    assert qa.squad_f1("the", ["a"]) == 0.0  # no words left: no overlap
    assert qa.squad_f1("red car", ["car", "blue car", "red car!"]) == 1.0  # the best gold wins
    assert qa.squad_f1("red car", ["car", "blue car"]) == pytest.approx(2 / 3)  # P 1/2, R 1


def test_squad_evaluate_averages_in_percent():
    scores = qa.squad_evaluate(["Denver", "cat"], [["Denver Broncos"], ["cat", "dog"]])
    assert scores["exact_match"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    with pytest.raises(TypeError, match="list"):
        qa.squad_f1("x", "x")


# ------------------------------------------------------------------------- qa.encode_squad


def test_word_spans_cover_the_text_without_whitespace():
    text = "Super Bowl 50 (NFL) was the 2015 season's final—really."
    spans = qa.word_spans(text)
    assert "".join(text[a:b] for a, b in spans) == "".join(text.split())
    assert all(a < b for a, b in spans) and all(b0 <= a1 for (_, b0), (a1, _) in zip(spans, spans[1:]))
    assert [text[a:b] for a, b in spans][3:6] == ["(", "NFL", ")"]


def test_encode_squad_gold_positions_decode_to_the_gold_answer(squad_200, bert_tok):
    examples, f = squad_200
    T = f["input_ids"].size(1)
    assert T <= 192 and f["context_mask"].dtype == torch.bool
    answerable = f["answerable"].tolist()
    assert sum(answerable) >= 150
    equal = identical = 0
    for i, ex in enumerate(examples):
        s, e = int(f["start_positions"][i]), int(f["end_positions"][i])
        if not answerable[i]:
            continue
        assert s <= e and f["context_mask"][i, s] and f["context_mask"][i, e]
        decoded, gold = qa.decode_answer(f, i, s, e), ex["answers"][0]["text"]
        assert qa.squad_normalize(gold) in qa.squad_normalize(decoded)  # at worst widened to whole words
        equal += qa.squad_normalize(decoded) == qa.squad_normalize(gold)
        identical += decoded == gold
    assert equal / sum(answerable) >= 0.95
    assert identical / sum(answerable) >= 0.95  # the very characters, not just normalised


def test_encode_squad_layout_and_segments(squad_200, bert_tok):
    examples, f = squad_200
    for i in (0, 57, 199):
        ids = f["input_ids"][i][f["attention_mask"][i] == 1].tolist()
        q = bert_tok.convert_tokens_to_ids(bert_tok.tokenize(examples[i]["question"]))
        assert ids[: len(q) + 2] == [bert_tok.cls_id] + q + [bert_tok.sep_id]
        assert ids[-1] == bert_tok.sep_id and ids.count(bert_tok.sep_id) == 2
        context = f["context_mask"][i].nonzero().flatten().tolist()
        assert context == list(range(len(q) + 2, len(ids) - 1))  # exactly between the [SEP]s
        types = f["token_type_ids"][i][: len(ids)].tolist()
        assert types == [0] * (len(q) + 2) + [1] * (len(ids) - len(q) - 2)
        # The context tokens are the context's own tokens, in order (a prefix when cut).
        full = bert_tok.convert_tokens_to_ids(bert_tok.tokenize(examples[i]["context"]))
        assert ids[len(q) + 2 : -1] == full[: len(context)]


def test_encode_squad_marks_answers_cut_off_by_truncation(squad, bert_tok):
    examples = squad[:200]
    f = qa.encode_squad(bert_tok, examples, max_len=64, max_question_len=16)
    assert f["input_ids"].size(1) <= 64
    cut = ~f["answerable"]
    assert 0 < int(cut.sum()) < len(examples)
    assert (f["start_positions"][cut] == 0).all() and (f["end_positions"][cut] == 0).all()
    for i in cut.nonzero().flatten().tolist():
        last_char = max(b for o in f["offsets"][i] if o is not None for b in o[1:])
        a = examples[i]["answers"][0]
        assert a["answer_start"] + len(a["text"]) > last_char  # the answer ends beyond the window
        assert qa.decode_answer(f, i, 0, 0) == ""  # [CLS] decodes to no text
    kept = select(f, f["answerable"])
    assert len(kept["id"]) == kept["input_ids"].size(0) == int(f["answerable"].sum())
    assert kept["context_mask"][torch.arange(len(kept["id"])), kept["end_positions"]].all()


def test_question_is_cut_to_max_question_len(bert_tok):
    ex = {"question": "why " * 50, "context": "Because it rains.", "answers": [{"text": "it rains", "answer_start": 8}]}
    f = qa.encode_squad(bert_tok, [ex], max_len=40, max_question_len=10)
    assert f["input_ids"].size(1) == 1 + 10 + 1 + 4 + 1
    assert qa.decode_answer(f, 0, int(f["start_positions"][0]), int(f["end_positions"][0])) == "it rains"


def test_answers_map_to_whole_words_and_punctuation_marks(bert_tok):
    context = "In the 1990s, the (NFL) grew: Mötley Crüe's fans cheered."
    cases = [
        ("1990", "1990s"),  # starts inside a word: widened to the word
        ("NFL", "NFL"),  # brackets are words of their own
        ("the (NFL) grew", "the (NFL) grew"),
        ("Mötley Crüe", "Mötley Crüe"),  # accents are stripped in tokens, kept in the text
        ("rüe", "Crüe"),
    ]
    examples = [
        {"question": "What?", "context": context, "answers": [{"text": a, "answer_start": context.index(a)}]}
        for a, _ in cases
    ]
    f = qa.encode_squad(bert_tok, examples)
    for i, (_, want) in enumerate(cases):
        assert qa.decode_answer(f, i, int(f["start_positions"][i]), int(f["end_positions"][i])) == want


def test_predict_spans_stays_in_the_context_and_under_the_length_limit():
    start = torch.tensor([[9.0, 0, 3, 1, 0, 0], [0, 0, 0, 5, 0, 0]])
    end = torch.tensor([[9.0, 0, 1, 2, 0, 4], [0, 0, 0, 0, 1, 5]])  # [CLS] (9 + 9) is not context
    context = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    assert qa.predict_spans(start, end, context, max_answer_len=30) == [(2, 5), (3, 5)]
    assert qa.predict_spans(start, end, context, max_answer_len=2) == [(2, 3), (3, 4)]


# ------------------------------------------------------------- the null span: "no answer"


def test_null_margins_compare_the_best_span_with_the_cls_span():
    start = torch.tensor([[1.0, 0, 3, 1, 0], [6.0, 0, 1, 0, 0]])
    end = torch.tensor([[1.0, 0, 1, 2, -1], [6.0, 0, 0, 1, 0]])
    context = torch.tensor([[0, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)
    spans, margins = qa.null_margins(start, end, context)
    assert spans == qa.predict_spans(start, end, context) == [(2, 3), (2, 3)]
    torch.testing.assert_close(margins, torch.tensor([5.0 - 2.0, 2.0 - 12.0]))
    assert qa.abstains(margins, 0.0).tolist() == [False, True]
    assert qa.abstains(margins, 3.0).tolist() == [True, True]  # a tie goes to the null


def test_null_margins_refuse_nan_and_a_masked_cls():
    context = torch.tensor([[0, 1, 1]], dtype=torch.bool)
    good = torch.tensor([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="NaN"):
        qa.null_margins(torch.tensor([[0.0, float("nan"), 1.0]]), good, context)
    with pytest.raises(ValueError, match="NaN"):
        qa.null_margins(good, torch.tensor([[float("nan"), 0.0, 1.0]]), context)
    with pytest.raises(ValueError, match=r"span_mask\[:, 0\] = True"):
        qa.null_margins(torch.tensor([[float("-inf"), 1.0, 2.0]]), good, context)
    with pytest.raises(ValueError, match="same \\(B, T\\) shape"):
        qa.null_margins(good, good[:, :2], context)


def test_best_span_and_predict_spans_refuse_nan_logits():
    from onehot2gpt.bert import best_span

    with pytest.raises(ValueError, match="start_logits holds NaN at positions \\[1\\]"):
        best_span(torch.tensor([0.0, float("nan")]), torch.zeros(2))
    with pytest.raises(ValueError, match="end_logits holds NaN"):
        qa.predict_spans(torch.zeros(1, 3), torch.full((1, 3), float("nan")), torch.ones(1, 3, dtype=torch.bool))


@pytest.mark.parametrize(
    "bad, error",
    [(float("nan"), ValueError), (float("inf"), ValueError), ("1", TypeError), (None, TypeError), (True, TypeError)],
)
def test_a_bad_threshold_is_refused(bad, error):
    with pytest.raises(error, match=r"null_threshold(=\S+)? must be a (finite )?number.*score margin"):
        qa.abstains(torch.tensor([1.0]), bad)


def test_unanswerable_pairs_take_a_paragraph_of_another_article_without_the_answer(squad, bert_tok):
    titles = list(dict.fromkeys(ex["title"] for ex in squad))[:6]
    rows = [ex for t in titles for ex in [e for e in squad if e["title"] == t][:40]]
    pairs = qa.unanswerable_pairs(rows, seed=0)
    paragraphs = {}
    for ex in squad:
        paragraphs.setdefault(ex["context"], ex["title"])
    assert len(pairs) == len(rows)
    for ex, pair in zip(rows, pairs):
        assert pair["question"] == ex["question"] and pair["answers"] == []
        assert paragraphs[pair["context"]] != ex["title"]
        assert not any(
            f" {qa.squad_normalize(a['text'])} " in f" {qa.squad_normalize(pair['context'])} " for a in ex["answers"]
        )
    assert qa.unanswerable_pairs(rows, seed=0) == pairs
    assert [p["context"] for p in qa.unanswerable_pairs(rows, seed=1)] != [p["context"] for p in pairs]
    features = qa.encode_squad(bert_tok, pairs[:3])
    assert not features["answerable"].any() and (features["start_positions"] == 0).all()
    with pytest.raises(ValueError, match="at least two articles"):
        qa.unanswerable_pairs([ex for ex in squad if ex["title"] == squad[0]["title"]])


def test_split_by_article_is_disjoint_and_deterministic(squad):
    train, test = qa.split_by_article(squad, test_fraction=0.3, seed=0)
    titles = {ex["title"] for ex in squad}
    train_titles, test_titles = {ex["title"] for ex in train}, {ex["title"] for ex in test}
    assert not train_titles & test_titles and train_titles | test_titles == titles
    assert len(train) + len(test) == len(squad)
    assert abs(len(test_titles) - 0.3 * len(titles)) <= 1
    assert qa.split_by_article(squad, 0.3, seed=0) == (train, test)
    assert {ex["title"] for ex in qa.split_by_article(squad, 0.3, seed=1)[1]} != test_titles
    assert [ex["id"] for ex in test] == [ex["id"] for ex in squad if ex["title"] in test_titles]


# ------------------------------------------------------------------------------ tagging


def test_upos_tags_are_the_tags_of_ud_ewt():
    sentences = _load(data.read_ud_pos, "dev")
    assert set(UPOS_TAGS) == {t for _, tags in sentences for t in tags}
    assert len(UPOS_TAGS) == 17


@pytest.mark.parametrize("max_len", [512, 24])
def test_encode_tagged_labels_first_pieces_of_kept_words(bert_tok, max_len):
    sentences = _load(data.read_ud_pos, "dev")[:300]
    words = [w for w, _ in sentences]
    tags = [t for _, t in sentences]
    enc = encode_tagged(bert_tok, words, tags, max_len=max_len)
    assert enc["input_ids"].size(1) <= max_len
    truncated = 0
    for i, (ws, ts) in enumerate(sentences):
        index = enc["word_index"][i].tolist()
        labels = enc["labels"][i].tolist()
        kept = sorted({w for w in index if w >= 0})
        assert kept == list(range(len(kept)))  # a prefix of the words
        labelled = [t for t, y in enumerate(labels) if y != IGNORE_INDEX]
        assert len(labelled) == len(kept)
        assert labelled == [t for t in range(len(index)) if index[t] >= 0 and index[t] != index[t - 1]]
        assert [labels[t] for t in labelled] == [UPOS_TAGS.index(ts[index[t]]) for t in labelled]
        truncated += len(kept) < len(ws)
    if max_len == 512:
        assert truncated == 0
    else:
        assert truncated > 0


def test_tag_accuracy_counts_labelled_tokens_only():
    labels = torch.tensor([[IGNORE_INDEX, 1, IGNORE_INDEX, 0], [2, IGNORE_INDEX, IGNORE_INDEX, 1]])
    logits = torch.zeros(2, 4, 3)
    logits[0, 1, 1] = logits[0, 3, 2] = logits[1, 0, 2] = logits[1, 3, 1] = 1.0  # 3 of 4 right
    logits[0, 0, 0] = logits[0, 2, 0] = 5.0  # ignored tokens
    assert tag_accuracy(logits, labels) == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="-100"):
        tag_accuracy(logits, torch.full((2, 4), IGNORE_INDEX))


def test_encode_tagged_rejects_unknown_tags(bert_tok):
    with pytest.raises(ValueError, match="tag_vocab"):
        encode_tagged(bert_tok, [["Hello"]], [["GREETING"]])


# --------------------------------------------------------------------- pairs and SNLI


def test_read_snli_skips_no_consensus_pairs():
    pairs = _load(data.read_snli, "dev")
    with open(data.fetch("snli", "snli_1.0_dev.jsonl"), encoding="utf-8") as fh:
        golds = [json.loads(line)["gold_label"] for line in fh if line.strip()]
    assert len(golds) == 10_000
    assert len(pairs) == sum(g != "-" for g in golds) == 9_842  # Bowman et al. (2015), table
    counts = Counter(label for _, _, label in pairs)
    assert set(counts) == set(SNLI_LABELS)
    assert all(0.30 < c / len(pairs) < 0.37 for c in counts.values())
    assert all(p and h for p, h, _ in pairs)


def test_encode_pairs_segments_and_labels(bert_tok):
    enc = encode_pairs(
        bert_tok,
        ["A man plays a guitar.", "Two dogs run."],
        ["A person makes music.", "Cats sleep."],
        ["entailment", "contradiction"],
    )
    assert enc["labels"].tolist() == [SNLI_LABELS.index("entailment"), SNLI_LABELS.index("contradiction")]
    for ids, types, mask in zip(
        enc["input_ids"].tolist(), enc["token_type_ids"].tolist(), enc["attention_mask"].tolist()
    ):
        n = sum(mask)
        first_sep = ids.index(bert_tok.sep_id)
        assert ids[0] == bert_tok.cls_id and ids[n - 1] == bert_tok.sep_id
        assert types[:n] == [0] * (first_sep + 1) + [1] * (n - first_sep - 1)
        assert ids[n:] == [bert_tok.pad_id] * (len(ids) - n)


def test_encode_pairs_truncates_the_longer_sentence_first(bert_tok):
    premise = "the " * 100 + "end"
    enc = encode_pairs(bert_tok, [premise], ["a short one"], max_len=20)
    ids = enc["input_ids"][0].tolist()
    assert len(ids) == 20
    assert ids[-4:] == bert_tok.convert_tokens_to_ids(["a", "short", "one", "[SEP]"])


def test_encode_sentences_shapes_and_truncation(bert_tok):
    enc = encode_sentences(bert_tok, ["a fine film", "dull " * 200], [1, 0], max_len=32)
    assert enc["input_ids"].shape == (2, 32) and enc["labels"].tolist() == [1, 0]
    assert enc["attention_mask"][0].sum() == len(bert_tok.tokenize("a fine film")) + 2
    with pytest.raises(ValueError, match="one label per text"):
        encode_sentences(bert_tok, ["x"], [0, 1])


# ------------------------------------------------------------- fine-tuning smoke tests


@pytest.fixture(scope="module")
def tiny_tok():
    texts = [s for s, _ in _load(data.read_sst2, "train")[:400]]
    return WordPieceTokenizer.train(texts, vocab_size=300)


def tiny_bert(tok) -> BertModel:
    torch.manual_seed(0)
    return BertModel(
        BertConfig(vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=64, dropout=0.0)
    )


def _overfits(losses: list[float], steps: int) -> None:
    assert len(losses) == steps and all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5


def test_finetune_sequence_classification_overfits(tiny_tok):
    rows = _load(data.read_sst2, "dev")[:8]
    enc = encode_sentences(tiny_tok, [s for s, _ in rows], [y for _, y in rows], max_len=64)
    model = BertForSequenceClassification(tiny_bert(tiny_tok), n_labels=2)
    losses = finetune(model, enc, task="sequence", epochs=60, batch_size=8, lr=3e-3, progress=False)
    _overfits(losses, 60)
    result = evaluate(model, enc, "sequence", batch_size=3)
    assert result["predictions"].shape == (8,) and 0 <= result["accuracy"] <= 1
    with torch.no_grad():  # per-batch trimming of padding changes nothing
        full = model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]).argmax(-1)
    assert torch.equal(result["predictions"], full)


def test_finetune_sentence_pairs_overfits(tiny_tok):
    pairs = _load(data.read_snli, "dev")[:8]
    enc = encode_pairs(
        tiny_tok, [p for p, _, _ in pairs], [h for _, h, _ in pairs], [y for _, _, y in pairs], max_len=64
    )
    model = BertForSequenceClassification(tiny_bert(tiny_tok), n_labels=len(SNLI_LABELS))
    losses = finetune(model, enc, task="sequence", epochs=100, batch_size=8, lr=3e-3, progress=False)
    _overfits(losses, 100)


def test_finetune_tagging_overfits(tiny_tok):
    sentences = [s for s in _load(data.read_ud_pos, "dev") if len(s[0]) <= 12][:8]
    enc = encode_tagged(tiny_tok, [w for w, _ in sentences], [t for _, t in sentences], max_len=64)
    model = BertForTokenClassification(tiny_bert(tiny_tok), n_labels=len(UPOS_TAGS))
    losses = finetune(model, enc, task="token", epochs=60, batch_size=8, lr=3e-3, progress=False)
    _overfits(losses, 60)
    result = evaluate(model, enc, "token", batch_size=3)
    with torch.no_grad():
        logits = model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
    assert result["accuracy"] == pytest.approx(tag_accuracy(logits, enc["labels"]))
    assert (
        result["predictions"][enc["labels"] != IGNORE_INDEX] == logits.argmax(-1)[enc["labels"] != IGNORE_INDEX]
    ).all()


def test_finetune_question_answering_overfits(tiny_tok, squad):
    f = qa.encode_squad(tiny_tok, squad[:200], max_len=64, max_question_len=16)
    cut = select(f, (~f["answerable"]).nonzero().flatten()[:4])
    f = select(f, f["answerable"].nonzero().flatten()[:8])
    assert len(f["id"]) == 8 and len(cut["id"]) == 4
    model = BertForQuestionAnswering(tiny_bert(tiny_tok))
    losses = finetune(model, f, task="qa", epochs=60, batch_size=8, lr=3e-3, progress=False)
    _overfits(losses, 60)
    result = evaluate(model, f, "qa", batch_size=3)
    assert result["start_logits"].shape == f["input_ids"].shape
    assert len(result["predictions"]) == 8 and 0 <= result["exact_match"] <= result["f1"] <= 100
    for (s, e), row in zip(result["spans"], f["context_mask"]):
        assert s <= e and row[s] and row[e]
    # Answers cut off by truncation point at [CLS], which the loss must allow.
    assert (cut["start_positions"] == 0).all()
    mixed = {
        k: torch.cat([f[k], cut[k]])
        for k in ("input_ids", "token_type_ids", "attention_mask", "context_mask", "start_positions", "end_positions")
    }
    losses = finetune(model, mixed, task="qa", epochs=2, batch_size=12, progress=False)
    assert all(torch.isfinite(torch.tensor(losses)))


def test_finetune_group_by_length_trims_the_padding_and_still_learns(tiny_tok, monkeypatch):
    rows = _load(data.read_sst2, "dev")[:96]
    enc = encode_sentences(tiny_tok, [s for s, _ in rows], [y for _, y in rows], max_len=64)
    widths = []
    forward = bert_tasks._forward

    def recording(model, batch, task):
        widths.append(batch["input_ids"].shape)
        return forward(model, batch, task)

    monkeypatch.setattr(bert_tasks, "_forward", recording)
    tokens = {}
    for grouped in (False, True):
        widths.clear()
        model = BertForSequenceClassification(tiny_bert(tiny_tok), n_labels=2)
        losses = finetune(
            model, enc, task="sequence", epochs=30, batch_size=8, lr=3e-3, progress=False, group_by_length=grouped
        )
        assert len(losses) == 30 * 12 and len(widths) == 30 * 12
        tokens[grouped] = sum(b * t for b, t in widths)
        assert sum(losses[-12:]) < 0.7 * sum(losses[:12]), f"group_by_length={grouped} did not learn"
    assert tokens[True] < 0.8 * tokens[False]


def test_finetune_respects_max_steps_and_frozen_encoder(tiny_tok):
    enc = encode_sentences(tiny_tok, ["a fine film", "dull", "great fun", "bad"], [1, 0, 1, 0])
    model = BertForSequenceClassification(tiny_bert(tiny_tok), n_labels=2, freeze_bert=True)
    before = {k: v.clone() for k, v in model.bert.state_dict().items()}
    head = model.classifier.weight.clone()
    losses = finetune(model, enc, task="sequence", epochs=10, batch_size=2, max_steps=7, progress=False)
    assert len(losses) == 7
    assert all(torch.equal(before[k], v) for k, v in model.bert.state_dict().items())
    assert not torch.equal(head, model.classifier.weight)
    with pytest.raises(ValueError, match="task='ner' must be one of 'sequence', 'token', 'qa'"):
        finetune(model, enc, task="ner")
    with pytest.raises(KeyError, match="labels"):
        finetune(model, encode_sentences(tiny_tok, ["x"]), task="sequence")


def test_qa_loss_is_the_mean_of_start_and_end_cross_entropies_over_context_and_cls():
    from onehot2gpt.bert_tasks import qa_loss

    torch.manual_seed(0)
    model = BertForQuestionAnswering(
        BertConfig(vocab_size=30, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=16, dropout=0.0)
    ).eval()
    ids = torch.randint(5, 30, (2, 10))
    ids[:, 0], ids[:, 3], ids[:, 9] = 2, 3, 3
    context = torch.zeros(2, 10, dtype=torch.bool)
    context[:, 4:9] = True
    batch = {
        "input_ids": ids,
        "token_type_ids": context.long(),
        "attention_mask": torch.ones(2, 10, dtype=torch.long),
        "context_mask": context,
        "start_positions": torch.tensor([5, 0]),
        "end_positions": torch.tensor([6, 0]),
    }
    hidden = model.bert(ids, batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
    scores = hidden @ model.qa.weight.T + model.qa.bias  # (B, T, 2)
    allowed = [0, 4, 5, 6, 7, 8]  # [CLS] and the context
    expected = 0.0
    for b, (s, e) in enumerate([(5, 6), (0, 0)]):
        for k, gold in ((0, s), (1, e)):
            log_p = scores[b, allowed, k].log_softmax(-1)
            expected = expected - log_p[allowed.index(gold)] / 4  # mean over 2 rows and 2 ends
    torch.testing.assert_close(qa_loss(model, batch), expected)
    assert torch.equal(batch["context_mask"], context)  # the batch is not changed


def test_encode_squad_refuses_an_answer_that_is_not_at_answer_start(bert_tok):
    example = {
        "id": "q7",
        "question": "Who won?",
        "context": "The Denver Broncos won Super Bowl 50.",
        "answers": [{"text": "Denver Broncos", "answer_start": 4}],
    }
    assert qa.encode_squad(bert_tok, [example])["answerable"].tolist() == [True]
    moved = {**example, "answers": [{"text": "Denver Broncos", "answer_start": 8}]}
    with pytest.raises(
        ValueError,
        match=r"question 'q7'.*'Denver Broncos' should start at character 8.*"
        r"'er Broncos won' stands there.*occur at character 4",
    ):
        qa.encode_squad(bert_tok, [moved])
    missing = {**example, "answers": [{"text": "Carolina Panthers", "answer_start": 4}]}
    with pytest.raises(ValueError, match="does not occur in the context"):
        qa.encode_squad(bert_tok, [missing])
