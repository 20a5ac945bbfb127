"""The training run of the two character-GPT recipes (``gpt-char-shakespeare`` and
``gpt-char-shakespeare-large``): the same steps, their own settings."""

from __future__ import annotations

import _recipe


def train_char_gpt(args, s: dict) -> None:
    """Train a character GPT on the first 90 % of Tiny Shakespeare with the settings `s` (a recipe's
    constants) and write it to ``args.out`` with its vocabulary; the validation loss is taken on
    the last 10 %."""
    import time

    import torch
    from onehot2gpt.data import read_tinyshakespeare
    from onehot2gpt.gpt import GPT, GPTConfig
    from onehot2gpt.gpt_training import char_dataset, train_val_split
    from onehot2gpt.utils import set_threads

    set_threads(s["THREADS"])
    bf16 = s["PRECISION"] == "bf16"
    if bf16:
        import _bert

        if not _bert.native_bf16(args.device):
            raise SystemExit(
                f"PRECISION bf16: this {args.device} has no native bfloat16 (on a CPU: AVX512-BF16 or AMX), "
                f"where autocast makes each update slower; run with --set PRECISION=float32"
            )
    start, cpu_start = time.time(), time.process_time()
    ids, vocab = char_dataset(read_tinyshakespeare())
    train, val = train_val_split(ids, 0.1)
    recipe = dict(
        iters=s["ITERS"],
        batch_size=s["BATCH_SIZE"],
        block_size=s["BLOCK_SIZE"],
        lr=s["LR"],
        min_lr=s["MIN_LR"],
        warmup=s["WARMUP"],
        weight_decay=s["WEIGHT_DECAY"],
        betas=(0.9, 0.99),
        clip=1.0,
    )
    torch.manual_seed(s["SEED"])
    config = GPTConfig.char(
        vocab_size=len(vocab),
        max_len=s["BLOCK_SIZE"],
        d_model=s["D_MODEL"],
        n_layers=s["N_LAYERS"],
        n_heads=s["N_HEADS"],
    )
    model = GPT(config).to(args.device)
    history = fit(model, train, val, recipe, s, eval_batch_size=12, bf16=bf16, desc="GPT char")
    info = {
        "data": "Tiny Shakespeare, first 90% (read_tinyshakespeare, train_val_split)",
        **run_info(args, s, recipe, history, start),
        "process_cpu_seconds": round(time.process_time() - cpu_start, 1),
        "val_loss_is": f"mean of {s['EVAL_BATCHES']} fixed windows (12 x {s['BLOCK_SIZE']} characters) "
        f"of the last 10% (estimate_loss, seed 1234)",
        "evals": [[i, round(t, 1), round(v, 4)] for i, t, v in history["evals"]],
        "precision": s["PRECISION"],
    }
    save(args, model, info, vocab)


def fit(model, train_ids, val_ids, recipe: dict, s: dict, *, eval_batch_size: int, desc: str, bf16=False) -> dict:
    """:func:`onehot2gpt.gpt_training.train_gpt` with a recipe's optimiser `recipe` and its
    evaluation settings (EVAL_EVERY, EVAL_BATCHES, SEED) → the history."""
    from onehot2gpt.gpt_training import train_gpt

    return train_gpt(
        model,
        train_ids,
        val_ids,
        **recipe,
        eval_every=s["EVAL_EVERY"],
        eval_batches=s["EVAL_BATCHES"],
        eval_batch_size=eval_batch_size,
        seed=s["SEED"],
        bf16=bf16,
        desc=desc,
    )


def run_info(args, s: dict, recipe: dict, history: dict, start: float) -> dict:
    """What every GPT recipe records in ``info`` about its run: the command and settings, the
    optimiser's recipe, the updates, the times, the validation loss, threads, device and seed."""
    import time

    return {
        "command": _recipe.command_line(),
        "arguments": s,
        "recipe": {**recipe, "betas": list(recipe["betas"])},
        "iters": history["iters"],
        "seconds": round(history["train_seconds"], 1),
        "ms_per_iter": round(history["ms_per_iter"], 1),
        "total_seconds": round(time.time() - start, 1),
        "val_loss": round(history["val_loss"], 4),
        "threads": s["THREADS"],
        "device": args.device,
        "seed": s["SEED"],
    }


def save(args, model, info: dict, tokenizer) -> None:
    """Write the GPT and its tokenizer to ``args.out`` (atomically) and print the run's record."""
    from onehot2gpt.gpt import save_gpt

    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        save_gpt(model.cpu(), tmp, info=info, tokenizer=tokenizer)
    _recipe.print_json({"out": str(args.out), **{k: v for k, v in info.items() if k not in ("evals", "arguments")}})
