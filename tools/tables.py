"""Write the course's tables of measured numbers into README.md and docs/*.md from their results files.

A table lives between two markers in a Markdown file::

    <!-- table:notebooks -->
    ...generated, never edited by hand...
    <!-- /table -->

and is rebuilt from the file that holds its numbers (``bench/results/*.json``, the ULMFiT record
notebook 04 reads) together with a line naming that file and the command that wrote it. After
``make bench`` (or one benchmark run by hand) rewrites a results file::

    python tools/tables.py           # rewrite every table in README.md and docs/*.md
    python tools/tables.py --check   # exit 1 and name the tables that differ (tests/test_tables.py)

``make bench`` pipes each benchmark's last line through ``python tools/tables.py --stamp
bench/NAME.py``, which checks that it is one JSON object and adds the command, the commit and the
date (UTC) unless the script gave them, so that every results file names where it came from.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MARKER = re.compile(r"(<!-- table:([a-z0-9-]+) -->\n)(.*?)(<!-- /table -->)", re.DOTALL)

# What each notebook builds, in a line (the README's table; the title comes from the notebook).
BUILDS = {
    "01": "tokenizers, a vocabulary, one-hot vectors, bag of words; words against characters",
    "02": "skip-gram and CBOW, negative sampling, analogies; GloVe and fastText beside them",
    "03": "n-gram counts and Kneser–Ney, an LSTM cell from its gates, an LSTM language model",
    "04": "ELMo's biLM and scalar mix, probes for POS and sentiment, ULMFiT's fine-tuning",
    "05": "dot-product, scaled and multi-head attention, masks, an attention explorer",
    "06": "the encoder-decoder Transformer: positions, blocks, cross-attention, a date model",
    "07": "BERT's embeddings, encoder and masked-LM + NSP pre-training",
    "08": "BERT fine-tuned on sentiment, POS, NLI and QA; MiniLM beside it; what the layers hold",
    "09": "GPT: causal attention, pre-norm blocks, sampling, the KV cache, looking inside",
    "10": "zero-shot prompting, and a corpus that shows where it comes from",
    "11": "autoregressive against autoencoding, XLNet's permutations, an induction head",
}
# The lecturer's plan: minutes of class per notebook (docs/teaching.md).
IN_CLASS = {
    "01": "45 min",
    "02": "90 min",
    "03": "90 min",
    "04": "90 min",
    "05": "90 min",
    "06": "2 × 90 min",
    "07": "90 min",
    "08": "2 × 90 min",
    "09": "90 min",
    "10": "60 min",
    "11": "60 min",
}


def load(name: str) -> dict:
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python bench/{path.stem}.py` or restore it from git")
    return json.loads(path.read_text())


def notebooks() -> list[tuple[str, str, Path]]:
    """(number, title, path) of every course notebook, the title from its first `# ` heading."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text())
        lines = (
            line for c in nb["cells"] if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()
        )
        heading = next((line[2:] for line in lines if line.startswith("# ")), path.stem)
        found.append((path.name[:2], heading.split(" · ", 1)[-1].strip(), path))
    return found


def exercises(path: Path) -> int:
    nb = json.loads(path.read_text())
    return sum("exercise" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])


def seconds_of(path: Path, record: dict) -> str:
    seconds = record["seconds"].get(path.name)
    return "—" if seconds is None else f"{seconds:.0f} s"


def source(file: str, record: dict, *, dated: bool = True) -> str:
    """The line under a table: the results file, the command that wrote it, where and when."""
    facts = [f"commit {record['commit']}"] if record.get("commit") else []
    if dated and record.get("date"):
        facts.append(record["date"])
    if record.get("machine"):
        facts.append(record["machine"])
    command = record.get("command", f"python bench/{Path(file).stem}.py")
    where = f" ({'; '.join(facts)})" if facts else ""
    typed = (
        " The numbers were typed from that run's output and transcribed into the file."
        if record.get("transcribed_from")
        else ""
    )
    return f"Source: `{file}`, written by `{command}`{where}.{typed}"


