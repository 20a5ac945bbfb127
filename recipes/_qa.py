"""MiniLM fine-tuned for extractive QA on SQuAD: the training run of ``minilm-qa-squad.py`` and the
held-out scores it records (``bench/pretrained.py`` and the tests score the committed checkpoint with
the same :func:`qa_split` and :func:`null_threshold_report`).

SQuAD's dev set is the only split the course mirrors, so it is split by article
(:func:`onehot2gpt.bert_tasks.split_by_article`, 30 % of the 48 articles held out, seed 0): the
model trains on 34 articles and is scored on 14 it never saw. Only the top layers and the
start/end head train; the checkpoint stores just those, in float16, on top of the pip package's
MiniLM (its sha256 is recorded and checked on load). A second phase adds questions paired with
paragraphs of other articles, pointed at [CLS] (SQuAD 2.0's null span), and records the threshold
on the null margin chosen on half the held-out articles.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

__all__ = [
    "qa_split",
    "minilm_qa_recipe",
    "qa_trainable",
    "save_minilm_qa",
    "choose_null_threshold",
    "null_threshold_report",
]


def qa_split(test_fraction: float = 0.3, seed: int = 0):
    """SQuAD 1.1 dev split by article → (train questions, held-out questions): the split every
    QA number in the course uses (the checkpoint trains on the first, is scored on the second)."""
    from onehot2gpt.bert_tasks import split_by_article
    from onehot2gpt.data import read_squad

    return split_by_article(read_squad(), test_fraction, seed)


def minilm_qa_recipe(
    out: str | Path,
    *,
    top_layers: int = 4,
    epochs: int = 2,
    batch_size: int = 16,
    lr: float = 8e-5,
    max_len: int = 256,
    test_fraction: float = 0.3,
    seed: int = 0,
    null_steps: int = 100,
    null_share: float = 0.33,
    null_lr: float = 5e-5,
    null_sample: int = 150,
    evaluate_on: int | None = None,
    resume: str | Path | None = None,
    progress: bool = True,
    command: str = "python recipes/minilm-qa-squad.py",
) -> dict:
    """Fine-tune all-MiniLM-L6-v2 for extractive QA, teach it to say "no answer", and save it → the
    held-out scores.

    Phase 1 (BERT's SQuAD recipe, shortened for a CPU): ``[CLS] question [SEP] passage [SEP]``
    cut to `max_len` pieces, questions whose answer the cut removes left out of training; AdamW,
    warm-up over the first 10 % of steps then linear decay, `epochs` passes in batches of
    `batch_size`; only the top `top_layers` layers and the start/end vectors train.

    Phase 2 (SQuAD 2.0's null span): `null_steps` more steps at `null_lr` on training questions,
    a `null_share` of them paired with a paragraph of another training article
    (:func:`~onehot2gpt.bert_tasks.unanswerable_pairs`) and pointed at [CLS]. It starts from
    phase 1's weights rounded to float16, as they are stored; `resume` names a checkpoint folder
    that holds phase 1's result and skips it (its ``info`` is kept under "phase1").

    Scores: SQuAD's exact match and F1 on the held-out articles (all their questions, or up to
    `evaluate_on` of them, evenly spread). The held-out articles are split in two halves by article; on up to
    `null_sample` questions of each half, paired with paragraphs of other articles of that half,
    the threshold on the null margin (:func:`~onehot2gpt.bert_tasks.null_margins`) is chosen on
    the first half ("tune") and reported on the second ("report")."""
    import random

    from onehot2gpt.bert import BertForQuestionAnswering
    from onehot2gpt.bert_tasks import encode_squad, evaluate, finetune, select, unanswerable_pairs
    from onehot2gpt.checkpoints import load
    from onehot2gpt.pretrained import minilm_bert, minilm_path
    from onehot2gpt.subword import WordPieceTokenizer
    from onehot2gpt.utils import seeded

    out = Path(out)
    started = time.time()
    train, test = qa_split(test_fraction, seed)
    tokenizer = WordPieceTokenizer.load(minilm_path() / "vocab.txt")
    features = encode_squad(tokenizer, train, max_len=max_len)
    features = select(features, features["answerable"])
    if resume is None:
        with seeded(seed):
            bert, _ = minilm_bert()
            model = BertForQuestionAnswering(bert)  # the start/end head starts random
            qa_trainable(model, top_layers)
            losses = finetune(
                model,
                features,
                task="qa",
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                seed=seed,
                progress=progress,
                desc="MiniLM on SQuAD",
            )
        phase1 = {
            "steps": len(losses),
            "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
            "train_seconds": round(time.time() - started),
            "threads": torch.get_num_threads(),
        }
        with torch.no_grad():  # phase 2 starts from what phase 1 stores
            for p in model.parameters():
                p.copy_(p.half().float())
    else:
        model, _, _, phase1 = load(resume, kind="minilm-qa")
        if "phase2" in phase1:
            raise ValueError(
                f"{resume} has been through phase 2 already: resume from a phase-1 checkpoint "
                f"(one trained on answerable questions only)"
            )
    # Phase 2: answerable rows and rows whose passage comes from another article ([CLS] targets).
    started2 = time.time()
    rng = random.Random(seed)
    n_rows = null_steps * batch_size
    n_null = round(null_share * n_rows)
    answerable = rng.sample(range(features["input_ids"].size(0)), n_rows - n_null)
    nulls = encode_squad(tokenizer, unanswerable_pairs(rng.sample(train, n_null), seed=seed), max_len=max_len)
    mixed = _concat_rows(select(features, answerable), nulls, tokenizer.pad_id)
    with seeded(seed):
        qa_trainable(model, top_layers)
        null_losses = finetune(
            model,
            mixed,
            task="qa",
            epochs=1,
            batch_size=batch_size,
            lr=null_lr,
            seed=seed,
            progress=progress,
            desc="MiniLM: answer or null",
        )
    trained_s = time.time() - started2
    # Scores: SQuAD on the held-out articles, then the null threshold (tune half → report half).
    held_out = test if evaluate_on is None else test[:: max(1, -(-len(test) // evaluate_on))]
    scored = evaluate(model, encode_squad(tokenizer, held_out, max_len=max_len), "qa")
    result = {
        "exact_match": round(scored["exact_match"], 2),
        "f1": round(scored["f1"], 2),
        "held_out_questions": len(held_out),
        "held_out_articles": len({e["title"] for e in held_out}),
        "train_questions": int(features["input_ids"].size(0)),
        "train_articles": len({e["title"] for e in train}),
        "steps": phase1["steps"] + len(null_losses),
        "final_loss": round(sum(null_losses[-50:]) / len(null_losses[-50:]), 4),
        "train_seconds": round(phase1["train_seconds"] + trained_s),
        "threads": torch.get_num_threads(),
        "null": null_threshold_report(model, tokenizer, test, max_len, null_sample, seed),
        "phase1": {**phase1, "source": "this run" if resume is None else f"resumed from {resume}"},
        "phase2": {
            "steps": len(null_losses),
            "rows": n_rows,
            "null_rows": n_null,
            "train_seconds": round(trained_s),
            "threads": torch.get_num_threads(),
        },
    }
    args = {
        "top_layers": top_layers,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "max_len": max_len,
        "test_fraction": test_fraction,
        "seed": seed,
        "null_steps": null_steps,
        "null_share": null_share,
        "null_lr": null_lr,
        "null_sample": null_sample,
    }
    save_minilm_qa(
        model,
        out,
        top_layers,
        tokenizer,
        info={
            "recipe": "minilm-qa-squad",
            "command": command,
            "arguments": args,
            "data": "SQuAD 1.1 dev, split by article (recipes/_qa.py qa_split)",
            **result,
        },
    )
    return {**result, "checkpoint": str(out)}


def _concat_rows(a: dict, b: dict, pad_id: int) -> dict:
    """Two ``encode_squad`` dicts → one with the rows of both, (B, T) tensors padded to the longer T."""
    import torch.nn.functional as F

    T = max(a["input_ids"].size(1), b["input_ids"].size(1))
    out = {}
    for k, v in a.items():
        if torch.is_tensor(v) and v.dim() == 2:
            pad = pad_id if k == "input_ids" else 0
            out[k] = torch.cat([F.pad(x.long(), (0, T - x.size(1)), value=pad) for x in (v, b[k])]).to(v.dtype)
        elif torch.is_tensor(v):
            out[k] = torch.cat([v, b[k]])
        else:
            out[k] = list(v) + list(b[k])
    return out


def qa_trainable(model, top_layers: int) -> list[str]:
    """Freeze all of a BertForQuestionAnswering except its top `top_layers` encoder layers and the
    QA head → the names of the parameters left trainable (what a QA checkpoint stores)."""
    from onehot2gpt.bert import freeze

    layers = model.bert.encoder.layers
    if not isinstance(top_layers, int) or isinstance(top_layers, bool) or not 0 <= top_layers <= len(layers):
        raise ValueError(f"top_layers must be a whole number from 0 to {len(layers)}; got {top_layers!r}")
    freeze(model.bert)
    for layer in list(layers)[len(layers) - top_layers :]:
        freeze(layer, False)
    freeze(model.qa, False)
    return [k for k, p in model.named_parameters() if p.requires_grad]


def save_minilm_qa(model, directory: str | Path, top_layers: int, tokenizer, info: dict | None = None) -> Path:
    """Write a QA checkpoint: the top `top_layers` layers and the QA head of `model` (a
    BertForQuestionAnswering built on :func:`~onehot2gpt.pretrained.minilm_bert`) in float16,
    MiniLM's vocab.txt, and a config naming the base weights (their sha256) it must be loaded on
    top of (what :func:`~onehot2gpt.pretrained.minilm_qa_from_checkpoint` checks)."""
    from onehot2gpt.checkpoints import save_checkpoint
    from onehot2gpt.pretrained import MINILM_NAME, _qa_names, minilm_weights_sha256

    params = dict(model.named_parameters())
    config = {
        "base": MINILM_NAME,
        "base_sha256": minilm_weights_sha256(),
        "top_layers": top_layers,
        "n_layers": model.bert.config.n_layers,
        "d_model": model.bert.config.d_model,
        "vocab_size": model.bert.config.vocab_size,
    }
    tensors = {k: params[k] for k in _qa_names(model, top_layers)}
    return save_checkpoint(
        directory,
        "minilm-qa",
        "BertForQuestionAnswering",
        config,
        tensors,
        tokenizer=tokenizer,
        info=info,
        dtype=torch.float16,
    )


def choose_null_threshold(answerable: torch.Tensor, unanswerable: torch.Tensor) -> float:
    """Margins of questions whose passage holds the answer and of questions whose passage does not
    (1-D each) → the threshold that maximises the mean of the two accuracies (answered on the
    first, abstained on the second), halfway between the two margins around it. Choose it on
    held-out questions and report on others.

    Example:
        >>> choose_null_threshold(torch.tensor([5., 6., 1.]), torch.tensor([-2., 0., 3.]))
        0.5
    """
    a, u = torch.as_tensor(answerable).float().flatten(), torch.as_tensor(unanswerable).float().flatten()
    if len(a) == 0 or len(u) == 0:
        raise ValueError(f"need margins of both kinds of question; got {len(a)} answerable and {len(u)} unanswerable")
    if not (torch.isfinite(a).all() and torch.isfinite(u).all()):
        raise ValueError("the margins hold NaN or inf: score the questions again with a working model")
    values = torch.cat([a, u]).unique()  # sorted
    candidates = torch.cat([values[:1] - 1, (values[1:] + values[:-1]) / 2, values[-1:] + 1])
    answered = (a[None, :] > candidates[:, None]).float().mean(1)
    abstained = (u[None, :] <= candidates[:, None]).float().mean(1)
    return float(candidates[int(((answered + abstained) / 2).argmax())])


def null_threshold_report(model, tokenizer, held_out, max_len: int, sample: int, seed: int) -> dict:
    """The held-out articles split in halves by article → the null threshold chosen on the first
    half and the scores it gives on the second: the share of answerable questions answered (of
    those whose answer fits the window), the share of unanswerable ones (paired with a paragraph of
    another article of the same half) declined, and SQuAD's EM / F1 on the answerable questions
    when declining counts as a wrong answer. Up to `sample` questions per half, evenly spread."""
    from onehot2gpt.bert_tasks import (
        encode_squad,
        evaluate,
        null_accuracy,
        null_margins,
        select,
        split_by_article,
        squad_evaluate,
        unanswerable_pairs,
    )
    from onehot2gpt.qa import abstains

    halves = dict(zip(("tune", "report"), split_by_article(held_out, 0.5, seed)))
    margins, report = {}, {}
    for name, rows in halves.items():
        rows = rows[:: max(1, -(-len(rows) // sample))]
        for kind, examples in (("answerable", rows), ("unanswerable", unanswerable_pairs(rows, seed=seed))):
            f = encode_squad(tokenizer, examples, max_len=max_len)
            if kind == "answerable":
                f = select(f, f["answerable"])
            r = evaluate(model, f, "qa")
            _, m = null_margins(r["start_logits"], r["end_logits"], f["context_mask"])
            margins[name, kind] = m
            if name == "report" and kind == "answerable":
                report = {"predictions": r["predictions"], "answers": f["answers"], "margins": m}
        halves[name] = rows
    threshold = choose_null_threshold(margins["tune", "answerable"], margins["tune", "unanswerable"])
    declined = abstains(report["margins"], threshold)
    given = [("" if d else p) for p, d in zip(report["predictions"], declined.tolist())]
    always, with_null = (
        squad_evaluate(report["predictions"], report["answers"]),
        squad_evaluate(given, report["answers"]),
    )
    return {
        "threshold": round(threshold, 3),
        "tune_articles": sorted({e["title"] for e in halves["tune"]}),
        "report_articles": sorted({e["title"] for e in halves["report"]}),
        "tune": {
            k: round(v, 4)
            for k, v in null_accuracy(margins["tune", "answerable"], margins["tune", "unanswerable"], threshold).items()
        },
        "report": {
            **{
                k: round(v, 4)
                for k, v in null_accuracy(
                    margins["report", "answerable"], margins["report", "unanswerable"], threshold
                ).items()
            },
            "answerable_questions": len(report["answers"]),
            "unanswerable_questions": len(margins["report", "unanswerable"]),
            "f1_always_answer": round(always["f1"], 2),
            "f1_with_null": round(with_null["f1"], 2),
            "exact_match_with_null": round(with_null["exact_match"], 2),
        },
    }
