"""The training commands (recipes/*.py) never lose or overwrite a run.

``--out`` is checked before anything trains (a folder that can be written; a checkpoint already
there only with ``--force``); the result is written into a hidden folder beside ``--out`` and
renamed into place at the end, so a run that fails or is interrupted (SIGINT, after its first save
too) leaves the previous checkpoint or nothing; what it writes can be read by other users.
Each case asserts that the message names ``--out``, the folder and what to do."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from onehot2gpt.checkpoints import load
from onehot2gpt.gpt import GPT, GPTConfig, save_gpt
from onehot2gpt.vocab import Vocab
from test_recipes import run

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
sys.path.insert(0, str(RECIPES))

# a character GPT that trains in a second or two (3 updates)
TINY_GPT = [
    *("--set", "ITERS=3", "--set", "D_MODEL=16", "--set", "N_LAYERS=1", "--set", "N_HEADS=2"),
    *("--set", "BLOCK_SIZE=16", "--set", "BATCH_SIZE=2", "--set", "EVAL_EVERY=2", "--set", "EVAL_BATCHES=2"),
    *("--set", "THREADS=1"),
]
# the four zero-shot GPTs cut to two, with a small corpus and 2 updates each: one checkpoint per share
TINY_ZERO_SHOT = ["--set", "ITERS=2", "--set", "DOCUMENTS=200", "--set", "SHARES=[0.0, 0.1]"]
# root writes anywhere: without these capabilities its permission bits count as everyone's
AS_A_USER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


run_here = run  # recipes/`script` run in this process → its exit code (tests/test_recipes.py)


def _child() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python turns SIGINT into KeyboardInterrupt only over the default
    os.umask(0o022)


def start(script: str, *argv: str, prefix=()) -> subprocess.Popen:
    """Start recipes/`script` as a command (umask 022, SIGINT as a terminal sends it)."""
    return subprocess.Popen(
        [*prefix, sys.executable, str(RECIPES / script), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child,
        cwd=ROOT,
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def previous_checkpoint(folder: Path, run: str = "the previous one") -> dict:
    """Save a small GPT to `folder` (what an earlier run left) → its files' bytes."""
    torch.manual_seed(0)
    vocab = Vocab(list("abcdefghij"), specials=())
    save_gpt(GPT(GPTConfig.tiny(vocab_size=len(vocab))), folder, info={"run": run}, tokenizer=vocab)
    return snapshot(folder)


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def hidden_leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------ --out is checked before training


def test_an_out_whose_folder_cannot_be_written_is_refused_before_training(tmp_path):
    """An existing empty --out inside a folder that cannot be written passed the check and failed at
    the very end, after the whole run, with a PermissionError traceback (the result is written
    beside --out, then renamed)."""
    prefix = AS_A_USER if os.geteuid() == 0 else []
    if prefix and not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: every folder can be written")
    locked = tmp_path / "locked"
    (locked / "empty").mkdir(parents=True)
    locked.chmod(0o500)
    try:
        code, _, err = finish(
            start("gpt-char-shakespeare.py", "--out", str(locked / "empty"), *TINY_GPT, prefix=prefix)
        )
    finally:
        locked.chmod(0o700)
    assert code == 2, err
    assert f"--out {locked / 'empty'}: {locked} is not writable" in err and "name a folder inside one" in err, err
    assert "Traceback" not in err and "GPT char" not in err  # refused before any training
    assert [p.name for p in locked.iterdir()] == ["empty"]


def test_an_out_below_a_file_or_through_a_link_is_refused_before_training(tmp_path, capsys):
    """Both passed the check: the first failed when the folder was made, the second (a link to an
    empty folder) at the rename, each after the whole run."""
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)  # a file that can be written and "searched"
    assert run_here("gpt-char-shakespeare.py", "--out", str(script / "run"), "--dry-run") == 2
    err = capsys.readouterr().err
    assert f"--out {script / 'run'}: {script} is a file, not a folder" in err, err
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    assert run_here("gpt-char-shakespeare.py", "--out", str(tmp_path / "link"), "--dry-run") == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'link'} is a symbolic link (to {tmp_path / 'empty'}); name the folder itself" in err


def test_a_checkpoint_in_out_is_refused_without_force_and_a_folder_of_other_files_even_with_it(tmp_path, capsys):
    before = previous_checkpoint(tmp_path / "run")
    assert run_here("gpt-char-shakespeare.py", "--out", str(tmp_path / "run"), "--dry-run") == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'run'} is not empty: it holds a checkpoint" in err and "add --force" in err, err
    assert run_here("gpt-char-shakespeare.py", "--out", str(tmp_path / "run"), "--force", "--dry-run") == 0
    assert f"would replace {tmp_path / 'run'}" in capsys.readouterr().out
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    for argv in ([], ["--force"]):
        assert run_here("gpt-char-shakespeare.py", "--out", str(tmp_path / "notes"), *argv, "--dry-run") == 2
        err = capsys.readouterr().err
        assert f"--out {tmp_path / 'notes'} is not empty and holds no checkpoint" in err, err
        assert "--force replaces only a folder a recipe wrote" in err
    assert snapshot(tmp_path / "run") == before and (tmp_path / "notes" / "todo.txt").read_text() == "mine"


