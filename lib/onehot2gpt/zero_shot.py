"""Where zero-shot ability comes from: an invented world, its pre-training corpus, and the tests
(notebook 10).

GPT-2 answered questions after "Q: … A:", summarised after "TL;DR:" and translated after a few
"english = french" lines without being trained for any of it: the web already contained text in
those shapes. This module makes that claim testable on a CPU. The world
(:mod:`onehot2gpt.zero_shot_world`, whose names this module offers too) has *known people*, whose
facts are the same in every document, and *strangers*, whose facts every document draws anew.
:func:`make_corpus` writes prose about them, the same prose followed by ``q : … ?`` / ``a : … .``
lines (the *Q/A share* of documents, the one thing that varies between the experiment's models),
``tl;dr :`` summaries, and blocks of real Tatoeba pairs, ``english = french``.

The tests (:func:`make_tests`) separate reading from recall: :func:`classify_answer` labels each
greedy answer "read" (the passage's fact), "memorised" (what pre-training taught instead) or
"other", and :func:`evaluate` gives the shares, zero-shot (the bare prompt) and few-shot.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence

from .utils import check_choice, check_int, check_number, check_text, evaluating, seeded
from .zero_shot_world import (  # noqa: F401 (the notebook reads the world's names from here: zs.World, …)
    ANIMALS,
    EOD,
    FACT_TEMPLATES,
    FILLERS,
    NAMES,
    NL,
    QUESTIONS,
    RELATIONS,
    SPECIALS,
    TLDR,
    TOWNS,
    TRADES,
    VALUES,
    VERBS,
    WEATHER,
    Corpus,
    Person,
    World,
    WorldTokenizer,
    make_corpus,
    stated_facts,
    tldr,
    translation_pairs,
)


@dataclass(frozen=True)
class Item:
    """One test question: the prompt (without examples); `answers`, the lines (without the line
    break) that reading the passage gives (for translation: the correct translations);
    `memorised`, the lines a model answering from what pre-training taught would give instead;
    the solved examples a few-shot prompt puts first; and `first_words`, the words an answer of
    the asked kind starts with (any town for "where", any name for a summary)."""

    task: str
    prompt: str
    answers: tuple[str, ...]
    shots: tuple[str, ...] = ()
    memorised: tuple[str, ...] = ()
    first_words: tuple[str, ...] = ()  # the words an answer of the right kind starts with
    # A Q/A item's parts, for a prompt writer to lay out: (passage, question, its solved examples
    # as (passage, question, answer) triples); () for the other tasks.
    qa: tuple = ()

    def text(self, few_shot: bool, render=None) -> str:
        """The prompt, with the solved examples first when `few_shot`. With `render`, a Q/A item is
        laid out by ``render(passage, question, examples)`` (:func:`qa_prompt`'s arguments) instead
        of the stored text; other items are not Q/A and stay as they are."""
        if render is not None and self.qa:
            passage, question, examples = self.qa
            text = render(passage, question, examples if few_shot else ())
            if not isinstance(text, str):
                raise TypeError(f"the prompt writer returned {type(text).__name__}, not the prompt as a str")
            return text
        return ("".join(self.shots) if few_shot else "") + self.prompt


def qa_prompt(passage: str, question: str, examples: Sequence[tuple[str, str, str]] = ()) -> str:
    """A Q/A prompt in the pre-training corpus's layout: for each solved example (passage,
    question, answer) its passage, ``q : <question>`` and ``a : <answer> .`` on lines of their
    own; then the passage, ``q : <question>`` and ``a :``, where the model writes the answer."""
    check_text(passage, "passage", fix="the passage the question is about"), check_text(question, "question")
    shots = "".join(f"{p}{NL}q : {q}{NL}a : {a} .{NL}" for p, q, a in examples)
    return f"{shots}{passage}{NL}q : {question}{NL}a :"


def answer_matches(logits, start: int, answer_ids: Sequence[int]) -> bool:
    """Whether greedy decoding writes `answer_ids`: `logits` (T, V) are the model's over prompt +
    answer, the answer starts at position `start`; True iff the arg-max at each position from
    ``start - 1`` predicts the answer's next id (the one-pass test of :func:`greedy_matches`)."""
    check_int(start, "start", 1, len(logits) - len(answer_ids), fix="the answer must fit inside the logits")
    predicted = logits[start - 1 : start - 1 + len(answer_ids)].argmax(-1)
    return bool((predicted == torch.as_tensor(list(answer_ids), device=predicted.device)).all())


