"""Rebuild ``gpt-wikitext2``: the subword GPT of notebook 09 on WikiText-2.

    python recipes/gpt-wikitext2.py --out DIR [--device cuda]

``GPTConfig.small`` (4 layers x 128, 64 pieces of context) with the course BERT's WordPiece
vocabulary (read from the committed ``bert-wikitext2``), trained on WikiText-2 train as one stream
of pieces (articles separated by [SEP]) for 3,500 updates without dropout; the validation loss is
the mean over fixed windows of WikiText-2 valid.
"""

import _gpt
import _recipe

ITERS = 3500
BATCH_SIZE = 32
BLOCK_SIZE = 64
LR = 2e-3  # decayed to LR / 10
WARMUP = 100
DROPOUT = 0.0
EVAL_EVERY = 500
EVAL_BATCHES = 50  # fixed validation windows of 32 x BLOCK_SIZE scored at each evaluation
THREADS = 2
SEED = 0


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()))
    s = args.settings
    import math
    import time

    import torch
    from onehot2gpt.checkpoints import checkpoint_path
    from onehot2gpt.gpt import GPT, GPTConfig
    from onehot2gpt.gpt_training import wikitext_stream
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.utils import set_threads

    set_threads(s["THREADS"])
    start = time.time()
    tokenizer = WordPieceTokenizer.load(checkpoint_path("bert-wikitext2") / "vocab.txt")
    train, val = wikitext_stream(tokenizer, "train"), wikitext_stream(tokenizer, "valid")
    recipe = dict(
        iters=s["ITERS"],
        batch_size=s["BATCH_SIZE"],
        block_size=s["BLOCK_SIZE"],
        lr=s["LR"],
        min_lr=s["LR"] / 10,
        warmup=s["WARMUP"],
        weight_decay=0.1,
        betas=(0.9, 0.99),
        clip=1.0,
    )
    torch.manual_seed(s["SEED"])
    config = GPTConfig.small(vocab_size=len(tokenizer), max_len=s["BLOCK_SIZE"], dropout=s["DROPOUT"])
    model = GPT(config).to(args.device)
    history = _gpt.fit(model, train, val, recipe, s, eval_batch_size=32, desc="GPT WikiText-2")
    info = {
        "data": "WikiText-2 train as one WordPiece stream (wikitext_stream), the course BERT's vocabulary",
        **_gpt.run_info(args, s, recipe, history, start),
        "val_perplexity": round(math.exp(history["val_loss"]), 1),
        "val_loss_is": f"mean of {s['EVAL_BATCHES']} fixed windows (32 x {s['BLOCK_SIZE']} pieces) of WikiText-2 valid",
        "dropout": s["DROPOUT"],
    }
    _gpt.save(args, model, info, tokenizer)


if __name__ == "__main__":
    main()
