"""Extractive QA on the real pretrained encoder: the shipped MiniLM QA checkpoint, its recipe,
answer_question and the QA widget."""

import functools
import inspect
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt import bert_tasks
from onehot2gpt.bert import BertForQuestionAnswering, BertForSequenceClassification
from onehot2gpt.checkpoints import CheckpointError, checkpoint_path, config_sha256, load
from onehot2gpt.pretrained import QA_CHECKPOINT, minilm_bert, minilm_path, qa_null_threshold
from onehot2gpt.subword import WordPieceTokenizer
from onehot2gpt.widgets import PRECIPITATION, QuestionAnswerer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _qa import choose_null_threshold, minilm_qa_recipe, qa_split, qa_trainable, save_minilm_qa  # noqa: E402  (recipes/_qa.py: the QA recipe's run)


@pytest.fixture(scope="module")
def qa_model():
    return load(QA_CHECKPOINT)[:2]


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer.load(minilm_path() / "vocab.txt")


# --------------------------------------------------------------------- the shipped checkpoint


def test_shipped_checkpoint_is_small_and_holds_only_the_trained_layers():
    folder = checkpoint_path(QA_CHECKPOINT)
    size = sum(p.stat().st_size for p in folder.iterdir())
    assert size <= 15_000_000, f"the QA checkpoint is {size:,} bytes; the course ships at most 15 MB"
    record = json.loads((folder / "config.json").read_text())
    assert record["dtype"] == "float16"
    from safetensors import safe_open

    with safe_open(str(folder / "weights.safetensors"), "pt") as f:
        names = list(f.keys())
    n = record["config"]["n_layers"]
    trained = {f"bert.encoder.layers.{i}." for i in range(n - record["config"]["top_layers"], n)}
    assert names and all(k.startswith(tuple(trained) + ("qa.",)) for k in names), names[:5]
    assert not any(k.startswith("bert.embeddings") for k in names)


def test_recipe_defaults_are_what_built_the_shipped_checkpoint():
    info = json.loads((checkpoint_path(QA_CHECKPOINT) / "config.json").read_text())["info"]
    defaults = {
        k: p.default for k, p in inspect.signature(minilm_qa_recipe).parameters.items() if k in info["arguments"]
    }
    assert defaults == info["arguments"], "change the recipe's defaults and the checkpoint together"
    assert info["command"] in ("python -m onehot2gpt.recipes minilm-qa", "python recipes/minilm-qa-squad.py")


def test_shipped_model_answers_the_precipitation_questions(qa_model):
    model, tok = qa_model
    answers = {
        q: bert_tasks.answer_question(model, tok, PRECIPITATION, q)["answer"].lower()
        for q in (
            "Under what force does precipitation fall?",
            "Where do water droplets collide with ice crystals to form precipitation?",
        )
    }
    assert "gravity" in answers["Under what force does precipitation fall?"], answers
    assert "cloud" in answers["Where do water droplets collide with ice crystals to form precipitation?"], answers