def count(n: int, word: str) -> str:
    """`n` and `word`, plural where n is not 1: count(1, "thread") == "1 thread"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def notebook_table() -> str:
    from onehot2gpt_teach.course import badge_url

    record = load("notebooks.json")
    rows = []
    for number, title, path in notebooks():
        course = f"notebooks/{path.name}"
        badge = f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]({badge_url(course)})"
        student = f"[student]({badge_url(f'notebooks/student/{path.name}')})"
        rows.append(
            [number, f"[{title}]({course})", BUILDS.get(number, ""), seconds_of(path, record), f"{badge} {student}"]
        )
    note = source("bench/results/notebooks.json", record, dated=False)
    return table(["#", "notebook", "what you build", "runs in", "Colab"], rows) + f"\n\nRun times. {note}"


def teaching_table() -> str:
    record = load("notebooks.json")
    rows = [
        [str(week), f"{number} {title}", IN_CLASS.get(number, ""), seconds_of(path, record), str(exercises(path))]
        for week, (number, title, path) in enumerate(notebooks(), start=1)
    ]
    header = ["week", "notebook", "in class", "runs in", "exercises"]
    return (
        table(header, rows)
        + f"\n\n*Runs in*, top to bottom in a fresh kernel. {source('bench/results/notebooks.json', record)}"
    )


def notebook_times_table() -> str:
    record = load("notebooks.json")
    rows = [[name, f"{s:.1f}"] for name, s in record["seconds"].items()]
    rows.append(["**total**", f"**{record['total_seconds']:.1f}**"])
    t = record.get("targets", {})
    met = "every notebook met both" if not record["over_90_s"] and not record["failed"] else "not met"
    note = f"Targets: each notebook ≤ {t.get('each_s', 90):.0f} s, all ≤ {t.get('total_s', 900) / 60:.0f} min ({met}); "
    note += f"{count(record['threads'], 'torch thread')}. " + source("bench/results/notebooks.json", record)
    return table(["notebook", "seconds"], rows) + "\n\n" + note


def against_gensim(r: dict, timed: str) -> list[list[str]]:
    """The rows word2vec's and fastText's benchmarks share: time, analogies, WordSim, ours beside gensim's."""
    return [
        [f"seconds ({timed})", f"{r['ours_seconds']:.1f}", f"{r['gensim_seconds']:.1f}"],
        ["Google analogy accuracy", f"{r['ours_analogy']:.3f}", f"{r['gensim_analogy']:.3f}"],
        ["WordSim-353 Spearman", f"{r['ours_wordsim']:.3f}", f"{r['gensim_wordsim']:.3f}"],
    ]


def fasttext_table() -> str:
    r = load("fasttext.json")
    rows = against_gensim(r, "vocabulary, n-gram table, training") + [
        [
            f"misspelling → intended word among the 10 nearest ({r['typos']} misspellings)",
            f"{r['ours_typo_recall_at_10']:.3f}",
            f"{r['gensim_typo_recall_at_10']:.3f}",
        ]
    ]
    met = ", ".join(f"{k} {'met' if v else '**not met**'}" for k, v in r["met"].items())
    note = (
        f"Time ratio {r['time_ratio']:.1f}×; targets: {r['targets']['quality']}; {r['targets']['time']} ({met}); "
        f"{count(r['threads'], 'thread')}, {count(r['epochs'], 'epoch')}. " + source("bench/results/fasttext.json", r)
    )
    return table(["", "ours", "gensim `FastText`"], rows) + "\n\n" + note


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def zero_shot_table() -> str:
    r = load("zero_shot.json")
    rows = []
    for share, tests in r["results"].items():

        def both(test: str, key: str) -> str:
            return f"{_pct(tests[test]['zero'][key])} / {_pct(tests[test]['few'][key])}"

        rows.append(
            [
                share,
                both("qa_new", "read"),
                both("qa_changed", "read"),
                both("qa_changed", "memorised"),
                both("qa_changed", "format"),
                both("tldr_changed", "memorised"),
                both("translation", "read"),
                both("translation", "memorised"),
            ]
        )
    header = [
        "Q/A share",
        "strangers: read",
        "changed fact: read",
        "changed fact: memorised",
        "format",
        "TL;DR, changed fact: memorised",
        "translation: correct",
        "translation: recalled",
    ]
    items = sorted(set(r["items_per_test"].values()))
    note = (
        f"Each cell: zero-shot / few-shot; {', '.join(map(str, items))} items per test, {count(r['threads'], 'thread')}. "
        + source("bench/results/zero_shot.json", r)
    )
    return table(header, rows) + "\n\n" + note