TESTS = ("qa_new", "qa_changed", "tldr_new", "tldr_changed", "translation")  # the keys of make_tests() and evaluate()


def _passage(world: World, rng: random.Random, person: Person) -> str:
    """A paragraph about `person` and someone else, in a random order."""
    other = world.draw(rng.choice([m for m in NAMES if m != person.name]), rng)
    return world.prose(rng, [person, other] if rng.random() < 0.5 else [other, person])


def _without(word: str, write, tries: int = 100) -> str:
    """`write()` again until its text does not hold `word` (the memorised fact a passage must not give away)."""
    for _ in range(tries):
        text = write()
        if word not in text.split():
            return text
    raise RuntimeError(f"could not write a passage without {word!r} in {tries} tries")


def _changed(person: Person, relation: str, rng: random.Random) -> Person:
    return person.changed(relation, rng.choice([v for v in VALUES[relation] if v != person.fact(relation)]))


def make_tests(
    world: World,
    train_pairs: Sequence[tuple[str, str]],
    test_pairs: dict[str, list[str]],
    *,
    n: int = 120,
    qa_shots: int = 1,
    translation_shots: int = 3,
    tldr_shots: int = 1,
    seed: int = 2,
) -> dict[str, list[Item]]:
    """`n` items per test (translation: at most the held-out sentences), every passage fresh:

    * ``qa_new``: a paragraph about a stranger (facts drawn for this passage) and someone else,
      then ``q : <question about the stranger>`` and ``a :``. Only the passage holds the answer.
    * ``qa_changed``: a paragraph about a known person in which the asked fact is *changed* (and
      the memorised value appears nowhere in the passage), and someone else. Reading gives the
      passage's fact, memory the known one.
    * ``tldr_new`` / ``tldr_changed``: the same for ``tl;dr :`` (the changed fact is the town or
      the trade, the two facts a summary states).
    * ``translation``: ``<held-out english> =``; answers: all its Tatoeba translations;
      "memorised": every French sentence of the pre-training pairs (a recalled line).

    Few-shot examples are solved items about strangers (or training pairs), in the corpus's own
    format: the same examples a prompt writer would paste in.
    """
    check_int(n, "n", 1, fix="the number of items per test")
    rng = random.Random(seed)
    tests: dict[str, list[Item]] = {t: [] for t in TESTS}

    def qa_shot():  # → the solved example's text, and its (passage, question, answer)
        pair = [world.draw(m, rng) for m in rng.sample(world.strangers, 2)]
        passage = world.prose(rng, pair)
        person, relation = rng.choice(pair), rng.choice(RELATIONS)
        parts = passage[: -len(NL)], QUESTIONS[relation].format(n=person.name), person.fact(relation)
        return passage + world.qa_block(person, relation), parts

    def tldr_shot():
        return world.tldr_document(world.draw(rng.choice(world.strangers), rng), rng)

    def add(task, prompt, answer, memorised, first_words, qa=()):
        if task.startswith("qa"):
            made = [qa_shot() for _ in range(qa_shots)]
            shots, qa = tuple(text for text, _ in made), (*qa, tuple(parts for _, parts in made))
        else:
            shots = tuple(tldr_shot() for _ in range(tldr_shots))
        item = Item(task, prompt, (answer,), shots, (memorised,) if memorised else (), first_words, qa)
        tests[task].append(item)

    def ask(passage: str, name: str, relation: str):  # → the prompt, and its (passage, question)
        question = QUESTIONS[relation].format(n=name)
        return qa_prompt(passage[: -len(NL)], question), (passage[: -len(NL)], question)

    for _ in range(n):
        stranger = world.draw(rng.choice(world.strangers), rng)
        relation = rng.choice(RELATIONS)
        prompt, parts = ask(_passage(world, rng, stranger), stranger.name, relation)
        add("qa_new", prompt, f"{stranger.fact(relation)} .", None, VALUES[relation], parts)

        known = rng.choice(world.people)
        relation = rng.choice(RELATIONS)
        shown = _changed(known, relation, rng)
        passage = _without(known.fact(relation), lambda: _passage(world, rng, shown))
        prompt, parts = ask(passage, known.name, relation)
        add("qa_changed", prompt, f"{shown.fact(relation)} .", f"{known.fact(relation)} .", VALUES[relation], parts)

        stranger = world.draw(rng.choice(world.strangers), rng)
        add("tldr_new", world.tldr_document(stranger, rng, summary=False), tldr(stranger), None, NAMES)

        known = rng.choice(world.people)
        relation = rng.choice(("town", "trade"))
        shown = _changed(known, relation, rng)
        text = _without(known.fact(relation), lambda: world.tldr_document(shown, rng, summary=False))
        add("tldr_changed", text, tldr(shown), tldr(known), NAMES)
    recalled = tuple(sorted({f for _, f in train_pairs}))
    shots = tuple(
        f"{a} = {b}{NL}" for a, b in (train_pairs[i] for i in rng.sample(range(len(train_pairs)), translation_shots))
    )
    for e in list(test_pairs)[:n]:  # the same phrase-book lines before every sentence
        tests["translation"].append(Item("translation", f"{e} =", tuple(test_pairs[e]), shots, recalled))
    return tests


