"""Rebuild ``bilm-wikitext2``: the ELMo biLM on WikiText-2 (notebooks 03-04).

    python recipes/bilm-wikitext2.py --out DIR

Sentences of WikiText-2 (lower-cased, cut after '.'), a vocabulary of the 20,000 most frequent words
seen at least 3 times, two epochs of :func:`_bilm.train_bilm` without dropout, and, for
comparison, a Kneser-Ney n-gram model on the same words. The perplexities of both go into ``info``.
"""

import _recipe

EPOCHS = 2
BATCH_SIZE = 64
LR = 3e-3
D_MODEL = 128
HIDDEN = 224
N_LAYERS = 2
DROPOUT = 0.0  # two epochs of a 2M-word corpus do not overfit this model; dropout only slowed it
MIN_FREQ = 3
MAX_WORDS = 20_000
NGRAM = 3  # the order of the count-based baseline
MINUTES = None  # stop training after this many minutes (None: run every epoch)
SEED = 0
THREADS = None  # None: torch's default


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    import platform
    import random
    import time

    import torch
    from _bilm import bilm_perplexity, sentence_ids, train_bilm
    from onehot2gpt.data import wikitext_sentences
    from onehot2gpt.elmo import BiLM, BiLMConfig, save_bilm, split_sentences
    from onehot2gpt.rnn_lm import NGramLM
    from onehot2gpt.utils import set_seed, set_threads
    from onehot2gpt.vocab import Vocab

    start = time.perf_counter()
    set_seed(s["SEED"])
    threads = set_threads(s["THREADS"])
    paragraphs = {split: wikitext_sentences(split) for split in ("train", "valid")}
    sentences = {split: [x for p in ps for x in split_sentences(p)] for split, ps in paragraphs.items()}
    vocab = Vocab.build(sentences["train"], min_freq=s["MIN_FREQ"], max_size=s["MAX_WORDS"])
    config = BiLMConfig(
        vocab_size=len(vocab), d_model=s["D_MODEL"], hidden=s["HIDDEN"], n_layers=s["N_LAYERS"], dropout=s["DROPOUT"]
    )
    seqs = {split: sentence_ids(x, vocab, config.max_len) for split, x in sentences.items()}
    # the count-based baseline: the same vocabulary, sentences and predicted tokens
    ngram = {}
    for direction in ("fwd", "bwd"):
        flip = (lambda x: x[::-1]) if direction == "bwd" else (lambda x: x)
        lm = NGramLM(s["NGRAM"], vocab).fit([flip(x) for x in sentences["train"]])
        ngram[f"valid_ppl_{direction}"] = round(lm.perplexity([flip(x) for x in sentences["valid"] if x]), 2)
    bilm = BiLM(config)
    n_params = sum(p.numel() for p in bilm.parameters())
    train_start = time.perf_counter()
    history = train_bilm(
        bilm,
        seqs["train"],
        epochs=s["EPOCHS"],
        batch_size=s["BATCH_SIZE"],
        lr=s["LR"],
        minutes=s["MINUTES"],
        seed=s["SEED"],
    )
    train_minutes = (time.perf_counter() - train_start) / 60
    sample = random.Random(s["SEED"]).sample(seqs["train"], len(seqs["train"]) // 10)
    train_ppl = bilm_perplexity(bilm, sample)
    valid_ppl = bilm_perplexity(bilm, seqs["valid"])
    info = {
        "command": _recipe.command_line(),
        "arguments": s,
        "data": "WikiText-2 (lower-cased), sentences cut after '.'",
        "vocab": {"min_freq": s["MIN_FREQ"], "max_words": s["MAX_WORDS"], "size": len(vocab)},
        "epochs": s["EPOCHS"],
        "steps": len(history),
        "batch_size": s["BATCH_SIZE"],
        "lr": s["LR"],
        "seed": s["SEED"],
        "threads": threads,
        "parameters": n_params,
        "train_ppl_fwd": round(train_ppl[0], 2),
        "train_ppl_bwd": round(train_ppl[1], 2),
        "train_ppl_note": "on a fixed 10% sample of the training sentences, dropout off",
        "valid_ppl_fwd": round(valid_ppl[0], 2),
        "valid_ppl_bwd": round(valid_ppl[1], 2),
        "ngram": {"n": s["NGRAM"], "smoothing": "interpolated Kneser-Ney, D=0.75", **ngram},
        "train_minutes": round(train_minutes, 2),
        "wall_time_s": round(time.perf_counter() - start, 1),
        "machine": f"{platform.machine()}, {threads} threads, torch {torch.__version__}",
    }
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        save_bilm(bilm, vocab, tmp, info=info)
    _recipe.print_json({"out": str(args.out), **{k: v for k, v in info.items() if "ppl" in k or k == "ngram"}})


if __name__ == "__main__":
    main()
