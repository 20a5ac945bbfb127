"""Rebuild ``glove-wikitext2``: GloVe word vectors on WikiText-2 train, lower-cased (notebook 02).

    python recipes/glove-wikitext2.py --out DIR

Counts the co-occurrences and trains with ``train_glove`` (``recipes/_glove.py``) (x_max 10 for this
small corpus instead of the paper's 100), scores the vectors on the Google analogies and
WordSim-353, and stores both scores in the checkpoint's ``info``.
"""

import _recipe

D_MODEL = 100
WINDOW = 10
MIN_COUNT = 5
X_MAX = 10.0
EPOCHS = 30
LR = 0.05
BATCH_SIZE = 8192
SEED = 0
THREADS = 2


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    import time

    from _glove import train_glove
    from onehot2gpt import data
    from onehot2gpt.utils import set_threads

    set_threads(s["THREADS"])
    start = time.perf_counter()
    wv = train_glove(
        data.wikitext_sentences("train", lower=True),
        corpus_name="wikitext-2 train, lower-cased",
        **{k.lower(): v for k, v in s.items() if k != "THREADS"},
    )
    wv.config["wall_seconds"] = round(time.perf_counter() - start, 1)
    wv.config["command"] = _recipe.command_line()
    wv.config["arguments"] = s
    analogies = wv.evaluate_analogies(data.read_analogies())
    wordsim = wv.evaluate_wordsim(data.read_wordsim353())
    wv.config.update(analogy_accuracy=round(analogies["accuracy"], 4), wordsim_spearman=round(wordsim["spearman"], 4))
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        wv.save(tmp)
    _recipe.print_json(
        {"out": str(args.out), **{k: wv.config[k] for k in ("wall_seconds", "analogy_accuracy", "wordsim_spearman")}}
    )


if __name__ == "__main__":
    main()
