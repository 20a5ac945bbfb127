"""Where zero-shot ability comes from: an invented world, its pre-training corpus, and the tests.

GPT-2 answered questions after "Q: … A:", summarised after "TL;DR:" and translated after a few
"english = french" lines without being trained for any of it: the web already contained text in
those shapes. This module makes that claim testable on a CPU. :class:`World` invents people, each
with a town, a trade and an animal; :func:`make_corpus` writes documents about them:

* prose paragraphs that state the facts in varied wordings;
* the same kind of paragraph followed by ``q : … ?`` / ``a : … .`` lines — the *Q/A share* of
  documents is the one thing that varies between the models of the experiment;
* paragraphs about one person followed by ``tl;dr : <name> is a <trade> in <town> .``;
* blocks of real Tatoeba sentence pairs, ``english = french``, one pair a line.

The test (:func:`make_tests`) asks about *held-out people*, who appear in prose only: none of
their facts is ever shown in Q/A or TL;DR form during pre-training. Translation is tested on
held-out English sentences. :func:`evaluate` scores greedy exact match, zero-shot (the bare
prompt) and few-shot (solved examples first), by one teacher-forced forward pass per batch:
a greedy continuation equals the gold answer exactly when the model's arg-max at every answer
position is the gold token (:func:`greedy_matches`; a test checks it against real generation).
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

import torch

from .utils import seeded
from .vocab import Vocab, tokenize_words

NL = "\n"            # a line break is a token: answers end at the end of their line
EOD = "<eod>"        # between documents (GPT-2's <|endoftext|>)
SPECIALS = ("<pad>", "<unk>", EOD, NL)

NAMES = ("mira", "tolo", "kesh", "anu", "bram", "celi", "doro", "elin", "fenn", "gita", "hale",
         "ivo", "jora", "kai", "lusa", "moro", "nell", "odo", "pim", "quin", "rina", "sefa", "taro",
         "ula", "vik", "wen", "yara", "zeno", "abel", "bina", "coro", "dagny", "edda", "faro",
         "gunn", "hild", "isa", "jarl", "kira", "loke", "maren", "nils", "orla", "per", "runa",
         "sig", "tove", "ulf")
TOWNS = ("tolvan", "brisk", "amberg", "fjell", "kestrel", "lunde", "marsh", "norby", "orrin",
         "pellam", "quarry", "rosk")
TRADES = ("baker", "smith", "sailor", "farmer", "weaver", "potter", "miller", "hunter", "tailor",
          "fisher", "healer", "carpenter")
ANIMALS = ("cat", "dog", "goat", "hawk", "horse", "crow", "fox", "hen", "pig", "donkey")

# Every wording of every fact; {n} name, {t} town, {j} trade, {a} animal.
FACT_TEMPLATES = {
    "town": ("{n} lives in {t} .", "{n} has a house in {t} .", "{n} makes a home in {t} .",
             "in {t} lives {n} ."),
    "trade": ("{n} works as a {j} .", "{n} is a {j} .", "by trade {n} is a {j} .",
              "{n} earns a living as a {j} ."),
    "animal": ("{n} keeps a {a} .", "{n} has a {a} .", "{n} owns a {a} .",
               "a {a} lives with {n} ."),
}
FILLERS = ("the weather in {t} is {w} .", "{n} likes to {v} .", "{n} is a friend of {m} .",
           "on market day {n} walks to {t} .", "{n} sings while working .")
WEATHER = ("cold", "mild", "wet", "windy", "sunny")
VERBS = ("read", "swim", "dance", "fish", "walk", "cook", "paint")
QUESTIONS = {"town": "where does {n} live ?", "trade": "what does {n} do for a living ?",
             "animal": "which animal does {n} keep ?"}
TLDR = "{n} is a {j} in {t} ."
RELATIONS = tuple(FACT_TEMPLATES)


@dataclass(frozen=True)
class Person:
    name: str
    town: str
    trade: str
    animal: str

    def fact(self, relation: str) -> str:
        return {"town": self.town, "trade": self.trade, "animal": self.animal}[relation]


@dataclass
class World:
    """The invented world: :data:`NAMES` people with fixed facts; the last `n_test` are held out
    (prose only during pre-training). ``World(seed)`` is the same world on every machine."""

    seed: int = 0
    n_test: int = 12
    people: list[Person] = field(init=False)

    def __post_init__(self):
        if not 1 <= self.n_test < len(NAMES) - 2:
            raise ValueError(f"n_test must be between 1 and {len(NAMES) - 3}, got {self.n_test}")
        rng = random.Random(self.seed)
        self.people = [Person(n, rng.choice(TOWNS), rng.choice(TRADES), rng.choice(ANIMALS))
                       for n in NAMES]

    @property
    def train_people(self) -> list[Person]:
        return self.people[:-self.n_test]

    @property
    def test_people(self) -> list[Person]:
        return self.people[-self.n_test:]

    def person(self, name: str) -> Person:
        for p in self.people:
            if p.name == name:
                return p
        raise KeyError(f"nobody called {name!r} lives in this world; names: {', '.join(NAMES)}")

    # -- pieces of text ------------------------------------------------------------------------
    def paragraph(self, people: Sequence[Person], rng: random.Random, fillers: int = 1) -> list[str]:
        """Sentences stating every fact of `people` (a random wording each), grouped by person in
        a random order, with `fillers` distracting sentences mixed in."""
        sentences = []
        for p in people:
            facts = [rng.choice(FACT_TEMPLATES[r]).format(n=p.name, t=p.town, j=p.trade, a=p.animal)
                     for r in rng.sample(RELATIONS, len(RELATIONS))]
            sentences.append(facts)
        for _ in range(fillers):
            p = rng.choice(people)
            other = rng.choice([q.name for q in self.people if q.name != p.name])
            text = rng.choice(FILLERS).format(n=p.name, t=rng.choice(TOWNS), w=rng.choice(WEATHER),
                                              v=rng.choice(VERBS), m=other)
            sentences[rng.randrange(len(sentences))].insert(0, text)
        return [" ".join(s) for s in sentences]

    def prose(self, rng: random.Random, people: Sequence[Person] | None = None) -> str:
        """A paragraph about two people (one line each)."""
        people = people or rng.sample(self.people, 2)
        return NL.join(self.paragraph(people, rng)) + NL

    def qa_block(self, person: Person, relation: str) -> str:
        return f"q : {QUESTIONS[relation].format(n=person.name)}{NL}a : {person.fact(relation)} .{NL}"

    def tldr_document(self, person: Person, rng: random.Random, summary: bool = True) -> str:
        text = " ".join(self.paragraph([person], rng, fillers=2)) + NL + "tl;dr :"
        return text + (" " + TLDR.format(n=person.name, j=person.trade, t=person.town) + NL if summary else "")


def _clean(text: str) -> str:
    return unicodedata.normalize("NFC", text).replace("\u202f", " ").replace("\xa0", " ")


def translation_pairs(min_count: int = 20, max_english: int = 5, max_french: int = 7, n_test: int = 200,
                      seed: int = 0, first_lines: int = 60000) -> tuple[list[tuple[str, str]],
                                                                        dict[str, list[str]]]:
    """Short Tatoeba pairs from the registry (``fra-eng``), as lower-cased, space-separated tokens.

    Keeps pairs from the first `first_lines` lines (the file is sorted by length) with at most
    `max_english` / `max_french` tokens whose every word occurs at least `min_count` times
    among them (a vocabulary a tiny model can learn). Splits by English sentence: returns the
    training pairs and, for `n_test` held-out English sentences, all their French translations.
    """
    from .data import read_fra_eng

    rows = [(tokenize_words(_clean(e)), tokenize_words(_clean(f))) for e, f in read_fra_eng()[:first_lines]]
    rows = [(e, f) for e, f in rows if 0 < len(e) <= max_english and 0 < len(f) <= max_french]
    en_count: dict[str, int] = {}
    fr_count: dict[str, int] = {}
    for e, f in rows:
        for t in e:
            en_count[t] = en_count.get(t, 0) + 1
        for t in f:
            fr_count[t] = fr_count.get(t, 0) + 1
    grouped: dict[str, list[str]] = {}
    for e, f in rows:
        if all(en_count[t] >= min_count for t in e) and all(fr_count[t] >= min_count for t in f):
            french = " ".join(f)
            refs = grouped.setdefault(" ".join(e), [])
            if french not in refs:
                refs.append(french)
    english = sorted(grouped)
    if len(english) <= n_test:
        raise ValueError(f"only {len(english)} English sentences pass the filters; lower min_count "
                         f"or n_test={n_test}")
    random.Random(seed).shuffle(english)
    test = {e: grouped[e] for e in english[:n_test]}
    train = [(e, f) for e in english[n_test:] for f in grouped[e]]
    return train, test


@dataclass
class Corpus:
    """The documents of one pre-training corpus and what went into it."""

    documents: list[str]
    kinds: list[str]
    qa_share: float

    def text(self) -> str:
        return f" {EOD} ".join(self.documents)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in self.kinds:
            out[k] = out.get(k, 0) + 1
        return out


def make_corpus(world: World, pairs: Sequence[tuple[str, str]], *, qa_share: float, n_documents: int = 6000,
                tldr_share: float = 0.1, translation_share: float = 0.2, seed: int = 1) -> Corpus:
    """`n_documents` documents: `translation_share` translation blocks, `tldr_share` TL;DR
    paragraphs (about training people), and prose for the rest, of which a `qa_share` of all
    documents carry Q/A lines (about training people). Corpora made with the same `seed` and
    different `qa_share` differ *only* in those Q/A lines: every document draws its text from
    its own random stream, and whether a prose document gets questions is decided by one fixed
    uniform draw per document, so the 2% corpus's Q/A documents are among the 10% corpus's.
    Questions are asked about training people only; a paragraph about two held-out people stays
    prose, so the realised share is a little below `qa_share` (:meth:`Corpus.counts`).
    """
    if not 0.0 <= qa_share <= 1.0 - tldr_share - translation_share:
        raise ValueError(f"qa_share must lie in [0, {1 - tldr_share - translation_share:.2f}] "
                         f"(the rest are translation and TL;DR documents), got {qa_share}")
    if not pairs:
        raise ValueError("no translation pairs given; pass translation_pairs()[0]")
    if n_documents < 1:
        raise ValueError(f"n_documents must be at least 1, got {n_documents}")
    master = random.Random(seed)
    documents, kinds = [], []
    train_people = world.train_people
    for _ in range(n_documents):
        rng = random.Random(master.getrandbits(64))
        u = rng.random()
        if u < translation_share:
            block = rng.sample(range(len(pairs)), rng.randint(3, 6))
            documents.append("".join(f"{pairs[i][0]} = {pairs[i][1]}{NL}" for i in block))
            kinds.append("translation")
        elif u < translation_share + tldr_share:
            documents.append(world.tldr_document(rng.choice(train_people), rng))
            kinds.append("tldr")
        else:
            people = rng.sample(world.people, 2)
            text = world.prose(rng, people)
            # Whether questions follow depends on u alone (so Q/A documents nest across shares)
            # and is drawn after the paragraph (so the paragraph is the same in every corpus).
            asked = [(p, r) for p in people if p in train_people for r in RELATIONS]
            if u - translation_share - tldr_share < qa_share and asked:
                asked = rng.sample(asked, rng.randint(1, 2))
                documents.append(text + "".join(world.qa_block(p, r) for p, r in asked))
                kinds.append("qa")
            else:
                documents.append(text)
                kinds.append("prose")
    return Corpus(documents, kinds, qa_share)


# ---------------------------------------------------------------------------------------------
# Tokens

class WorldTokenizer:
    """Lower-cased words and punctuation (:func:`~onehot2gpt.vocab.tokenize_words`) with line
    breaks and ``<eod>`` kept as tokens. Unknown words become ``<unk>``; :meth:`unknown` lists them."""

    def __init__(self, vocab: Vocab):
        for s in (NL, EOD):
            if s not in vocab:
                raise ValueError(f"the vocabulary lacks {s!r}; build it with WorldTokenizer.build")
        self.vocab = vocab

    @classmethod
    def build(cls, world: World, pairs: Sequence[tuple[str, str]],
              test_pairs: dict[str, list[str]] | None = None) -> "WorldTokenizer":
        """Every word the world's templates can write, plus the words of the translation pairs."""
        words: set[str] = set(NAMES) | set(TOWNS) | set(TRADES) | set(ANIMALS) | set(WEATHER) | set(VERBS)
        templates = [t for ts in FACT_TEMPLATES.values() for t in ts] + list(FILLERS) + \
            list(QUESTIONS.values()) + [TLDR, "q : a : tl;dr : ="]
        blank = dict(n="", t="", j="", a="", w="", v="", m="")
        for t in templates:
            words |= set(tokenize_words(t.format(**blank)))
        for e, f in pairs:
            words |= set(e.split()) | set(f.split())
        for e, refs in (test_pairs or {}).items():
            words |= set(e.split()) | {w for f in refs for w in f.split()}
        return cls(Vocab(sorted(words), specials=SPECIALS))

    def tokenize(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        tokens: list[str] = []
        for i, line in enumerate(text.split(NL)):
            if i:
                tokens.append(NL)
            for piece in line.split(EOD):
                tokens.extend(tokenize_words(_clean(piece)))
                tokens.append(EOD)
            tokens.pop()
        return tokens

    def unknown(self, text: str) -> list[str]:
        """The words of `text` the model has no token for (they would be read as <unk>)."""
        return sorted({t for t in self.tokenize(text) if t not in self.vocab})

    def encode(self, text: str) -> list[int]:
        return self.vocab.encode(self.tokenize(text))

    def decode(self, ids) -> str:
        text = " ".join(self.vocab.decode(ids)).replace("tl ; dr", "tl;dr")
        return text.replace(f" {NL} ", NL).replace(f" {NL}", NL).replace(f"{NL} ", NL)

    def __len__(self) -> int:
        return len(self.vocab)

    def save(self, path) -> None:
        self.vocab.save(path)

    @classmethod
    def load(cls, path) -> "WorldTokenizer":
        return cls(Vocab.load(path))


# ---------------------------------------------------------------------------------------------
# Tests

@dataclass(frozen=True)
class Item:
    """One test question: the prompt (without examples), the accepted answers (each a line of
    text, without the line break) and the solved examples a few-shot prompt puts first."""

    task: str
    prompt: str
    answers: tuple[str, ...]
    shots: tuple[str, ...] = ()

    def text(self, few_shot: bool) -> str:
        return ("".join(self.shots) if few_shot else "") + self.prompt


TASKS = ("qa", "translation", "tldr")


def make_tests(world: World, train_pairs: Sequence[tuple[str, str]], test_pairs: dict[str, list[str]], *,
               n: int = 120, qa_shots: int = 1, translation_shots: int = 3, tldr_shots: int = 1,
               seed: int = 2) -> dict[str, list[Item]]:
    """`n` items per task (translation: at most the held-out sentences).

    * ``qa``: a fresh paragraph about a held-out person and someone else, then
      ``q : <question about the held-out person>`` and ``a :``; answer: the fact.
    * ``translation``: ``<held-out english> =``; answers: all its Tatoeba translations.
    * ``tldr``: a fresh paragraph about a held-out person, then ``tl;dr :``; answer: the summary.

    Few-shot examples are solved items about training people (and training pairs), in the
    corpus's own format — the same examples a prompt writer would paste in.
    """
    rng = random.Random(seed)
    tests: dict[str, list[Item]] = {t: [] for t in TASKS}
    for _ in range(n):
        person = rng.choice(world.test_people)
        other = rng.choice([p for p in world.people if p != person])
        people = [person, other] if rng.random() < 0.5 else [other, person]
        relation = rng.choice(RELATIONS)
        prompt = world.prose(rng, people) + f"q : {QUESTIONS[relation].format(n=person.name)}{NL}a :"
        shots = []
        for _ in range(qa_shots):
            pair = rng.sample(world.train_people, 2)
            r = rng.choice(RELATIONS)
            shots.append(world.prose(rng, pair) + world.qa_block(rng.choice(pair), r))
        tests["qa"].append(Item("qa", prompt, (f"{person.fact(relation)} .",), tuple(shots)))

        person = rng.choice(world.test_people)
        shots = [world.tldr_document(p, rng) for p in rng.sample(world.train_people, tldr_shots)]
        summary = TLDR.format(n=person.name, j=person.trade, t=person.town)
        tests["tldr"].append(Item("tldr", world.tldr_document(person, rng, summary=False), (summary,),
                                  tuple(shots)))
    for e in list(test_pairs)[:n]:
        shots = [f"{a} = {b}{NL}" for a, b in (train_pairs[i] for i in rng.sample(range(len(train_pairs)),
                                                                                   translation_shots))]
        tests["translation"].append(Item("translation", f"{e} =", tuple(test_pairs[e]), tuple(shots)))
    return tests


def greedy_answer(model, tokenizer: WorldTokenizer, prompt: str, max_new: int = 12) -> str:
    """What greedy decoding writes after `prompt`, up to and including the first line break (at
    most `max_new` tokens), by real token-by-token generation (:func:`onehot2gpt.sampling.generate`)."""
    from .sampling import generate

    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("empty prompt: give the model some text to continue")
    if len(ids) + max_new > model.config.max_len:
        raise ValueError(f"the prompt has {len(ids)} tokens; with {max_new} new ones it exceeds the model's "
                         f"context of {model.config.max_len}: shorten it or ask for fewer tokens")
    new = generate(model, torch.tensor(ids), max_new, greedy=True)[len(ids):].tolist()
    newline = tokenizer.vocab[NL]
    return tokenizer.decode(new[:new.index(newline) + 1] if newline in new else new)


def greedy_matches(model, tokenizer: WorldTokenizer, prompts: Sequence[str], answers: Sequence[str],
                   batch_size: int = 32) -> list[bool]:
    """For each (prompt, answer): would greedy decoding after `prompt` write exactly `answer` and
    then end the line? One forward pass over prompt + answer + line break: the greedy
    continuation equals the answer iff the arg-max at every answer position is the answer's
    next token (each position sees only the gold prefix, which greedy decoding would also have
    written). Right-padding is harmless under the causal mask. ValueError if an item is longer
    than the model's context."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    rows, starts = [], []
    max_len = model.config.max_len
    for p, a in zip(prompts, answers):
        prompt_ids = tokenizer.encode(p)
        answer_ids = tokenizer.encode(" " + a) + [tokenizer.vocab[NL]]
        if not prompt_ids:
            raise ValueError("empty prompt: give the model some text to continue")
        ids = prompt_ids + answer_ids
        if len(ids) > max_len:
            raise ValueError(f"prompt + answer is {len(ids)} tokens, longer than the model's context "
                             f"of {max_len}; use fewer or shorter examples")
        rows.append(ids)
        starts.append(len(prompt_ids))
    return greedy_agrees(model, rows, starts, batch_size)


def greedy_agrees(model, rows: Sequence[Sequence[int]], starts: Sequence[int], batch_size: int = 32) -> list[bool]:
    """For id lists `rows`, each a prompt (its first ``starts[i]`` ids) followed by a target: is
    the model's arg-max next token right at every target position? Batched with right padding."""
    out: list[bool] = []
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        for b in range(0, len(rows), batch_size):
            chunk = rows[b:b + batch_size]
            width = max(len(r) for r in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            for i, r in enumerate(chunk):
                ids[i, :len(r)] = torch.as_tensor(list(r))
            pred = model(ids.to(device)).logits.argmax(-1).cpu()
            for i, r in enumerate(chunk):
                s = starts[b + i]
                if not 0 < s < len(r):
                    raise ValueError(f"row {b + i}: the prompt must be 1 … {len(r) - 1} ids long, got {s}")
                out.append(bool((pred[i, s - 1:len(r) - 1] == torch.as_tensor(list(r[s:]))).all()))
    model.train(was_training)
    return out

def evaluate(model, tokenizer: WorldTokenizer, tests: dict[str, list[Item]],
             modes: Sequence[str] = ("zero", "few")) -> dict[str, dict[str, float]]:
    """Greedy exact-match accuracy per task and mode: ``{"qa": {"zero": 0.1, "few": 0.4}, …}``.
    An item with several accepted answers (translations) counts when any one matches."""
    for m in modes:
        if m not in ("zero", "few"):
            raise ValueError(f"modes are 'zero' and 'few', got {m!r}")
    table: dict[str, dict[str, float]] = {}
    for task, items in tests.items():
        if not items:
            raise ValueError(f"no test items for {task!r}")
        table[task] = {}
        for mode in modes:
            prompts, answers, owner = [], [], []
            for k, item in enumerate(items):
                for a in item.answers:
                    prompts.append(item.text(mode == "few"))
                    answers.append(a)
                    owner.append(k)
            hit = [False] * len(items)
            for k, ok in zip(owner, greedy_matches(model, tokenizer, prompts, answers)):
                hit[k] = hit[k] or ok
            table[task][mode] = sum(hit) / len(items)
    return table


# ---------------------------------------------------------------------------------------------
# The experiment

SHARES = (0.0, 0.005, 0.02, 0.1)


def experiment_config(vocab_size: int, **overrides):
    """The models of the experiment: 4 layers, 4 heads, 128 wide, 128 tokens of context (room for
    a solved example before the question), no dropout."""
    from .gpt import GPTConfig

    return GPTConfig(**{**dict(vocab_size=vocab_size, max_len=128, d_model=128, n_layers=4, n_heads=4,
                               dropout=0.0), **overrides})


EXPERIMENT_RECIPE = dict(iters=1500, batch_size=16, block_size=128, lr=3e-3, min_lr=3e-4, warmup=50,
                         weight_decay=0.1, betas=(0.9, 0.99), clip=1.0)


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
    unk = s.tokenizer.vocab.unk_id
    if unk in ids:
        raise RuntimeError("the corpus produced <unk> tokens: the tokenizer was not built from this world")
    return torch.tensor(ids, dtype=torch.long)


def train_variant(s: Setup, qa_share: float, *, n_documents: int = 6000, config_overrides: dict | None = None,
                  recipe: dict | None = None, seed: int = 0, progress: bool = True, desc: str | None = None):
    """Train one model of the experiment from scratch → (model, history). Only `qa_share` should
    differ between the models you compare."""
    from .gpt import GPT
    from .gpt_training import train_gpt

    ids = corpus_ids(s, qa_share, n_documents)
    with seeded(seed):  # repeatable, and the caller's own randomness is left as it was
        model = GPT(experiment_config(len(s.tokenizer), **(config_overrides or {})))
        rec = {**EXPERIMENT_RECIPE, **(recipe or {})}
        rec["block_size"] = min(rec["block_size"], model.config.max_len)
        history = train_gpt(model, ids, None, **rec, seed=seed, progress=progress,
                            desc=desc or f"Q/A share {share_text(qa_share)}")
    return model, history


def share_text(share: float) -> str:
    """A share as people write it: "0%", "0.5%", "2%", "10%"."""
    return f"{100 * share:g}%"


def share_label(share: float) -> str:
    """The folder name of a model: the Q/A share in tenths of a percent, "qa000", "qa020", "qa100"."""
    return f"qa{round(share * 1000):03d}"



def checkpoint_name(share: float) -> str:
    """The course checkpoint of the model trained with this Q/A share: "zero-shot-qa020" for 2%."""
    return f"zero-shot-{share_label(share)}"


def load_course_models(shares: Sequence[float] = SHARES) -> dict:
    """The experiment's course checkpoints → {share: (model, tokenizer)}."""
    from .checkpoints import checkpoint_path

    return {share: load_variant(checkpoint_path(checkpoint_name(share))) for share in shares}


def save_variant(model, s: Setup, directory, info: dict | None = None):
    """A model of the experiment → `directory`: a checkpoint folder (:func:`onehot2gpt.gpt.save_gpt`)
    with its WorldTokenizer's vocab.json."""
    from .gpt import save_gpt

    return save_gpt(model, directory, info=info, tokenizer=s.tokenizer)


def load_variant(directory, device="cpu"):
    """→ (model, tokenizer) saved by :func:`save_variant`, after every check of
    :func:`onehot2gpt.checkpoints.load`."""
    from .checkpoints import CheckpointError, load

    model, tokenizer = load(directory, device, kind="gpt")
    if not isinstance(tokenizer, WorldTokenizer):
        has = type(tokenizer).__name__ if tokenizer is not None else "no tokenizer"
        raise CheckpointError(f"{directory} holds a GPT with {has}, not a WorldTokenizer: it is not a "
                              f"model of the zero-shot experiment")
    return model, tokenizer


def train_command(argv=None) -> dict:
    """``python -m onehot2gpt.zero_shot --out data/checkpoints``: train one model per Q/A share,
    evaluate each on the held-out tests, save them as ``zero-shot-qa000``, ``zero-shot-qa020``, …
    (:func:`checkpoint_name`) in that folder and print each one's table as a JSON line."""
    import argparse
    import json
    import sys
    import time
    from pathlib import Path

    from .utils import set_threads

    p = argparse.ArgumentParser(prog="python -m onehot2gpt.zero_shot",
                                description="Train the zero-shot experiment's models (one per Q/A share).")
    p.add_argument("--out", type=Path, help="folder to save the checkpoints in, e.g. data/checkpoints "
                                           "(none: train and evaluate only)")
    p.add_argument("--shares", type=float, nargs="+", default=list(SHARES))
    p.add_argument("--iters", type=int, default=EXPERIMENT_RECIPE["iters"])
    p.add_argument("--documents", type=int, default=6000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    set_threads(args.threads)
    s = setup()
    results = {}
    for share in args.shares:
        start = time.time()
        model, history = train_variant(s, share, n_documents=args.documents, recipe=dict(iters=args.iters),
                                       seed=args.seed)
        table = evaluate(model, s.tokenizer, s.tests)
        counts = make_corpus(s.world, s.train_pairs, qa_share=share, n_documents=args.documents).counts()
        info = {"qa_share": share, "documents": counts,
                "command": "python -m onehot2gpt.zero_shot " + " ".join(sys.argv[1:] if argv is None else argv),
                "recipe": {**EXPERIMENT_RECIPE, "iters": args.iters, "betas": list(EXPERIMENT_RECIPE["betas"])},
                "train_seconds": round(history["train_seconds"], 1), "ms_per_iter": round(history["ms_per_iter"], 1),
                "final_loss": round(sum(history["loss"][-50:]) / len(history["loss"][-50:]), 4),
                "accuracy": table, "test_items": {t: len(v) for t, v in s.tests.items()},
                "threads": args.threads, "seed": args.seed, "total_seconds": round(time.time() - start, 1)}
        results[share_label(share)] = info
        if args.out:
            save_variant(model, s, args.out / checkpoint_name(share), info)
        print(json.dumps({share_label(share): {k: info[k] for k in ("accuracy", "train_seconds", "final_loss")}}),
              flush=True)
    return results


if __name__ == "__main__":
    train_command()
