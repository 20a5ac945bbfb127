"""Every committed checkpoint has a recipe, and the recipe is the command that built it."""

import json
import shlex
import subprocess
import sys

import pytest
from onehot2gpt.checkpoints import checkpoint_path, list_checkpoints
from onehot2gpt.recipes import COMMANDS, command, recipe_for


def _options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """argv after "-m module" → (positional words, {--option: value}), --device dropped: a
    GPU-lent run and a CPU run are the same recipe."""
    words, options, i = [], {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            options[argv[i]] = argv[i + 1]
            i += 2
        else:
            words.append(argv[i])
            i += 1
    options.pop("--device", None)
    return words, options


@pytest.mark.parametrize("name", list_checkpoints())
def test_every_committed_checkpoint_has_a_recipe(name):
    assert recipe_for(name)


@pytest.mark.parametrize("name", [n for n in list_checkpoints() if recipe_for(n) in COMMANDS])
def test_the_recipe_is_the_recorded_command(name):
    info = json.loads((checkpoint_path(name) / "config.json").read_text())["info"]
    recipe = recipe_for(name)
    ours = _options(command(recipe)[1:])
    recorded = shlex.split(info["command"])
    assert recorded[:2] == ["python", "-m"], info["command"]
    assert _options(recorded[2:]) == ours, f"{name}: recorded {info['command']!r}, recipe {command(recipe)}"


def test_unknown_recipe_names_the_known_ones():
    with pytest.raises(ValueError, match="one of word2vec-wikitext2"):
        command("gpt-huge")
    with pytest.raises(ValueError, match="add one to onehot2gpt.recipes.COMMANDS"):
        recipe_for("my-own-checkpoint")


def test_dry_run_prints_the_command_without_training():
    out = subprocess.run(
        [sys.executable, "-m", "onehot2gpt.recipes", "gpt-wikitext2", "--dry-run", "--device", "cuda"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == (
        "$ python -m onehot2gpt.gpt_training wikitext --out data/checkpoints/gpt-wikitext2 --device cuda"
    )


def _defaults(recipe: str):
    """The arguments the recipe's command trains with: its module's parser, defaults filled in."""
    import importlib

    argv = command(recipe)
    module = importlib.import_module(argv[1])
    return vars(module.build_parser().parse_args(argv[2:]))


@pytest.mark.parametrize("name", ["bert-wikitext2", "gpt-char-shakespeare", "gpt-wikitext2", "bilm-wikitext2"])
def test_the_recipes_defaults_are_what_the_checkpoint_recorded(name):
    """Not just the same command line: the values the command trains with by default are the ones
    the committed checkpoint records (a changed default would rebuild something else)."""
    record = json.loads((checkpoint_path(name) / "config.json").read_text())
    info, config = record["info"], record["config"]
    args = _defaults(recipe_for(name))
    if name == "bert-wikitext2":
        assert {k: args[k] for k in ("steps", "batch_size", "max_len", "lr", "seed")} == {
            k: info[k] for k in ("steps", "batch_size", "max_len", "lr", "seed")
        }
        assert args["vocab_size"] == config["vocab_size"] and args["dropout"] == config["dropout"]
        assert args["short_steps"] == 0 and args["warmup"] == 100  # no length schedule then
        assert args["mask_prob"] == info.get("mask_prob", 0.15) and args["bf16"] == info.get("bf16", False)
        assert args["nsp_weight"] == info.get("nsp_weight", 1.0)
        assert args["explicit_attention"] == info.get("explicit_attention", False)
        return
    if name == "bilm-wikitext2":
        for key in ("epochs", "batch_size", "lr", "seed"):
            assert args[key] == info[key], f"{name}: --{key.replace('_', '-')} {args[key]} but trained with {info[key]}"
        assert (args["min_freq"], args["max_words"]) == (info["vocab"]["min_freq"], info["vocab"]["max_words"])
        assert (args["d_model"], args["hidden"], args["n_layers"], args["dropout"]) == (
            config["d_model"],
            config["hidden"],
            config["n_layers"],
            config["dropout"],
        )
        return
    recipe = info["recipe"]
    for key in ("iters", "batch_size", "block_size", "lr", "warmup"):
        assert args[key] == recipe[key], f"{name}: --{key.replace('_', '-')} {args[key]} but trained with {recipe[key]}"
    assert args["seed"] == info["seed"] and args["block_size"] == config["max_len"]
    if name == "gpt-wikitext2":
        assert args["dropout"] == config["dropout"], f"--dropout {args['dropout']} but trained with {config['dropout']}"
    if name == "gpt-char-shakespeare":
        assert (args["min_lr"], args["weight_decay"]) == (recipe["min_lr"], recipe["weight_decay"])
        assert (args["d_model"], args["n_layers"], args["n_heads"]) == (
            config["d_model"],
            config["n_layers"],
            config["n_heads"],
        )


def test_laptop_recipes_add_their_arguments_and_parse():
    """Each laptop recipe is the checkpoint's command plus its LAPTOP arguments, which the
    module's own parser accepts (a misspelt option would fail here, not an hour into a run)."""
    import importlib

    from onehot2gpt.recipes import LAPTOP, LAPTOP_BUDGET_MINUTES

    assert set(LAPTOP) == set(LAPTOP_BUDGET_MINUTES) == {"bert-wikitext2", "gpt-wikitext2", "bilm-wikitext2"}
    for name, extra in LAPTOP.items():
        argv = command(name, "/tmp/out", laptop=True)
        assert argv == command(name, "/tmp/out")[: len(argv) - len(extra)] + extra
        parsed = vars(importlib.import_module(argv[1]).build_parser().parse_args(argv[2:]))
        assert parsed["dropout"] == 0.0, f"{name}: the laptop recipe trains without dropout"
    with pytest.raises(ValueError, match="has no laptop variant"):
        command("zero-shot", laptop=True)
    out = subprocess.run(
        [sys.executable, "-m", "onehot2gpt.recipes", "bert-wikitext2", "--laptop", "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from onehot2gpt.bert_pretraining import native_bf16

    expected = [a for a in LAPTOP["bert-wikitext2"] if native_bf16() or a != "--bf16"]  # see the next test
    assert out.strip().endswith(" ".join(expected))


def test_the_bert_laptop_recipe_drops_bf16_where_the_cpu_lacks_it(monkeypatch, capsys):
    """--laptop's bfloat16 autocast is only faster with native bfloat16; elsewhere the recipe says
    so and runs the same steps in float32 instead of failing."""
    from onehot2gpt import bert_pretraining, recipes

    assert "--bf16" in recipes.LAPTOP["bert-wikitext2"]
    monkeypatch.setattr(bert_pretraining, "native_bf16", lambda device="cpu": False)
    recipes.main(["bert-wikitext2", "--laptop", "--dry-run", "--out", "/tmp/x"])
    out, err = capsys.readouterr()
    assert out.strip().endswith(" ".join(a for a in recipes.LAPTOP["bert-wikitext2"] if a != "--bf16"))
    assert "no native bfloat16" in err and "float32" in err
    monkeypatch.setattr(bert_pretraining, "native_bf16", lambda device="cpu": True)
    recipes.main(["bert-wikitext2", "--laptop", "--dry-run", "--out", "/tmp/x"])
    assert capsys.readouterr().out.strip().endswith(" ".join(recipes.LAPTOP["bert-wikitext2"]))
