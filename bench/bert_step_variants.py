"""Experiment: changes to the BERT laptop recipe's training step, timed in the training loop.

* ``chunked``: the masked-LM loss computed in chunks of rows
  (:func:`onehot2gpt.bert_pretraining.chunked_mlm_loss`, ``--chunked-loss``). The plain loss
  materialises the (masked pieces × 8,000) logits several times per step: their float32 copy for
  the cross-entropy, the log-softmax, a zero-filled gradient and the log-softmax's gradient, each
  about 26 MB at 64 × 64 pieces and 25 % masking. The chunked loss scores 128 rows at a time and
  computes their gradients at once; its loss and gradients equal the plain loss's
  (``tests/test_bert_pretraining.py``).
* ``buckets``: the pairs of 8 batches drawn together and grouped by length, each batch padded only
  to its own longest pair (:func:`onehot2gpt.bert_pretraining.length_sorted_batches`,
  ``--length-buckets 8``).
* ``chunked_buckets``: both.
* ``chunked_foreach``: the chunked loss with AdamW's multi-tensor (``foreach``) update; on a CPU
  PyTorch defaults to one parameter at a time.
* ``chunked_sparse``: the chunked loss, and the encoder's top layer run only at [CLS] and the masked
  pieces, the rows the two losses read (:func:`onehot2gpt.bert_pretraining.encode_for_losses`,
  ``--sparse-top``).

Each variant runs in its own process (2 threads, bfloat16, explicit attention, 25 % masking, no
dropout: the laptop recipe's step), 30 warm-up steps, then ``--steps`` timed; the variants
alternate for ``--rounds`` rounds because these cores' pace drifts by a third within minutes.

    python bench/bert_step_variants.py --steps 300 --rounds 3

Results: ``bench/RECIPES_LOG.md``, "The masked-LM loss in chunks, and AdamW's foreach" and "The
chunked loss and length buckets in the recipe". The last line printed is one JSON object.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

import torch  # noqa: E402

VARIANTS = ("default", "chunked", "buckets", "chunked_buckets", "chunked_foreach", "chunked_sparse")


def _one(variant: str, steps: int, batch_size: int = 64) -> dict:
    """Time `steps` steps of the laptop recipe's loop with `variant` in this process."""
    import onehot2gpt.bert_pretraining as bp
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.utils import set_threads

    if variant not in VARIANTS:
        raise SystemExit(f"variant is one of {VARIANTS}; got {variant!r}")
    set_threads(2)
    if variant == "chunked_foreach":
        adamw = torch.optim.AdamW
        torch.optim.AdamW = lambda *a, **k: adamw(*a, foreach=True, **k)
    train = wikitext_articles("train")
    tok = WordPieceTokenizer.train((s for a in train for s in a), vocab_size=8000, score="frequency")
    ids = bp.tokenize_articles(tok, train)
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=len(tok), max_len=128, dropout=0.0))
    recipe = dict(
        batch_size=batch_size,
        mask_prob=0.25,
        bf16=True,
        explicit_attention=True,
        progress=False,
        chunked_loss=variant.startswith("chunked"),
        length_buckets=8 if "buckets" in variant else 0,
        sparse_top=variant.endswith("sparse"),
    )
    bp.pretrain_bert(model, tok, ids, steps=30, warmup=10, **recipe)
    start = time.perf_counter()
    history = bp.pretrain_bert(model, tok, ids, steps=steps, lr=1e-3, warmup=200, **recipe)
    return {
        "variant": variant,
        "ms_per_step": round(1000 * (time.perf_counter() - start) / steps, 1),
        "last_loss": round(history["loss"][-1], 4),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=["default", "chunked", "chunked_buckets"])
    p.add_argument("--batch-size", type=int, default=64, help="pairs a step (the laptop recipe's: 64)")
    p.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.batch_size < 1:
        p.error("--steps, --rounds and --batch-size are whole numbers of at least 1")
    if args.one:
        print(json.dumps(_one(args.one, args.steps, args.batch_size)))
        return
    runs = {v: [] for v in args.variants}
    for _ in range(args.rounds):
        for v in args.variants:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    v,
                    "--steps",
                    str(args.steps),
                    "--batch-size",
                    str(args.batch_size),
                ],
                capture_output=True,
                text=True,
                env=os.environ,
            )
            if out.returncode:
                raise SystemExit(f"variant {v} failed:\n{out.stderr[-2000:]}")
            runs[v].append(json.loads(out.stdout.strip().splitlines()[-1])["ms_per_step"])
            print(v, runs[v][-1], "ms per step", file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "steps": args.steps,
                "rounds": args.rounds,
                "batch_size": args.batch_size,
                "ms_per_step": runs,
                "median": {v: statistics.median(r) for v, r in runs.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
