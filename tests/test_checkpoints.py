import json

import pytest

from onehot2gpt import checkpoints


def test_finds_a_checkpoint_by_name(tmp_path, monkeypatch):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps({"dim": 3}))
    (tmp_path / "not-a-checkpoint").mkdir()
    monkeypatch.setenv("ONEHOT2GPT_CHECKPOINTS", str(tmp_path))
    assert checkpoints.list_checkpoints() == ["tiny"]
    assert checkpoints.checkpoint_path("tiny") == tmp_path / "tiny"
    assert checkpoints.checkpoint_config("tiny") == {"dim": 3}


def test_missing_checkpoint_says_what_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("ONEHOT2GPT_CHECKPOINTS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ONEHOT2GPT_CHECKPOINTS"):
        checkpoints.checkpoint_path("gpt-5")


def test_committed_checkpoints_have_configs():
    names = checkpoints.list_checkpoints()
    assert "word2vec-wikitext2" in names
    for name in names:
        assert checkpoints.checkpoint_config(name), f"{name}: empty config.json"
