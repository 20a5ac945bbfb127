"""Benchmark: the course's story in one table: contextual beats static beats one-hot.

Three parts, all with the course checkpoints (``bilm-wikitext2``, ``word2vec-wikitext2``):

1. Language modelling on WikiText-2 valid. The biLM's forward (and backward) perplexity against
   an interpolated Kneser–Ney 3-gram (``NGramLM``) fitted on WikiText-2 train. Both use the same
   text and conventions as the biLM's training (``python -m onehot2gpt.elmo train``): lower-cased
   paragraphs cut into sentences after every "." (``split_sentences``), the biLM's own 20k-word
   vocabulary (other words and WikiText's own ``<unk>`` → ``<unk>``, which both models must then
   predict), each sentence wrapped in <bos> … <eos>. Both count exactly the same predictions:
   every word of every sentence plus the closing <eos> (the backward models: every word plus
   <bos>, which the reversed n-gram sees as its <eos>), i.e. len(sentence) + 1 per sentence.
2. Part-of-speech tagging on UD English EWT (17 UPOS tags; train on train, report test): the
   linear probe of ``probing.train_probe`` on top of
   * one-hot: a table of tag scores per word id of the biLM vocabulary (lower-cased words,
     unknown → <unk>);
   * word2vec: the frozen 100-d skip-gram vectors; unknown words get the vector of WikiText's
     own ``<unk>`` token (trained like any other word: the stand-in for rare words);
   * ELMo top: the biLM's top layer only (``layer=L``);
   * ELMo mix: a learned scalar mix over all L+1 layers (ELMo's recipe).
   (extra: ELMo layer 0, the biLM's context-free token layer, as a static baseline.)
3. Sentiment, SST-2 (GLUE dev, 872 sentences, as the test set): a linear probe on the mean over
   the tokens of the word2vec vectors, or of each biLM layer (then the scalar mix). The probes
   train on a fixed random subset of SST-2 train (which includes phrases).

All probes share one setting (Adam lr 1e-2, batch 512, seed 0; 10 epochs for POS, 20 for
SST-2, layer norm before the mix); nothing is tuned on the test sets. Nothing is cached.

Run from the repository root::

    python bench/elmo.py [--pos-train 0] [--sst2-train 20000] [--threads 2] [--smoke]

Prints readable lines and, as the last line, one JSON object that starts with bilm_valid_ppl,
ngram_valid_ppl, pos_acc_onehot, pos_acc_word2vec, pos_acc_elmo_top, pos_acc_elmo_mix,
sst2_acc_word2vec, sst2_acc_elmo_mix, followed by extras (sizes, seconds, layer weights).
``--smoke`` runs every part on tiny subsets, to check the script, not the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from onehot2gpt import data
from onehot2gpt.checkpoints import load
from onehot2gpt.elmo import ElmoFeatures, split_sentences
from onehot2gpt.probing import sentence_features, token_features, train_probe
from onehot2gpt.rnn_lm import NGramLM
from onehot2gpt.utils import set_seed, set_threads
from onehot2gpt.vocab import BOS, EOS, UNK, Vocab
from onehot2gpt.word2vec import WordVectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
from _bilm import bilm_perplexity  # noqa: E402  (recipes/_bilm.py: the biLM recipe's perplexity)

SEED = 0
POS_PROBE = dict(epochs=10, lr=1e-2, batch_size=512, seed=SEED)
SST_PROBE = dict(epochs=20, lr=1e-2, batch_size=512, seed=SEED)


# --------------------------------------------------------------------------------- helpers


def wikitext_pieces(split: str, max_tokens: int) -> list[list[str]]:
    """WikiText-2 as the biLM trained on it: lower-cased sentences cut after ".", and any longer
    than max_tokens cut into pieces (as the biLM recipe's ``sentence_ids`` does; none are in WikiText-2)."""
    sentences = [s for p in data.wikitext_sentences(split, lower=True) for s in split_sentences(p)]
    return [s[i : i + max_tokens] for s in sentences for i in range(0, len(s), max_tokens)]


def elmo_encode(
    features: ElmoFeatures, sentences: Sequence[Sequence[str]], pool: str, chunk: int = 512
) -> torch.Tensor:
    """Frozen biLM layers for each token (pool="token": (N, L+1, 2H), sentences in the given
    order) or the mean over each sentence's tokens (pool="mean": (B, L+1, 2H))."""
    parts = []
    for start in range(0, len(sentences), chunk):
        layers, mask = features.encode(sentences[start : start + chunk])
        parts.append(token_features(layers, mask) if pool == "token" else sentence_features(layers, mask))
    return torch.cat(parts)


def word2vec_ids(wv: WordVectors, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, float]:
    """Flat ids of all tokens in the word2vec vocabulary (unknown → WikiText's "<unk>" word)."""
    unk = wv.vocab.stoi[UNK]
    ids = [wv.vocab.stoi.get(w, unk) for s in sentences for w in s]
    known = sum(w in wv.vocab.stoi for s in sentences for w in s)
    return torch.tensor(ids, dtype=torch.long), 1 - known / max(len(ids), 1)


def word2vec_means(wv: WordVectors, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """(B, 1, D): the mean word vector of each sentence (unknown → the "<unk>" vector)."""
    ids, _ = word2vec_ids(wv, sentences)
    lengths = torch.tensor([len(s) for s in sentences])
    owner = torch.repeat_interleave(torch.arange(len(sentences)), lengths)
    sums = torch.zeros(len(sentences), wv.d_model).index_add_(0, owner, wv.vectors[ids])
    return (sums / lengths[:, None].clamp_min(1))[:, None, :]


def oov_rate(vocab: Vocab, sentences: Sequence[Sequence[str]]) -> float:
    n = sum(len(s) for s in sentences)
    return sum(w not in vocab.stoi for s in sentences for w in s) / max(n, 1)


def rounded(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


# --------------------------------------------------------------------------------- parts


def language_models(bilm, vocab: Vocab, order: int, smoke: bool) -> dict:
    max_tokens = bilm.config.max_len - 2
    train, valid = wikitext_pieces("train", max_tokens), wikitext_pieces("valid", max_tokens)
    if smoke:
        train, valid = train[:3000], valid[:200]
    n_predicted = sum(len(s) + 1 for s in valid)
    print(
        f"WikiText-2: train {len(train):,} sentences, {sum(map(len, train)):,} tokens; valid "
        f"{len(valid):,} sentences, {n_predicted - len(valid):,} tokens; vocabulary {len(vocab):,} "
        f"(the biLM's), valid OOV rate {oov_rate(vocab, valid):.2%} (WikiText's own <unk> included)"
    )
    print(
        f"Both LMs score the same {n_predicted:,} predictions per direction: each valid sentence's "
        f"words plus its <eos> (forward) or <bos> (backward), unknown words as <unk>"
    )

    start = time.perf_counter()
    seqs = [[vocab[BOS]] + vocab.encode_tokens(s) + [vocab[EOS]] for s in valid]
    assert sum(len(s) - 1 for s in seqs) == n_predicted  # bilm.nll: n−1 predictions per row
    bilm_fwd, bilm_bwd = bilm_perplexity(bilm, seqs)
    bilm_seconds = time.perf_counter() - start

    start = time.perf_counter()
    ngram = {}
    for direction, flip in (("fwd", lambda s: s), ("bwd", lambda s: s[::-1])):
        lm = NGramLM(order, vocab).fit([flip(s) for s in train])
        ngram[direction] = lm.perplexity([flip(s) for s in valid])  # counts len(s) + 1 per sentence
    ngram_seconds = time.perf_counter() - start
    print(f"biLM valid perplexity: forward {bilm_fwd:.2f}, backward {bilm_bwd:.2f} ({bilm_seconds:.0f} s)")
    print(
        f"{order}-gram Kneser-Ney (D=0.75) valid perplexity: forward {ngram['fwd']:.2f}, backward "
        f"{ngram['bwd']:.2f} ({ngram_seconds:.0f} s for both fits and scores)"
    )
    return {
        "bilm_fwd": bilm_fwd,
        "bilm_bwd": bilm_bwd,
        "ngram_fwd": ngram["fwd"],
        "ngram_bwd": ngram["bwd"],
        "n_predicted": n_predicted,
        "seconds": bilm_seconds + ngram_seconds,
    }


def pos_tagging(features: ElmoFeatures, wv: WordVectors, n_train: int, smoke: bool) -> dict:
    start = time.perf_counter()
    train = data.read_ud_pos("train", lower=True)
    test = data.read_ud_pos("test", lower=True)
    if n_train and n_train < len(train):
        train = random.Random(SEED).sample(train, n_train)
    if smoke:
        test = test[:200]
    # Sort by length: less padding when encoding; the probe shuffles anyway.
    train, test = (sorted(split, key=lambda x: len(x[0])) for split in (train, test))
    tags = sorted({t for _, ts in train for t in ts})
    tag_id = {t: i for i, t in enumerate(tags)}
    y = {
        name: torch.tensor([tag_id[t] for _, ts in split for t in ts])
        for name, split in (("train", train), ("test", test))
    }
    words = {"train": [w for w, _ in train], "test": [w for w, _ in test]}
    n_tokens = {k: len(v) for k, v in y.items()}
    print(
        f"UD EWT POS: train {len(train):,} sentences, {n_tokens['train']:,} tokens; test {len(test):,} "
        f"sentences, {n_tokens['test']:,} tokens; {len(tags)} tags; test OOV: biLM vocab "
        f"{oov_rate(features.vocab, words['test']):.2%}, word2vec vocab {oov_rate(wv.vocab, words['test']):.2%}"
    )
    acc, result = {}, {}

    def run(name: str, train_x, test_x, **kw) -> None:
        t0 = time.perf_counter()
        r = train_probe(
            train_x, y["train"], test_x, y["test"], n_classes=len(tags), task=f"pos-{name}", **POS_PROBE, **kw
        )
        acc[name], result[name] = r.test_accuracy, r
        print(
            f"  POS {name:>10}: test accuracy {r.test_accuracy:.4f} (train {r.train_accuracy:.4f}; "
            f"layer weights {[round(w, 2) for w in r.weights.tolist()]}; {time.perf_counter() - t0:.0f} s)"
        )

    # one-hot over the biLM vocabulary: the probe is a table of tag scores per word id
    onehot = {k: torch.tensor(features.vocab.encode_tokens([w for s in v for w in s])) for k, v in words.items()}
    run("onehot", onehot["train"], onehot["test"], onehot_size=len(features.vocab))

    w2v = {k: wv.vectors[word2vec_ids(wv, v)[0]][:, None, :] for k, v in words.items()}  # (N, 1, 100)
    run("word2vec", w2v["train"], w2v["test"])
    del w2v

    t0 = time.perf_counter()
    elmo = {k: elmo_encode(features, v, "token") for k, v in words.items()}  # (N, L+1, 2H)
    encode_seconds = time.perf_counter() - t0
    assert len(elmo["train"]) == n_tokens["train"] and len(elmo["test"]) == n_tokens["test"]
    print(f"  encoded {sum(n_tokens.values()):,} tokens with the biLM in {encode_seconds:.0f} s")
    top = features.n_layers - 1
    run("elmo_layer0", elmo["train"], elmo["test"], layer=0)
    run("elmo_top", elmo["train"], elmo["test"], layer=top)
    run("elmo_mix", elmo["train"], elmo["test"])
    del elmo
    return {
        "acc": acc,
        "mix_weights": result["elmo_mix"].weights.tolist(),
        "n_train_sentences": len(train),
        "n_train_tokens": n_tokens["train"],
        "n_test_tokens": n_tokens["test"],
        "encode_seconds": encode_seconds,
        "seconds": time.perf_counter() - start,
    }


def sentiment(features: ElmoFeatures, wv: WordVectors, n_train: int, smoke: bool) -> dict:
    start = time.perf_counter()
    train = data.read_sst2("train")
    test = data.read_sst2("test")
    if n_train and n_train < len(train):
        train = random.Random(SEED).sample(train, n_train)
    if smoke:
        test = test[:200]
    split = {"train": train, "test": test}
    sents = {k: [s.lower().split() for s, _ in v] for k, v in split.items()}
    y = {k: torch.tensor([label for _, label in v]) for k, v in split.items()}
    print(
        f"SST-2: train {len(train):,} of 60,614 sentences and phrases (random, seed {SEED}), "
        f"{sum(map(len, sents['train'])):,} tokens; test {len(test):,} sentences; test OOV: biLM vocab "
        f"{oov_rate(features.vocab, sents['test']):.2%}, word2vec vocab {oov_rate(wv.vocab, sents['test']):.2%}"
    )
    acc, weights = {}, None

    def run(name: str, train_x, test_x, **kw):
        t0 = time.perf_counter()
        r = train_probe(train_x, y["train"], test_x, y["test"], n_classes=2, task=f"sst2-{name}", **SST_PROBE, **kw)
        acc[name] = r.test_accuracy
        print(
            f"  SST-2 {name:>10}: test accuracy {r.test_accuracy:.4f} (train {r.train_accuracy:.4f}; "
            f"layer weights {[round(w, 2) for w in r.weights.tolist()]}; {time.perf_counter() - t0:.0f} s)"
        )
        return r

    run("word2vec", word2vec_means(wv, sents["train"]), word2vec_means(wv, sents["test"]))
    t0 = time.perf_counter()
    order = {k: sorted(range(len(v)), key=lambda i: len(v[i])) for k, v in sents.items()}
    elmo = {}
    for k, v in sents.items():  # encode sorted by length, then restore the order
        pooled = elmo_encode(features, [v[i] for i in order[k]], "mean")
        elmo[k] = torch.empty_like(pooled).index_copy_(0, torch.tensor(order[k]), pooled)
    encode_seconds = time.perf_counter() - t0
    print(f"  encoded {sum(map(len, sents['train'] + sents['test'])):,} tokens with the biLM in {encode_seconds:.0f} s")
    weights = run("elmo_mix", elmo["train"], elmo["test"]).weights.tolist()
    return {
        "acc": acc,
        "mix_weights": weights,
        "n_train": len(train),
        "n_test": len(test),
        "encode_seconds": encode_seconds,
        "seconds": time.perf_counter() - start,
    }


# --------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bilm", default=None, help="biLM checkpoint folder (default: the course's bilm-wikitext2)")
    parser.add_argument("--ngram", type=int, default=3, help="order of the Kneser-Ney baseline")
    parser.add_argument("--pos-train", type=int, default=0, help="UD EWT train sentences (0 = all 12,544)")
    parser.add_argument("--sst2-train", type=int, default=20_000, help="SST-2 train rows (0 = all 60,614)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="tiny subsets: checks the script, not the numbers")
    args = parser.parse_args()
    if args.smoke:
        args.pos_train, args.sst2_train = args.pos_train or 500, min(args.sst2_train or 500, 500)

    wall = time.perf_counter()
    set_seed(SEED)
    threads = set_threads(args.threads)
    bilm_dir = args.bilm or "bilm-wikitext2"
    bilm, vocab, _, trained = load(bilm_dir, kind="bilm")
    wv = load("word2vec-wikitext2").model
    features = ElmoFeatures(bilm, vocab, lower=True, batch_size=64)
    c = bilm.config
    n_params = sum(p.numel() for p in bilm.parameters())
    print(
        f"biLM {bilm_dir}: {n_params:,} parameters, L={c.n_layers} layers of 2x{c.hidden} "
        f"(ELMo vectors {c.output_dim}), vocabulary {len(vocab):,}, trained {trained.get('train_minutes', '?')} min; "
        f"word2vec: {len(wv):,} words x {wv.d_model}; torch {torch.__version__}, {threads} threads, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"
        + (" [SMOKE TEST]" if args.smoke else "")
    )

    lm = language_models(bilm, vocab, args.ngram, args.smoke)
    pos = pos_tagging(features, wv, args.pos_train, args.smoke)
    sst = sentiment(features, wv, args.sst2_train, args.smoke)

    seconds = time.perf_counter() - wall
    summary = {
        "bilm_valid_ppl": rounded(lm["bilm_fwd"], 2),
        "ngram_valid_ppl": rounded(lm["ngram_fwd"], 2),
        "pos_acc_onehot": rounded(pos["acc"]["onehot"]),
        "pos_acc_word2vec": rounded(pos["acc"]["word2vec"]),
        "pos_acc_elmo_top": rounded(pos["acc"]["elmo_top"]),
        "pos_acc_elmo_mix": rounded(pos["acc"]["elmo_mix"]),
        "sst2_acc_word2vec": rounded(sst["acc"]["word2vec"]),
        "sst2_acc_elmo_mix": rounded(sst["acc"]["elmo_mix"]),
        # extras
        "bilm_valid_ppl_bwd": rounded(lm["bilm_bwd"], 2),
        "ngram_valid_ppl_bwd": rounded(lm["ngram_bwd"], 2),
        "ngram_order": args.ngram,
        "lm_predicted_tokens": lm["n_predicted"],
        "pos_acc_elmo_layer0": rounded(pos["acc"]["elmo_layer0"]),
        "pos_mix_weights": [rounded(w, 3) for w in pos["mix_weights"]],
        "sst2_mix_weights": [rounded(w, 3) for w in sst["mix_weights"]],
        "pos_train_sentences": pos["n_train_sentences"],
        "pos_train_tokens": pos["n_train_tokens"],
        "pos_test_tokens": pos["n_test_tokens"],
        "sst2_train_rows": sst["n_train"],
        "sst2_test_rows": sst["n_test"],
        "word2vec_unknown": "vector of WikiText's <unk> token",
        "seconds_lm": round(lm["seconds"], 1),
        "seconds_pos": round(pos["seconds"], 1),
        "seconds_sst2": round(sst["seconds"], 1),
        "seconds_total": round(seconds, 1),
        "threads": threads,
        "smoke": args.smoke,
    }
    checks = {
        "pos_acc_elmo_mix >= pos_acc_word2vec + 0.02": summary["pos_acc_elmo_mix"]
        >= summary["pos_acc_word2vec"] + 0.02,
        "bilm_valid_ppl < ngram_valid_ppl": summary["bilm_valid_ppl"] < summary["ngram_valid_ppl"],
    }
    print(f"{'representation':<16}{'POS (UD EWT test)':>20}{'SST-2 (GLUE dev)':>20}")
    for name, p, s in (
        ("one-hot", pos["acc"]["onehot"], None),
        ("word2vec", pos["acc"]["word2vec"], sst["acc"]["word2vec"]),
        ("ELMo layer 0", pos["acc"]["elmo_layer0"], None),
        ("ELMo top", pos["acc"]["elmo_top"], None),
        ("ELMo mix", pos["acc"]["elmo_mix"], sst["acc"]["elmo_mix"]),
    ):
        print(f"{name:<16}{p:>20.4f}{'' if s is None else f'{s:.4f}':>20}")
    print(
        f"language model, WikiText-2 valid perplexity: biLM forward {summary['bilm_valid_ppl']:.2f} vs "
        f"{args.ngram}-gram Kneser-Ney {summary['ngram_valid_ppl']:.2f}"
    )
    for check, ok in checks.items():
        print(f"target {check}: {'met' if ok else 'NOT met'}")
    print(f"total wall time {seconds / 60:.1f} min")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