def word2vec_table() -> str:
    r = load("word2vec.json")
    rows = against_gensim(r, "vocabulary and training")
    note = (
        f"Time ratio {r['time_ratio']:.2f}×; {count(r['threads'], 'thread')}, {count(r['epochs'], 'epoch')}. "
        + source("bench/results/word2vec.json", r)
    )
    return table(["", "ours", "gensim `Word2Vec` (sg=1)"], rows) + "\n\n" + note


def attention_table() -> str:
    r = load("attention.json")
    lengths = sorted(int(k[len("ours_ms_T") :]) for k in r if k.startswith("ours_ms_T"))
    rows = [
        [str(t), f"{r[f'ours_ms_T{t}']:.3g}", f"{r[f'torch_ms_T{t}']:.3g}", f"{r[f'ratio_T{t}']:.2f}"] for t in lengths
    ]
    note = (
        f"Batch {r['batch']}, d_model {r['d_model']}, {r['n_heads']} heads, {count(r['threads'], 'thread')}, median of "
        f"{r['repeats']} alternating repeats; largest difference over outputs and input gradients "
        f"{r['max_abs_diff']}. " + source("bench/results/attention.json", r)
    )
    return table(["T", "ours (ms)", "`torch.nn.MultiheadAttention` (ms)", "ours / torch"], rows) + "\n\n" + note


def generate_table() -> str:
    r = load("generate.json")
    rows = [
        ["tokens/s with the cache", f"{r['cached_tok_s']:,.0f}"],
        ["tokens/s without", f"{r['uncached_tok_s']:,.0f}"],
        ["speed-up", f"{r['speedup']:.1f}×"],
    ]
    note = (
        f"{r['new_tokens']} new tokens from a prompt of {r['prompt_tokens']} tokens, batch {r['batch']}, "
        f"{count(r['threads'], 'thread')}, median of {r['repeats']} alternating repeats; the two outputs identical. "
        + source("bench/results/generate.json", r)
    )
    return table(["measure", "value"], rows) + "\n\n" + note


def bert_table() -> str:
    r = load("bert.json")
    rows = [
        ["MiniLM forward, batch 8 × 128: ours / HF (sdpa), ms", f"{r['ours_ms']:.1f} / {r['hf_ms']:.1f}"],
        ["largest \\|ours − HF\\| over the last hidden states", f"{r['max_abs_diff']}"],
        ["masked-piece accuracy, WikiText-2 valid", f"{r['mlm_acc_valid']:.3f}"],
        [
            f"SST-2 test, {r['sst2_train']:,} train rows: pre-trained / random init",
            f"{r['sst2_acc_pretrained']:.3f} / {r['sst2_acc_random_init']:.3f}",
        ],
        [
            f"SST-2 test, {r['sst2_small']:,} train rows: pre-trained / random init",
            f"{r['sst2_small_acc_pretrained']:.3f} / {r['sst2_small_acc_random_init']:.3f}",
        ],
        ["UD EWT POS test accuracy (trained on all of train)", f"{r['pos_acc']:.3f}"],
        ["SNLI test accuracy (trained on the dev file)", f"{r['snli_acc']:.3f}"],
        ["SQuAD 1.1 dev, split by article 70/30: EM / F1", f"{r['squad_em']:.1f} / {r['squad_f1']:.1f}"],
    ]
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in r["seconds"].items())
    note = (
        f"{count(r['epochs'], 'epoch')}, lr {r['lr']}, {count(r['threads'], 'thread')}; seconds per part: {seconds}. "
        + source("bench/results/bert.json", r)
    )
    return table(["measure", "result"], rows) + "\n\n" + note


