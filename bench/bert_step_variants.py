"""Experiment: two changes to the BERT laptop recipe's training step, timed in the training loop.

* ``fused``: the masked-LM loss computed in chunks of rows (:func:`chunked_mlm_loss`). The plain
  loss materialises the (masked pieces × 8,000) logits several times per step: their float32
  copy for the cross-entropy, the log-softmax, a zero-filled gradient and the log-softmax's
  gradient, each about 26 MB at 64 × 64 pieces and 25 % masking. Here each chunk of 128 rows is
  scored, its share of the loss summed and its gradients (with respect to the hidden states, the
  tied embedding and the decoder bias) computed at once, so no (N, V) tensor outlives a chunk;
  the backward pass only scales them. The loss and gradients equal
  ``F.cross_entropy(model.mlm(hidden), targets)`` (``tests/test_bert_step_variants.py``).
* ``fused_foreach``: the same, with AdamW's multi-tensor (``foreach``) update; on a CPU PyTorch
  defaults to one parameter at a time.

Each variant runs in its own process (2 threads, bfloat16, explicit attention, 25 % masking, no
dropout: the laptop recipe's step), 30 warm-up steps, then ``--steps`` timed; the variants
alternate for ``--rounds`` rounds because these cores' pace drifts by a third within minutes.

    python bench/bert_step_variants.py --steps 300 --rounds 3

Result (2026-11-28): ``bench/RECIPES_LOG.md``, "The masked-LM loss in chunks, and AdamW's foreach".
The last line printed is one JSON object.
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
import torch.nn.functional as F  # noqa: E402

VARIANTS = ("default", "fused", "fused_foreach")


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``h @ weight.T + bias`` against `targets`, `chunk` rows at a time,
    the matrix products in `dtype` and the softmax in float32 (as autocast runs ``F.linear`` and
    ``F.cross_entropy``). The gradients are computed during the forward pass."""

    @staticmethod
    def forward(ctx, h, weight, bias, targets, chunk, dtype):
        n = h.shape[0]
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        with torch.autocast(h.device.type, enabled=False):
            hc, wc, bc = h.to(dtype), weight.to(dtype), bias.to(dtype)
            gh = torch.empty_like(hc) if need_h else None
            gw = torch.zeros(weight.shape, dtype=torch.float32, device=h.device) if need_w else None
            gb = torch.zeros(bias.shape, dtype=torch.float32, device=h.device) if need_b else None
            total = torch.zeros((), dtype=torch.float32, device=h.device)
            for s in range(0, n, chunk):
                x, t = hc[s:s + chunk], targets[s:s + chunk]
                logits = torch.addmm(bc, x, wc.t()).float()
                lse = torch.logsumexp(logits, 1)
                total += (lse - logits.gather(1, t[:, None]).squeeze(1)).sum()
                if not (need_h or need_w or need_b):
                    continue
                p = logits.sub_(lse[:, None]).exp_()                    # softmax, in place
                p[torch.arange(len(t), device=h.device), t] -= 1
                g = p.div_(n).to(dtype)                                 # d(mean loss)/d(logits)
                if need_h:
                    torch.mm(g, wc, out=gh[s:s + chunk])
                if need_w:
                    gw += torch.mm(g.t(), x).float()
                if need_b:
                    gb += g.sum(0).float()
        empty = torch.empty(0)
        ctx.save_for_backward(gh if need_h else empty, gw if need_w else empty, gb if need_b else empty)
        ctx.h_dtype, ctx.needs = h.dtype, (need_h, need_w, need_b)
        return total / n

    @staticmethod
    def backward(ctx, grad):
        grads = [(g * grad).to(dt) if need else None
                 for g, need, dt in zip(ctx.saved_tensors, ctx.needs, (ctx.h_dtype, torch.float32, torch.float32))]
        return (*grads, None, None, None)


def chunked_mlm_loss(model, hidden, targets, chunk: int = 128):
    """The masked-LM loss of a BertForPreTraining at the chosen positions: `hidden` (N, D) →
    the MLM head's transform → :class:`ChunkedLinearCrossEntropy` against the tied embedding."""
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden is (N, D) and targets (N,); got {tuple(hidden.shape)} and {tuple(targets.shape)}")
    if chunk < 1:
        raise ValueError(f"chunk is a number of rows, at least 1; got {chunk}")
    head, device = model.mlm, hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    h = head.norm(head.activation(head.dense(hidden)))
    return ChunkedLinearCrossEntropy.apply(h, head.decoder.weight, head.decoder.bias, targets, chunk, dtype)


def _one(variant: str, steps: int) -> dict:
    """Time `steps` steps of the laptop recipe's loop with `variant` in this process."""
    import onehot2gpt.bert_pretraining as bp
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.utils import IGNORE_INDEX, set_threads

    if variant not in VARIANTS:
        raise SystemExit(f"variant is one of {VARIANTS}; got {variant!r}")
    set_threads(2)
    if variant.startswith("fused"):
        def loss(model, batch, count_correct=True, explicit_attention=False):
            out = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                             output_attentions=explicit_attention)
            chosen = batch["mlm_labels"] != IGNORE_INDEX
            mlm = chunked_mlm_loss(model, out.last_hidden_state[chosen], batch["mlm_labels"][chosen])
            nsp = F.cross_entropy(model.nsp(out.pooled), batch["nsp_labels"])
            return mlm + nsp, mlm, nsp, None, int(chosen.sum())
        bp.pretraining_loss = loss
    if variant == "fused_foreach":
        adamw = torch.optim.AdamW
        torch.optim.AdamW = lambda *a, **k: adamw(*a, foreach=True, **k)
    train = wikitext_articles("train")
    tok = WordPieceTokenizer.train((s for a in train for s in a), vocab_size=8000, score="frequency")
    ids = bp.tokenize_articles(tok, train)
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=len(tok), max_len=128, dropout=0.0))
    recipe = dict(mask_prob=0.25, bf16=True, explicit_attention=True, progress=False)
    bp.pretrain_bert(model, tok, ids, steps=30, warmup=10, **recipe)
    start = time.perf_counter()
    history = bp.pretrain_bert(model, tok, ids, steps=steps, lr=1e-3, warmup=200, **recipe)
    return {"variant": variant, "ms_per_step": round(1000 * (time.perf_counter() - start) / steps, 1),
            "last_loss": round(history["loss"][-1], 4)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        p.error("--steps and --rounds are whole numbers of at least 1")
    if args.one:
        print(json.dumps(_one(args.one, args.steps)))
        return
    runs = {v: [] for v in args.variants}
    for _ in range(args.rounds):
        for v in args.variants:
            out = subprocess.run([sys.executable, __file__, "--one", v, "--steps", str(args.steps)],
                                 capture_output=True, text=True, env=os.environ)
            if out.returncode:
                raise SystemExit(f"variant {v} failed:\n{out.stderr[-2000:]}")
            runs[v].append(json.loads(out.stdout.strip().splitlines()[-1])["ms_per_step"])
            print(v, runs[v][-1], "ms per step", file=sys.stderr, flush=True)
    print(json.dumps({"steps": args.steps, "rounds": args.rounds, "ms_per_step": runs,
                      "median": {v: statistics.median(r) for v, r in runs.items()}}))


if __name__ == "__main__":
    main()
