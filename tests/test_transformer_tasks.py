"""The Transformer's task of notebook 06: the date dataset, encoding, training, translating, scoring."""

import copy
import datetime
import math

import pytest
import torch
from onehot2gpt.data import make_date_pairs
from onehot2gpt.training import inverse_sqrt_schedule, pad_batch
from onehot2gpt.transformer import Seq2SeqTransformer, TransformerConfig
from onehot2gpt.transformer_tasks import encode_pairs, exact_match, train_seq2seq, translate
from onehot2gpt.vocab import Vocab, tokenize_chars

# Every format the generator may use, written independently as strptime patterns.
FORMATS = ["%d %B %Y", "%B %d, %Y", "%b %d, %Y", "%d/%m/%Y", "%A, %d %B %Y", "%a %d %b %Y", "%Y %b %d", "%d.%m.%Y"]


WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}


def _parse(text):
    for fmt in FORMATS:
        try:
            return datetime.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise AssertionError(f"{text!r} matches none of the date formats")


def test_date_pairs_are_correct_and_deterministic():
    pairs = make_date_pairs(400, seed=3)
    assert pairs == make_date_pairs(400, seed=3)
    assert pairs != make_date_pairs(400, seed=4)
    for source, target in pairs:
        day = _parse(source)
        assert target == day.isoformat()
        assert 1950 <= day.year <= 2049
        first = source.split()[0].rstrip(",").lower()
        if first in WEEKDAYS or first in {w[:3] for w in WEEKDAYS}:
            assert day.strftime("%A").lower().startswith(first)  # weekdays are the real ones
    assert any(s == s.lower() and s.strip("0123456789./ ") for s, _ in pairs)  # lower-cased ones too
    with pytest.raises(ValueError, match="n=0 must be at least 1"):
        make_date_pairs(0)


def test_pad_batch_and_encode_pairs():
    assert pad_batch([[5, 6, 7], [8]]).tolist() == [[5, 6, 7], [8, 0, 0]]
    with pytest.raises(ValueError, match="nothing to pad"):
        pad_batch([])
    src_vocab, tgt_vocab = Vocab(list("abc")), Vocab(list("xy"))
    src, tgt = encode_pairs([("ab", "x"), ("c", "yx")], src_vocab, tgt_vocab)
    assert src.tolist() == [[src_vocab["a"], src_vocab["b"]], [src_vocab["c"], 0]]
    bos, eos = tgt_vocab["<bos>"], tgt_vocab["<eos>"]
    assert tgt.tolist() == [[bos, tgt_vocab["x"], eos, 0], [bos, tgt_vocab["y"], tgt_vocab["x"], eos]]
    with pytest.raises(ValueError, match="empty"):
        encode_pairs([("ab", "")], src_vocab, tgt_vocab)


def test_schedule_warms_up_then_decays():
    f = inverse_sqrt_schedule(10)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(39) == pytest.approx(0.5)  # √(10 / 40)
    assert all(f(s) > f(s + 1) for s in range(10, 100))


@pytest.fixture(scope="module")
def date_setup(one_thread):
    pairs = make_date_pairs(300, seed=0)
    src_vocab = Vocab.build([tokenize_chars(s) for s, _ in pairs])
    tgt_vocab = Vocab.build([tokenize_chars(t) for _, t in pairs])
    torch.manual_seed(0)
    model = Seq2SeqTransformer(
        TransformerConfig.tiny(vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), dropout=0.0)
    )
    return pairs, src_vocab, tgt_vocab, model


def test_training_lowers_the_loss_from_ln_vocab(date_setup):
    pairs, src_vocab, tgt_vocab, model = date_setup
    src, tgt = encode_pairs(pairs, src_vocab, tgt_vocab)
    losses = train_seq2seq(
        model, src, tgt, steps=120, batch_size=32, lr=3e-3, warmup=20, label_smoothing=0.0, progress=False
    )
    assert len(losses) == 120
    assert abs(losses[0] - math.log(len(tgt_vocab))) < 1.0
    assert sum(losses[-10:]) / 10 < 0.6 * losses[0]
    assert not model.training
    with pytest.raises(ValueError, match="pair up"):
        train_seq2seq(model, src, tgt[:5], steps=1, progress=False)


def test_translate_decodes_and_reports_bad_input(date_setup):
    pairs, src_vocab, tgt_vocab, model = date_setup
    out = translate(model, [pairs[0][0], pairs[1][0]], src_vocab, tgt_vocab)
    assert len(out) == 2 and all(isinstance(o, str) for o in out)
    assert all("<" not in o for o in out)  # no <eos>/<pad> text
    with pytest.raises(ValueError, match="never saw"):
        translate(model, ["22 Novembre 2026 (Paris)"], src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match="non-empty"):
        translate(model, ["  "], src_vocab, tgt_vocab)
    with pytest.raises(TypeError, match="list of strings"):
        translate(model, "2019 feb 15", src_vocab, tgt_vocab)


def test_exact_match():
    assert exact_match(["a", "b", "c"], ["a", "x", "c"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        exact_match(["a"], [])


def test_train_seq2seq_stops_at_the_first_non_finite_loss(date_setup):
    from onehot2gpt.utils import TrainingDiverged

    pairs, src_vocab, tgt_vocab, model = date_setup
    src, tgt = encode_pairs(pairs[:8], src_vocab, tgt_vocab)
    broken = copy.deepcopy(model)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="step 0"):
        train_seq2seq(broken, src, tgt, steps=2, batch_size=4, progress=False)
