"""Every number the prose of a course notebook states is one the notebook shows or cites.

`unbacked_numbers(nb)` scans every markdown cell of a notebook (nbformat JSON). A number there must
* appear in an output of the same notebook (stream text, ``text/plain``, ``text/markdown``, or the
  text of ``text/html``), compared after normalising: thousands separators dropped
  (``1,024,000`` = ``1024000``), a sign and a trailing ``%`` or ``×``/``x`` ignored (``54.6`` matches
  ``54.6%``), trailing zeros after a decimal point ignored (``0.8`` = ``0.80``), and a magnitude suffix
  kept (``110M`` matches ``110M``, ``110.0M`` or ``110,000,000``; rounded, ``1.9M`` and ``2M`` match
  ``1,875,522``). Otherwise the digits must be the output's, verbatim: ``0.79`` does not match
  ``0.7912`` (print the rounded value you write); or
* be listed in the notebook's cited facts, ``metadata["onehot2gpt"]["cited_facts"]``, a list of
  ``{"value": "110M", "source": "Devlin et al. 2019, Table 1"}``, each with a non-empty source; or
* be a whole-number setting the reader sees in the code: an integer literal of one of the notebook's
  code cells (``batch_size=128``, ``steps = 2_000``), so that "batches of 128" needs no print. A
  decimal (a learning rate, Adam's β) is a claim about a recipe: print it or cite its source.

Exempt, because they are not results (the whole list):
1. code: fenced code blocks and inline ``code``;
2. LaTeX math: ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``;
3. HTML tags with their attributes, link and image targets ``](...)``, bare URLs;
4. the section number that starts a heading (``## 3. Title``, ``# 02 · Title``);
5. references: "notebook 07", "notebooks 04 and 07", "section 3", "Exercise 2", "Figure 1",
   "Table 2", "equation 4", "step 3", "cell 5", "part 2", "chapter 4" (and lists after them);
6. names, ordinals and versions: digits joined to letters (GPT-2, word2vec, SST-2, L2, 1st, 3rd),
   and a version number right after a capitalised name (SQuAD 1.1, ERNIE 2.0, Python 3.11);
7. plain integers 0-10 (counting words: "two positions", "a window of 2");
8. a year in a citation: 1900-2099 within 40 characters after "et al." (also in a table row),
   right after an author's name or an opening parenthesis ("Mikolov et al., 2013",
   "(Vaswani et al. 2017)", "Elman (1990)", "Hochreiter & Schmidhuber, 1997", "(2019)").

Anything else is a number the prose states: print it with an f-string from the cell that computes it,
or cite it.
"""

from __future__ import annotations

