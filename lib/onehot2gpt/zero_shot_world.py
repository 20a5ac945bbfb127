"""The invented world of the zero-shot experiment (:mod:`onehot2gpt.zero_shot`): its people, the
documents written about them (:func:`make_corpus`), real Tatoeba sentence pairs
(:func:`translation_pairs`) and the word-level tokenizer of it all (:class:`WorldTokenizer`).
Every name here is importable from :mod:`onehot2gpt.zero_shot`, the module the notebook uses.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .utils import check_choice, check_int, check_number, check_text
from .vocab import Vocab, tokenize_words

NL = "\n"  # a line break is a token: answers end at the end of their line
EOD = "<eod>"  # between documents (GPT-2's <|endoftext|>)
SPECIALS = ("<pad>", "<unk>", EOD, NL)

NAMES = tuple(
    "mira tolo kesh anu bram celi doro elin fenn gita hale ivo jora kai lusa moro nell odo pim quin rina "
    "sefa taro ula vik wen yara zeno abel bina coro dagny edda faro gunn hild isa jarl kira loke maren "
    "nils orla per runa sig tove ulf".split()
)
TOWNS = tuple("tolvan brisk amberg fjell kestrel lunde marsh norby orrin pellam quarry rosk".split())
TRADES = tuple("baker smith sailor farmer weaver potter miller hunter tailor fisher healer carpenter".split())
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
        return getattr(self, check_choice(relation, "relation", RELATIONS))

    def changed(self, relation: str, value: str) -> Person:
        """The same person with one fact replaced (the passage of a changed-fact question)."""
        values = VALUES[check_choice(relation, "relation", RELATIONS)]
        check_choice(value, relation, values, fix=f"a {relation} of this world")
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
        check_int(self.n_known, "n_known", 1, len(NAMES) - 2, fix="the other names are strangers, at least two")
        rng = random.Random(self.seed)
        self.people = [
            Person(n, rng.choice(TOWNS), rng.choice(TRADES), rng.choice(ANIMALS)) for n in NAMES[: self.n_known]
        ]
        self.strangers = NAMES[self.n_known :]

    def person(self, name: str) -> Person:
        """The known person called `name` (KeyError for a stranger or an unknown name)."""
        if name in self.strangers:
            raise KeyError(f"{name!r} is a stranger: their facts are drawn anew in every document")
        return self.draw(name, None)  # a known person's facts are fixed: no random draw

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
    check_text(text, "text", empty_ok=True)
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
    en_count = Counter(t for e, _ in rows for t in e)
    fr_count = Counter(t for _, f in rows for t in f)
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
        return dict(Counter(self.kinds))


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
        check_number(value, name, 0, 1, fix="a share of the documents")
    if qa_share > 1.0 - tldr_share - translation_share + 1e-12:
        raise ValueError(
            f"qa_share must lie in [0, {1 - tldr_share - translation_share:.2f}] "
            f"(the rest are translation and TL;DR documents), got {qa_share}"
        )
    if not pairs:
        raise ValueError("no translation pairs given; pass translation_pairs()[0]")
    check_int(n_documents, "n_documents", 1)
    master = random.Random(seed)
    documents, kinds = [], []
    for _ in range(n_documents):
        rng = random.Random(master.getrandbits(64))
        u = rng.random()
        if u < translation_share:
            block = rng.sample(range(len(pairs)), rng.randint(3, 6))
            kind, text = "translation", "".join(f"{pairs[i][0]} = {pairs[i][1]}{NL}" for i in block)
        elif u < translation_share + tldr_share:
            kind, text = "tldr", world.tldr_document(world.draw(rng.choice(NAMES), rng), rng)
        else:
            people = [world.draw(n, rng) for n in rng.sample(NAMES, 2)]
            kind, text = "prose", world.prose(rng, people)
            # Whether questions follow depends on u alone (so Q/A documents nest across shares)
            # and is drawn after the paragraph (so the paragraph is the same in every corpus).
            if u - translation_share - tldr_share < qa_share:
                asked = rng.sample([(p, r) for p in people for r in RELATIONS], rng.randint(1, 2))
                kind, text = "qa", text + "".join(world.qa_block(p, r) for p, r in asked)
        documents.append(text)
        kinds.append(kind)
    return Corpus(documents, kinds, qa_share)


# ------------------------------------------------------------------------------------------- Tokens


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
        check_text(text, "text", empty_ok=True, fix="the tokenizer reads one string")
        tokens: list[str] = []
        for piece in re.split(f"({NL}|{EOD})", text):  # the separators kept, as tokens of their own
            tokens += [piece] if piece in (NL, EOD) else tokenize_words(_clean(piece))
        return tokens

    def unknown(self, text: str) -> list[str]:
        """The words of `text` the model has no token for (they would be read as <unk>)."""
        return sorted({t for t in self.tokenize(text) if t not in self.vocab})

    def encode(self, text: str) -> list[int]:
        """A text → ids (unknown words → <unk>; an empty text → [], which the experiment's
        functions report as an empty prompt)."""
        return self.vocab.encode_tokens(self.tokenize(text))

    def decode(self, ids) -> str:
        """Ids (list or 1-D tensor) → text, line breaks and "tl;dr" as the corpus writes them."""
        text = " ".join(self.vocab.decode_tokens(ids)).replace("tl ; dr", "tl;dr")
        return text.replace(f" {NL} ", NL).replace(f" {NL}", NL).replace(f"{NL} ", NL)

    def __len__(self) -> int:
        return len(self.vocab)

    def save(self, path) -> None:
        self.vocab.save(path)

    @classmethod
    def load(cls, path) -> WorldTokenizer:
        return cls(Vocab.load(path))
