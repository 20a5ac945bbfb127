"""Benchmark: a real pretrained BERT (all-MiniLM-L6-v2, offline) fine-tuned on SST-2, SNLI and SQuAD.

What notebook 08 shows live in a few seconds, at the size where the numbers settle:

* ``sst2_accuracy``: MiniLM fully fine-tuned (``bert_tasks.finetune``: AdamW, warm-up + linear decay,
  batch 32, one epoch) on ``--sst2-train`` shuffled SST-2 training sentences, with a linear head
  on the mean of the last layer (``pooling="mean"``: what sentence-transformers trained), scored
  on the 872 sentences of the test file (the GLUE dev split; GLUE's test labels are hidden).
* ``snli_accuracy``: the same recipe on SNLI sentence pairs, ``[CLS] premise [SEP] hypothesis
  [SEP]``, trained on the 9,842 labelled dev pairs, scored on the 9,824 labelled test pairs.
* ``squad_exact_match``, ``squad_f1`` (0–100): the course's QA checkpoint (``minilm-qa-squad``,
  built by ``python recipes/minilm-qa-squad.py``: MiniLM's top layers fine-tuned on 34 of
  SQuAD 1.1 dev's 48 articles) scored on every question of the 14 articles it never trained on
  (``recipes.qa_split``), with SQuAD's official normalisation. A question whose answer falls
  outside the 256-piece window counts as a miss.

* ``null``: "no answer in this passage". The held-out articles are split in halves by article
  (``recipes.null_threshold_report``, the function the QA recipe records its threshold with); up
  to ``--null-sample`` questions of each half are asked of their own paragraph and of a paragraph
  of another article of that half (``bert_tasks.unanswerable_pairs``); the threshold on the null
  margin is chosen on the first half and scored on the second: the share of answerable questions
  answered, of unanswerable ones declined, and F1 with declining counted as wrong.
  ``--checkpoint DIR`` scores another QA checkpoint, e.g. one trained on SQuAD 1.1 alone.

Targets (issue 15): SST-2 ≥ 0.85, SNLI ≥ 0.70, SQuAD F1 ≥ 50 on articles never trained on.

Run from the repository root::

    python bench/pretrained.py [--threads 2] [--sst2-train 20000] [--only sst2,snli,squad,null] [--smoke]

The last line is one JSON object with the keys of the parts run, the settings and the seconds of
each part (``--out FILE`` also writes it there). ``--smoke`` runs every part on tiny subsets, to
check the script, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from onehot2gpt import bert_tasks, data
from onehot2gpt.bert import BertForSequenceClassification
from onehot2gpt.checkpoints import load
from onehot2gpt.pretrained import minilm_bert, minilm_path
from onehot2gpt.subword import WordPieceTokenizer
from onehot2gpt.utils import seeded, set_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _qa import null_threshold_report, qa_split  # noqa: E402  (recipes/_qa.py: the QA recipe's split and scores)


def fine_tune_minilm(train: dict, test: dict, n_labels: int, lr: float, epochs: int) -> float:
    """Full fine-tuning of MiniLM with a mean-pooled linear head → test accuracy."""
    with seeded(0):
        model = BertForSequenceClassification(minilm_bert()[0], n_labels, pooling="mean")
        bert_tasks.finetune(model, train, task="sequence", epochs=epochs, batch_size=32, lr=lr, seed=0)
    return bert_tasks.evaluate(model, test, "sequence")["accuracy"]


def run_sst2(tok, n_train: int, lr: float, epochs: int, smoke: bool) -> float:
    rows = data.read_sst2("train")
    random.Random(0).shuffle(rows)
    test = data.read_sst2("test")[: 64 if smoke else None]
    encode = lambda r: bert_tasks.encode_sentences(tok, [s for s, _ in r], [y for _, y in r], max_len=64)
    return fine_tune_minilm(encode(rows[:n_train]), encode(test), 2, lr, epochs)


def run_snli(tok, lr: float, epochs: int, smoke: bool) -> float:
    train, test = data.read_snli("dev"), data.read_snli("test")
    if smoke:
        train, test = train[:64], test[:64]
    encode = lambda r: bert_tasks.encode_pairs(
        tok, [p for p, _, _ in r], [h for _, h, _ in r], [y for _, _, y in r], max_len=128
    )
    return fine_tune_minilm(encode(train), encode(test), len(bert_tasks.SNLI_LABELS), lr, epochs)


def run_null(checkpoint, sample: int, smoke: bool) -> dict:
    model, tok = load(checkpoint or "minilm-qa-squad", kind="minilm-qa")[:2]
    _, held_out = qa_split(*training_split())
    return null_threshold_report(model, tok, held_out, model_max_len(), 4 if smoke else sample, seed=0)


def run_squad(smoke: bool) -> dict:
    model, tok = load("minilm-qa-squad")[:2]
    max_len = model_max_len()
    _, held_out = qa_split(*training_split())
    held_out = held_out[:32] if smoke else held_out
    scores = bert_tasks.evaluate(model, bert_tasks.encode_squad(tok, held_out, max_len=max_len), "qa")
    return {
        "exact_match": scores["exact_match"],
        "f1": scores["f1"],
        "questions": len(held_out),
        "articles": len({e["title"] for e in held_out}),
    }


def _qa_arguments() -> dict:
    from onehot2gpt.checkpoints import checkpoint_path, read_record

    return read_record(checkpoint_path("minilm-qa-squad"))["info"]["arguments"]


def model_max_len() -> int:
    """The window the QA checkpoint was trained with."""
    return _qa_arguments()["max_len"]


def training_split() -> tuple[float, int]:
    """(test_fraction, seed) of the split the QA checkpoint was trained on: its held-out side is scored."""
    args = _qa_arguments()
    return args["test_fraction"], args["seed"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sst2-train", type=int, default=20000)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--only", default="sst2,snli,squad,null", help="the parts to run, comma-separated")
    p.add_argument("--checkpoint", default=None, help="the QA checkpoint for the null part (default: the course's)")
    p.add_argument(
        "--null-sample", type=int, default=150, help="null part: questions per half of the held-out articles"
    )
    p.add_argument("--out", default=None, help="also write the JSON result to this file")
    p.add_argument("--smoke", action="store_true", help="tiny subsets: checks the script, not the numbers")
    args = p.parse_args(argv)
    parts = args.only.split(",")
    unknown = sorted(set(parts) - {"sst2", "snli", "squad", "null"})
    if unknown:
        p.error(f"--only: unknown parts {unknown}; choose from sst2, snli, squad, null")
    threads = set_threads(args.threads)
    tok = WordPieceTokenizer.load(minilm_path() / "vocab.txt")
    result, seconds = {}, {}

    if "sst2" in parts:
        start = time.time()
        result["sst2_accuracy"] = round(
            run_sst2(tok, 64 if args.smoke else args.sst2_train, args.lr, args.epochs, args.smoke), 4
        )
        seconds["sst2"] = round(time.time() - start, 1)
        print(f"SST-2: {result['sst2_accuracy']:.4f} ({seconds['sst2']:.0f} s)", flush=True)

    if "snli" in parts:
        start = time.time()
        result["snli_accuracy"] = round(run_snli(tok, args.lr, args.epochs, args.smoke), 4)
        seconds["snli"] = round(time.time() - start, 1)
        print(f"SNLI: {result['snli_accuracy']:.4f} ({seconds['snli']:.0f} s)", flush=True)

    if "squad" in parts:
        start = time.time()
        squad = run_squad(args.smoke)
        result["squad_exact_match"], result["squad_f1"] = round(squad["exact_match"], 2), round(squad["f1"], 2)
        result.update(squad_questions=squad["questions"], squad_articles=squad["articles"])
        seconds["squad"] = round(time.time() - start, 1)
        print(
            f"SQuAD on {squad['questions']} questions of {squad['articles']} unseen articles: "
            f"EM {squad['exact_match']:.1f}, F1 {squad['f1']:.1f} ({seconds['squad']:.0f} s)",
            flush=True,
        )

    if "null" in parts:
        start = time.time()
        null = result["null"] = run_null(args.checkpoint, args.null_sample, args.smoke)
        result["null_checkpoint"] = args.checkpoint or "the course's minilm-qa-squad"
        seconds["null"] = round(time.time() - start, 1)
        report = null["report"]
        print(
            f"null span: threshold {null['threshold']} chosen on {len(null['tune_articles'])} articles; on "
            f"{report['answerable_questions']} + {report['unanswerable_questions']} questions of "
            f"{len(null['report_articles'])} others: answered {report['answered']:.3f}, declined "
            f"{report['abstained']:.3f}; F1 {report['f1_always_answer']} always answering, "
            f"{report['f1_with_null']} with the null ({seconds['null']:.0f} s)",
            flush=True,
        )

    result.update(
        seconds=seconds,
        threads=threads,
        lr=args.lr,
        epochs=args.epochs,
        sst2_train=args.sst2_train,
        parts=parts,
        smoke=args.smoke,
    )
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