def elmo_table() -> str:
    r = load("elmo.json")
    pos = ["POS accuracy"] + [
        f"{r[k]:.3f}" if k in r else ""
        for k in ("pos_acc_onehot", "pos_acc_word2vec", "pos_acc_elmo_layer0", "pos_acc_elmo_top", "pos_acc_elmo_mix")
    ]
    sst = ["SST-2 accuracy", "", f"{r['sst2_acc_word2vec']:.3f}", "", "", f"{r['sst2_acc_elmo_mix']:.3f}"]
    probes = table(["", "one-hot", "word2vec", "ELMo token layer", "ELMo top layer", "ELMo scalar mix"], [pos, sst])
    lm = table(
        ["language model", "valid perplexity (forward)", "(backward)"],
        [
            [
                f"{r['ngram_order']}-gram, interpolated Kneser–Ney",
                f"{r['ngram_valid_ppl']:.1f}",
                f"{r['ngram_valid_ppl_bwd']:.1f}",
            ],
            ["the course biLM", f"{r['bilm_valid_ppl']:.1f}", f"{r['bilm_valid_ppl_bwd']:.1f}"],
        ],
    )
    note = f"{r['lm_predicted_tokens']:,} predicted tokens per direction. " + source("bench/results/elmo.json", r)
    return probes + "\n\n" + lm + "\n\n" + note


def pretrained_table() -> str:
    r = load("pretrained.json")
    rows = [
        [f"SST-2 test, MiniLM fine-tuned on {r['sst2_train']:,} training sentences", f"{r['sst2_accuracy']:.4f}"],
        ["SNLI test, fine-tuned on the labelled dev pairs", f"{r['snli_accuracy']:.4f}"],
        [
            f"SQuAD: EM / F1 on {r['squad_questions']:,} questions of {r['squad_articles']} held-out articles",
            f"{r['squad_exact_match']:.2f} / {r['squad_f1']:.2f}",
        ],
    ]
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in r["seconds"].items())
    note = (
        f"{count(r['epochs'], 'epoch')}, lr {r['lr']}, {count(r['threads'], 'thread')}; seconds per part: {seconds}. "
        + source("bench/results/pretrained.json", r)
    )
    return table(["measure", "result"], rows) + "\n\n" + note


def part(record: dict, name: str) -> dict:
    """One part of a results file (gpt_char.json's "train" or "writes"), with the file's own command,
    commit, date and machine where the part does not name its own."""
    meta = {k: record[k] for k in ("command", "commit", "date", "machine", "threads", "torch") if k in record}
    return {**meta, **record[name]}


def gpt_char_train_table() -> str:
    r = part(load("gpt_char.json"), "train")
    rows = []
    for name, label in (("nanogpt_settings", "nanoGPT's settings"), ("course_recipe", "course recipe")):
        m = r[name]
        reached = (
            "—"
            if m["seconds_to_val_1_90"] is None
            else f"{m['seconds_to_val_1_90']} ({m['iters_to_val_1_90']:,} updates)"
        )
        rows.append([label, f"{m['ms_per_iter']}", f"{m['val_loss_final']:.3f} ({m['iters']:,} updates)", reached])
    note = (
        f"Validation on {r['eval_batches']} windows of {r['eval_windows']}, {count(r['threads'], 'thread')}. "
        + source("bench/results/gpt_char.json", r)
    )
    header = [
        "recipe",
        "ms per update",
        "final validation loss",
        f"training seconds to validation ≤ {r['target_val_loss']}",
    ]
    return table(header, rows) + "\n\n" + note


def gpt_char_writes_table() -> str:
    w = part(load("gpt_char.json"), "writes")
    rows = []
    for name, m in w["models"].items():
        c = m["model"]
        cpu = "" if m["process_cpu_minutes"] is None else f" ({m['process_cpu_minutes']} min of CPU)"
        rows.append(
            [
                f"`{name}`",
                f"{c['n_layers']} × {c['d_model']}, {c['max_len']} characters, {m['params'] / 1e6:.1f}M",
                f"{m['val_loss']:.3f}",
                f"{100 * m['real_word_share']:.1f}%",
                f"{m['total_minutes']}{cpu}, {count(m['threads_of_the_run'], 'thread')}, {m['precision']}",
            ]
        )
    t = w["targets"]
    met = ", ".join(f"{k} {'met' if v else '**not met**'}" for k, v in w["met"].items())
    note = (
        f"Validation: {w['val_windows']}; real words: {count(w['samples'], 'sample')} of {w['chars_per_sample']} characters "
        f"at temperature {w['temperature']}, {w['known_words']}. Training minutes are what the checkpoint's own "
        f"run recorded. Targets for `{w['scored_first']}`: loss ≤ {t['val_loss_at_most']}, "
        f"≤ {t['train_minutes_at_most']} min, ≥ {100 * t['real_word_share_at_least']:.0f}% real words ({met}). "
        + source("bench/results/gpt_char.json", w)
    )
    header = ["checkpoint", "size", "val loss (nats/char)", "real words", "training minutes (recorded)"]
    return table(header, rows) + "\n\n" + note