import copy
import io
import json
import re
import tokenize
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# A number: digits with optional thousands separators and decimals; then an optional magnitude
# (k, K, M, B, bn) or a percent/times sign. Digits glued to a letter before them are names.
NUMBER = re.compile(
    r"(?<![\w.,/])(?<![A-Za-z]-)"
    r"(?P<sign>[-−])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<mag>\s?(?:k|K|M|B|bn)(?![A-Za-z]))?"
    r"(?P<unit>\s?(?:%|×|x(?![A-Za-z])))?"
    r"(?P<after>[A-Za-z]*)"
)
REFERENCE_WORDS = (
    r"notebooks?|sections?|§|exercises?|figures?|fig\.|tables?|equations?|eqs?\.|steps?"
    r"|cells?|parts?|chapters?|lectures?|appendix"
)
REFERENCE = re.compile(
    rf"\b(?:{REFERENCE_WORDS})\s+\d+(?:\.\d+)*[a-z]?(?:(?:\s*,\s*|\s+(?:and|or|to)\s+|\s*[-–]\s*)\d+(?:\.\d+)*[a-z]?)*",
    re.IGNORECASE,
)
YEAR = re.compile(r"\b(?:19|20)\d\d[a-z]?\b")
# What may stand before a citation's year: an author's name or "(" (and "et al." within 40 characters).
AUTHOR_BEFORE = re.compile(
    r"(?:\b(?!(?:In|On|By|At|Of|To|For|From|Since|Until|Before|After|The|A|An|And|Or|"
    r"In|Around|About|Circa|Between)\b)[A-Z][\w'’-]+(?:\s+(?:and|&)\s+[A-Z][\w'’-]+)?"
    r",?\s*\(?|\()\s*$"
)
NOT_NAMES = (
    "In|On|By|At|Of|To|For|From|Since|Until|Before|After|The|A|An|And|Or|About|Around|With|Only|"
    "Just|All|Some|Each|Every|Over|Under|Nearly|Almost|Roughly|Here|There|Now|Then|Its|It|This|That"
)
VERSION = re.compile(
    rf"\b(?!(?:{NOT_NAMES})\b)[A-Z][\w-]*\s+v?([1-9]\d?\.\d{{1,2}}(?:\.\d+)?)"
    r"(?![\d.,]*\d|\s?(?:%|×|x\b|k\b|K\b|M\b|B\b|bn\b))"
)
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL)
FENCED = re.compile(r"^\s*(```|~~~).*?^\s*\1", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+")
HTML_TAG = re.compile(r"<!--.*?-->|<[A-Za-z/!][^>]*>", re.DOTALL)
HEADING_NUMBER = re.compile(r"^(\s{0,3}#{1,6}\s*)\d+(?:\.\d+)*\.?(?:\s*[·:\-–—])?", re.MULTILINE)


class Unbacked(NamedTuple):
    cell: int  # index of the markdown cell in nb["cells"]
    number: str  # the number as the prose writes it
    context: str  # the words around it

    def message(self, name: str) -> str:
        return (
            f"{name}, markdown cell {self.cell}: {self.number!r} is in no output and not in "
            f"cited_facts (…{self.context}…): print it with an f-string from the cell that "
            f"computes it, or cite it in metadata['onehot2gpt']['cited_facts'] with its source"
        )


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


class _HTMLText(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    return " ".join(parser.parts)


def output_text(nb: dict) -> str:
    """All the text the notebook's stored outputs show."""
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if out.get("output_type") == "stream":
                parts.append(_text(out.get("text")))
            data = out.get("data", {})
            for mime in ("text/plain", "text/markdown", "text/latex"):
                if mime in data:
                    parts.append(_text(data[mime]))
            if "text/html" in data:
                parts.append(_html_text(_text(data["text/html"])))
    return "\n".join(parts)


def code_literals(nb: dict) -> set[str]:
    """The numeric literals of the notebook's code cells (the settings a reader sees), normalised."""
    found = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(
            line for line in _text(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        for tok in tokens:
            if tok.type == tokenize.NUMBER:
                literal = tok.string.replace("_", "").rstrip("jJ")
                try:
                    value = Decimal(literal)
                except InvalidOperation:
                    continue
                found.add(_plain(value))
    return found


def _plain(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros after the point: 2e3 -> 2000, 0.50 -> 0.5."""
    text = format(value.normalize(), "f")
    return text


MAGNITUDE = {"k": 10**3, "K": 10**3, "M": 10**6, "B": 10**9, "bn": 10**9}


def _forms(match: re.Match) -> tuple[str, str | None]:
    """(digits as written without separators, the full value if a magnitude is attached)."""
    digits = match["num"].replace(",", "")
    if digits.startswith("."):
        digits = "0" + digits
    mag = (match["mag"] or "").strip()
    full = _plain(Decimal(digits) * MAGNITUDE[mag]) if mag else None
    return digits, full


class _Index:
    """The numbers of a text, for the lookups `unbacked_numbers` makes."""

    def __init__(self, text: str):
        self.exact: set[str] = set()  # "0.7912", "54.6", "1024000"
        self.magnitude: set[str] = set()  # "110M", "1.9M"
        self.values: list[Decimal] = []  # every number, for rounding
        for m in NUMBER.finditer(text):
            digits, full = _forms(m)
            self.exact.update({digits, _plain(Decimal(digits))})
            self.values.append(Decimal(digits))
            if full is not None:
                self.magnitude.add(_plain(Decimal(digits)) + m["mag"].strip())
                self.exact.add(full)
                self.values.append(Decimal(full))
        self._rounded: dict[tuple[int, int], set[Decimal]] = {}

    def rounds_to(self, digits: str, scale: int) -> bool:
        """Whether a number here, divided by the magnitude `scale`, rounds to `digits` (1,875,522
        -> 1.9 for "1.9M"). Only a number with more digits than `digits` rounds."""
        places = len(digits.split(".")[1]) if "." in digits else 0
        key = (places, scale)
        if key not in self._rounded:
            quantum = Decimal(1).scaleb(-places)
            rounded = set()
            for value in self.values:
                scaled = value / scale
                if scaled != scaled.quantize(quantum, rounding=ROUND_HALF_UP):
                    rounded.add(scaled.quantize(quantum, rounding=ROUND_HALF_UP))
            self._rounded[key] = rounded
        return Decimal(digits) in self._rounded[key]

    def has(self, match: re.Match) -> bool:
        digits, full = _forms(match)
        if match["mag"]:
            mag = match["mag"].strip()
            return (
                _plain(Decimal(digits)) + mag in self.magnitude
                or full in self.exact
                or self.rounds_to(digits, MAGNITUDE[mag])
            )
        return digits in self.exact or _plain(Decimal(digits)) in self.exact


def cited_facts(nb: dict) -> list[dict]:
    """The notebook's cited facts; raises ValueError on a malformed entry."""
    facts = nb.get("metadata", {}).get("onehot2gpt", {}).get("cited_facts", [])
    if not isinstance(facts, list):
        raise ValueError("metadata['onehot2gpt']['cited_facts'] must be a list of {'value': ..., 'source': ...}")
    for fact in facts:
        if not (isinstance(fact, dict) and str(fact.get("value", "")).strip() and str(fact.get("source", "")).strip()):
            raise ValueError(
                f"cited fact {fact!r} needs a non-empty 'value' and a non-empty 'source' "
                "(the paper and where in it, e.g. 'Devlin et al. 2019, Table 1')"
            )
    return facts


def prose(markdown: str) -> str:
    """The markdown with the exempt parts (code, math, HTML, links, URLs, heading numbers,
    references, citation years) blanked out, keeping offsets."""

    def blank(pattern, text, group=0):
        def repl(m):
            start, end = m.span(group)
            inner = m.group(0)
            a, b = start - m.start(), end - m.start()
            return inner[:a] + " " * (b - a) + inner[b:]

        return pattern.sub(repl, text)

    text = markdown
    for pattern in (FENCED, INLINE_CODE, MATH, HTML_TAG, LINK_TARGET, URL, HEADING_NUMBER, REFERENCE):
        text = blank(pattern, text)
    text = blank(VERSION, text, group=1)
    for m in list(YEAR.finditer(text)):
        before = " ".join(text[max(0, m.start() - 80) : m.start()].split()) + " "
        if "et al" in before[-40:] or AUTHOR_BEFORE.search(before[-60:]):
            text = text[: m.start()] + " " * len(m.group(0)) + text[m.end() :]
    return text


def exempt_integer(match: re.Match) -> bool:
    """Names and ordinals (GPT-2 is caught by the pattern; 1st, 2nd, 3-gram's letters after), and
    counting integers 0-10."""
    if match["after"] and not match["mag"] and not match["unit"]:
        return True
    digits = match["num"].replace(",", "")
    return match["mag"] is None and match["unit"] is None and "." not in digits and int(digits) <= 10


def unbacked_numbers(nb: dict) -> list[Unbacked]:
    """Every number in the notebook's markdown cells that is in none of its outputs, not a cited fact
    and not a setting in its code (see the module docstring for the exemptions)."""
    shown = _Index(output_text(nb))
    cited = _Index(" ".join(str(f["value"]) for f in cited_facts(nb)))
    settings = code_literals(nb)
    problems = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        original = _text(cell["source"])
        text = prose(original)
        for m in NUMBER.finditer(text):
            if exempt_integer(m):
                continue
            digits, full = _forms(m)
            if shown.has(m) or cited.has(m):
                continue
            if (
                not m["mag"]
                and not m["unit"]
                and "." not in digits
                and (digits in settings or _plain(Decimal(digits)) in settings)
            ):
                continue
            a, b = m.span()
            context = " ".join(original[max(0, a - 40) : b + 40].split())
            problems.append(Unbacked(i, original[a:b].strip(), context))
    return problems


# -- the course's notebooks --------------------------------------------------------------------


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_number_in_the_prose_is_shown_or_cited(path):
    problems = unbacked_numbers(load(path))
    assert not problems, "\n".join(p.message(path.name) for p in problems)


# -- the checker itself ------------------------------------------------------------------------


def markdown_cell(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code_cell(code: str, printed: str = "", plain: str | None = None, html: str | None = None) -> dict:
    outputs = []
    if printed:
        outputs.append({"output_type": "stream", "name": "stdout", "text": printed})
    data = {}
    if plain is not None:
        data["text/plain"] = plain
    if html is not None:
        data["text/html"] = html
    if data:
        outputs.append({"output_type": "execute_result", "data": data, "metadata": {}, "execution_count": 1})
    return {"cell_type": "code", "metadata": {}, "source": code, "outputs": outputs, "execution_count": 1}


def notebook_of(*cells, facts=None) -> dict:
    meta = {"onehot2gpt": {"cited_facts": facts}} if facts is not None else {}
    return {"cells": list(cells), "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def test_a_planted_wrong_number_in_a_real_notebook_is_reported_with_its_cell():
    nb = copy.deepcopy(load(NOTEBOOKS[0]))
    before = unbacked_numbers(nb)
    nb["cells"].insert(3, markdown_cell("The model separates the two groups: their distance is 0.7931."))
    after = unbacked_numbers(nb)
    planted = [p for p in after if p not in [q._replace(cell=q.cell + (q.cell >= 3)) for q in before]]
    assert [(p.cell, p.number) for p in planted] == [(3, "0.7931")]
    message = planted[0].message(NOTEBOOKS[0].name)
    assert f"{NOTEBOOKS[0].name}, markdown cell 3: '0.7931' is in no output and not in cited_facts" in message
    assert "print it with an f-string" in message


def test_a_number_printed_by_a_real_notebook_passes():
    nb = copy.deepcopy(load(NOTEBOOKS[0]))
    printed = [m for m in NUMBER.finditer(output_text(nb)) if not exempt_integer(m)]
    assert printed, f"{NOTEBOOKS[0].name} prints no number to plant"
    before = len(unbacked_numbers(nb))
    nb["cells"].append(markdown_cell(f"The output above shows {printed[-1].group(0).strip()}."))
    assert len(unbacked_numbers(nb)) == before


def test_numbers_match_after_normalising_separators_percent_times_and_zeros():
    nb = notebook_of(
        code_cell("print(...)", printed="token embeddings: 1,024,000 of 1875522 (54.6%)\nspeed-up 1.23x\n"),
        code_cell("d", plain="{'money 2 to river 1': 0.790}"),
        code_cell("h", html="<table><tr><td>accuracy</td><td><b>81.25</b></td></tr></table>"),
        markdown_cell("They are 54.6% (1,024,000 of 1,875,522, 1.9M); 1.23× faster; 0.79 apart; 81.25."),
    )
    assert unbacked_numbers(nb) == []


def test_a_decimal_must_be_printed_as_the_prose_writes_it():
    nb = notebook_of(
        code_cell("d", printed="distance 0.7912, accuracy 81.25\n"),
        markdown_cell("The distance is 0.79 and the accuracy 81.3."),
    )
    assert [p.number for p in unbacked_numbers(nb)] == ["0.79", "81.3"]


def test_wrong_numbers_fail_whatever_their_format():
    nb = notebook_of(
        code_cell("print(...)", printed="share 54.6%  distance 0.7912  speed-up 1.2x\n"),
        markdown_cell("About 75% of the weights; distance 0.80; 1.5× faster; 12,345 tokens; 0.7913; -0.7912."),
    )
    assert [p.number for p in unbacked_numbers(nb)] == ["75%", "0.80", "1.5×", "12,345", "0.7913"]
    assert {p.cell for p in unbacked_numbers(nb)} == {1}


def test_cited_facts_back_a_number_and_need_a_source():
    text = markdown_cell("BERT-base has 110M parameters and masks 15% of the tokens.")
    assert [p.number for p in unbacked_numbers(notebook_of(text))] == ["110M", "15%"]
    facts = [
        {"value": "110M", "source": "Devlin et al. 2019, section 3"},
        {"value": "15%", "source": "Devlin et al. 2019, section 3.1"},
    ]
    assert unbacked_numbers(notebook_of(text, facts=facts)) == []
    with pytest.raises(ValueError, match="non-empty 'source'"):
        unbacked_numbers(notebook_of(text, facts=[{"value": "110M", "source": " "}]))
    with pytest.raises(ValueError, match="must be a list"):
        unbacked_numbers(notebook_of(text, facts={"value": "110M"}))


def test_the_exemptions_are_exempt_and_nothing_else():
    nb = notebook_of(
        code_cell("window = 5\nsteps = 2_000\nlr = 3e-4"),
        markdown_cell(
            "## 3. Results of notebooks 04 and 07\n\n"
            "As in section 4.2 and Exercise 12 (Mikolov et al., 2013; Elman (1990)), GPT-2 and "
            "word2vec on SST-2 use $d_{k} = 64$ and `lr=0.001`; see [the paper](https://x.org/1706.03762)"
            ' and <img src="data:image/png;base64,AAA123" width="640">. Two to 10 words, the '
            "3rd layer, a window of 5, 2,000 steps at 0.0003.\n\n```\nloss 2.345\n```\n"
        ),
        markdown_cell("# 02 · Word embeddings\n\nIn 2013 the loss was 3.21 after 4,000 steps."),
    )
    # 2,000 is an integer setting of the code; 0.0003 (3e-4) is a decimal one, so it must be cited
    assert [(p.cell, p.number) for p in unbacked_numbers(nb)] == [(1, "0.0003"), (2, "2013"), (2, "3.21"), (2, "4,000")]


def test_a_version_after_a_name_is_exempt_and_a_result_after_one_is_not():
    nb = notebook_of(
        markdown_cell("Trained on SQuAD 1.1, unlike ERNIE 2.0 (Python 3.11). BERT 1.9M; In 1.5 hours; BERT 0.85.")
    )
    assert [p.number for p in unbacked_numbers(nb)] == ["1.9M", "1.5", "0.85"]


def test_the_message_names_the_notebook_the_cell_and_the_number():
    nb = notebook_of(
        code_cell("x", printed="0.067 0.052\n"), markdown_cell("Syntactic does better: 0.079 (Mikolov et al.,\n2013).")
    )
    (problem,) = unbacked_numbers(nb)
    assert problem.message("02_word2vec.ipynb").startswith(
        "02_word2vec.ipynb, markdown cell 1: '0.079' is in no output and not in cited_facts"
    )


def test_magnitudes_ranges_signs_and_citation_years():
    nb = notebook_of(
        code_cell("p", printed="parameters: 1,875,522\ncorrelation -0.35\n"),
        markdown_cell(
            "The course BERT has 1.9M (about 2M) parameters; the correlation is −0.35.\n\n"
            "| model | year |\n|---|---|\n| MT-DNN (Liu et al.) | 2019 |\n\n"
            "Its scores span 0.35-0.47, and 3M parameters is wrong. In 2019 it ran."
        ),
    )
    assert [p.number for p in unbacked_numbers(nb)] == ["0.47", "3M", "2019"]


def test_an_integer_setting_in_the_code_backs_the_prose_and_a_decimal_one_does_not():
    code = {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "execution_count": 1,
        "source": "optimizer = Adam(params, lr=3e-4, betas=(0.9, 0.98))\nbatch_size = 128",
    }
    nb = notebook_of(code, markdown_cell("Batches of 128, Adam with β₂ = 0.98."))
    assert [p.number for p in unbacked_numbers(nb)] == ["0.98"]
    cited = notebook_of(
        code,
        markdown_cell("Batches of 128, Adam with β₂ = 0.98."),
        facts=[{"value": "0.98", "source": "Vaswani et al. 2017, section 5.3"}],
    )
    assert unbacked_numbers(cited) == []
