"""Bad input to the trainers (issue 48): a learning rate far too large. Every trainer stops as
soon as its loss explodes, while it is still finite (more than 1000× the level an untrained model
starts from: ln V for a language model, ln(classes) for a classifier), with the step and the fix;
before, they stopped only once the loss became NaN or inf, or returned the broken weights.

One test per trainer family, each a tiny model and lr=1000 (a normal run uses 1e-4 … 0.05).
"""

import math
import sys
from pathlib import Path

import pytest
import torch
from onehot2gpt.utils import TrainingDiverged

pytestmark = pytest.mark.usefixtures("one_thread")

LR = 1000.0


def exploding(what: str, start: float | None) -> str:
    """The message of a run stopped while its loss was still finite, naming the step and the fix
    (`start`: the starting level it names, None for any)."""
    level = r"\S+" if start is None else f"{start:.3g}"
    return (
        rf"^{what} diverged at step \d+: the loss is \S+, more than 1000× its starting level "
        rf"\({level}\): the run is exploding\. Lower the learning rate \(now 1000\)"
    )


def stopped_at(error) -> int:
    return int(str(error.value).split("diverged at step ")[1].split(":")[0])


def test_train_gpt_stops_when_its_loss_explodes():
    from onehot2gpt.gpt import GPT, GPTConfig
    from onehot2gpt.gpt_training import char_dataset, train_gpt

    ids, vocab = char_dataset("abcdefgh" * 60)
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=len(vocab)))
    with pytest.raises(TrainingDiverged, match=exploding("GPT", math.log(len(vocab)))) as error:
        train_gpt(model, ids, iters=20, batch_size=4, block_size=8, lr=LR, warmup=0, progress=False)
    assert stopped_at(error) < 20


def test_word2vec_stops_at_the_first_non_finite_step_not_at_the_end_of_the_epoch():
    # word2vec's damped row steps keep even lr=1000 from exploding; a NaN loss used to be
    # reported only with the epoch's mean loss, after every batch of the epoch ran on NaN
    from onehot2gpt.word2vec import train_word2vec

    g = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(30)]
    sentences = [[words[int(i)] for i in torch.randint(0, 30, (10,), generator=g)] for _ in range(40)]
    steps = []
    with pytest.raises(
        TrainingDiverged, match=r"^word2vec \(epoch 1\) diverged at step \d+: the loss is nan\. Lower the learning rate"
    ) as error:
        train_word2vec(
            sentences,
            d_model=8,
            min_count=1,
            sample=0,
            batch_size=16,
            lr=1e300,
            progress=False,
            on_step=lambda step, loss: steps.append(step),
        )
    assert stopped_at(error) == len(steps)  # the first step whose loss was NaN: every one before was reported


def test_pretrain_bert_stops_when_its_loss_explodes():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert
    from test_bert_pretraining import VOCAB, _articles, _Tok

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    start = math.log(VOCAB) + math.log(2)  # which token, and next sentence or not
    with pytest.raises(TrainingDiverged, match=exploding("BERT", start)):
        pretrain_bert(model, _Tok(), _articles(), steps=10, warmup=1, batch_size=4, max_len=24, lr=LR, progress=False)


def _bert_classifier_data(n=16, T=8, vocab=30):
    g = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(5, vocab, (n, T), generator=g),
        "token_type_ids": torch.zeros(n, T, dtype=torch.long),
        "attention_mask": torch.ones(n, T, dtype=torch.long),
        "labels": torch.randint(0, 2, (n,), generator=g),
    }


def test_bert_finetune_stops_when_its_loss_explodes():
    from onehot2gpt.bert import BertConfig, BertForSequenceClassification, BertModel
    from onehot2gpt.bert_tasks import finetune

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=64, dropout=0.0)
    model = BertForSequenceClassification(BertModel(config), n_labels=2)
    with pytest.raises(TrainingDiverged, match=exploding("sequence", math.log(2))):
        finetune(model, _bert_classifier_data(), task="sequence", epochs=3, batch_size=4, lr=LR, progress=False)


def test_train_probe_stops_when_its_loss_explodes():
    from onehot2gpt.probing import train_probe

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 3, 8, generator=g), torch.randint(0, 2, (64,), generator=g)
    # held to ln 2, or to its first loss where that is higher
    with pytest.raises(TrainingDiverged, match=exploding("planted training", None)) as error:
        train_probe(x[:48], y[:48], x[48:], y[48:], epochs=5, lr=LR, batch_size=16, task="planted")
    assert float(str(error.value).split("starting level (")[1].split(")")[0]) >= round(math.log(2), 3)


def test_train_seq2seq_stops_when_its_loss_explodes():
    from onehot2gpt.transformer import Seq2SeqTransformer, TransformerConfig
    from onehot2gpt.transformer_tasks import encode_pairs, train_seq2seq
    from onehot2gpt.vocab import Vocab, tokenize_chars

    pairs = [("12 march 2001", "2001-03-12"), ("1 may 1999", "1999-05-01")] * 4
    src_vocab = Vocab.build([tokenize_chars(s) for s, _ in pairs])
    tgt_vocab = Vocab.build([tokenize_chars(t) for _, t in pairs])
    src, tgt = encode_pairs(pairs, src_vocab, tgt_vocab)
    torch.manual_seed(0)
    config = TransformerConfig.tiny(vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), dropout=0.0)
    model = Seq2SeqTransformer(config)
    with pytest.raises(TrainingDiverged, match=exploding("dates", math.log(len(tgt_vocab)))):
        train_seq2seq(model, src, tgt, steps=10, batch_size=4, lr=LR, warmup=1, progress=False, desc="dates")


def test_ulmfit_finetune_classifier_stops_when_its_loss_explodes():
    from onehot2gpt.elmo import BiLM, BiLMConfig

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    from _ulmfit import finetune_classifier  # the recipe's loop

    g = torch.Generator().manual_seed(0)
    ids, labels = torch.randint(3, 30, (16, 6), generator=g), torch.randint(0, 3, (16,), generator=g)
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.tiny(vocab_size=30))
    with pytest.raises(TrainingDiverged, match=exploding("fine-tuning with lr_top=1000", math.log(3))):
        finetune_classifier(
            bilm, ids, torch.ones_like(ids, dtype=torch.bool), labels, lr_top=LR, epochs=3, batch_size=4, n_classes=3
        )


def test_finetune_gpt_stops_when_its_loss_explodes():
    from onehot2gpt.gpt_tasks import GPTForSequenceClassification, finetune_gpt
    from test_gpt_tasks import V, tiny_gpt, toy_task

    model = GPTForSequenceClassification(tiny_gpt(), n_labels=2)
    start = math.log(2) + 0.5 * math.log(V)  # at worst: the classes, and λ = 0.5 times the next token
    with pytest.raises(TrainingDiverged, match=exploding("fine-tune", start)):
        finetune_gpt(model, toy_task(32, seed=1), lm_weight=0.5, epochs=2, batch_size=8, lr=LR, progress=False)


def test_the_recipes_fast_bert_loop_stops_when_its_loss_explodes():
    """recipes/_bert.py's pretrain_bert_fast (the course BERT's recipe) stops as pretrain_bert does."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    import _bert
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from test_bert_pretraining import VOCAB, _articles, _Tok

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    start = math.log(VOCAB) + math.log(2)
    with pytest.raises(TrainingDiverged, match=exploding("BERT", start)):
        _bert.pretrain_bert_fast(
            model, _Tok(), _articles(), steps=10, warmup=1, batch_size=4, max_len=24, lr=LR, progress=False
        )
