"""recipes/: one script per committed checkpoint, each the command that rebuilt it.

Every script answers --help and --dry-run, refuses an --out it must not write, and holds the
settings the committed checkpoint records; one runs end to end on a tiny setting."""

import json
import re
import runpy
import sys
from pathlib import Path

import pytest
import test_checkpoints
import torch
from onehot2gpt.checkpoints import CheckpointError, checkpoint_path, list_checkpoints, load
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
sys.path.insert(0, str(RECIPES))

# the committed checkpoints (and results) → the script that builds them
BUILDS = {
    "bert-wikitext2": "bert-wikitext2.py",
    "bilm-wikitext2": "bilm-wikitext2.py",
    "glove-wikitext2": "glove-wikitext2.py",
    "gpt-char-shakespeare": "gpt-char-shakespeare.py",
    "gpt-char-shakespeare-large": "gpt-char-shakespeare-large.py",
    "gpt-wikitext2": "gpt-wikitext2.py",
    "minilm-qa-squad": "minilm-qa-squad.py",
    "word2vec-wikitext2": "word2vec-wikitext2.py",
    "zero-shot-qa000": "zero-shot-qa.py",
    "zero-shot-qa005": "zero-shot-qa.py",
    "zero-shot-qa020": "zero-shot-qa.py",
    "zero-shot-qa100": "zero-shot-qa.py",
    "ulmfit-ablation.json": "ulmfit-ablation.py",
}
SCRIPTS = sorted(set(BUILDS.values()))


def run(script: str, *argv: str, monkeypatch=None):
    """Run recipes/`script` in this process with `argv` → its SystemExit code (0 if it returned).
    sys.argv and sys.excepthook (a recipe sets its Ctrl-C handler there) are given back."""
    saved, hook = sys.argv, sys.excepthook
    sys.argv = [str(RECIPES / script), *argv]
    try:
        runpy.run_path(str(RECIPES / script), run_name="__main__")
    except SystemExit as e:
        return e.code
    finally:
        sys.argv, sys.excepthook = saved, hook
    return 0


def settings(script: str) -> dict:
    """The upper-case constants at the top of a recipe: its settings."""
    namespace = runpy.run_path(str(RECIPES / script), run_name="recipe")
    return {k: v for k, v in namespace.items() if k.isupper() and not k.startswith("_")}


def test_every_script_in_recipes_builds_something_and_every_checkpoint_has_one():
    assert sorted(p.name for p in RECIPES.glob("[!_]*.py")) == sorted([*SCRIPTS, "checkpoints.py"])
    assert set(list_checkpoints()) == {k for k in BUILDS if not k.endswith(".json")}


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_names_out_and_the_settings(script, capsys):
    assert run(script, "--help") == 0
    out = capsys.readouterr().out
    assert "--out" in out and "--dry-run" in out and "--set NAME=VALUE" in out
    for name in settings(script):
        assert f"{name}=" in out.replace("\n", " ")


@pytest.mark.parametrize("script", SCRIPTS)
def test_dry_run_prints_the_settings_and_writes_nothing(script, tmp_path, capsys):
    out = tmp_path / "new"
    assert run(script, "--out", str(out), "--dry-run", "--set", f"{next(iter(settings(script)))}=None") != 0
    capsys.readouterr()
    assert run(script, "--out", str(out), "--dry-run") == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == json.loads(json.dumps(settings(script))) and not out.exists()


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_out_is_refused_with_a_clear_error(script, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "config.json").write_text("{}")
    (tmp_path / "file").write_text("x")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for out, says in (
            (tmp_path / "full", "is not empty"),
            (tmp_path / "file", "is a file"),
            *([] if _root() else [(locked / "new", "is not writable")]),
        ):
            assert run(script, "--out", str(out)) == 2
            err = capsys.readouterr().err
            assert f"--out {out}" in err and says in err, err
        assert run(script) == 2 and "--out" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)
    assert (tmp_path / "full" / "config.json").read_text() == "{}"


def _root() -> bool:
    import os

    return hasattr(os, "geteuid") and os.geteuid() == 0  # root writes anywhere


