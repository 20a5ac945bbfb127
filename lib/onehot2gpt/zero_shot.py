"""Where zero-shot ability comes from: an invented world, its pre-training corpus, and the tests.

GPT-2 answered questions after "Q: … A:", summarised after "TL;DR:" and translated after a few
"english = french" lines without being trained for any of it: the web already contained text in
those shapes. This module makes that claim testable on a CPU. :class:`World` has two kinds of
people: *known people*, whose town, trade and animal are the same in every document (a model can
memorise them), and *strangers*, whose facts every document draws anew (only the passage holds
them). :func:`make_corpus` writes documents about them:

* prose paragraphs that state the facts in varied wordings;
* the same kind of paragraph followed by ``q : … ?`` / ``a : … .`` lines — the *Q/A share* of
  documents is the one thing that varies between the models of the experiment;
* paragraphs about one person followed by ``tl;dr : <name> is a <trade> in <town> .``;
* blocks of real Tatoeba sentence pairs, ``english = french``, one pair a line.

The tests (:func:`make_tests`) separate reading from recall. A question about a stranger can
only be answered from the passage; a question about a known person whose fact the passage
*changes* is answered with the passage's fact by a model that reads and with the memorised one
by a model that recalls. :func:`classify_answer` labels each greedy answer "read",
"memorised" or "other"; :func:`evaluate` gives the shares, zero-shot (the bare prompt) and
few-shot (solved examples first). Translation is tested on held-out English sentences, where
"memorised" means a French line recalled whole from pre-training.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from .utils import seeded
from .vocab import Vocab, tokenize_words

NL = "\n"  # a line break is a token: answers end at the end of their line
EOD = "<eod>"  # between documents (GPT-2's <|endoftext|>)
SPECIALS = ("<pad>", "<unk>", EOD, NL)

NAMES = (
    "mira",
    "tolo",
    "kesh",
    "anu",
    "bram",
    "celi",
    "doro",
    "elin",
    "fenn",
    "gita",
    "hale",
    "ivo",
    "jora",
    "kai",
    "lusa",
    "moro",
    "nell",
    "odo",
    "pim",
    "quin",
    "rina",
    "sefa",
    "taro",
    "ula",
    "vik",
    "wen",
    "yara",
    "zeno",
    "abel",
    "bina",
    "coro",
    "dagny",
    "edda",
    "faro",
    "gunn",
    "hild",
    "isa",
    "jarl",
    "kira",
    "loke",
    "maren",
    "nils",
    "orla",
    "per",
    "runa",
    "sig",
    "tove",
    "ulf",
)
TOWNS = (
    "tolvan",
    "brisk",
    "amberg",
    "fjell",
    "kestrel",
    "lunde",
    "marsh",
    "norby",
    "orrin",
    "pellam",
    "quarry",
    "rosk",
)
TRADES = (
    "baker",
    "smith",
    "sailor",
    "farmer",
    "weaver",
    "potter",
    "miller",
    "hunter",
    "tailor",
    "fisher",
    "healer",
    "carpenter",
)
ANIMALS = ("cat", "dog", "goat", "hawk", "horse", "crow", "fox", "hen", "pig", "donkey")

# Every wording of every fact; {n} name, {t} town, {j} trade, {a} animal.
FACT_TEMPLATES = {
    "town": ("{n} lives in {t} .", "{n} has a house in {t} .", "{n} makes a home in {t} .", "in {t} lives {n} ."),
    "trade": ("{n} works as a {j} .", "{n} is a {j} .", "by trade {n} is a {j} .", "{n} earns a living as a {j} ."),
    "animal": ("{n} keeps a {a} .", "{n} has a {a} .", "{n} owns a {a} .", "a {a} lives with {n} ."),
}
FILLERS = (
    "the weather in {t} is {w} .",
    "{n} likes to {v} .",
    "{n} is a friend of {m} .",
    "on market day {n} walks to {t} .",
    "{n} sings while working .",
)
WEATHER = ("cold", "mild", "wet", "windy", "sunny")
VERBS = ("read", "swim", "dance", "fish", "walk", "cook", "paint")
QUESTIONS = {
    "town": "where does {n} live ?",
    "trade": "what does {n} do for a living ?",
    "animal": "which animal does {n} keep ?",
}
TLDR = "{n} is a {j} in {t} ."
RELATIONS = tuple(FACT_TEMPLATES)


@dataclass(frozen=True)
class Person:
    name: str
    town: str
    trade: str
    animal: str

    def fact(self, relation: str) -> str:
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}")
        return getattr(self, relation)

    def changed(self, relation: str, value: str) -> Person:
        """The same person with one fact replaced (the passage of a changed-fact question)."""
        if value not in VALUES[relation]:
            raise ValueError(
                f"{value!r} is not a {relation} of this world; choose one of {', '.join(VALUES[relation])}"
            )
        return replace(self, **{relation: value})


VALUES = {"town": TOWNS, "trade": TRADES, "animal": ANIMALS}


@dataclass
class World:
    """The invented world. The first `n_known` names are **known people**: each has one town, trade
    and animal, the same in every document that mentions them, so a model can memorise them. The
    other names are **strangers**: every document that mentions one draws their town, trade and
    animal anew, so no fact of theirs can be memorised and only the passage holds it.
    ``World(seed)`` is the same world on every machine."""

    seed: int = 0
    n_known: int = 24
    people: list[Person] = field(init=False)
    strangers: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        if (
            isinstance(self.n_known, bool)
            or not isinstance(self.n_known, int)
            or not 1 <= self.n_known <= len(NAMES) - 2
        ):
            raise ValueError(
                f"n_known must be a whole number between 1 and {len(NAMES) - 2} (the rest are "
                f"strangers), got {self.n_known!r}"
            )
        rng = random.Random(self.seed)
        self.people = [
            Person(n, rng.choice(TOWNS), rng.choice(TRADES), rng.choice(ANIMALS)) for n in NAMES[: self.n_known]
        ]
        self.strangers = NAMES[self.n_known :]

    def person(self, name: str) -> Person:
        """The known person called `name` (KeyError for a stranger or an unknown name)."""
        for p in self.people:
            if p.name == name:
                return p
        if name in self.strangers:
            raise KeyError(f"{name!r} is a stranger: their facts are drawn anew in every document")
        raise KeyError(f"nobody called {name!r} lives in this world; names: {', '.join(NAMES)}")

    def memorised(self, name: str) -> Person | None:
        """What pre-training can teach about `name`: the known person, or None for a stranger."""
        return next((p for p in self.people if p.name == name), None)

    def draw(self, name: str, rng: random.Random) -> Person:
        """`name` as one document shows them: the known person's fixed facts, or a stranger with a
        fresh town, trade and animal."""
        known = self.memorised(name)
        if known is not None:
            return known
        if name not in self.strangers:
            raise KeyError(f"nobody called {name!r} lives in this world; names: {', '.join(NAMES)}")
        return Person(name, rng.choice(TOWNS), rng.choice(TRADES), rng.choice(ANIMALS))

    # -- pieces of text ------------------------------------------------------------------------
    def paragraph(self, people: Sequence[Person], rng: random.Random, fillers: int = 1) -> list[str]:
        """Sentences stating every fact of `people` (a random wording each), grouped by person in
        a random order, with `fillers` distracting sentences mixed in."""
        sentences = []
        for p in people:
            facts = [
                rng.choice(FACT_TEMPLATES[r]).format(n=p.name, t=p.town, j=p.trade, a=p.animal)
                for r in rng.sample(RELATIONS, len(RELATIONS))
            ]
            sentences.append(facts)
        for _ in range(fillers):
            p = rng.choice(people)
            other = rng.choice([n for n in NAMES if n != p.name])
            text = rng.choice(FILLERS).format(
                n=p.name, t=rng.choice(TOWNS), w=rng.choice(WEATHER), v=rng.choice(VERBS), m=other
            )
            sentences[rng.randrange(len(sentences))].insert(0, text)
        return [" ".join(s) for s in sentences]

    def prose(self, rng: random.Random, people: Sequence[Person]) -> str:
        """A paragraph about `people` (one line each)."""
        return NL.join(self.paragraph(people, rng)) + NL

    def qa_block(self, person: Person, relation: str) -> str:
        return f"q : {QUESTIONS[relation].format(n=person.name)}{NL}a : {person.fact(relation)} .{NL}"

    def tldr_document(self, person: Person, rng: random.Random, summary: bool = True) -> str:
        text = " ".join(self.paragraph([person], rng, fillers=2)) + NL + "tl;dr :"
        return text + (" " + tldr(person) + NL if summary else "")


def tldr(person: Person) -> str:
    """The corpus's summary of one person: "mira is a baker in tolvan ."."""
    return TLDR.format(n=person.name, j=person.trade, t=person.town)


