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
    if "command" not in info:          # the course BERT records its settings, not its command line
        words, options = ours
        assert words == ["onehot2gpt.training", "bert"]
        assert int(options["--steps"]) == info["steps"]
        return
    recorded = shlex.split(info["command"])
    assert recorded[:2] == ["python", "-m"], info["command"]
    assert _options(recorded[2:]) == ours, f"{name}: recorded {info['command']!r}, recipe {command(recipe)}"


def test_unknown_recipe_names_the_known_ones():
    with pytest.raises(ValueError, match="one of word2vec-wikitext2"):
        command("gpt-huge")
    with pytest.raises(ValueError, match="add one to onehot2gpt.recipes.COMMANDS"):
        recipe_for("my-own-checkpoint")


def test_dry_run_prints_the_command_without_training():
    out = subprocess.run([sys.executable, "-m", "onehot2gpt.recipes", "gpt-wikitext2", "--dry-run",
                          "--device", "cuda"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("$ python -m onehot2gpt.training gpt-wikitext --out data/checkpoints/gpt-wikitext2 "
                           "--device cuda")
