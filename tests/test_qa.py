"""Extractive QA on the real pretrained encoder: the shipped MiniLM QA checkpoint, its recipe,
answer_question and the QA widget."""

import functools
import inspect
import json
import shutil

import pytest
import torch

from onehot2gpt import bert_tasks
from onehot2gpt.bert import BertForQuestionAnswering, BertForSequenceClassification
from onehot2gpt.checkpoints import CheckpointError, checkpoint_path, config_sha256, sha256_file
from onehot2gpt.pretrained import (QA_CHECKPOINT, minilm_bert, minilm_path, minilm_qa, qa_trainable,
                                   save_minilm_qa)
from onehot2gpt.recipes import RECIPES, minilm_qa_recipe
from onehot2gpt.subword import WordPieceTokenizer
from onehot2gpt.widgets import PRECIPITATION, QuestionAnswerer


@pytest.fixture(scope="module")
def qa_model():
    return minilm_qa()


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
    defaults = {k: p.default for k, p in inspect.signature(minilm_qa_recipe).parameters.items()
                if k in info["arguments"]}
    assert defaults == info["arguments"], "change the recipe's defaults and the checkpoint together"
    assert info["command"] == "python -m onehot2gpt.recipes minilm-qa" and "minilm-qa" in RECIPES


def test_shipped_model_answers_the_precipitation_questions(qa_model):
    model, tok = qa_model
    answers = {q: bert_tasks.answer_question(model, tok, PRECIPITATION, q)["answer"].lower() for q in
               ("What causes precipitation to fall?", "Where do water droplets collide with ice crystals "
                                                      "to form precipitation?")}
    assert "gravity" in answers["What causes precipitation to fall?"], answers
    assert "cloud" in answers["Where do water droplets collide with ice crystals to form precipitation?"], answers


def test_loading_on_other_base_weights_is_refused(tmp_path, qa_model):
    copy = tmp_path / "qa"
    shutil.copytree(checkpoint_path(QA_CHECKPOINT), copy)
    record = json.loads((copy / "config.json").read_text())
    record["config"]["base_sha256"] = "0" * 64
    record["config_sha256"] = config_sha256(record["config"])
    (copy / "config.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="different all-MiniLM-L6-v2 weights"):
        minilm_qa(copy)


def test_a_corrupt_weights_file_is_refused(tmp_path):
    copy = tmp_path / "qa"
    shutil.copytree(checkpoint_path(QA_CHECKPOINT), copy)
    (copy / "weights.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="sha256"):
        minilm_qa(copy)


def test_save_and_load_round_trip_in_float16(tmp_path, tok):
    torch.manual_seed(0)
    model = BertForQuestionAnswering(minilm_bert()[0])
    names = qa_trainable(model, 1)
    assert all(k.startswith(("bert.encoder.layers.5.", "qa.")) for k in names)
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    save_minilm_qa(model, tmp_path / "qa", 1, tok)
    loaded, loaded_tok = minilm_qa(tmp_path / "qa")
    assert len(loaded_tok) == len(tok)
    torch.testing.assert_close(loaded.qa.weight, model.qa.weight.half().float())
    torch.testing.assert_close(loaded.bert.encoder.layers[0].ff.linear1.weight,
                               model.bert.encoder.layers[0].ff.linear1.weight)


@pytest.mark.parametrize("top", [-1, 7, 2.0, True])
def test_qa_trainable_rejects_a_bad_layer_count(top):
    model = BertForQuestionAnswering(minilm_bert()[0])
    with pytest.raises(ValueError, match="top_layers must be a whole number from 0 to 6"):
        qa_trainable(model, top)


# --------------------------------------------------------------------- answer_question

def test_answer_is_the_passage_own_text_with_word_positions(qa_model):
    model, tok = qa_model
    r = bert_tasks.answer_question(model, tok, PRECIPITATION, "What causes precipitation to fall?")
    a, b = r["char_span"]
    assert r["answer"] == PRECIPITATION[a:b]
    words = PRECIPITATION.split()
    assert " ".join(words[r["words"][0] - 1:r["words"][1]]).strip('.,"') == r["answer"].strip('.,"')
    assert len(r["tokens"]) == len(r["p_start"]) == len(r["p_end"])
    assert abs(sum(r["p_start"]) - 1) < 1e-4 and abs(sum(r["p_end"]) - 1) < 1e-4
    assert 0 <= r["start"] <= r["end"] < len(r["tokens"])
    assert r["p_start"][r["start"]] == pytest.approx(max(r["p_start"]), abs=0.5)


@pytest.mark.parametrize("passage, question, message", [
    ("", "Why?", "passage is empty"),
    (PRECIPITATION, "   ", "question is empty"),
    ("word " * 600, "Why?", "paste only the paragraph"),
    (PRECIPITATION, "why " * 80, "shorten the question"),
])
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
    assert w.result is not None and "gravity" in w.result["answer"].lower()
    assert "<mark" in w.output.value and "P(start)" in w.output.value and w.status.value == ""


def test_widget_never_shows_an_answer_for_other_text(qa_model):
    model, tok = qa_model
    w = QuestionAnswerer(functools.partial(bert_tasks.answer_question, model, tok))
    w.passage.value = "The Eiffel Tower is in Paris. It was finished in 1889."
    assert w.result is None and w.output.value == "" and "Answer" in w.status.value
    w.question.value = "When was the tower finished?"
    assert "1889" in w.result["answer"]
    w.question.value = ""                               # a bad input clears the old answer
    assert w.result is None and w.output.value == "" and "question is empty" in w.status.value
    w.question.value = "Where is the tower?"
    assert "Paris" in w.result["answer"] and w.status.value == ""


def test_widget_survives_an_exception_in_the_model():
    def broken(passage, question):
        raise RuntimeError("boom")
    w = QuestionAnswerer(broken)
    assert w.result is None and "boom" in w.status.value


# --------------------------------------------------------------------- mean pooling

def test_mean_pooling_reads_the_mean_of_real_tokens():
    bert = minilm_bert()[0]
    head = BertForSequenceClassification(bert, 2, pooling="mean").eval()
    ids = torch.tensor([[101, 2023, 2003, 102, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        h = bert(ids, torch.zeros_like(ids), mask).last_hidden_state[0, :4].mean(0)
        torch.testing.assert_close(head(ids, torch.zeros_like(ids), mask)[0],
                                   h @ head.classifier.weight.T + head.classifier.bias)


def test_unknown_pooling_is_refused():
    with pytest.raises(ValueError, match='pooling must be "pooler"'):
        BertForSequenceClassification(minilm_bert()[0], 2, pooling="max")