def _fact_patterns() -> list[tuple[str, re.Pattern]]:
    out = []
    for relation, templates in FACT_TEMPLATES.items():
        slot = {"town": "t", "trade": "j", "animal": "a"}[relation]
        for t in templates:
            pattern = re.escape(t).replace(r"\{n\}", r"(?P<n>\w+)").replace(r"\{" + slot + r"\}", r"(?P<v>\w+)")
            out.append((relation, re.compile(r"(?:^|(?<=\. )|(?<=\n))" + pattern)))
    return out


def stated_facts(text: str) -> list[tuple[str, str, str]]:
    """Every fact `text` states in one of the corpus's wordings, as (name, relation, value).

    Example:
        >>> stated_facts("the weather in brisk is wet . in tolvan lives mira .")
        [('mira', 'town', 'tolvan')]
    """
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    found = []
    for relation, pattern in _FACT_PATTERNS:
        for m in pattern.finditer(text):
            if m["n"] in NAMES and m["v"] in VALUES[relation]:
                found.append((m["n"], relation, m["v"]))
    return found


_FACT_PATTERNS = _fact_patterns()


def _clean(text: str) -> str:
    return unicodedata.normalize("NFC", text).replace("\u202f", " ").replace("\xa0", " ")


def translation_pairs(
    min_count: int = 20,
    max_english: int = 5,
    max_french: int = 7,
    n_test: int = 200,
    seed: int = 0,
    first_lines: int = 60000,
) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
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
        raise ValueError(f"only {len(english)} English sentences pass the filters; lower min_count or n_test={n_test}")
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