# -------- Scoring: what greedy decoding writes, and whether it came from the passage or from memory

LABELS = ("read", "memorised", "other")


def classify_answer(written: str, answers: Sequence[str], memorised: Sequence[str] = ()) -> str:
    """Where a written answer came from → "read", "memorised" or "other".

    `written` is what the model wrote after the prompt; its answer is the first line, and only a
    line the model ended counts (a continuation cut off before its line break is "other").
    "read": the line is one of `answers` (the passage's fact; for translation, a correct
    translation). "memorised": it is one of `memorised` (what pre-training taught instead) and
    not an answer. Spacing around the line does not matter.

    Example:
        >>> classify_answer(" marsh .\\n", ["kestrel ."], ["marsh ."])
        'memorised'
    """
    if not isinstance(written, str):
        raise TypeError(f"written must be the text the model wrote, got {type(written).__name__}")
    if isinstance(answers, str) or isinstance(memorised, str):
        raise TypeError("answers and memorised are lists of lines, not one string: wrap it in a list")
    if not answers:
        raise ValueError("answers is empty: give the line(s) that reading the passage would write")
    if NL not in written:
        return "other"
    line = " ".join(written.split(NL, 1)[0].split())
    if line in {" ".join(a.split()) for a in answers}:
        return "read"
    if line in {" ".join(m.split()) for m in memorised}:
        return "memorised"
    return "other"


def greedy_lines(
    model, tokenizer: WorldTokenizer, prompts: Sequence[str], max_new: int, batch_size: int = 64
) -> list[str]:
    """What greedy decoding writes after each prompt, up to and including its first line break
    (at most `max_new` tokens). Prompts of the same length are generated together
    (:func:`onehot2gpt.sampling.generate`, with its key/value cache); the result is the same as
    one :func:`greedy_answer` per prompt. ValueError for an empty prompt or one that, with
    `max_new` tokens, is longer than the model's context."""
    from .sampling import generate

    check_int(max_new, "max_new", 1, fix="the most tokens to write after each prompt")
    encoded = [_prompt_ids(tokenizer, p, model.config.max_len, max_new, f"prompt {i}") for i, p in enumerate(prompts)]
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    out, newline = [""] * len(prompts), tokenizer.vocab[NL]
    for length, rows in by_length.items():
        for b in range(0, len(rows), batch_size):
            chunk = rows[b : b + batch_size]
            ids = torch.tensor([encoded[i] for i in chunk])
            new = generate(model, ids, max_new, greedy=True, on_crop="error")[:, length:].tolist()
            for i, row in zip(chunk, new):  # each up to and including its first line break
                out[i] = tokenizer.decode(row[: row.index(newline) + 1] if newline in row else row)
    return out


def answer_length(tokenizer: WorldTokenizer, items: Sequence[Item]) -> int:
    """The most tokens an answer of `items` can take, its line break included: greedy decoding
    needs no more to be classified."""
    lines = {line for it in items for line in (*it.answers, *it.memorised)}
    return 1 + max(len(tokenizer.tokenize(line)) for line in lines)


