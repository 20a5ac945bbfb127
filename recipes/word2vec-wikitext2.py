"""Rebuild ``word2vec-wikitext2``: skip-gram word vectors on WikiText-2 train, lower-cased (notebook 02).

    python recipes/word2vec-wikitext2.py --out DIR

Trains with :func:`onehot2gpt.word2vec.train_word2vec` on one thread (bit-reproducible), saves the
vectors, and scores them on the Google analogies and WordSim-353 (printed, not stored: the
committed checkpoint's config records what its command recorded then).
"""

import _recipe

MODEL = "skipgram"
D_MODEL = 100
WINDOW = 5
NEGATIVE = 5
MIN_COUNT = 5
SAMPLE = 1e-3
EPOCHS = 5
LR = 0.025
MIN_LR = 0.0001
BATCH_SIZE = 4096
SEED = 0
THREADS = 1  # 1: bit-reproducible; n > 1: n Hogwild workers, faster, not reproducible


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    import time

    from onehot2gpt import data
    from onehot2gpt.word2vec import train_word2vec

    start = time.perf_counter()
    wv = train_word2vec(
        data.wikitext_sentences("train", lower=True),
        threads=s["THREADS"],
        corpus_name="wikitext-2 train, lower-cased",
        **{k.lower(): v for k, v in s.items() if k != "THREADS"},
    )
    wv.config["wall_seconds"] = round(time.perf_counter() - start, 1)  # training + reading the corpus
    wv.config["command"] = _recipe.command_line()
    wv.config["arguments"] = s
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        wv.save(tmp)
    analogies = wv.evaluate_analogies(data.read_analogies())
    wordsim = wv.evaluate_wordsim(data.read_wordsim353())
    _recipe.print_json(
        {
            "out": str(args.out),
            "train_seconds": wv.config["train_seconds"],
            "analogy_accuracy": round(analogies["accuracy"], 4),
            "wordsim_spearman": round(wordsim["spearman"], 4),
        }
    )


if __name__ == "__main__":
    main()
