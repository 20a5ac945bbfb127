"""Rebuild ``bert-wikitext2``: the course BERT pre-trained on WikiText-2 (notebooks 07-08).

    python recipes/bert-wikitext2.py --out DIR [--device cuda]     # the committed checkpoint
    python recipes/bert-wikitext2.py --out DIR --laptop            # the 2-core variant (LOG.md)

A WordPiece vocabulary of 8,000 pieces learned on WikiText-2 train (merging by frequency), the
course-size BERT (``BertConfig.course``) and 20,000 steps of masked LM + next-sentence prediction by
:func:`onehot2gpt.bert_pretraining.pretrain_bert`, the loop notebook 07 reads; then masked-piece
and NSP accuracy on WikiText-2 valid, stored in ``info``.

``--laptop`` changes the settings to those of ``LAPTOP`` below and trains with the speed tricks of
``_bert.py`` (:func:`_bert.pretrain_bert_fast`): the same kind of model in a time a 2-core machine
allows, not the committed checkpoint (``LOG.md`` says what each change measured). Any switch set
with ``--set`` also selects that loop.
"""

import _recipe

VOCAB_SIZE = 8000
STEPS = 20000
BATCH_SIZE = 64
MAX_LEN = 64
LR = 1e-3
WARMUP = 100  # steps of linear warm-up
DROPOUT = 0.1
THREADS = 2
SEED = 0
# The speed switches of _bert.pretrain_bert_fast (off: the plain loop of the library).
MASK_PROB = 0.15  # share of pieces predicted in training (evaluation always uses 0.15)
BF16 = False  # bfloat16 autocast; refused where the CPU or GPU has no native bfloat16
EXPLICIT_ATTENTION = False  # attention as notebook 05 writes it instead of the fused kernel
CHUNKED_LOSS = False  # the masked-LM loss without a float32 (pieces x vocabulary) tensor
SPARSE_TOP = False  # the top layer run only at [CLS] and the masked pieces

# --laptop: the 2-core recipe (LOG.md, "BERT on 2 cores").
laptop = dict(
    STEPS=14000,
    MASK_PROB=0.25,
    DROPOUT=0.0,
    WARMUP=200,
    BF16=True,
    EXPLICIT_ATTENTION=True,
    CHUNKED_LOSS=True,
    SPARSE_TOP=True,
)
_PLAIN = dict(MASK_PROB=0.15, BF16=False, EXPLICIT_ATTENTION=False, CHUNKED_LOSS=False, SPARSE_TOP=False)


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), laptop=laptop)
    s = args.settings
    import json
    import time

    import _bert
    import torch
    from onehot2gpt.bert import BertConfig, BertForPreTraining, save_bert
    from onehot2gpt.bert_pretraining import evaluate_pretraining, pretrain_bert, tokenize_articles
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.utils import set_threads

    fast = any(s[k] != v for k, v in _PLAIN.items())
    if s["BF16"] and not _bert.native_bf16(args.device):
        raise SystemExit(
            f"BF16: this {args.device} has no native bfloat16 (on a CPU: AVX512-BF16 or AMX), so autocast "
            "would make every step slower than float32; run with --set BF16=False"
        )
    set_threads(s["THREADS"])
    start = time.time()
    train = wikitext_articles("train")
    # merging by frequency (the most frequent pair first), as Hugging Face's WordPiece trainer does
    tokenizer = WordPieceTokenizer.train((x for a in train for x in a), vocab_size=s["VOCAB_SIZE"], score="frequency")
    t_vocab = time.time() - start
    train_ids = tokenize_articles(tokenizer, train)
    valid_ids = tokenize_articles(tokenizer, wikitext_articles("valid"))
    torch.manual_seed(s["SEED"])
    config = BertConfig.course(vocab_size=len(tokenizer), max_len=max(s["MAX_LEN"], 128), dropout=s["DROPOUT"])
    model = BertForPreTraining(config).to(args.device)
    # the loop's arguments are the settings of the same names, in lower case
    common = {k.lower(): s[k] for k in ("STEPS", "BATCH_SIZE", "MAX_LEN", "LR", "WARMUP", "SEED")}
    if fast:
        switches = {k.lower(): s[k] for k in _PLAIN}  # mask_prob, bf16, explicit_attention, ...
        history = _bert.pretrain_bert_fast(model, tokenizer, train_ids, **common, **switches)
    else:
        history = pretrain_bert(model, tokenizer, train_ids, **common)
    t_train = time.time() - start
    scores = evaluate_pretraining(model, tokenizer, valid_ids, max_len=s["MAX_LEN"])
    nsp = _bert.evaluate_nsp(model, tokenizer, valid_ids, max_len=s["MAX_LEN"])
    info = {
        "data": "WikiText-2 train (wikitext_articles)",
        "command": _recipe.command_line(),
        "arguments": s,
        "loop": "recipes/_bert.py pretrain_bert_fast" if fast else "onehot2gpt.bert_pretraining.pretrain_bert",
        "steps": s["STEPS"],
        "batch_size": s["BATCH_SIZE"],
        "max_len": s["MAX_LEN"],
        "lr": s["LR"],
        "threads": s["THREADS"],
        "device": args.device,
        "seed": s["SEED"],
        "vocab_seconds": round(t_vocab, 1),
        "total_seconds": round(t_train, 1),
        "valid": {k: round(v, 4) for k, v in scores.items()},
        "valid_nsp_every_pair": round(nsp["nsp_accuracy"], 4),
        "final_train_mlm_loss": round(sum(history["mlm_loss"][-100:]) / len(history["mlm_loss"][-100:]), 4),
    }
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        save_bert(model.cpu(), tmp, info=info, tokenizer=tokenizer)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