def classify(
    model, tokenizer: WorldTokenizer, items: Sequence[Item], few_shot: bool = False, batch_size: int = 32
) -> list[str]:
    """Each item's label: :func:`classify_answer` of the line greedy decoding writes.

    An item with a few candidate lines is scored by one teacher-forced pass per candidate
    (:func:`greedy_matches`), which gives the label generating would; items with many candidates
    (translation: every French sentence of pre-training) are generated (:func:`greedy_lines`)."""
    return _classify(model, tokenizer, items, few_shot, batch_size)[0]


def _classify(model, tokenizer, items, few_shot, batch_size=32, prompt=None, matches=None):
    """→ (labels, the first token greedy decoding writes after each prompt, or None when generated).
    `prompt` lays out the Q/A items (:meth:`Item.text`); `matches` replaces :func:`answer_matches`."""
    if not items:
        raise ValueError("no items to classify")
    if max(len(it.answers) + len(it.memorised) for it in items) > MAX_CANDIDATES:
        written = greedy_lines(
            model, tokenizer, [it.text(few_shot, prompt) for it in items], answer_length(tokenizer, items), batch_size
        )
        return [classify_answer(w, it.answers, it.memorised) for w, it in zip(written, items)], None
    candidates = [
        (k, label, line)
        for k, it in enumerate(items)
        for label, lines in (("read", it.answers), ("memorised", it.memorised))
        for line in lines
    ]
    prompts = [items[k].text(few_shot, prompt) for k, _, _ in candidates]
    rows, starts = _answer_rows(model, tokenizer, prompts, [line for _, _, line in candidates])
    hits, firsts = _agree(model, rows, starts, batch_size, matches)
    labels, first = ["other"] * len(items), [""] * len(items)
    for (k, label, _), hit, f in zip(candidates, hits, firsts):
        first[k] = tokenizer.vocab.itos[f]
        if hit and labels[k] != "read":  # a line that is both an answer and memorised is read
            labels[k] = label
    return labels, first


MAX_CANDIDATES = 8  # more candidate lines than this: generate instead of one pass per line


def shares(labels: Sequence[str]) -> dict[str, float]:
    """Labels → the share of each of :data:`LABELS`."""
    if not labels:
        raise ValueError("no labels to count")
    unknown = set(labels) - set(LABELS)
    if unknown:
        raise ValueError(f"unknown labels {sorted(unknown)}; labels are {', '.join(LABELS)}")
    return {label: sum(x == label for x in labels) / len(labels) for label in LABELS}


