"""Where the course's small trained checkpoints live, and how to find them.

Each checkpoint is a folder in ``data/checkpoints/<name>/`` holding safetensors weights, a
``config.json`` (with the command that reproduces it) and, where the model has one, a vocabulary.
Models load them with their own ``load`` functions; this module only resolves names to folders,
so notebooks work from any working directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def checkpoints_dir() -> Path:
    """The folder of course checkpoints (env ONEHOT2GPT_CHECKPOINTS, else <repo>/data/checkpoints)."""
    return Path(os.environ.get("ONEHOT2GPT_CHECKPOINTS") or _REPO / "data" / "checkpoints")


def list_checkpoints() -> list[str]:
    """Names of the checkpoints that exist."""
    root = checkpoints_dir()
    return sorted(p.name for p in root.iterdir() if (p / "config.json").exists()) if root.exists() else []


def checkpoint_path(name: str) -> Path:
    """Folder of the course checkpoint `name`, e.g. ``"word2vec-wikitext2"``."""
    path = checkpoints_dir() / name
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"no course checkpoint {name!r} in {checkpoints_dir()} (have: {list_checkpoints()}). "
            "Use a clone of the course repository with `pip install -e .`, or set "
            "ONEHOT2GPT_CHECKPOINTS to the folder that holds the checkpoints.")
    return path


def checkpoint_config(name: str) -> dict:
    """The ``config.json`` of a course checkpoint."""
    return json.loads((checkpoint_path(name) / "config.json").read_text(encoding="utf-8"))


def load_matching_weights(weights_path: Path, expected: dict, config_path: Path) -> dict:
    """Read a safetensors file and check it against the tensors a model built from its config
    expects ({name: tensor}); raise a ValueError listing missing, unexpected and mis-shaped
    tensors (a checkpoint that does not match its config is never half-loaded)."""
    from safetensors.torch import load_file

    weights = load_file(str(weights_path))
    problems = [f"missing {k}" for k in expected if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in expected]
    problems += [f"{k}: shape {tuple(weights[k].shape)} in the file, {tuple(v.shape)} in the config"
                 for k, v in expected.items() if k in weights and weights[k].shape != v.shape]
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise ValueError(f"the weights in {weights_path} do not match {config_path}: {shown}")
    return weights


def read_model_folder(directory: Path, fmt: str, config_cls, saver: str, what: str) -> tuple[dict, object]:
    """Check a folder written by one of our ``save_*`` functions (``config.json`` +
    ``weights.safetensors``) → (the parsed config.json, ``config_cls(**its "config")``).
    FileNotFoundError for a missing file, ValueError for another format or unknown fields."""
    from dataclasses import fields

    missing = [n for n in ("config.json", "weights.safetensors") if not (directory / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{directory} lacks {', '.join(missing)}; a {what} checkpoint folder holds "
                                f"config.json and weights.safetensors, written by {saver}")
    data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    if data.get("format") != fmt:
        raise ValueError(f"{directory / 'config.json'} is not a {what} checkpoint of this library "
                         f"(format {fmt!r})")
    unknown = set(data["config"]) - {f.name for f in fields(config_cls)}
    if unknown:
        raise ValueError(f"{directory / 'config.json'} has unknown config fields {sorted(unknown)}")
    return data, config_cls(**data["config"])


def fill_weights(model, directory: Path, device="cpu"):
    """Copy ``directory/weights.safetensors`` into `model` after :func:`load_matching_weights`
    checked every name and shape → the model on `device`, in eval mode."""
    import torch

    expected = dict(model.named_parameters())
    weights = load_matching_weights(directory / "weights.safetensors", expected, directory / "config.json")
    with torch.no_grad():
        for k, p in expected.items():
            p.copy_(weights[k])
    return model.to(device).eval()