def make_corpus(
    world: World,
    pairs: Sequence[tuple[str, str]],
    *,
    qa_share: float,
    n_documents: int = 6000,
    tldr_share: float = 0.1,
    translation_share: float = 0.2,
    seed: int = 1,
) -> Corpus:
    """`n_documents` documents: `translation_share` translation blocks, `tldr_share` TL;DR
    paragraphs about one person, and prose paragraphs about two people for the rest, of which a
    `qa_share` of all documents carry one or two Q/A lines about the paragraph's people. Every
    name is equally likely in every document; a known person's facts are always theirs, a
    stranger's are drawn anew (:meth:`World.draw`).

    Corpora made with the same `seed` and different `qa_share` differ *only* in those Q/A lines:
    every document draws its text from its own random stream, and whether a prose document gets
    questions is decided by one fixed uniform draw per document, so the 2% corpus's Q/A
    documents are among the 10% corpus's.
    """
    for name, value in (("qa_share", qa_share), ("tldr_share", tldr_share), ("translation_share", translation_share)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    if qa_share > 1.0 - tldr_share - translation_share + 1e-12:
        raise ValueError(
            f"qa_share must lie in [0, {1 - tldr_share - translation_share:.2f}] "
            f"(the rest are translation and TL;DR documents), got {qa_share}"
        )
    if not pairs:
        raise ValueError("no translation pairs given; pass translation_pairs()[0]")
    if isinstance(n_documents, bool) or not isinstance(n_documents, int) or n_documents < 1:
        raise ValueError(f"n_documents must be a whole number ≥ 1, got {n_documents!r}")
    master = random.Random(seed)
    documents, kinds = [], []
    for _ in range(n_documents):
        rng = random.Random(master.getrandbits(64))
        u = rng.random()
        if u < translation_share:
            block = rng.sample(range(len(pairs)), rng.randint(3, 6))
            documents.append("".join(f"{pairs[i][0]} = {pairs[i][1]}{NL}" for i in block))
            kinds.append("translation")
        elif u < translation_share + tldr_share:
            documents.append(world.tldr_document(world.draw(rng.choice(NAMES), rng), rng))
            kinds.append("tldr")
        else:
            people = [world.draw(n, rng) for n in rng.sample(NAMES, 2)]
            text = world.prose(rng, people)
            # Whether questions follow depends on u alone (so Q/A documents nest across shares)
            # and is drawn after the paragraph (so the paragraph is the same in every corpus).
            if u - translation_share - tldr_share < qa_share:
                asked = rng.sample([(p, r) for p in people for r in RELATIONS], rng.randint(1, 2))
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
    def build(
        cls, world: World, pairs: Sequence[tuple[str, str]], test_pairs: dict[str, list[str]] | None = None
    ) -> WorldTokenizer:
        """Every word the world's templates can write, plus the words of the translation pairs."""
        words: set[str] = set(NAMES) | set(TOWNS) | set(TRADES) | set(ANIMALS) | set(WEATHER) | set(VERBS)
        templates = (
            [t for ts in FACT_TEMPLATES.values() for t in ts]
            + list(FILLERS)
            + list(QUESTIONS.values())
            + [TLDR, "q : a : tl;dr : ="]
        )
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
    def load(cls, path) -> WorldTokenizer:
        return cls(Vocab.load(path))


# ---------------------------------------------------------------------------------------------
# Tests


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

    def text(self, few_shot: bool) -> str:
        return ("".join(self.shots) if few_shot else "") + self.prompt


TESTS = ("qa_new", "qa_changed", "tldr_new", "tldr_changed", "translation")
TASKS = TESTS  # the keys of make_tests() and evaluate()


def _passage(world: World, rng: random.Random, person: Person, avoid: str | None = None, tries: int = 100) -> str:
    """A paragraph about `person` and someone else (in a random order) in which the word `avoid`
    does not occur."""
    for _ in range(tries):
        other = world.draw(rng.choice([m for m in NAMES if m != person.name]), rng)
        order = [person, other] if rng.random() < 0.5 else [other, person]
        text = world.prose(rng, order)
        if avoid is None or avoid not in text.split():
            return text
    raise RuntimeError(f"could not write a passage without {avoid!r} in {tries} tries")


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
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number ≥ 1, got {n!r}")
    rng = random.Random(seed)
    tests: dict[str, list[Item]] = {t: [] for t in TESTS}

    def qa_shot():
        pair = [world.draw(m, rng) for m in rng.sample(world.strangers, 2)]
        return world.prose(rng, pair) + world.qa_block(rng.choice(pair), rng.choice(RELATIONS))

    def tldr_shot():
        return world.tldr_document(world.draw(rng.choice(world.strangers), rng), rng)

    for _ in range(n):
        stranger = world.draw(rng.choice(world.strangers), rng)
        relation = rng.choice(RELATIONS)
        prompt = _passage(world, rng, stranger) + f"q : {QUESTIONS[relation].format(n=stranger.name)}{NL}a :"
        tests["qa_new"].append(
            Item(
                "qa_new",
                prompt,
                (f"{stranger.fact(relation)} .",),
                tuple(qa_shot() for _ in range(qa_shots)),
                first_words=VALUES[relation],
            )
        )

        known = rng.choice(world.people)
        relation = rng.choice(RELATIONS)
        shown = _changed(known, relation, rng)
        prompt = (
            _passage(world, rng, shown, avoid=known.fact(relation))
            + f"q : {QUESTIONS[relation].format(n=known.name)}{NL}a :"
        )
        tests["qa_changed"].append(
            Item(
                "qa_changed",
                prompt,
                (f"{shown.fact(relation)} .",),
                tuple(qa_shot() for _ in range(qa_shots)),
                (f"{known.fact(relation)} .",),
                VALUES[relation],
            )
        )

        stranger = world.draw(rng.choice(world.strangers), rng)
        tests["tldr_new"].append(
            Item(
                "tldr_new",
                world.tldr_document(stranger, rng, summary=False),
                (tldr(stranger),),
                tuple(tldr_shot() for _ in range(tldr_shots)),
                first_words=NAMES,
            )
        )

        known = rng.choice(world.people)
        relation = rng.choice(("town", "trade"))
        shown = _changed(known, relation, rng)
        for _ in range(100):
            text = world.tldr_document(shown, rng, summary=False)
            if known.fact(relation) not in text.split():
                break
        else:
            raise RuntimeError("could not write a TL;DR passage without the memorised fact")
        tests["tldr_changed"].append(
            Item(
                "tldr_changed",
                text,
                (tldr(shown),),
                tuple(tldr_shot() for _ in range(tldr_shots)),
                (tldr(known),),
                NAMES,
            )
        )
    recalled = tuple(sorted({f for _, f in train_pairs}))
    shots = tuple(
        f"{a} = {b}{NL}" for a, b in (train_pairs[i] for i in rng.sample(range(len(train_pairs)), translation_shots))
    )
    for e in list(test_pairs)[:n]:  # the same phrase-book lines before every sentence
        tests["translation"].append(Item("translation", f"{e} =", tuple(test_pairs[e]), shots, recalled))
    return tests


# ---------------------------------------------------------------------------------------------
# Scoring: what greedy decoding writes, and whether it came from the passage or from memory

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

    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise ValueError(f"max_new must be a whole number ≥ 1, got {max_new!r}")
    encoded = [tokenizer.encode(p) for p in prompts]
    for i, ids in enumerate(encoded):
        if not ids:
            raise ValueError(f"prompt {i} is empty: give the model some text to continue")
        if len(ids) + max_new > model.config.max_len:
            raise ValueError(
                f"prompt {i} has {len(ids)} tokens; with max_new={max_new} it exceeds the model's "
                f"context of {model.config.max_len}: shorten it or ask for fewer tokens"
            )
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    newline = tokenizer.vocab[NL]
    out = [""] * len(prompts)
    for length, rows in by_length.items():
        for b in range(0, len(rows), batch_size):
            chunk = rows[b : b + batch_size]
            ids = torch.tensor([encoded[i] for i in chunk])
            new = generate(model, ids, max_new, greedy=True, on_crop="error")[:, length:].tolist()
            for i, row in zip(chunk, new):
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

    An item with a few candidate lines (the passage's answer and the memorised one) is scored by
    one teacher-forced pass per candidate (:func:`greedy_matches`): greedy decoding writes a line
    exactly when the pass says so, so the label is the same as generating, and cheaper. Items with
    many candidates (translation, whose "memorised" lines are every French sentence of
    pre-training) are generated (:func:`greedy_lines`)."""
    return _classify(model, tokenizer, items, few_shot, batch_size)[0]


def _classify(model, tokenizer, items, few_shot, batch_size=32):
    """→ (labels, the first token greedy decoding writes after each prompt, or None when generated)."""
    if not items:
        raise ValueError("no items to classify")
    if max(len(it.answers) + len(it.memorised) for it in items) > MAX_CANDIDATES:
        written = greedy_lines(
            model, tokenizer, [it.text(few_shot) for it in items], answer_length(tokenizer, items), batch_size
        )
        return [classify_answer(w, it.answers, it.memorised) for w, it in zip(written, items)], None
    rows, starts, owner, kind = [], [], [], []
    for k, it in enumerate(items):
        prompt_ids = _prompt_ids(tokenizer, it.text(few_shot))
        for label, candidates in (("read", it.answers), ("memorised", it.memorised)):
            for line in candidates:
                rows.append(prompt_ids + _line_ids(tokenizer, line))
                starts.append(len(prompt_ids))
                owner.append(k)
                kind.append(label)
    _check_rows(rows, model.config.max_len)
    hits, firsts = _agree(model, rows, starts, batch_size)
    labels, first = ["other"] * len(items), [""] * len(items)
    for k, label, hit, f in zip(owner, kind, hits, firsts):
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
    model, tokenizer: WorldTokenizer, tests: dict[str, list[Item]], modes: Sequence[str] = ("zero", "few")
) -> dict[str, dict[str, dict[str, float]]]:
    """Per test and mode, the shares of answers that read the passage, gave a memorised fact, or
    neither, and (for tests whose items name their `first_words`) the share whose first word is
    of the asked kind, right or wrong — the format:
    ``{"qa_changed": {"zero": {"read": 0.1, "memorised": 0.8, "other": 0.1, "format": 0.95}, …}, …}``.
    "read" is greedy exact match with the passage's fact (a correct translation, for translation)."""
    for m in modes:
        if m not in ("zero", "few"):
            raise ValueError(f"modes are 'zero' and 'few', got {m!r}")
    table: dict[str, dict[str, dict[str, float]]] = {}
    for test, items in tests.items():
        if not items:
            raise ValueError(f"no test items for {test!r}")
        table[test] = {}
        for mode in modes:
            labels, words = _classify(model, tokenizer, items, mode == "few")
            row = shares(labels)
            if words is not None and all(it.first_words for it in items):
                row["format"] = sum(w in it.first_words for w, it in zip(words, items)) / len(items)
            table[test][mode] = row
    return table


def greedy_answer(model, tokenizer: WorldTokenizer, prompt: str, max_new: int = 12) -> str:
    """What greedy decoding writes after `prompt`, up to and including the first line break (at
    most `max_new` tokens), by real token-by-token generation (:func:`onehot2gpt.sampling.generate`)."""
    from .sampling import generate

    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("empty prompt: give the model some text to continue")
    if len(ids) + max_new > model.config.max_len:
        raise ValueError(
            f"the prompt has {len(ids)} tokens; with {max_new} new ones it exceeds the model's "
            f"context of {model.config.max_len}: shorten it or ask for fewer tokens"
        )
    new = generate(model, torch.tensor(ids), max_new, greedy=True)[len(ids) :].tolist()
    newline = tokenizer.vocab[NL]
    return tokenizer.decode(new[: new.index(newline) + 1] if newline in new else new)


def _prompt_ids(tokenizer: WorldTokenizer, prompt: str) -> list[int]:
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("empty prompt: give the model some text to continue")
    return ids


def _line_ids(tokenizer: WorldTokenizer, line: str) -> list[int]:
    return tokenizer.encode(" " + line) + [tokenizer.vocab[NL]]


def _check_rows(rows, max_len: int) -> None:
    for ids in rows:
        if len(ids) > max_len:
            raise ValueError(
                f"prompt + answer is {len(ids)} tokens, longer than the model's context "
                f"of {max_len}; use fewer or shorter examples"
            )


def greedy_matches(
    model, tokenizer: WorldTokenizer, prompts: Sequence[str], answers: Sequence[str], batch_size: int = 32
) -> list[bool]:
    """For each (prompt, answer): would greedy decoding after `prompt` write exactly `answer` and
    then end the line? One forward pass over prompt + answer + line break: the greedy
    continuation equals the answer iff the arg-max at every answer position is the answer's
    next token (each position sees only the gold prefix, which greedy decoding would also have
    written). Right-padding is harmless under the causal mask. ValueError if an item is longer
    than the model's context."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    rows, starts = [], []
    for p, a in zip(prompts, answers):
        prompt_ids = _prompt_ids(tokenizer, p)
        rows.append(prompt_ids + _line_ids(tokenizer, a))
        starts.append(len(prompt_ids))
    _check_rows(rows, model.config.max_len)
    return greedy_agrees(model, rows, starts, batch_size)


def greedy_agrees(model, rows: Sequence[Sequence[int]], starts: Sequence[int], batch_size: int = 32) -> list[bool]:
    """For id lists `rows`, each a prompt (its first ``starts[i]`` ids) followed by a target: is
    the model's arg-max next token right at every target position? Batched with right padding."""
    return _agree(model, rows, starts, batch_size)[0]


def _agree(model, rows, starts, batch_size):
    """→ (greedy_agrees's answers, the arg-max token after each prompt). Rows are batched in
    order of length, so that little padding is computed."""
    if len(rows) != len(starts):
        raise ValueError(f"{len(rows)} rows but {len(starts)} starts")
    for i, (r, s) in enumerate(zip(rows, starts)):
        if not 0 < s < len(r):
            raise ValueError(f"row {i}: the prompt must be 1 … {len(r) - 1} ids long, got {s}")
    agrees, firsts = [False] * len(rows), [0] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        for b in range(0, len(order), batch_size):
            chunk = order[b : b + batch_size]
            width = max(len(rows[i]) for i in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            for j, i in enumerate(chunk):
                ids[j, : len(rows[i])] = torch.as_tensor(list(rows[i]))
            pred = model(ids.to(device)).logits.argmax(-1).cpu()  # (B, T)
            for j, i in enumerate(chunk):
                r, s = rows[i], starts[i]
                agrees[i] = bool((pred[j, s - 1 : len(r) - 1] == torch.as_tensor(list(r[s:]))).all())
                firsts[i] = int(pred[j, s - 1])
    model.train(was_training)
    return agrees, firsts


# ---------------------------------------------------------------------------------------------
# The experiment

SHARES = (0.0, 0.005, 0.02, 0.1)


def experiment_config(vocab_size: int, **overrides):
    """The models of the experiment: 4 layers, 4 heads, 128 wide, 128 tokens of context (room for
    a solved example before the question), no dropout."""
    from .gpt import GPTConfig

    return GPTConfig(
        **{**dict(vocab_size=vocab_size, max_len=128, d_model=128, n_layers=4, n_heads=4, dropout=0.0), **overrides}
    )


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
    unk = s.tokenizer.vocab.unk_id
    if unk in ids:
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
    return f"{100 * share:g}%"


def share_label(share: float) -> str:
    """The folder name of a model: the Q/A share in tenths of a percent, "qa000", "qa020", "qa100"."""
    return f"qa{round(share * 1000):03d}"


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
            has = type(tokenizer).__name__ if tokenizer is not None else "no tokenizer"
            raise CheckpointError(
                f"{checkpoint_name(share)} holds a GPT with {has}, not a WorldTokenizer: it is not a model "
                f"of the zero-shot experiment"
            )
        models[share] = (model, tokenizer)
    return models


def save_variant(model, s: Setup, directory, info: dict | None = None):
    """A model of the experiment → `directory`: a checkpoint folder (:func:`onehot2gpt.gpt.save_gpt`)
    with its WorldTokenizer's vocab.json."""
    from .gpt import save_gpt

    return save_gpt(model, directory, info=info, tokenizer=s.tokenizer)
