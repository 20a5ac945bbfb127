"""The GPU sweep's dropout knobs (bench/bert_budget_sweep.py) build the model each variant names:
a sweep that silently trained the wrong dropout would mislabel its findings."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bert_budget_sweep as sweep  # noqa: E402


def rates(model):
    """{name: rate} of every nn.Dropout, and the attention modules' weight-dropout rates."""
    layers = {n: m.p for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout)}
    attention = {
        n: m.dropout
        for n, m in model.named_modules()
        if not isinstance(m, torch.nn.Dropout) and isinstance(getattr(m, "dropout", None), float)
    }
    return layers, attention


def test_no_dropout_variant_has_none_anywhere():
    layers, attention = rates(sweep.build_model(sweep.VARIANTS["L14"], 50))
    assert layers and attention
    assert set(layers.values()) == {0.0} and set(attention.values()) == {0.0}


def test_full_dropout_variant_sets_every_layer_and_the_attention_weights():
    layers, attention = rates(sweep.build_model(sweep.VARIANTS["L14d"], 50))
    assert set(layers.values()) == {0.1} and set(attention.values()) == {0.1}


def test_attn_dropout_zero_keeps_the_layers_rate():
    layers, attention = rates(sweep.build_model(sweep.VARIANTS["L14h"], 50))
    assert set(layers.values()) == {0.1} and set(attention.values()) == {0.0}


@pytest.mark.parametrize(
    "name, kept",
    [
        ("F10e", {"bert.embeddings.dropout"}),
        (
            "F10r",
            {"bert.embeddings.dropout"} | {f"bert.encoder.layers.{i}.dropout{k}" for i in range(4) for k in (1, 2)},
        ),
    ],
)
def test_dropout_at_keeps_the_rate_only_where_named(name, kept):
    layers, attention = rates(sweep.build_model(sweep.VARIANTS[name], 50))
    assert {n for n, p in layers.items() if p > 0} == kept
    assert all(p == 0.0 for n, p in layers.items() if n not in kept)  # e.g. the feed-forward's inner one
    assert set(attention.values()) == {0.0}


def test_every_variant_is_priced_and_uses_only_known_knobs():
    for name, config in sweep.VARIANTS.items():
        c = {**sweep.BASE, **config}
        assert sweep.units(c) > 0, name
        assert set(config) <= set(sweep.BASE), f"{name} sets a knob BASE does not have: {set(config) - set(sweep.BASE)}"