def qa_null_table() -> str:
    before, after = load("pretrained_null_phase1.json"), load("pretrained_null.json")
    b, a = before["null"]["report"], after["null"]["report"]
    rows = [
        [
            "threshold (chosen on the other 7 articles)",
            f"{before['null']['threshold']:.3f}",
            f"{after['null']['threshold']:.3f}",
        ],
        ["answerable questions answered", f"{b['answered']:.3f}", f"{a['answered']:.3f}"],
        [
            "questions paired with another article's paragraph, declined",
            f"{b['abstained']:.3f}",
            f"{a['abstained']:.3f}",
        ],
        [
            "F1 always answering / declining counted as wrong",
            f"{b['f1_always_answer']:.2f} / {b['f1_with_null']:.2f}",
            f"{a['f1_always_answer']:.2f} / {a['f1_with_null']:.2f}",
        ],
    ]
    note = (
        f"Report half: {a['answerable_questions']} answerable and {a['unanswerable_questions']} unanswerable "
        f"questions of 7 held-out articles. Phase 1 — {source('bench/results/pretrained_null_phase1.json', before)} "
        f"With phase 2 — {source('bench/results/pretrained_null.json', after)}"
    )
    header = ["report half (7 held-out articles)", "phase 1 (SQuAD 1.1 only)", "with phase 2 (committed)"]
    return table(header, rows) + "\n\n" + note


def ulmfit_table() -> str:
    from onehot2gpt.ulmfit import ABLATION_FILE, load_ablation

    r = load_ablation()
    rows = []
    for setting, accs in r["accuracy"].items():
        mean = sum(accs) / len(accs)
        rows.append([setting, f"{mean:.3f}", ", ".join(f"{x:.3f}" for x in accs), f"{max(accs) - min(accs):.3f}"])
    seeds = f"{r['seeds'][0]}–{r['seeds'][-1]}"
    file = ABLATION_FILE.relative_to(ROOT) if ABLATION_FILE.is_relative_to(ROOT) else ABLATION_FILE.name
    note = (
        f"{r['train_sentences']} training sentences, {r['test_sentences']} test sentences, {count(r['threads'], 'thread')}, "
        f"{r['seconds'] / 60:.1f} minutes. " + source(str(file), r)
    )
    return table(["setting", "mean", f"seeds {seeds}", "best − worst seed"], rows) + "\n\n" + note


# The recipe that rebuilds each committed checkpoint (docs/recipes.md), and the key of its config.json
# "info" that holds the whole run's wall-clock seconds.
RECIPE_TIMES = {
    "word2vec-wikitext2": ("word2vec-wikitext2.py", "wall_seconds"),
    "glove-wikitext2": ("glove-wikitext2.py", "wall_seconds"),
    "bilm-wikitext2": ("bilm-wikitext2.py", "wall_time_s"),
    "bert-wikitext2": ("bert-wikitext2.py", "total_seconds"),
    "gpt-char-shakespeare": ("gpt-char-shakespeare.py", "total_seconds"),
    "gpt-char-shakespeare-large": ("gpt-char-shakespeare-large.py", "total_seconds"),
    "gpt-wikitext2": ("gpt-wikitext2.py", "total_seconds"),
    "minilm-qa-squad": ("minilm-qa-squad.py", "train_seconds"),
    "zero-shot-qa000": ("zero-shot-qa.py", "total_seconds"),
    "zero-shot-qa005": ("zero-shot-qa.py", "total_seconds"),
    "zero-shot-qa020": ("zero-shot-qa.py", "total_seconds"),
    "zero-shot-qa100": ("zero-shot-qa.py", "total_seconds"),
}