def test_force_replaces_the_checkpoint_only_at_the_end_and_everything_written_can_be_read_by_others(tmp_path):
    before = previous_checkpoint(tmp_path / "run")
    code, out, err = finish(start("gpt-char-shakespeare.py", "--out", str(tmp_path / "run"), "--force", *TINY_GPT))
    assert code == 0, err
    model, vocab, _, info = load(tmp_path / "run", kind="gpt")
    assert snapshot(tmp_path / "run") != before and len(vocab) == 65 and info["iters"] == 3
    assert "--force" in info["command"] and json.loads(out.splitlines()[-1])["out"] == str(tmp_path / "run")
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no hidden partial or old folder beside it
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o755
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").iterdir()}
    assert modes == {"config.json": 0o644, "vocab.json": 0o644, "weights.safetensors": 0o644}


def test_the_library_saves_checkpoint_files_other_users_can_read(tmp_path):
    """safetensors writes its file 0600; the checkpoint's files get 0666 less the umask."""
    folder, mask = tmp_path / "gpt", os.umask(0o022)
    try:
        previous_checkpoint(folder)
    finally:
        os.umask(mask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert modes == {"config.json": 0o644, "vocab.json": 0o644, "weights.safetensors": 0o644}
    load(folder, kind="gpt")


# ------------------------------------------------------------------ the atomic write


def test_an_interrupt_inside_the_save_leaves_the_previous_checkpoint_and_one_in_the_rename_the_new(
    tmp_path, monkeypatch
):
    import _recipe

    out = tmp_path / "run"
    before = previous_checkpoint(out)
    with pytest.raises(KeyboardInterrupt):
        with _recipe.atomic_folder(out, replace=True) as tmp:
            (tmp / "weights.safetensors").write_bytes(b"half")
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the files are being written
    assert snapshot(out) == before and hidden_leftovers(tmp_path) == []

    rename = os.rename

    def interrupted_rename(src, dst):  # Ctrl-C between moving the old folder away and the new one in
        os.kill(os.getpid(), signal.SIGINT)
        return rename(src, dst)

    with pytest.raises(KeyboardInterrupt):
        with _recipe.atomic_folder(out, replace=True) as tmp:
            previous_checkpoint(tmp, run="the new one")
            monkeypatch.setattr(os, "rename", interrupted_rename)  # for the renames at the end
    monkeypatch.undo()
    assert load(out, kind="gpt").info == {"run": "the new one"}
    assert hidden_leftovers(tmp_path) == []


def test_an_out_filled_during_the_run_keeps_both_and_says_where(tmp_path):
    import _recipe

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        with _recipe.atomic_folder(out) as tmp:
            (tmp / "result.json").write_text("new")
            out.mkdir()
            (out / "other.txt").write_text("someone else's")
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("run.new-")]
    assert len(kept) == 1 and (kept[0] / "result.json").read_text() == "new"
    assert f"--out {out} was filled by something else" in str(e.value.code) and str(kept[0]) in str(e.value.code)
    assert (out / "other.txt").read_text() == "someone else's" and hidden_leftovers(tmp_path) == []


# ------------------------------------------------------------------ SIGINT, as Ctrl-C sends it


def _interrupt_when(proc: subprocess.Popen, stream, marker: str, timeout: float = 60) -> None:
    """Read `proc`'s `stream` (stdout or stderr) until `marker` shows, then send SIGINT."""
    text, deadline = "", time.time() + timeout
    while marker not in text:
        chunk = os.read(stream.fileno(), 4096)  # a progress bar redraws with \r, not a new line
        if not chunk:
            code, _, err = finish(proc)
            raise AssertionError(f"the run ended (exit {code}) before {marker!r} showed: {err[-2000:]}")
        text += chunk.decode(errors="replace")
        assert time.time() < deadline, f"no {marker!r} within {timeout} s"
    proc.send_signal(signal.SIGINT)


def test_sigint_after_the_first_checkpoint_of_a_run_leaves_the_previous_ones(tmp_path):
    """zero-shot-qa saves one checkpoint per share: Ctrl-C after the first was saved."""
    out = tmp_path / "zero-shot"
    before = {}
    for name in ("zero-shot-qa000", "zero-shot-qa100"):
        before.update({f"{name}/{k}": v for k, v in previous_checkpoint(out / name).items()})
    proc = start("zero-shot-qa.py", "--out", str(out), "--force", *TINY_ZERO_SHOT)
    _interrupt_when(proc, proc.stdout, '{"qa000"')  # printed once qa000 is saved
    code, _, err = finish(proc)
    assert code != 0 and "Traceback" not in err, err[-2000:]
    assert f"interrupted: --out {out} is as it was before this run" in err
    assert snapshot(out) == before and [p.name for p in tmp_path.iterdir()] == ["zero-shot"]
    for name in ("zero-shot-qa000", "zero-shot-qa100"):
        load(out / name, kind="gpt")


def test_sigint_while_training_leaves_the_previous_checkpoint_and_after_the_save_a_whole_new_one(tmp_path):
    out = tmp_path / "run"
    before = previous_checkpoint(out)
    argv = ["--out", str(out), "--force", *TINY_GPT, "--set", "ITERS=100000", "--set", "EVAL_EVERY=100000"]
    proc = start("gpt-char-shakespeare.py", *argv)
    _interrupt_when(proc, proc.stderr, "GPT char")  # the progress bar: training has started
    code, _, err = finish(proc)
    assert code != 0 and f"interrupted: --out {out} is as it was before this run" in err, err[-2000:]
    assert snapshot(out) == before and [p.name for p in tmp_path.iterdir()] == ["run"]

    proc = start("gpt-char-shakespeare.py", "--out", str(out), "--force", *TINY_GPT)
    _interrupt_when(proc, proc.stdout, '{"out"')  # printed once the run is in place
    code, _, err = finish(proc)
    assert snapshot(out) != before and load(out, kind="gpt").info["iters"] == 3, err[-2000:]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