def evaluate(
    model,
    tokenizer: WorldTokenizer,
    tests: dict[str, list[Item]],
    modes: Sequence[str] = ("zero", "few"),
    *,
    prompt=None,
    matches=None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Per test and mode, the shares of answers that read the passage, gave a memorised fact, or
    neither, and (for tests whose items name their `first_words`) the share whose first word is
    of the asked kind, right or wrong — the format:
    ``{"qa_changed": {"zero": {"read": 0.1, "memorised": 0.8, "other": 0.1, "format": 0.95}, …}, …}``.
    "read" is greedy exact match with the passage's fact (a correct translation, for translation).

    The experiment's two parts can be yours: `prompt` (:func:`qa_prompt`'s signature) lays out
    every Q/A item, and `matches` (:func:`answer_matches`'s) decides whether greedy decoding writes
    a candidate line; by default the library's."""
    for m in modes:
        check_choice(m, "modes", ("zero", "few"))
    for name, fn in (("prompt", prompt), ("matches", matches)):
        if fn is not None and not callable(fn):
            raise TypeError(f"evaluate: {name}={fn!r} is not a function; pass a function, or None for the library's")
    table: dict[str, dict[str, dict[str, float]]] = {}
    for test, items in tests.items():
        if not items:
            raise ValueError(f"no test items for {test!r}")
        table[test] = {}
        for mode in modes:
            labels, words = _classify(model, tokenizer, items, mode == "few", prompt=prompt, matches=matches)
            row = shares(labels)
            if words is not None and all(it.first_words for it in items):
                row["format"] = sum(w in it.first_words for w, it in zip(words, items)) / len(items)
            table[test][mode] = row
    return table


def greedy_answer(model, tokenizer: WorldTokenizer, prompt: str, max_new: int = 12) -> str:
    """What greedy decoding writes after `prompt`, up to and including the first line break (at
    most `max_new` tokens), by token-by-token generation: :func:`greedy_lines` of this one prompt."""
    return greedy_lines(model, tokenizer, [prompt], max_new)[0]


def _prompt_ids(tokenizer: WorldTokenizer, prompt: str, max_len: int, max_new: int = 0, what="the prompt") -> list[int]:
    """The ids of `prompt`; ValueError when it is empty or, with `max_new` tokens more, longer than `max_len`."""
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError(f"{what} is empty: give the model some text to continue")
    if len(ids) + max_new > max_len:
        raise ValueError(
            f"{what} has {len(ids)} tokens; with max_new={max_new} it exceeds the model's "
            f"context of {max_len}: shorten it or ask for fewer tokens"
        )
    return ids


def _answer_rows(model, tokenizer: WorldTokenizer, prompts: Sequence[str], lines: Sequence[str]):
    """→ (the ids of each prompt + line + line break, where each line starts); ValueError when a
    prompt is empty or a row is longer than the model's context."""
    rows, starts = [], []
    for prompt, line in zip(prompts, lines):
        ids = _prompt_ids(tokenizer, prompt, model.config.max_len)
        rows.append(ids + tokenizer.encode(" " + line) + [tokenizer.vocab[NL]])
        starts.append(len(ids))
        if len(rows[-1]) > model.config.max_len:
            raise ValueError(
                f"prompt + answer is {len(rows[-1])} tokens, longer than the model's context "
                f"of {model.config.max_len}; use fewer or shorter examples"
            )
    return rows, starts


def greedy_matches(
    model, tokenizer: WorldTokenizer, prompts: Sequence[str], answers: Sequence[str], batch_size: int = 32
) -> list[bool]:
    """For each (prompt, answer): would greedy decoding after `prompt` write exactly `answer` and
    then end the line? One forward pass over prompt + answer + line break: the greedy
    continuation equals the answer iff the arg-max at every answer position is the answer's
    next token (each position sees only the gold prefix, which greedy decoding would also have
    written). ValueError if an item is longer than the model's context."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    rows, starts = _answer_rows(model, tokenizer, prompts, answers)
    return greedy_agrees(model, rows, starts, batch_size)


def greedy_agrees(model, rows: Sequence[Sequence[int]], starts: Sequence[int], batch_size: int = 32) -> list[bool]:
    """For id lists `rows`, each a prompt (its first ``starts[i]`` ids) followed by a target: is
    the model's arg-max next token right at every target position? Batched with right padding."""
    return _agree(model, rows, starts, batch_size)[0]


def _agree(model, rows, starts, batch_size, matches=None):
    """→ (greedy_agrees's answers, the arg-max token after each prompt). Rows are batched in
    order of length, so that little padding is computed. `matches` (:func:`answer_matches`'s
    signature) decides each row from its logits instead of the batched comparison."""
    if len(rows) != len(starts):
        raise ValueError(f"{len(rows)} rows but {len(starts)} starts")
    for i, (r, s) in enumerate(zip(rows, starts)):
        if not 0 < s < len(r):
            raise ValueError(f"row {i}: the prompt must be 1 … {len(r) - 1} ids long, got {s}")
    agrees, firsts = [False] * len(rows), [0] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    device = next(model.parameters()).device
    with evaluating(model):
        for b in range(0, len(order), batch_size):
            chunk = order[b : b + batch_size]
            ids = pad_sequence([torch.as_tensor(list(rows[i])) for i in chunk], batch_first=True)  # right-padded
            logits = model(ids.to(device)).logits.cpu()  # (B, T, V)
            pred = logits.argmax(-1)  # (B, T)
            for j, i in enumerate(chunk):
                r, s = rows[i], starts[i]
                if matches is None:
                    agrees[i] = bool((pred[j, s - 1 : len(r) - 1] == torch.as_tensor(list(r[s:]))).all())
                else:
                    agrees[i] = _as_bool(matches(logits[j, : len(r)], s, list(r[s:])))
                firsts[i] = int(pred[j, s - 1])
    return agrees, firsts


def _as_bool(answer) -> bool:
    """A matcher's answer as a bool: True/False, or a one-element tensor; TypeError otherwise."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        return bool(answer)
    if isinstance(answer, bool):
        return answer
    raise TypeError(f"the answer matcher returned {answer!r}; it must return True or False")


# ----------------------------------------------------------------------------------- The experiment

SHARES = (0.0, 0.005, 0.02, 0.1)


def experiment_config(vocab_size: int, **overrides):
    """The models of the experiment: 4 layers, 4 heads, 128 wide, 128 tokens of context (room for
    a solved example before the question), no dropout."""
    from .gpt import GPTConfig

    return GPTConfig.char(vocab_size, **{"max_len": 128, **overrides})


EXPERIMENT_RECIPE = dict(
    iters=1200,
    batch_size=8,
    block_size=128,
    lr=3e-3,
    min_lr=3e-4,
    warmup=50,
    weight_decay=0.1,
    betas=(0.9, 0.99),
    clip=1.0,
)


@dataclass
class Setup:
    """Everything the models share: the world, the pairs, the tokenizer and the test items."""

    world: World
    train_pairs: list[tuple[str, str]]
    test_pairs: dict[str, list[str]]
    tokenizer: WorldTokenizer
    tests: dict[str, list[Item]]


def setup(seed: int = 0, n_test_items: int = 120) -> Setup:
    """The world, Tatoeba pairs (from the registry), tokenizer and tests used by every model."""
    world = World(seed)
    train_pairs, test_pairs = translation_pairs(seed=seed)
    tokenizer = WorldTokenizer.build(world, train_pairs, test_pairs)
    tests = make_tests(world, train_pairs, test_pairs, n=n_test_items)
    return Setup(world, train_pairs, test_pairs, tokenizer, tests)


def corpus_ids(s: Setup, qa_share: float, n_documents: int = 6000, seed: int = 1) -> torch.Tensor:
    """The token ids of the corpus with this Q/A share (documents joined by ``<eod>``)."""
    corpus = make_corpus(s.world, s.train_pairs, qa_share=qa_share, n_documents=n_documents, seed=seed)
    ids = s.tokenizer.encode(corpus.text())
    if s.tokenizer.vocab.unk_id in ids:
        raise RuntimeError("the corpus produced <unk> tokens: the tokenizer was not built from this world")
    return torch.tensor(ids, dtype=torch.long)


def train_variant(
    s: Setup,
    qa_share: float,
    *,
    n_documents: int = 6000,
    config_overrides: dict | None = None,
    recipe: dict | None = None,
    seed: int = 0,
    progress: bool = True,
    desc: str | None = None,
):
    """Train one model of the experiment from scratch → (model, history). Only `qa_share` should
    differ between the models you compare."""
    from .gpt import GPT
    from .gpt_training import train_gpt

    ids = corpus_ids(s, qa_share, n_documents)
    with seeded(seed):  # repeatable, and the caller's own randomness is left as it was
        model = GPT(experiment_config(len(s.tokenizer), **(config_overrides or {})))
        rec = {**EXPERIMENT_RECIPE, **(recipe or {})}
        rec["block_size"] = min(rec["block_size"], model.config.max_len)
        history = train_gpt(
            model, ids, None, **rec, seed=seed, progress=progress, desc=desc or f"Q/A share {share_text(qa_share)}"
        )
    return model, history


def share_text(share: float) -> str:
    """A share as people write it: "0%", "0.5%", "2%", "10%"."""
    return f"{100 * check_number(share, 'share', 0, 1, fix='a Q/A share, e.g. 0.02'):g}%"


def share_label(share: float) -> str:
    """The folder name of a model: the Q/A share in tenths of a percent, "qa000", "qa020", "qa100"."""
    return f"qa{round(check_number(share, 'share', 0, 1, fix='a Q/A share, e.g. 0.02') * 1000):03d}"


def checkpoint_name(share: float) -> str:
    """The course checkpoint of the model trained with this Q/A share: "zero-shot-qa020" for 2%."""
    return f"zero-shot-{share_label(share)}"


def load_course_models(shares: Sequence[float] = SHARES) -> dict:
    """The experiment's course checkpoints → {share: (model, tokenizer)}, each loaded by name with
    :func:`onehot2gpt.checkpoints.load` (``load(checkpoint_name(share))``)."""
    from .checkpoints import CheckpointError, load

    models = {}
    for share in shares:
        model, tokenizer, _, _ = load(checkpoint_name(share), kind="gpt")
        if not isinstance(tokenizer, WorldTokenizer):
            raise CheckpointError(
                f"{checkpoint_name(share)} holds a GPT with a {type(tokenizer).__name__}, not a WorldTokenizer: "
                f"it is not a model of the zero-shot experiment"
            )
        models[share] = (model, tokenizer)
    return models