def test_loading_on_other_base_weights_is_refused(tmp_path, qa_model):
    copy = tmp_path / "qa"
    shutil.copytree(checkpoint_path(QA_CHECKPOINT), copy)
    record = json.loads((copy / "config.json").read_text())
    record["config"]["base_sha256"] = "0" * 64
    record["config_sha256"] = config_sha256(record["config"])
    (copy / "config.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="different all-MiniLM-L6-v2 weights"):
        load(copy)


def test_a_corrupt_weights_file_is_refused(tmp_path):
    copy = tmp_path / "qa"
    shutil.copytree(checkpoint_path(QA_CHECKPOINT), copy)
    (copy / "weights.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="sha256"):
        load(copy)


def test_save_and_load_round_trip_in_float16(tmp_path, tok):
    torch.manual_seed(0)
    model = BertForQuestionAnswering(minilm_bert()[0])
    names = qa_trainable(model, 1)
    assert all(k.startswith(("bert.encoder.layers.5.", "qa.")) for k in names)
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    save_minilm_qa(model, tmp_path / "qa", 1, tok)
    loaded, loaded_tok, _, _ = load(tmp_path / "qa", kind="minilm-qa")
    assert len(loaded_tok) == len(tok)
    torch.testing.assert_close(loaded.qa.weight, model.qa.weight.half().float())
    torch.testing.assert_close(
        loaded.bert.encoder.layers[0].ff.linear1.weight, model.bert.encoder.layers[0].ff.linear1.weight
    )


@pytest.mark.parametrize("top", [-1, 7, 2.0, True])
def test_qa_trainable_rejects_a_bad_layer_count(top):
    model = BertForQuestionAnswering(minilm_bert()[0])
    with pytest.raises(ValueError, match="top_layers must be a whole number from 0 to 6"):
        qa_trainable(model, top)


# --------------------------------------------------------------------- the null threshold (the recipe's)


def test_choose_null_threshold_separates_what_can_be_separated():
    answerable, unanswerable = torch.tensor([4.0, 6.0, 9.0]), torch.tensor([-3.0, 0.0, 2.0])
    t = choose_null_threshold(answerable, unanswerable)
    assert 2.0 < t < 4.0
    assert bert_tasks.null_accuracy(answerable, unanswerable, t) == {"answered": 1.0, "abstained": 1.0, "balanced": 1.0}
    # Overlapping margins: the best threshold still beats "always answer" and "never answer".
    g = torch.Generator().manual_seed(0)
    a, u = torch.randn(200, generator=g) + 2, torch.randn(300, generator=g)
    best = bert_tasks.null_accuracy(a, u, choose_null_threshold(a, u))["balanced"]
    for t in (-100.0, 100.0, 0.0, 2.0):
        assert best >= bert_tasks.null_accuracy(a, u, t)["balanced"]
    assert best > 0.75


def test_choose_null_threshold_refuses_empty_or_broken_margins():
    with pytest.raises(ValueError, match="both kinds"):
        choose_null_threshold(torch.tensor([]), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="NaN or inf"):
        choose_null_threshold(torch.tensor([float("nan")]), torch.tensor([1.0]))


# --------------------------------------------------------------------- answer_question


def test_answer_is_the_passage_own_text_with_word_positions(qa_model):
    model, tok = qa_model
    r = bert_tasks.answer_question(model, tok, PRECIPITATION, "What causes precipitation to fall?")
    a, b = r["char_span"]
    assert r["answer"] == PRECIPITATION[a:b]
    words = PRECIPITATION.split()
    assert " ".join(words[r["words"][0] - 1 : r["words"][1]]).strip('.,"') == r["answer"].strip('.,"')
    assert len(r["tokens"]) == len(r["p_start"]) == len(r["p_end"])
    assert abs(sum(r["p_start"]) - 1) < 1e-4 and abs(sum(r["p_end"]) - 1) < 1e-4
    assert 0 <= r["start"] <= r["end"] < len(r["tokens"])
    assert r["p_start"][r["start"]] == pytest.approx(max(r["p_start"]), abs=0.5)


@pytest.mark.parametrize(
    "passage, question, message",
    [
        ("", "Why?", "context is empty"),
        (PRECIPITATION, "   ", "question is empty"),
        ("word " * 600, "Why?", "paste only the paragraph"),
        (PRECIPITATION, "why " * 80, "shorten the question"),
    ],
)
def test_answer_question_refuses_bad_input(qa_model, passage, question, message):
    model, tok = qa_model
    with pytest.raises(ValueError, match=message):
        bert_tasks.answer_question(model, tok, passage, question)


def test_answer_question_refuses_a_non_string(qa_model):
    model, tok = qa_model
    with pytest.raises(TypeError, match="question must be a str"):
        bert_tasks.answer_question(model, tok, PRECIPITATION, 42)


# --------------------------------------------------------------------- the widget


def test_widget_answers_on_start_and_shows_the_span(qa_model):
    model, tok = qa_model
    w = QuestionAnswerer(functools.partial(bert_tasks.answer_question, model, tok))
    assert w.result is not None and "within a cloud" in w.result["answer"].lower()  # the default question
    assert "<mark" in w.output.value and "P(start)" in w.output.value and w.status.value == ""


def test_widget_never_shows_an_answer_for_other_text(qa_model):
    model, tok = qa_model
    w = QuestionAnswerer(functools.partial(bert_tasks.answer_question, model, tok))
    w.passage.value = "The Eiffel Tower is in Paris. It was finished in 1889."
    assert w.result is None and w.output.value == "" and "Answer" in w.status.value
    w.question.value = "When was the tower finished?"
    assert "1889" in w.result["answer"]
    w.question.value = ""  # a bad input clears the old answer
    assert w.result is None and w.output.value == "" and "question is empty" in w.status.value
    w.question.value = "Where is the tower?"
    assert "Paris" in w.result["answer"] and w.status.value == ""


def test_widget_survives_an_exception_in_the_model():
    def broken(passage, question):
        raise RuntimeError("boom")

    w = QuestionAnswerer(broken)
    assert w.result is None and "boom" in w.status.value


# --------------------------------------------------------------------- "no answer in this passage"

BEES = (
    "Honeybees live in colonies of up to 60,000 workers and a single queen. The workers collect nectar "
    "from flowers and turn it into honey, which the colony eats during the winter."
)


def test_shipped_checkpoint_records_a_threshold_chosen_on_held_out_articles():
    info = json.loads((checkpoint_path(QA_CHECKPOINT) / "config.json").read_text())["info"]
    null = info["null"]
    assert qa_null_threshold() == null["threshold"]
    assert null["tune_articles"] and null["report_articles"]
    assert not set(null["tune_articles"]) & set(null["report_articles"]), "tune and report on other articles"
    train_titles = {e["title"] for e in qa_split(info["arguments"]["test_fraction"], info["arguments"]["seed"])[0]}
    assert not train_titles & (set(null["tune_articles"]) | set(null["report_articles"]))
    assert null["report"]["balanced"] > 0.8


def test_the_null_span_separates_held_out_questions(qa_model):
    """Questions of the report articles, asked of their own paragraph and of another article's."""
    model, tok = qa_model
    null = load(QA_CHECKPOINT).info["null"]
    rows = [e for e in qa_split()[1] if e["title"] in null["report_articles"]]
    rows = rows[:: len(rows) // 16][:16]
    margins = {}
    for kind, examples in (("answerable", rows), ("unanswerable", bert_tasks.unanswerable_pairs(rows, seed=7))):
        f = bert_tasks.encode_squad(tok, examples, max_len=256)
        if kind == "answerable":
            f = bert_tasks.select(f, f["answerable"])
        r = bert_tasks.evaluate(model, f, "qa")
        margins[kind] = bert_tasks.null_margins(r["start_logits"], r["end_logits"], f["context_mask"])[1]
    scores = bert_tasks.null_accuracy(margins["answerable"], margins["unanswerable"], qa_null_threshold())
    assert scores["balanced"] >= 0.75, scores


@pytest.mark.parametrize(
    "passage, question, answer",
    [
        (PRECIPITATION, "Under what force does precipitation fall?", "gravity"),
        (BEES, "How many workers can a colony have?", "60,000"),
        (BEES, "Who won the football World Cup in 1998?", None),
        (PRECIPITATION, "Who painted the Mona Lisa?", None),
        ("The Eiffel Tower is in Paris. It was finished in 1889.", "When was the tower finished?", "1889"),
    ],
)
def test_answer_question_answers_or_declines(qa_model, passage, question, answer):
    model, tok = qa_model
    r = bert_tasks.answer_question(model, tok, passage, question, null_threshold=qa_null_threshold())
    if answer is None:
        assert r["no_answer"] and r["answer"] == "" and r["margin"] <= r["null_threshold"], r["best_span"]
    else:
        assert not r["no_answer"] and answer in r["answer"] and r["margin"] > r["null_threshold"]
    assert r["best_span"] == passage[r["char_span"][0] : r["char_span"][1]]
    assert r["score"] == pytest.approx(r["null_score"] + r["margin"], abs=1e-4)


def test_without_a_threshold_the_model_always_answers(qa_model):
    model, tok = qa_model
    r = bert_tasks.answer_question(model, tok, BEES, "Who won the football World Cup in 1998?", null_threshold=None)
    assert not r["no_answer"] and r["answer"] == r["best_span"] != ""


@pytest.mark.parametrize(
    "bad, error", [(float("nan"), ValueError), (float("inf"), ValueError), ("0.5", TypeError), (True, TypeError)]
)
def test_answer_question_refuses_a_bad_threshold(qa_model, bad, error):
    model, tok = qa_model
    with pytest.raises(error, match=r"null_threshold(=\S+)? must be a (finite )?number.*score margin"):
        bert_tasks.answer_question(model, tok, BEES, "Why?", null_threshold=bad)


def test_answer_question_refuses_nan_scores(tok):
    class Broken(torch.nn.Module):  # a model whose weights went NaN
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, token_type_ids=None, attention_mask=None, span_mask=None):
            nan = torch.full(input_ids.shape, float("nan"))
            return nan, nan

    with pytest.raises(ValueError, match="start_logits holds NaN"):
        bert_tasks.answer_question(Broken(), tok, BEES, "What do the workers collect?")


def test_widget_says_no_answer_in_this_passage_when_the_null_wins(qa_model):
    model, tok = qa_model
    w = QuestionAnswerer(functools.partial(bert_tasks.answer_question, model, tok, null_threshold=qa_null_threshold()))
    assert not w.result["no_answer"] and "within a cloud" in w.result["answer"]  # the default is answered
    assert "no answer" not in w.output.value
    w.passage.value = BEES
    w.question.value = "Who won the football World Cup in 1998?"
    assert w.result["no_answer"] and "no answer in this passage" in w.output.value and w.status.value == ""
    w.question.value = "How many workers can a colony have?"
    assert not w.result["no_answer"] and "60,000" in w.result["answer"]
    assert "no answer in this passage" not in w.output.value and "60,000" in w.output.value


def test_a_checkpoint_without_a_threshold_says_how_to_get_one(tmp_path):
    copy = tmp_path / "qa"
    shutil.copytree(checkpoint_path(QA_CHECKPOINT), copy)
    record = json.loads((copy / "config.json").read_text())
    del record["info"]["null"]
    (copy / "config.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="records no null threshold"):
        qa_null_threshold(copy)


# --------------------------------------------------------------------- mean pooling


def test_mean_pooling_reads_the_mean_of_real_tokens():
    bert = minilm_bert()[0]
    head = BertForSequenceClassification(bert, 2, pooling="mean").eval()
    ids = torch.tensor([[101, 2023, 2003, 102, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        h = bert(ids, torch.zeros_like(ids), mask).last_hidden_state[0, :4].mean(0)
        torch.testing.assert_close(
            head(ids, torch.zeros_like(ids), mask)[0], h @ head.classifier.weight.T + head.classifier.bias
        )


def test_unknown_pooling_is_refused():
    with pytest.raises(ValueError, match="pooling='max' must be one of 'pooler', 'mean'"):
        BertForSequenceClassification(minilm_bert()[0], 2, pooling="max")