def test_set_changes_one_setting_of_its_type_and_names_the_known_ones():
    import _recipe

    defaults = {"ITERS": 10, "LR": 1e-3, "NAME": "x", "LIMIT": None, "BF16": False}
    assert _recipe.settings(defaults, ["ITERS=3", "LR=2", "NAME=y", "LIMIT=5", "BF16=True"]) == {
        "ITERS": 3,
        "LR": 2.0,
        "NAME": "y",
        "LIMIT": 5,
        "BF16": True,
    }
    for bad, says in (
        ("ITER=3", "ITERS, LR"),
        ("ITERS=1.5", "ITERS takes a int"),
        ("ITERS", "NAME=VALUE"),
        ("ITERS=True", "ITERS takes a int"),
        ("BF16=1", "BF16 takes a bool"),
    ):
        with pytest.raises(ValueError, match=says):
            _recipe.settings(defaults, [bad])


def test_an_atomic_folder_appears_whole_or_not_at_all(tmp_path):
    import _recipe

    with pytest.raises(RuntimeError):
        with _recipe.atomic_folder(tmp_path / "out") as tmp:
            (tmp / "weights").write_text("half")
            raise RuntimeError("stopped half-way")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "empty").mkdir()
    with _recipe.atomic_folder(tmp_path / "empty") as tmp:
        (tmp / "weights").write_text("whole")
    assert [p.name for p in tmp_path.iterdir()] == ["empty"] and (tmp_path / "empty" / "weights").exists()


# ------------------------------------------------------------------ the settings that built each checkpoint


def info_of(name: str) -> tuple[dict, dict]:
    record = json.loads((checkpoint_path(name) / "config.json").read_text())
    return record["info"], record["config"]


def test_the_gpt_recipes_hold_the_settings_their_checkpoints_record():
    for name in ("gpt-char-shakespeare", "gpt-char-shakespeare-large", "gpt-wikitext2"):
        s, (info, config) = settings(BUILDS[name]), info_of(name)
        recipe = info["recipe"]
        for key in ("iters", "batch_size", "block_size", "lr", "warmup"):
            assert s[key.upper()] == recipe[key], f"{name}: {key.upper()} {s[key.upper()]}, trained with {recipe[key]}"
        assert s["SEED"] == info["seed"] and s["BLOCK_SIZE"] == config["max_len"] and s["THREADS"] == info["threads"]
        if name == "gpt-wikitext2":
            assert s["DROPOUT"] == config["dropout"] and s["LR"] / 10 == recipe["min_lr"]
        else:
            assert (s["MIN_LR"], s["WEIGHT_DECAY"]) == (recipe["min_lr"], recipe["weight_decay"])
            assert (s["D_MODEL"], s["N_LAYERS"], s["N_HEADS"]) == (
                config["d_model"],
                config["n_layers"],
                config["n_heads"],
            )
            assert s["PRECISION"] == (info.get("precision") or "float32")


def test_the_bert_recipe_holds_the_settings_its_checkpoint_records():
    s, (info, config) = settings(BUILDS["bert-wikitext2"]), info_of("bert-wikitext2")
    assert {k: s[k.upper()] for k in ("steps", "batch_size", "max_len", "lr", "seed")} == {
        k: info[k] for k in ("steps", "batch_size", "max_len", "lr", "seed")
    }
    assert (s["VOCAB_SIZE"], s["DROPOUT"], s["WARMUP"]) == (config["vocab_size"], config["dropout"], 100)
    # the committed BERT was trained by the plain loop: every speed switch off
    assert (s["MASK_PROB"], s["BF16"], s["EXPLICIT_ATTENTION"], s["CHUNKED_LOSS"], s["SPARSE_TOP"]) == (
        0.15,
        False,
        False,
        False,
        False,
    )


def test_the_word_vector_and_bilm_recipes_hold_the_settings_their_checkpoints_record():
    for name in ("word2vec-wikitext2", "glove-wikitext2"):
        s, (info, config) = settings(BUILDS[name]), info_of(name)
        checked = [key for key in s if key.lower() in info]
        for key in checked:
            assert info[key.lower()] == s[key], f"{name}: {key} {s[key]}, trained with {info[key.lower()]}"
        assert s["D_MODEL"] == config.get("d_model", config.get("dim"))  # older checkpoints say "dim"
        assert len(checked) >= len(s) - 2, f"{name}: the checkpoint records too few of {list(s)}"
    s, (info, config) = settings("bilm-wikitext2.py"), info_of("bilm-wikitext2")
    for key in ("epochs", "batch_size", "lr", "seed"):
        assert s[key.upper()] == info[key]
    assert (s["MIN_FREQ"], s["MAX_WORDS"]) == (info["vocab"]["min_freq"], info["vocab"]["max_words"])
    assert (s["D_MODEL"], s["HIDDEN"], s["N_LAYERS"], s["DROPOUT"]) == (
        config["d_model"],
        config["hidden"],
        config["n_layers"],
        config["dropout"],
    )


