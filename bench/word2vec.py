"""Benchmark: our skip-gram (onehot2gpt.word2vec) against gensim's Word2Vec on WikiText-2.

Both train on the same lower-cased WikiText-2 train paragraphs with the same settings: skip-gram
with negative sampling, dim 100, window 5, 5 noise words, min_count 5, sample 1e-3, 5 epochs,
lr 0.025 → 0.0001, seed 0, 2 threads (gensim ``workers=2``, ours ``threads=2``: two Hogwild
workers each). The time of each is the wall time from the token lists to trained vectors, i.e.
building the vocabulary plus training; reading the corpus is done once, before, and not timed.

Both sets of vectors are then scored by the same code, ``WordVectors.evaluate_analogies``
(Google analogies, 3CosAdd over the 30,000 most frequent words, questions with other words
skipped, as gensim's ``evaluate_word_analogies``) and ``WordVectors.evaluate_wordsim``
(WordSim-353 Spearman, pairs with unknown words skipped).

Run from the repository root (needs gensim: ``pip install -e .[bench]``)::

    python bench/word2vec.py [--epochs 5] [--threads 2] [--repeats 1] [--smoke]

Prints readable lines and, as the last line, one JSON object that starts with ours_seconds,
gensim_seconds, ours_analogy, gensim_analogy, ours_wordsim, gensim_wordsim. With --repeats N
both are trained N times, alternating; times are the best of N, scores the mean.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time

import torch
from onehot2gpt import data
from onehot2gpt.vocab import Vocab
from onehot2gpt.word2vec import WordVectors, train_word2vec

SETTINGS = dict(d_model=100, window=5, negative=5, min_count=5, sample=1e-3, lr=0.025, min_lr=1e-4, seed=0)


def train_ours(sentences, epochs: int, threads: int) -> tuple[WordVectors, float]:
    start = time.perf_counter()
    wv = train_word2vec(sentences, epochs=epochs, threads=threads, model="skipgram", progress=False, **SETTINGS)
    return wv, time.perf_counter() - start


def train_gensim(sentences, epochs: int, threads: int) -> tuple[WordVectors, float]:
    from gensim.models import Word2Vec

    start = time.perf_counter()
    model = Word2Vec(
        sentences,
        sg=1,
        hs=0,
        vector_size=SETTINGS["d_model"],
        window=SETTINGS["window"],
        negative=SETTINGS["negative"],
        min_count=SETTINGS["min_count"],
        sample=SETTINGS["sample"],
        alpha=SETTINGS["lr"],
        min_alpha=SETTINGS["min_lr"],
        seed=SETTINGS["seed"],
        epochs=epochs,
        workers=threads,
    )
    seconds = time.perf_counter() - start
    words = list(model.wv.index_to_key)  # most frequent first, like ours
    counts = {w: int(model.wv.get_vecattr(w, "count")) for w in words}
    return WordVectors(torch.from_numpy(model.wv.vectors.copy()), Vocab(words, counts, specials=())), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--smoke", action="store_true", help="500 paragraphs, 1 epoch: checks the script, not the numbers"
    )
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("gensim").setLevel(logging.WARNING)
    try:
        import gensim
    except ImportError:
        raise SystemExit("this benchmark needs gensim: pip install -e .[bench]") from None

    sentences = data.wikitext_sentences("train", lower=True)
    if args.smoke:
        sentences, args.epochs = sentences[:500], 1
    questions, pairs = data.read_analogies(), data.read_wordsim353()
    print(
        f"WikiText-2 train: {len(sentences):,} paragraphs, {sum(map(len, sentences)):,} tokens; "
        f"torch {torch.__version__}, gensim {gensim.__version__}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), {args.threads} threads each"
    )

    results: dict[str, dict[str, list[float]]] = {
        name: {"seconds": [], "analogy": [], "wordsim": []} for name in ("ours", "gensim")
    }
    for repeat in range(args.repeats):
        order = [("gensim", train_gensim), ("ours", train_ours)]
        for name, train in order if repeat % 2 == 0 else order[::-1]:
            wv, seconds = train(sentences, args.epochs, args.threads)
            analogy = wv.evaluate_analogies(questions, restrict_vocab=30000)
            wordsim = wv.evaluate_wordsim(pairs)
            for key, value in (
                ("seconds", seconds),
                ("analogy", analogy["accuracy"]),
                ("wordsim", wordsim["spearman"]),
            ):
                results[name][key].append(value)
            print(
                f"{name:>6}: {seconds:5.1f} s, {len(wv):,} words; analogies {analogy['accuracy']:.4f} "
                f"({analogy['n_used']:,}/{analogy['n_total']:,} questions used); "
                f"WordSim-353 Spearman {wordsim['spearman']:.4f} ({wordsim['n_used']}/{wordsim['n_total']} pairs)"
            )

    best = {name: min(r["seconds"]) for name, r in results.items()}
    mean = {name: {k: sum(v) / len(v) for k, v in r.items()} for name, r in results.items()}
    summary = {
        "ours_seconds": round(best["ours"], 2),
        "gensim_seconds": round(best["gensim"], 2),
        "ours_analogy": round(mean["ours"]["analogy"], 4),
        "gensim_analogy": round(mean["gensim"]["analogy"], 4),
        "ours_wordsim": round(mean["ours"]["wordsim"], 4),
        "gensim_wordsim": round(mean["gensim"]["wordsim"], 4),
        "time_ratio": round(best["ours"] / best["gensim"], 3),
        "epochs": args.epochs,
        "threads": args.threads,
        "repeats": args.repeats,
        "timed": "vocabulary building + training, from token lists to vectors",
        "smoke": args.smoke,
    }
    print(
        f"ours / gensim time: {summary['time_ratio']:.2f}x; analogy difference "
        f"{summary['ours_analogy'] - summary['gensim_analogy']:+.4f}, WordSim difference "
        f"{summary['ours_wordsim'] - summary['gensim_wordsim']:+.4f}"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
