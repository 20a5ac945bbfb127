"""Benchmark: our BERT against Hugging Face's, and the course BERT on the four fine-tuning cases.

1. Speed and parity: all-MiniLM-L6-v2's real weights in our classes (``minilm_bert``) against
   ``transformers.BertModel`` (its default sdpa attention), forward only, batch 8 × 128 tokens of
   WikiText-2 valid, 2 threads, median over alternating repeats. ``max_abs_diff``: the largest
   |ours − HF| over the last hidden states at real (non-padding) positions.
2. ``mlm_acc_valid``: masked-piece accuracy of the course BERT (``load("bert-wikitext2")``)
   on 50 fixed random pre-training batches of WikiText-2 valid.
3. Fine-tuning, the paper's four cases, each from the course BERT with the same recipe
   (``bert_tasks.finetune``: AdamW, warm-up + linear decay, lr 3e-4, batch 32):
   * SST-2 sentiment from [CLS]: trained on a fixed random subset of SST-2 train, scored on the
     872-sentence test file; once from the pre-trained BERT and once from a randomly initialised
     BERT of the same size, same budget (``sst2_acc_pretrained``, ``sst2_acc_random_init``);
     repeated with scarce labels, ``--sst2-small`` rows (``sst2_small_acc_pretrained``,
     ``sst2_small_acc_random_init``);
   * UD English EWT part-of-speech tags on each word's first piece (train → test, ``pos_acc``);
   * SNLI sentence pairs (train on the dev file, score on the test file, "-" labels skipped,
     ``snli_acc``);
   * SQuAD 1.1 extractive QA: the dev file split by article 70/30 (``bert_tasks.split_by_article``),
     official EM/F1 normalisation (``squad_em``, ``squad_f1``), windows of 128 tokens (the
     course BERT's maximum), answers cut off by the window count as misses.

Run from the repository root::

    python bench/bert.py [--threads 2] [--epochs 2] [--sst2-train 8000] [--smoke]

The last line is one JSON object with ours_ms, hf_ms, max_abs_diff, mlm_acc_valid,
sst2_acc_pretrained, sst2_acc_random_init, pos_acc, snli_acc, squad_em, squad_f1 and the wall time
of each part. ``--smoke`` runs every part on tiny subsets, to check the script, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch
from onehot2gpt import bert_tasks, data
from onehot2gpt.bert import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from onehot2gpt.bert_pretraining import evaluate_pretraining, tokenize_articles
from onehot2gpt.checkpoints import load
from onehot2gpt.pretrained import _quiet_transformers, minilm_bert, minilm_path
from onehot2gpt.utils import set_seed, set_threads


def speed_and_parity(repeats: int, batch: int = 8, length: int = 128):
    import transformers

    ours, tokenizer = minilm_bert()
    with _quiet_transformers():  # its default attention (sdpa), as users get it
        hf = transformers.BertModel.from_pretrained(str(minilm_path()), local_files_only=True).eval()
    texts = [s for a in data.wikitext_articles("valid") for s in a if len(s.split()) > 20][:batch]
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=length, return_tensors="pt")
    with torch.no_grad():
        a = ours(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]).last_hidden_state
        b = hf(**enc).last_hidden_state
        real = enc["attention_mask"].bool()
        diff = (a[real] - b[real]).abs().max().item()
        times = {"ours": [], "hf": []}
        for _ in range(2):
            ours(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]), hf(**enc)
        for _ in range(repeats):
            for name in ("ours", "hf"):
                start = time.perf_counter()
                if name == "ours":
                    ours(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
                else:
                    hf(**enc)
                times[name].append(1000 * (time.perf_counter() - start))
    return statistics.median(times["ours"]), statistics.median(times["hf"]), diff


def course_bert():
    return load("bert-wikitext2")[:2]


def fresh_encoder(pretrained: bool, seed: int = 0) -> BertModel:
    model, _ = course_bert()
    if pretrained:
        return model.bert
    torch.manual_seed(seed)
    return BertModel(model.config)  # same size, random initialisation


def run_sst2(tok, n_train, epochs, lr, smoke) -> tuple[float, float]:
    rows = data.read_sst2("train")
    random.Random(0).shuffle(rows)
    train, test = rows[:n_train], data.read_sst2("test")[: 64 if smoke else None]
    train_x = bert_tasks.encode_sentences(tok, [t for t, _ in train], [l for _, l in train], max_len=64)
    test_x = bert_tasks.encode_sentences(tok, [t for t, _ in test], [l for _, l in test], max_len=64)
    scores = {}
    for pretrained in (True, False):
        set_seed(0)
        model = BertForSequenceClassification(fresh_encoder(pretrained), 2)
        bert_tasks.finetune(model, train_x, task="sequence", epochs=epochs, lr=lr, progress=False)
        scores[pretrained] = bert_tasks.evaluate(model, test_x, "sequence")["accuracy"]
    return scores[True], scores[False]


def run_pos(tok, epochs, lr, smoke):
    train, test = data.read_ud_pos("train"), data.read_ud_pos("test")
    if smoke:
        train, test = train[:64], test[:32]
    encode = lambda rows: bert_tasks.encode_tagged(tok, [w for w, _ in rows], [t for _, t in rows], max_len=128)
    set_seed(0)
    model = BertForTokenClassification(fresh_encoder(True), len(bert_tasks.UPOS_TAGS))
    bert_tasks.finetune(model, encode(train), task="token", epochs=epochs, lr=lr, progress=False)
    return bert_tasks.evaluate(model, encode(test), "token")["accuracy"]


def run_snli(tok, epochs, lr, smoke):
    train, test = data.read_snli("dev"), data.read_snli("test")
    if smoke:
        train, test = train[:64], test[:32]
    encode = lambda rows: bert_tasks.encode_pairs(
        tok, [p for p, _, _ in rows], [h for _, h, _ in rows], [l for _, _, l in rows], max_len=128
    )
    set_seed(0)
    model = BertForSequenceClassification(fresh_encoder(True), len(bert_tasks.SNLI_LABELS))
    bert_tasks.finetune(model, encode(train), task="sequence", epochs=epochs, lr=lr, progress=False)
    return bert_tasks.evaluate(model, encode(test), "sequence")["accuracy"]


def run_squad(tok, epochs, lr, smoke):
    train, test = bert_tasks.split_by_article(data.read_squad(), test_fraction=0.3, seed=0)
    if smoke:
        train, test = train[:64], test[:32]
    train_x = bert_tasks.encode_squad(tok, train, max_len=128)
    test_x = bert_tasks.encode_squad(tok, test, max_len=128)
    set_seed(0)
    model = BertForQuestionAnswering(fresh_encoder(True))
    bert_tasks.finetune(
        model, bert_tasks.select(train_x, train_x["answerable"]), task="qa", epochs=epochs, lr=lr, progress=False
    )
    result = bert_tasks.evaluate(model, test_x, "qa")
    return result["exact_match"], result["f1"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--sst2-train", type=int, default=8000)
    p.add_argument("--sst2-small", type=int, default=1000, help="the scarce-label run: this many rows")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--smoke", action="store_true", help="tiny subsets: checks the script, not the numbers")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    epochs = 1 if args.smoke else args.epochs
    result, seconds = {}, {}

    start = time.time()
    ours_ms, hf_ms, diff = speed_and_parity(2 if args.smoke else args.repeats)
    result.update(ours_ms=round(ours_ms, 1), hf_ms=round(hf_ms, 1), max_abs_diff=float(f"{diff:.3g}"))
    seconds["speed"] = time.time() - start
    print(f"MiniLM forward, batch 8 x 128: ours {ours_ms:.1f} ms, HF {hf_ms:.1f} ms, max |diff| {diff:.2g}", flush=True)

    start = time.time()
    model, tok = course_bert()
    valid = tokenize_articles(tok, data.wikitext_articles("valid"))
    scores = evaluate_pretraining(model, tok, valid, batches=2 if args.smoke else 50)
    result["mlm_acc_valid"] = round(scores["mlm_accuracy"], 4)
    result["nsp_acc_valid"] = round(scores["nsp_accuracy"], 4)
    seconds["mlm"] = time.time() - start
    print(
        f"course BERT on WikiText-2 valid: masked accuracy {scores['mlm_accuracy']:.3f}, "
        f"NSP {scores['nsp_accuracy']:.3f}",
        flush=True,
    )

    for name, run in (
        ("sst2", lambda: run_sst2(tok, 64 if args.smoke else args.sst2_train, epochs, args.lr, args.smoke)),
        ("sst2_small", lambda: run_sst2(tok, 64 if args.smoke else args.sst2_small, epochs, args.lr, args.smoke)),
        ("pos", lambda: run_pos(tok, epochs, args.lr, args.smoke)),
        ("snli", lambda: run_snli(tok, epochs, args.lr, args.smoke)),
        ("squad", lambda: run_squad(tok, epochs, args.lr, args.smoke)),
    ):
        start = time.time()
        out = run()
        seconds[name] = time.time() - start
        if name.startswith("sst2"):
            result[f"{name}_acc_pretrained"], result[f"{name}_acc_random_init"] = round(out[0], 4), round(out[1], 4)
        elif name == "squad":
            result["squad_em"], result["squad_f1"] = round(out[0], 2), round(out[1], 2)
        else:
            result[f"{name}_acc"] = round(out, 4)
        print(f"{name}: {out} ({seconds[name]:.0f} s)", flush=True)

    result.update(
        seconds={k: round(v, 1) for k, v in seconds.items()},
        threads=threads,
        epochs=epochs,
        lr=args.lr,
        sst2_train=args.sst2_train,
        sst2_small=args.sst2_small,
        smoke=args.smoke,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