def test_the_zero_shot_and_qa_recipes_hold_the_settings_their_checkpoints_record():
    s = settings("zero-shot-qa.py")
    shares = []
    for name in ("zero-shot-qa000", "zero-shot-qa005", "zero-shot-qa020", "zero-shot-qa100"):
        info, _ = info_of(name)
        shares.append(info["qa_share"])
        assert (info["recipe"]["iters"], info["seed"], info["threads"]) == (s["ITERS"], s["SEED"], s["THREADS"])
        assert sum(info["documents"].values()) == s["DOCUMENTS"]
    assert shares == s["SHARES"]
    info, _ = info_of("minilm-qa-squad")
    assert {k.upper(): v for k, v in info["arguments"].items()} == {
        k: v for k, v in settings("minilm-qa-squad.py").items() if k not in ("EVALUATE_ON", "RESUME")
    }


# ------------------------------------------------------------------ a recipe, end to end


def test_the_character_gpt_recipe_runs_end_to_end_on_a_tiny_setting(tmp_path, capsys):
    from onehot2gpt.checkpoints import load

    out = tmp_path / "gpt-char"
    tiny = dict(ITERS=3, D_MODEL=16, N_LAYERS=1, N_HEADS=2, BLOCK_SIZE=16, BATCH_SIZE=2, EVAL_EVERY=2, EVAL_BATCHES=2)
    argv = ["--out", str(out), *[a for k, v in tiny.items() for a in ("--set", f"{k}={v}")], "--set", "THREADS=1"]
    assert run("gpt-char-shakespeare.py", *argv) == 0
    model, vocab, _, info = load(out, kind="gpt")
    assert len(vocab) == model.config.vocab_size == 65  # Tiny Shakespeare's characters
    assert (model.config.d_model, model.config.n_layers, model.config.max_len) == (16, 1, 16)
    assert info["iters"] == 3 and info["recipe"]["batch_size"] == 2
    assert [i for i, _, _ in info["evals"]] == [0, 2, 3] and info["val_loss"] == info["evals"][-1][2]
    assert info["command"].startswith("python recipes/gpt-char-shakespeare.py --out ")
    assert {k: info["arguments"][k] for k in tiny} == tiny
    assert [p.name for p in tmp_path.iterdir()] == ["gpt-char"]  # no partial folder left beside it
    assert '"val_loss"' in capsys.readouterr().out.strip().splitlines()[-1]
    assert run("gpt-char-shakespeare.py", *argv) == 2  # it never overwrites


def test_the_large_character_gpt_refuses_bf16_where_the_cpu_lacks_it(monkeypatch, tmp_path):
    import _bert

    monkeypatch.setattr(_bert, "native_bf16", lambda device="cpu": False)
    code = run("gpt-char-shakespeare-large.py", "--out", str(tmp_path / "x"), "--set", "ITERS=1")
    assert re.search("no native bfloat16.*PRECISION=float32", str(code))
    assert not (tmp_path / "x").exists()


def test_the_bert_recipe_refuses_bf16_where_the_cpu_lacks_it_and_laptop_sets_the_switches(
    monkeypatch, tmp_path, capsys
):
    import _bert

    monkeypatch.setattr(_bert, "native_bf16", lambda device="cpu": False)
    code = run("bert-wikitext2.py", "--out", str(tmp_path / "x"), "--laptop")
    assert re.search("no native bfloat16.*BF16=False", str(code))
    assert not (tmp_path / "x").exists()
    assert run("bert-wikitext2.py", "--out", str(tmp_path / "x"), "--laptop", "--dry-run") == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    laptop = runpy.run_path(str(RECIPES / "bert-wikitext2.py"), run_name="recipe")["laptop"]
    assert printed == {**settings("bert-wikitext2.py"), **laptop} and laptop["DROPOUT"] == 0.0


def test_the_checkpoints_tool_verifies_the_named_checkpoints(capsys):
    assert run("checkpoints.py", "verify", "gpt-char-shakespeare", "word2vec-wikitext2") == 0
    out = capsys.readouterr().out
    assert "ok      gpt-char-shakespeare: GPT, Vocab" in out and "ok      word2vec-wikitext2" in out


