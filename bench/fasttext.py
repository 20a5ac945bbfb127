"""Benchmark: our fastText (onehot2gpt.fasttext) against gensim's FastText on WikiText-2.

Both train on the same lower-cased WikiText-2 train paragraphs with the same settings: skip-gram
with negative sampling over words read as their character n-grams, dim 100, window 5, 5 noise
words, min_count 5, sample 1e-3, n-grams of 3 to 6 characters hashed into 200,000 rows, 5 epochs,
lr 0.05 → 0.0001, seed 0, 2 threads (gensim ``workers=2``; ours: ``threads=2``, torch's own threads). The time of
each is the wall time from the token lists to trained vectors (vocabulary, n-gram table and
training); reading the corpus is done once, before, and not timed.

Scored by the same code as ``bench/word2vec.py``: ``WordVectors.evaluate_analogies`` (Google
analogies, 3CosAdd over the 30,000 most frequent words) and ``evaluate_wordsim`` (WordSim-353
Spearman) on the vocabulary words' vectors. Then the point of fastText: vectors for words the
vocabulary never saw. For each of a fixed list of misspellings (a letter doubled, dropped or
swapped in a frequent word) both models give a vector; reported is how often the intended word is
among its 10 nearest vocabulary words.

Run from the repository root (needs gensim: ``pip install -e .[bench]``)::

    python bench/fasttext.py [--epochs 5] [--threads 2] [--smoke]

Prints readable lines and, as the last line, one JSON object that starts with ours_seconds,
gensim_seconds, ours_analogy, gensim_analogy, ours_wordsim, gensim_wordsim.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import time

import torch
from onehot2gpt import data
from onehot2gpt.fasttext import train_fasttext
from onehot2gpt.utils import set_threads
from onehot2gpt.vocab import Vocab
from onehot2gpt.word_vectors import WordVectors

SETTINGS = dict(
    d_model=100,
    window=5,
    negative=5,
    min_count=5,
    sample=1e-3,
    min_n=3,
    max_n=6,
    buckets=200_000,
    lr=0.05,
    min_lr=1e-4,
    seed=0,
)


def misspellings(words: list[str], n: int = 200, seed: int = 0) -> list[tuple[str, str]]:
    """(misspelling, intended word) for `n` frequent alphabetic words of 5+ letters, each changed
    once: a letter doubled, dropped, or two neighbours swapped; never another vocabulary word."""
    rng = random.Random(seed)
    known = set(words)
    pool = [w for w in words[:5000] if w.isalpha() and len(w) >= 5]
    out = []
    for word in rng.sample(pool, len(pool)):
        i = rng.randrange(1, len(word) - 1)
        kind = rng.choice(["double", "drop", "swap"])
        wrong = (
            word[:i] + word[i] + word[i:]
            if kind == "double"
            else word[:i] + word[i + 1 :]
            if kind == "drop"
            else word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        )
        if wrong != word and wrong not in known:
            out.append((wrong, word))
        if len(out) == n:
            break
    return out


def recall_at_10(vector_of, wv: WordVectors, pairs) -> float:
    unit = wv.unit_vectors
    hits = 0
    for wrong, word in pairs:
        q = vector_of(wrong)
        top = (unit @ (q / q.norm().clamp_min(1e-12))).topk(10).indices.tolist()
        hits += wv.vocab.stoi[word] in top
    return hits / len(pairs)


def train_ours(sentences, epochs: int, threads: int):
    start = time.perf_counter()
    ft = train_fasttext(sentences, epochs=epochs, threads=threads, progress=False, **SETTINGS)
    seconds = time.perf_counter() - start
    return ft.word_vectors(), (lambda w: ft[w]), seconds


def train_gensim(sentences, epochs: int, threads: int):
    from gensim.models import FastText

    start = time.perf_counter()
    model = FastText(
        sentences,
        sg=1,
        hs=0,
        vector_size=SETTINGS["d_model"],
        window=SETTINGS["window"],
        negative=SETTINGS["negative"],
        min_count=SETTINGS["min_count"],
        sample=SETTINGS["sample"],
        min_n=SETTINGS["min_n"],
        max_n=SETTINGS["max_n"],
        bucket=SETTINGS["buckets"],
        alpha=SETTINGS["lr"],
        min_alpha=SETTINGS["min_lr"],
        seed=SETTINGS["seed"],
        epochs=epochs,
        workers=threads,
    )
    seconds = time.perf_counter() - start
    words = list(model.wv.index_to_key)
    counts = {w: int(model.wv.get_vecattr(w, "count")) for w in words}
    wv = WordVectors(torch.from_numpy(model.wv.vectors.copy()), Vocab(words, counts, specials=()))
    return wv, (lambda w: torch.from_numpy(model.wv[w].copy())), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--smoke", action="store_true", help="500 paragraphs, 1 epoch: checks the script, not the numbers"
    )
    args = parser.parse_args()
    logging.getLogger("gensim").setLevel(logging.WARNING)
    try:
        import gensim
    except ImportError:
        raise SystemExit("this benchmark needs gensim: pip install -e .[bench]") from None
    set_threads(args.threads)
    sentences = data.wikitext_sentences("train", lower=True)
    if args.smoke:
        sentences, args.epochs = sentences[:500], 1
    questions, pairs = data.read_analogies(), data.read_wordsim353()
    print(
        f"WikiText-2 train: {len(sentences):,} paragraphs, {sum(map(len, sentences)):,} tokens; "
        f"torch {torch.__version__}, gensim {gensim.__version__}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), {args.threads} threads each"
    )
    results = {}
    typos = None
    for name, train in (
        ("gensim", lambda s: train_gensim(s, args.epochs, args.threads)),
        ("ours", lambda s: train_ours(s, args.epochs, args.threads)),
    ):
        wv, vector_of, seconds = train(sentences)
        typos = typos or misspellings(wv.vocab.itos)
        analogy = wv.evaluate_analogies(questions, restrict_vocab=30000)
        wordsim = wv.evaluate_wordsim(pairs)
        recall = recall_at_10(vector_of, wv, typos)
        results[name] = {
            "seconds": seconds,
            "analogy": analogy["accuracy"],
            "wordsim": wordsim["spearman"],
            "typo_recall_at_10": recall,
        }
        print(
            f"{name:>6}: {seconds:5.1f} s, {len(wv):,} words; analogies {analogy['accuracy']:.4f} "
            f"({analogy['n_used']:,}/{analogy['n_total']:,} used); WordSim-353 {wordsim['spearman']:.4f}; "
            f"misspelt word's own word among its 10 nearest: {recall:.3f} of {len(typos)}",
            flush=True,
        )
    ours, theirs = results["ours"], results["gensim"]
    summary = {
        "ours_seconds": round(ours["seconds"], 2),
        "gensim_seconds": round(theirs["seconds"], 2),
        "ours_analogy": round(ours["analogy"], 4),
        "gensim_analogy": round(theirs["analogy"], 4),
        "ours_wordsim": round(ours["wordsim"], 4),
        "gensim_wordsim": round(theirs["wordsim"], 4),
        "ours_typo_recall_at_10": round(ours["typo_recall_at_10"], 3),
        "gensim_typo_recall_at_10": round(theirs["typo_recall_at_10"], 3),
        "time_ratio": round(ours["seconds"] / theirs["seconds"], 3),
        "targets": {
            "quality": "ours at most 0.02 below gensim on analogies and on WordSim",
            "time": "ours ≤ 2 × gensim",
        },
        "met": {
            "quality": ours["analogy"] >= theirs["analogy"] - 0.02 and ours["wordsim"] >= theirs["wordsim"] - 0.02,
            "time": ours["seconds"] <= 2 * theirs["seconds"],
        },
        "epochs": args.epochs,
        "threads": args.threads,
        "typos": len(typos),
        "settings": SETTINGS,
        "smoke": args.smoke,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
