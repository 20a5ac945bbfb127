"""Rebuild the four ``zero-shot-qa*`` checkpoints of notebook 10, in one run, as they were built.

    python recipes/zero-shot-qa.py --out DIR

One GPT per Q/A share of the invented world's corpus (0 %, 0.5 %, 2 %, 10 %: ``zero-shot-qa000``,
``-qa005``, ``-qa020``, ``-qa100`` in DIR), each trained from scratch by
:func:`onehot2gpt.zero_shot.train_variant` with only the share differing, each scored on the
held-out tests (:func:`onehot2gpt.zero_shot.evaluate`) and the scores stored in its ``info``.
"""

import _recipe

SHARES = [0.0, 0.005, 0.02, 0.1]
ITERS = 1200
DOCUMENTS = 6000
THREADS = 1
SEED = 0


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    import time

    from onehot2gpt import zero_shot as zs
    from onehot2gpt.gpt import save_gpt
    from onehot2gpt.utils import set_threads

    set_threads(s["THREADS"])
    setup = zs.setup()
    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        for share in s["SHARES"]:
            start = time.time()
            model, history = zs.train_variant(
                setup, share, n_documents=s["DOCUMENTS"], recipe=dict(iters=s["ITERS"]), seed=s["SEED"]
            )
            table = zs.evaluate(model, setup.tokenizer, setup.tests)
            counts = zs.make_corpus(setup.world, setup.train_pairs, qa_share=share, n_documents=s["DOCUMENTS"]).counts()
            info = {
                "qa_share": share,
                "documents": counts,
                "command": _recipe.command_line(),
                "arguments": s,
                "recipe": {**zs.EXPERIMENT_RECIPE, "iters": s["ITERS"], "betas": list(zs.EXPERIMENT_RECIPE["betas"])},
                "train_seconds": round(history["train_seconds"], 1),
                "ms_per_iter": round(history["ms_per_iter"], 1),
                "final_loss": round(sum(history["loss"][-50:]) / len(history["loss"][-50:]), 4),
                "accuracy": table,
                "test_items": {t: len(v) for t, v in setup.tests.items()},
                "threads": s["THREADS"],
                "seed": s["SEED"],
                "total_seconds": round(time.time() - start, 1),
            }
            save_gpt(model, tmp / zs.checkpoint_name(share), info=info, tokenizer=setup.tokenizer)
            _recipe.print_json(
                {zs.share_label(share): {k: info[k] for k in ("accuracy", "train_seconds", "final_loss")}}
            )


if __name__ == "__main__":
    main()