def test_the_subword_gpt_recipe_writes_a_checkpoint_with_the_bert_vocabulary(tmp_path, monkeypatch):
    from onehot2gpt import gpt_training
    from onehot2gpt.checkpoints import load

    original, valid = gpt_training.wikitext_stream, []

    def small_stream(tokenizer, split="train"):  # a slice of valid for both: fast
        valid[:] = valid or [original(tokenizer, "valid")[:20000]]
        return valid[0]

    monkeypatch.setattr(gpt_training, "wikitext_stream", small_stream)
    tiny = ["ITERS=3", "BATCH_SIZE=4", "EVAL_EVERY=3", "EVAL_BATCHES=2", "THREADS=1"]
    assert run("gpt-wikitext2.py", "--out", str(tmp_path / "gpt"), *[a for t in tiny for a in ("--set", t)]) == 0
    model, tok, _, info = load(tmp_path / "gpt", kind="gpt")
    bert_tok = load("bert-wikitext2").tokenizer
    assert model.config.vocab_size == len(tok) == len(bert_tok) and model.config.max_len == 64
    assert info["iters"] == 3 and info["command"].startswith("python recipes/gpt-wikitext2.py")
    assert info["val_loss_is"].startswith("mean of 2 fixed windows")


def test_the_bilm_recipes_loop_learns_and_its_perplexity_is_both_directions():
    """recipes/_bilm.py: sentences become [<bos>, ..., <eos>] id lists cut to max_len; training
    lowers both directions' perplexity on a repetitive text, which a perplexity near the vocabulary
    size before training shows it was not already low."""
    import torch
    from _bilm import bilm_perplexity, sentence_ids, train_bilm
    from onehot2gpt.elmo import BiLM, BiLMConfig
    from onehot2gpt.vocab import BOS, EOS, Vocab

    sentences = [s.split() for s in ["the cat sat on the mat .", "a dog ran to the park ."] * 30]
    vocab = Vocab.build(sentences, min_freq=1)
    seqs = sentence_ids(sentences, vocab, max_len=6)
    assert all(len(s) <= 6 and s[0] == vocab[BOS] and s[-1] == vocab[EOS] for s in seqs)
    assert len(seqs) == 2 * len(sentences)  # each 7-word sentence cut into two pieces of at most 4 words
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), d_model=16, hidden=16, dropout=0.0, max_len=16, softmax="full"))
    before = bilm_perplexity(bilm, seqs)
    history = train_bilm(bilm, seqs, epochs=15, batch_size=16, lr=1e-2, warmup=5, progress=False)
    after = bilm_perplexity(bilm, seqs)
    assert len(history) == 15 * 8 and before[0] > 0.5 * len(vocab)
    assert after[0] < before[0] / 3 and after[1] < before[1] / 3, (before, after)


# ------------------------------------------------------------------ older checkpoint folders (recipes/checkpoints.py upgrade)


WORDS, tiny_gpt = test_checkpoints.WORDS, test_checkpoints.tiny_gpt  # a checkpoint folder to age (a fixture)


def upgrade(folder):
    return runpy.run_path(str(RECIPES / "checkpoints.py"), run_name="recipe")["upgrade"](folder)


def test_an_older_folder_is_refused_until_upgraded(tiny_gpt):
    model, folder = tiny_gpt
    record = json.loads((folder / "config.json").read_text())
    old = {"format": "onehot2gpt-gpt/1", "model": "GPT", "config": record["config"], "info": record["info"]}
    (folder / "config.json").write_text(json.dumps(old))
    with pytest.raises(CheckpointError, match="upgrade"):
        load(folder, kind="gpt")
    upgrade(folder)
    back, vocab, _, _ = load(folder)
    assert json.loads((folder / "config.json").read_text()) == record
    assert all(torch.equal(a, b) for a, b in zip(back.parameters(), model.parameters()))


def test_an_older_word2vec_folder_is_upgraded_with_its_file_renamed(tmp_path):
    wv = WordVectors(torch.randn(len(WORDS), 4), Vocab(WORDS, specials=()), {"model": "cbow"})
    folder = wv.save(tmp_path / "wv")
    (folder / "weights.safetensors").rename(folder / "vectors.safetensors")
    (folder / "config.json").write_text(
        json.dumps({"model": "cbow", "vocab_size": len(WORDS), "dim": 4, "stored_dtype": "float16"})
    )
    upgrade(folder)
    back = load(folder).model
    assert back.config["model"] == "cbow" and torch.equal(back.vectors, wv.vectors.half().float())