def recipes_table() -> str:
    """Each committed checkpoint, its recipe, and the time its own run took as its config.json
    records it, with the command it recorded (the history: older runs name older commands)."""
    folder = ROOT / "lib" / "onehot2gpt" / "assets"
    rows = []
    for name, (script, key) in RECIPE_TIMES.items():
        info = json.loads((folder / "checkpoints" / name / "config.json").read_text())["info"]
        where = info.get("device", "cpu")
        threads = f"{info['threads']} thread{'s' * (info['threads'] != 1)}" if info.get("threads") else ""
        first = info.get("phase1", {}).get("threads")
        if first and first != info.get("threads"):  # the QA recipe's two phases ran on different threads
            threads = f"{first} threads, then {threads}"
        run = f"{info[key] / 60:.1f} min ({where}{', ' + threads if where == 'cpu' and threads else ''})"
        rows.append([f"`{name}`", f"`python recipes/{script} --out DIR`", run, f"`{info['command']}`"])
    ulmfit = json.loads((folder / "results" / "ulmfit-ablation.json").read_text())
    run = f"{ulmfit['seconds'] / 60:.1f} min (cpu, {ulmfit['threads']} thread{'s' * (ulmfit['threads'] != 1)})"
    rows.append(
        ["`ulmfit-ablation.json`", "`python recipes/ulmfit-ablation.py --out DIR`", run, f"`{ulmfit['command']}`"]
    )
    note = (
        "Source: each checkpoint's `lib/onehot2gpt/assets/checkpoints/NAME/config.json` (`info`: the time key of "
        "`tools/tables.py` `RECIPE_TIMES`, `threads`, `device`, `command`) and "
        "`lib/onehot2gpt/assets/results/ulmfit-ablation.json`, written by the command in the last column."
    )
    return table(["checkpoint", "recipe", "its run took", "the command that ran"], rows) + "\n\n" + note


TABLES: dict[str, Callable[[], str]] = {
    "notebooks": notebook_table,
    "teaching": teaching_table,
    "notebook-times": notebook_times_table,
    "word2vec": word2vec_table,
    "fasttext": fasttext_table,
    "elmo": elmo_table,
    "attention": attention_table,
    "bert": bert_table,
    "gpt-char-train": gpt_char_train_table,
    "generate": generate_table,
    "zero-shot": zero_shot_table,
    "gpt-char-writes": gpt_char_writes_table,
    "pretrained": pretrained_table,
    "qa-null": qa_null_table,
    "ulmfit": ulmfit_table,
    "recipes": recipes_table,
}


def render(text: str, where: str = "text") -> str:
    """`text` with every marked table rebuilt; an unknown table name is an error naming it."""

    def rebuild(match: re.Match) -> str:
        name = match.group(2)
        if name not in TABLES:
            raise KeyError(f"{where}: no table named {name!r}; tools/tables.py knows {', '.join(TABLES)}")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return MARKER.sub(rebuild, text)


def documents() -> list[Path]:
    return [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if p.is_file()]


def stamp(line: str, script: str) -> dict:
    """A benchmark's last output line → its JSON object with ``command``, ``commit`` and ``date`` added."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{script}'s last line is not JSON ({err}): {line[:200]!r}; it must print one JSON object last"
        ) from err
    if not isinstance(record, dict):
        raise ValueError(f"{script}'s last line is JSON but not an object: {line[:200]!r}")
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    record.setdefault("command", f"python {script}")
    if git.returncode == 0:
        record.setdefault("commit", git.stdout.strip())
    record.setdefault("date", datetime.datetime.now(datetime.timezone.utc).date().isoformat())
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs")
    p.add_argument("--stamp", metavar="SCRIPT", help="read a benchmark's last line on stdin, print it stamped")
    args = p.parse_args(argv)
    if args.stamp:
        try:
            record = stamp(sys.stdin.read().strip(), args.stamp)
        except ValueError as err:
            print(err, file=sys.stderr)
            return 1
        print(json.dumps(record, indent=2, ensure_ascii=False))
        return 0
    stale = []
    for path in documents():
        text = path.read_text()
        new = render(text, str(path.relative_to(ROOT)))
        if new != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"tables out of date in {', '.join(stale)}: run `python tools/tables.py`", file=sys.stderr)
        return 1
    print(
        ("rewrote " if stale else "up to date: ") + ", ".join(stale or [str(p.relative_to(ROOT)) for p in documents()])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
