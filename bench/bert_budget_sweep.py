"""Benchmark: BERT laptop-recipe variants at the 30-minute budget, side by side on a GPU.

Issue 20 asks for a BERT recipe of at most 30 minutes on 2 CPU cores with masked-piece accuracy
≥ 38.7% and NSP ≥ 83%. A full CPU run costs 30 to 45 minutes, so this sweep trains many variants
at once on a GPU instead, each in its own process, and scores them as ``bench/recipes.py`` does
(``evaluate_pretraining``: 50 fixed batches of WikiText-2 valid) and on every NSP pair of valid and
test (``evaluate_nsp``). Every variant is priced in CPU cost *units*: a step of 64 pairs at 64
pieces is 1, at 32 pieces 0.55 (their time ratio on the 2-core machines); the committed recipe is
7,000 + 7,000 steps = 10,850 units (about 40 minutes there), the 30-minute budget about 7,900.

On the GPU the loop runs in float32 with PyTorch's fused attention (the same model and
arithmetic as the CPU recipe's, without its bfloat16 rounding), and the knobs go beyond
``pretrain_bert``'s: a separate masking share for the long phase (``mask_long``), a learning-rate
multiplier for the NSP head and pooler (``nsp_lr_mult``), the attention weights' dropout apart from
the rest (``attn_dropout``) and which dropout layers keep their rate (``dropout_at``). Variants run
until ``--deadline`` seconds after the start; one that has not finished by then is scored where it stopped and marked
``truncated`` (its learning rate had not decayed: compare it only with others stopped alike).

    python bench/bert_budget_sweep.py prepare DIR           # tokenised WikiText-2 + vocab.txt
    python bench/bert_budget_sweep.py run DIR [NAME ...] [--device cuda] [--deadline 420] [--out OUT]

Each variant is also fine-tuned as notebook 08 does (``bench/recipes.py``'s ``notebook08_scores``:
SST-2 from 800 rows, POS from 600 sentences whole and frozen, three seeds) on the sets ``prepare``
stores in DIR/notebook08.pt: a better pre-training score is no use if the payoffs fall.

``prepare`` needs the data (or ``ONEHOT2GPT_DATA_MIRROR``); ``run`` needs only DIR, so DIR can travel
to a GPU machine without network. The last line printed is one JSON object, the variants' scores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

BASE = dict(
    steps=14000,
    short_len=32,
    short_steps=7000,
    batch=64,
    mask=0.25,
    mask_long=None,
    dropout=0.0,
    attn_dropout=None,
    dropout_at=None,
    lr=1e-3,
    warmup=200,
    sample="article",
    nsp_weight=1.0,
    nsp_lr_mult=1.0,
    seed=0,
)
SHORT, LONG = 5000, 5150  # 0.55 × 5,000 + 5,150 = 7,900 units: the 30-minute budget
VARIANTS = {
    "R": {},  # the committed recipe (10,850 units)
    "B1": dict(steps=SHORT + LONG, short_steps=SHORT),  # the recipe, shortened to the budget
    "B1s": dict(steps=SHORT + LONG, short_steps=SHORT, seed=1),
    "B2": dict(steps=7900, short_steps=0, short_len=None),  # all steps at 64 pieces
    "B3": dict(steps=7900, short_steps=0, short_len=None, mask=0.15),
    "B4": dict(steps=SHORT + LONG, short_steps=SHORT, mask_long=0.15),
    "B5": dict(steps=SHORT + LONG, short_steps=SHORT, nsp_lr_mult=5.0),
    "B6": dict(steps=SHORT + LONG, short_steps=SHORT, dropout=0.1),
    "B7": dict(steps=SHORT + LONG, short_steps=SHORT, sample="sentence"),
    "B8": dict(steps=3000 + 6250, short_steps=3000),
    "B9": dict(steps=7900, short_steps=0, short_len=None, mask=0.15, nsp_lr_mult=5.0),
    "B11": dict(steps=SHORT + LONG, short_steps=SHORT, mask_long=0.15, dropout=0.1, nsp_lr_mult=5.0),
    "B12": dict(steps=7900, short_steps=0, short_len=None, mask=0.15, sample="sentence", nsp_lr_mult=5.0),
    # beyond the budget, all at 64 pieces: how much compute NSP 83% takes
    "L10": dict(steps=10850, short_steps=0, short_len=None),  # the committed recipe's cost
    "L14": dict(steps=14000, short_steps=0, short_len=None),
    "L18": dict(steps=18000, short_steps=0, short_len=None),
    # 2026-11-27, after the attention mask became an added bias (a 64-piece step 0.73x the time on
    # the CPU): 30 minutes now hold about 10,000-11,000 steps of 64 pairs at 64 pieces
    "F10": dict(steps=10000, short_steps=0, short_len=None),
    "F11": dict(steps=11000, short_steps=0, short_len=None),
    "F11s": dict(steps=11000, short_steps=0, short_len=None, seed=1),
    "F12": dict(steps=12000, short_steps=0, short_len=None),
    "Q96": dict(steps=8300, short_steps=0, short_len=None, batch=96),  # ≈ 11,000 units
    "Q128": dict(steps=6300, short_steps=0, short_len=None, batch=128),  # ≈ 11,000 units
    "Q128lr": dict(steps=6300, short_steps=0, short_len=None, batch=128, lr=1.4e-3),
    "Q128lr17": dict(steps=6300, short_steps=0, short_len=None, batch=128, lr=1.7e-3),
    "Q128lr2": dict(steps=6300, short_steps=0, short_len=None, batch=128, lr=2e-3),
    "Q128lrs": dict(steps=6300, short_steps=0, short_len=None, batch=128, lr=1.4e-3, seed=1),
    "Q128lr58": dict(steps=5800, short_steps=0, short_len=None, batch=128, lr=1.4e-3),  # ≈ 10,100 units
    "Q128lr2_58": dict(steps=5800, short_steps=0, short_len=None, batch=128, lr=2e-3),
    "F11lr": dict(steps=11000, short_steps=0, short_len=None, lr=1.4e-3),
    # 2026-11-27, evening: the 14,000-step laptop BERT beat the committed one on pre-training scores
    # but fine-tuned worse in notebook 08 (POS -1.6 points over three seeds); every variant now also
    # scores notebook 08's runs. Which change costs them: the committed BERT's own recipe as the
    # reference, and the laptop recipe with dropout back (about twice the CPU time per step, which
    # units() does not price) or with 15 % masking.
    "C20": dict(steps=20000, short_steps=0, short_len=None, mask=0.15, dropout=0.1, warmup=100),
    "L14d": dict(steps=14000, short_steps=0, short_len=None, dropout=0.1),
    "L14m": dict(steps=14000, short_steps=0, short_len=None, mask=0.15),
    # 2026-11-28: dropout 0.1 on the embeddings and residual branches only, none on the attention
    # weights (``attn_dropout``: None means the same rate as ``dropout``)
    "L14h": dict(steps=14000, short_steps=0, short_len=None, dropout=0.1, attn_dropout=0.0),
    # which of those dropout layers it takes, at 10,000 steps (``dropout_at``: the nn.Dropout layers
    # whose names end with one of these keep the rate, the rest are set to 0; None keeps all). On the
    # CPU each costs time by its size: the embeddings' and the residual branches' 64 x 64 x 128
    # values, the feed-forward's inner 64 x 64 x 512
    "F10h": dict(steps=10000, short_steps=0, short_len=None, dropout=0.1, attn_dropout=0.0),
    "F10e": dict(
        steps=10000, short_steps=0, short_len=None, dropout=0.1, attn_dropout=0.0, dropout_at=("embeddings.dropout",)
    ),
    "F10r": dict(
        steps=10000,
        short_steps=0,
        short_len=None,
        dropout=0.1,
        attn_dropout=0.0,
        dropout_at=("embeddings.dropout", "dropout1", "dropout2"),
    ),
}
# CPU time of one step of `batch` pairs at 64 pieces against one of 64 pairs (2 cores, bfloat16,
# the bias-mask attention, 2026-11-27: 230, 306 and 401 ms per step, interleaved)
BATCH_COST = {64: 1.0, 96: 1.33, 128: 1.74}


def units(config: dict) -> float:
    """CPU cost of a variant in long-step units (a 32-piece step costs 0.55 of a 64-piece one; a
    step of 96 or 128 pairs BATCH_COST's multiple of one of 64)."""
    per_step = BATCH_COST[config["batch"]]
    return per_step * (config["short_steps"] * 0.55 + (config["steps"] - config["short_steps"]))


def prepare(data: Path) -> None:
    """WikiText-2's articles, tokenised with the recipe's vocabulary, → DIR/ids.json, DIR/vocab.txt."""
    from onehot2gpt.bert_pretraining import tokenize_articles
    from onehot2gpt.data import wikitext_articles
    from onehot2gpt.subword import WordPieceTokenizer

    train = wikitext_articles("train")
    tokenizer = WordPieceTokenizer.train((s for a in train for s in a), vocab_size=8000, score="frequency")
    data.mkdir(parents=True, exist_ok=True)
    tokenizer.save(data / "vocab.txt")
    ids = {"train": tokenize_articles(tokenizer, train)}
    for split in ("valid", "test"):
        ids[split] = tokenize_articles(tokenizer, wikitext_articles(split))
    with tempfile.NamedTemporaryFile("w", dir=data, delete=False, suffix=".part") as fh:
        json.dump(ids, fh, separators=(",", ":"))
    os.replace(fh.name, data / "ids.json")
    # notebook 08's fine-tuning sets (bench/recipes.py's notebook08 part), so that each variant is
    # also judged by what the course shows, on a machine without the data
    import torch
    from recipes import notebook08_data

    with tempfile.NamedTemporaryFile(dir=data, delete=False, suffix=".part") as fh:
        torch.save(notebook08_data(tokenizer), fh)
    os.replace(fh.name, data / "notebook08.pt")
    print(json.dumps({"prepared": str(data), "vocab": len(tokenizer), **{k: len(v) for k, v in ids.items()}}))


def build_model(config: dict, vocab_size: int):
    """The course BERT's size with `config`'s dropout: ``dropout`` on every layer, then
    ``attn_dropout`` (unless None) on the attention weights and, with ``dropout_at``, 0 on every
    ``nn.Dropout`` whose name ends with none of its entries."""
    import torch
    from onehot2gpt.bert import BertConfig, BertForPreTraining

    c = {**BASE, **config}
    model = BertForPreTraining(BertConfig.tiny(vocab_size=vocab_size, max_len=128, dropout=c["dropout"]))
    if c["attn_dropout"] is not None:  # the attention weights' rate, a float attribute
        for m in model.modules():
            if not isinstance(m, torch.nn.Dropout) and isinstance(getattr(m, "dropout", None), float):
                m.dropout = float(c["attn_dropout"])
    if c["dropout_at"] is not None:
        for mname, m in model.named_modules():
            if isinstance(m, torch.nn.Dropout) and not mname.endswith(tuple(c["dropout_at"])):
                m.p = 0.0
    return model


def train_one(name: str, data: Path, out: Path, device: str, deadline: float) -> dict:
    """Train and score one variant; write OUT/NAME.json and return it."""
    import torch
    from onehot2gpt.bert_pretraining import evaluate_nsp, evaluate_pretraining, pretraining_batch, pretraining_loss
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.training import optimizer_step
    from onehot2gpt.utils import check_finite_loss

    start = time.time()
    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = True  # as in the 2026-11-27 run
    c = {**BASE, **VARIANTS[name]}
    tokenizer = WordPieceTokenizer.load(data / "vocab.txt")
    ids = json.loads((data / "ids.json").read_text())
    torch.manual_seed(c["seed"])
    model = build_model(c, len(tokenizer)).to(device)
    groups: dict = {}
    for pname, p in model.named_parameters():
        head = pname.startswith("nsp.") or "pooler" in pname
        groups.setdefault((head, p.dim() >= 2), []).append(p)
    opt = torch.optim.AdamW(
        [
            {"params": ps, "lr": c["lr"] * (c["nsp_lr_mult"] if head else 1.0), "weight_decay": 0.01 if decay else 0.0}
            for (head, decay), ps in groups.items()
        ],
        lr=c["lr"],
        betas=(0.9, 0.98),
    )
    steps, warm = c["steps"], c["warmup"]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    g = torch.Generator().manual_seed(c["seed"])
    model.train()
    done, truncated = 0, False
    for step in range(steps):
        if time.time() > deadline:
            truncated = True
            break
        short = step < c["short_steps"]
        mask = c["mask"] if short or c["mask_long"] is None else c["mask_long"]
        batch = pretraining_batch(
            ids["train"], c["batch"], c["short_len"] if short else 64, tokenizer, g, mask_prob=mask, sample=c["sample"]
        )
        _, mlm, nsp, _, _ = pretraining_loss(model, batch, count_correct=False)
        loss = mlm + c["nsp_weight"] * nsp
        optimizer_step(loss, opt, sched, model.parameters(), 1.0)
        done = step + 1
        if done % 500 == 0:  # not every step: reading the loss waits for the GPU
            check_finite_loss(loss, step, lr=c["lr"], what=name)
    model.eval()
    result = {
        "name": name,
        "config": c,
        "units": units(c),
        "steps_done": done,
        "truncated": truncated,
        "train_seconds": round(time.time() - start, 1),
        "fixed": {k: round(v, 4) for k, v in evaluate_pretraining(model, tokenizer, ids["valid"]).items()},
    }
    for split in ("valid", "test"):
        result[f"nsp_all_{split}"] = round(evaluate_nsp(model, tokenizer, ids[split])["nsp_accuracy"], 4)
    if (data / "notebook08.pt").is_file():  # absent in a folder prepared before 2026-11-27
        from recipes import notebook08_scores

        sets = torch.load(data / "notebook08.pt", weights_only=True)
        result["notebook08"] = notebook08_scores(model.bert, sets, device)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result


def run(data: Path, names: list[str], out: Path, device: str, deadline_s: float) -> list[dict]:
    """Every variant in `names` as its own process at once; their results, in order."""
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + deadline_s
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = {
        n: subprocess.Popen(
            [
                sys.executable,
                __file__,
                "_one",
                str(data),
                n,
                "--out",
                str(out),
                "--device",
                device,
                "--deadline-at",
                str(deadline),
            ],
            env=env,
            stderr=open(out / f"{n}.err", "w"),
        )
        for n in names
    }
    results = []
    for n, p in procs.items():
        if p.wait() != 0:
            print(f"{n} failed (exit {p.returncode}); its error is in {out / (n + '.err')}", file=sys.stderr)
            continue
        r = json.loads((out / f"{n}.json").read_text())
        results.append(r)
        print(
            f"{n:4s} units {r['units']:6.0f} steps {r['steps_done']}/{r['config']['steps']} "
            f"masked {r['fixed']['mlm_accuracy']:.4f} nsp {r['fixed']['nsp_accuracy']:.4f} "
            f"every pair {r['nsp_all_valid']:.4f}/{r['nsp_all_test']:.4f}{' truncated' if r['truncated'] else ''}"
        )
    return results


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["prepare", "run", "_one"])
    p.add_argument("data", type=Path, help="the folder `prepare` writes and `run` reads")
    p.add_argument("names", nargs="*", help=f"variants to run (default all): {', '.join(VARIANTS)}")
    p.add_argument("--out", type=Path, default=Path("bench/results/bert_budget_sweep"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--deadline", type=float, default=420.0, help="seconds from the start to stop training")
    p.add_argument("--deadline-at", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.command == "prepare":
        return prepare(args.data)
    unknown = [n for n in args.names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    missing = [f for f in ("ids.json", "vocab.txt") if not (args.data / f).is_file()]
    if missing:
        p.error(f"{args.data} lacks {missing}: run `python bench/bert_budget_sweep.py prepare {args.data}` first")
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(
            f"--device {args.device}: this torch ({torch.__version__}) sees no CUDA GPU; "
            f"use --device cpu (each variant then takes hours) or a machine with a GPU"
        )
    if args.command == "_one":
        train_one(args.names[0], args.data, args.out, args.device, args.deadline_at)
        return
    results = run(args.data, args.names or list(VARIANTS), args.out, args.device, args.deadline)
    print(
        json.dumps(
            {
                "device": args.device,
                "deadline_s": args.deadline,
                "variants": {
                    r["name"]: {
                        "units": r["units"],
                        "steps_done": r["steps_done"],
                        "truncated": r["truncated"],
                        "mlm_accuracy": r["fixed"]["mlm_accuracy"],
                        "nsp_accuracy": r["fixed"]["nsp_accuracy"],
                        "nsp_all_valid": r["nsp_all_valid"],
                        "nsp_all_test": r["nsp_all_test"],
                        **(
                            {"notebook08": {k: r["notebook08"][k] for k in ("sst2", "pos", "pos_frozen")}}
                            if "notebook08" in r
                            else {}
                        ),
                    }
                    for r in results
                },
            }
        )
    )


if __name__ == "__main__":
    main()
