"""Datasets: a registry of pinned public files, a verified download cache, and small readers.

Every file the course uses is listed in ``onehot2gpt/assets/registry.json`` with its URL, sha256
and size. :func:`fetch` turns a (dataset, file) name into a local path from the cache
(:func:`cache_dir`), else the mirror ``$ONEHOT2GPT_DATA_MIRROR/<dataset>/<file>``, else the URL or
its mirrors; it always checks the sha256 and writes under a temporary name, renamed once complete
and verified, so neither an error nor a Ctrl-C leaves a partial file. ``.gz`` and ``.zip`` files
are unpacked the same way.

Example:
    >>> path = fetch("word-benchmarks", "wordsim353.tsv")
    >>> path.name
    'wordsim353.tsv'
    >>> read_wordsim353()[0]
    ('love', 'sex', 6.77)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.client import HTTPException
from pathlib import Path
from typing import IO, Any

from onehot2gpt.progress import progress_bar

# What the package ships beside its code (package data, in the wheel too): the registry, the course
# checkpoints and the recorded ULMFiT ablation. Found next to this file, installed or not.
ASSETS = Path(__file__).resolve().parent / "assets"
REGISTRY_PATH = Path(os.environ.get("ONEHOT2GPT_REGISTRY") or ASSETS / "registry.json")
# A clone of the repository (an editable install) keeps its cache in <repo>/data/cache (git-ignored);
# an installed package never writes into site-packages and uses the user's cache folder instead.
_CHECKOUT = Path(__file__).resolve().parents[2]
_MIRROR_ENV = "ONEHOT2GPT_DATA_MIRROR"
_CACHE_ENV = "ONEHOT2GPT_CACHE"
_CHUNK = 1 << 20
_TIMEOUT_S = 60


class DataError(RuntimeError):
    """Something is wrong with a dataset: unknown name, bad checksum, cannot be obtained."""


class UnknownName(DataError, KeyError):
    """An unknown dataset or file name; the message lists the valid names."""

    __str__ = RuntimeError.__str__  # KeyError would print the message as a quoted repr


class ChecksumError(DataError):
    """A file's sha256 does not match the registry (the cached copy has been deleted)."""


class DatasetUnavailable(DataError):
    """A file is neither cached nor in the mirror, and downloading it failed."""


class CacheNotWritable(DataError, PermissionError):
    """The cache folder cannot be written; the message names ``ONEHOT2GPT_CACHE``."""

    __str__ = RuntimeError.__str__


# --------------------------------------------------------------------------------- registry


def load_registry() -> dict[str, Any]:
    """The registry (``$ONEHOT2GPT_REGISTRY`` if set): ``{"datasets": {name: {..., "files": [...]}}}``."""
    path = Path(os.environ.get("ONEHOT2GPT_REGISTRY") or REGISTRY_PATH)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def list_datasets() -> list[str]:
    """Names of all registered datasets, sorted."""
    return sorted(load_registry()["datasets"])


def _in_checkout() -> bool:
    """True when the library runs from a clone of the course repository (``pip install -e .``),
    False when it is installed (a wheel, ``pip install git+…``)."""
    return (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "lib" / "onehot2gpt").is_dir()


def cache_dir() -> Path:
    """The download cache: ``$ONEHOT2GPT_CACHE`` if set; else, in a clone of the repository,
    ``<repo>/data/cache`` (git-ignored); else, installed, ``$XDG_CACHE_HOME/onehot2gpt`` or
    ``~/.cache/onehot2gpt``, never inside the installed package."""
    if os.environ.get(_CACHE_ENV):
        return Path(os.environ[_CACHE_ENV])
    if _in_checkout():
        return _CHECKOUT / "data" / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onehot2gpt"


def _dataset(name: str) -> dict[str, Any]:
    """The registry entry of one dataset, or :class:`UnknownName` listing the valid ones."""
    datasets = load_registry()["datasets"]
    if name not in datasets:
        raise UnknownName(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(datasets))}")
    return datasets[name]


def _output_name(entry: dict[str, Any]) -> str:
    """The name of the file fetch() returns: the unpacked name for archives."""
    return entry.get("unpacked_name") or entry["name"]


def _file_entry(name: str, file: str | None) -> dict[str, Any]:
    """The registry entry of one file (by its name or its unpacked name)."""
    files = _dataset(name)["files"]
    if file is None:
        if len(files) == 1:
            return files[0]
        names = ", ".join(f["name"] for f in files)
        raise UnknownName(
            f"dataset {name!r} has {len(files)} files, say which: fetch({name!r}, file) with file one of {names}"
        )
    for entry in files:
        if file in (entry["name"], entry.get("unpacked_name")):
            return entry
    names = ", ".join(f["name"] + (f" (-> {f['unpacked_name']})" if f.get("unpacked_name") else "") for f in files)
    raise UnknownName(f"dataset {name!r} has no file {file!r}; its files: {names}")


# --------------------------------------------------------------------------------- fetching


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes, as 64 hex digits (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


_STALE_TMP_S = 3600  # a temp file this old belongs to a download that was killed


def _umask() -> int:
    """The process's umask (reading it means setting it: it is put back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale_temp_files(folder: Path, name: str) -> None:
    """Delete ``.<name>.*.tmp`` files left beside ``name`` by a download that was killed (a
    process killed with SIGKILL runs no clean-up); files younger than an hour may belong to a
    download still running in another process and are left alone."""
    now = time.time()
    for old in folder.glob(f".{name}.*.tmp"):
        try:
            if now - old.stat().st_mtime > _STALE_TMP_S:
                old.unlink()
        except OSError:
            pass  # gone already, or not ours to delete: either way nothing to do


@contextmanager
def _atomic_writer(dest: Path) -> Iterator[tuple[IO[bytes], Callable[[], None]]]:
    """Yield ``(fh, commit)``: write to a temp file beside ``dest``; ``commit()`` renames it. The
    temp file is removed whatever happens; the file gets 0666 less the umask (not mkstemp's 0600),
    so a cache a lecturer fills can be read by students."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(dest.parent, dest.name)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            committed = []
            yield fh, lambda: committed.append(True)
        if committed:
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _copy_hashing(src: IO[bytes], dest: Path, expected: str | None, bar: progress_bar | None = None) -> str:
    """Stream ``src`` into ``dest`` atomically, kept only if its sha256 is ``expected`` → the
    sha256 of what was read."""
    digest = hashlib.sha256()
    with _atomic_writer(dest) as (out, commit):
        for chunk in iter(lambda: src.read(_CHUNK), b""):
            digest.update(chunk)
            out.write(chunk)
            if bar is not None:
                bar.update(len(chunk))
        if expected is None or digest.hexdigest() == expected:
            commit()
    return digest.hexdigest()


def _verify_cached(path: Path, expected: str | None) -> bool:
    """True if ``path`` exists and matches; a mismatching file is deleted (ChecksumError)."""
    if not path.is_file():
        return False
    if expected is None:
        return True
    got = sha256_file(path)
    if got != expected:
        path.unlink(missing_ok=True)
        raise ChecksumError(
            f"cached file {path} is corrupt: sha256 {got}, expected {expected}. "
            "It has been deleted; run the same call again to fetch a fresh copy."
        )
    return True


def _from_mirror(name: str, entry: dict[str, Any], dest: Path) -> bool:
    """Copy ``<mirror>/<name>/<file>`` into the cache if the mirror has it; True on success."""
    mirror = os.environ.get(_MIRROR_ENV)
    if not mirror:
        return False
    src = Path(mirror) / name / entry["name"]
    if not src.is_file():
        return False
    with open(src, "rb") as fh:
        got = _copy_hashing(fh, dest, entry["sha256"])
    if got != entry["sha256"]:
        raise ChecksumError(
            f"mirror file {src} does not match the registry: sha256 {got}, expected {entry['sha256']}. "
            f"The mirror is read-only, so it was left as it is and nothing was cached. Fix or replace "
            f"that file, or unset {_MIRROR_ENV} to download {entry['url']} instead."
        )
    return True


def urls(entry: dict[str, Any]) -> list[str]:
    """The addresses of a registry file, in the order they are tried: its ``url``, then its
    ``mirrors`` (other hosts serving the same bytes)."""
    return [entry["url"], *entry.get("mirrors", [])]


def _download(entry: dict[str, Any], dest: Path, progress: bool) -> None:
    """Download the file to ``dest`` atomically from the first of :func:`urls` that serves it
    whole and with the registry's sha256; a failing or wrong address passes to the next."""
    failures = []
    for url in urls(entry):
        try:
            with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
                total = int(resp.headers.get("Content-Length") or entry.get("size") or 0) or None
                with progress_bar(
                    total=total, unit="B", unit_scale=True, desc=entry["name"], disable=not progress
                ) as bar:
                    got = _copy_hashing(resp, dest, entry["sha256"], bar)
        except (OSError, HTTPException) as exc:  # URLError, HTTPError, timeouts, resets are OSErrors
            failures.append((url, f"{type(exc).__name__}: {exc}", False))
            continue
        if got == entry["sha256"]:
            return
        failures.append((url, f"served a file with sha256 {got}, expected {entry['sha256']}", True))
    tried = "; ".join(f"{url} ({why})" for url, why, _ in failures)
    if all(wrong for _, _, wrong in failures):
        raise ChecksumError(
            f"no address served the registry's file: {tried}. Every download was deleted; run the same "
            "call again (if it keeps failing, the servers now serve a different file and the registry "
            "needs updating)."
        )
    mirror = os.environ.get(_MIRROR_ENV)
    where = f"it is not in the mirror {mirror}" if mirror else f"{_MIRROR_ENV} is not set"
    raise DatasetUnavailable(
        f"cannot download {entry['name']}: tried {tried}; {where}. Either connect to the internet, or "
        f"set {_MIRROR_ENV} to a folder holding <dataset>/<file> copies, or download {entry['url']} "
        f"yourself and save it as exactly {dest}"
    )


def _unpack(entry: dict[str, Any], archive: Path, dest: Path) -> None:
    """Extract ``archive`` (gunzip, or one zip member) to ``dest`` atomically, verifying it."""
    expected = entry.get("unpacked_sha256")
    if entry["unpack"] == "gunzip":
        with gzip.open(archive, "rb") as src:
            got = _copy_hashing(src, dest, expected)
    elif entry["unpack"] == "zip":
        with zipfile.ZipFile(archive) as zf, zf.open(entry["member"]) as src:
            got = _copy_hashing(src, dest, expected)
    else:
        raise DataError(f"unknown unpack method {entry['unpack']!r} for {entry['name']} in the registry")
    if expected is not None and got != expected:
        raise ChecksumError(
            f"unpacking {archive} gave sha256 {got} for {dest.name}, expected {expected}. "
            "Nothing was kept; delete the archive and run the same call again."
        )


def fetch(name: str, file: str | None = None, *, progress: bool = True) -> Path:
    """Path to a verified local copy of one dataset file (unpacked for .gz/.zip entries); ``file``
    may be left out for one-file datasets. Raises :class:`ChecksumError` (the bad cached copy is
    deleted), :class:`DatasetUnavailable` (no cache, no mirror, no network), :class:`CacheNotWritable`
    (a read-only cache that lacks the file) or :class:`UnknownName`."""
    entry = _file_entry(name, file)
    folder = cache_dir() / name
    try:
        return _fetch(name, entry, folder, progress)
    except PermissionError as exc:
        raise CacheNotWritable(
            f"cannot write the data cache {folder} ({exc.strerror}: {exc.filename}). Set "
            f"{_CACHE_ENV} to a folder you can write (e.g. export {_CACHE_ENV}=~/onehot2gpt-cache), "
            f"or ask whoever prepared {cache_dir()} to fetch {name} there once"
        ) from exc


def _fetch(name: str, entry: dict[str, Any], folder: Path, progress: bool) -> Path:
    raw = folder / entry["name"]
    if entry.get("unpack"):
        out = folder / _output_name(entry)
        if entry.get("unpacked_sha256") and _verify_cached(out, entry["unpacked_sha256"]):
            return out
    if not _verify_cached(raw, entry["sha256"]) and not _from_mirror(name, entry, raw):
        _download(entry, raw, progress)
    if not entry.get("unpack"):
        return raw
    _unpack(entry, raw, out)
    return out


def fetch_all(name: str, *, progress: bool = True) -> dict[str, Path]:
    """Fetch every file of a dataset: ``{returned file name: path}`` (unpacked names for archives)."""
    return {_output_name(e): fetch(name, e["name"], progress=progress) for e in _dataset(name)["files"]}


# --------------------------------------------------------------------------------- readers

_HEADING = re.compile(r"(= )+.*?( =)+")


def read_tinyshakespeare() -> str:
    """The whole Tiny Shakespeare corpus as one string (about 1.1M characters)."""
    return fetch("tinyshakespeare", "input.txt").read_text(encoding="utf-8")


def read_wikitext(split: str = "train") -> list[str]:
    """Raw lines (without the newline) of tokenized WikiText-2, headings (`` = = Title = = ``) and
    blank lines included; split is train (36,718 lines), valid (3,760) or test (4,358)."""
    if split not in ("train", "valid", "test"):
        raise UnknownName(f"unknown WikiText-2 split {split!r}; splits: train, valid, test")
    with open(fetch("wikitext-2", f"{split}.txt"), encoding="utf-8", newline="\n") as fh:
        return [line.rstrip("\n") for line in fh]


def _is_heading(line: str) -> bool:
    """True for WikiText section headings such as ``" = = Gameplay = = "``."""
    return _HEADING.fullmatch(line.strip()) is not None


def wikitext_sentences(split: str = "train", lower: bool = True) -> list[list[str]]:
    """One whitespace-split token list per non-empty, non-heading WikiText-2 line (a paragraph):
    about 17.6k lists, 2.0M tokens, for train."""
    lines = (line.lower() if lower else line for line in read_wikitext(split))
    return [line.split() for line in lines if line.strip() and not _is_heading(line)]


_WIKITEXT_JOINS = {"@-@": "-", "@,@": ",", "@.@": "."}


def _join_wikitext_numbers(words: list[str]) -> list[str]:
    """["1", "@,@", "000"] → ["1,000"]; a join marker without a word on both sides is dropped."""
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i] not in _WIKITEXT_JOINS:
            out.append(words[i])
        elif out and i + 1 < len(words) and words[i + 1] not in _WIKITEXT_JOINS:
            out[-1] += _WIKITEXT_JOINS[words[i]] + words[i + 1]
            i += 1  # the word after the marker is joined too
        i += 1
    return out


def wikitext_articles(split: str = "train") -> list[list[str]]:
    """WikiText-2 as articles, each a list of sentences (plain strings), for BERT's pre-training
    (next-sentence pairs must come from the same article, and from different ones).

    A new article starts at every top-level heading (`` = Title = ``); paragraphs are cut into
    sentences after each " . "; WikiText's split numbers (``1 @,@ 000``) are joined again and its
    ``<unk>`` tokens dropped (a WordPiece vocabulary has no such word). About 600 articles for
    train.
    """
    articles: list[list[str]] = []
    for line in read_wikitext(split):
        stripped = line.strip()
        if not stripped:
            continue
        if _is_heading(line):
            if not stripped.startswith("= ="):  # a top-level title starts a new article
                articles.append([])
            continue
        if not articles:
            articles.append([])
        words = _join_wikitext_numbers([w for w in stripped.split() if w != "<unk>"])
        sentence: list[str] = []
        for word in words:
            sentence.append(word)
            if word == ".":
                articles[-1].append(" ".join(sentence))
                sentence = []
        if sentence:
            articles[-1].append(" ".join(sentence))
    return [a for a in articles if a]


def read_analogies(lower: bool = True) -> list[tuple[str, str, str, str, str]]:
    """Google analogies as ``(section, a, b, c, d)``, read "a is to b as c is to d": 19,544
    questions from 14 sections (e.g. ``capital-common-countries``)."""
    questions: list[tuple[str, str, str, str, str]] = []
    section = ""
    with open(fetch("word-benchmarks", "questions-words.txt"), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(":"):
                section = line[1:].strip()
            elif line.strip():
                a, b, c, d = (line.lower() if lower else line).split()
                questions.append((section, a, b, c, d))
    return questions


def read_wordsim353() -> list[tuple[str, str, float]]:
    """WordSim-353 as ``(word1, word2, mean human relatedness 0-10)``: 353 pairs."""
    pairs: list[tuple[str, str, float]] = []
    with open(fetch("word-benchmarks", "wordsim353.tsv"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and not line.startswith("#"):
                w1, w2, score = line.rstrip("\n").split("\t")
                pairs.append((w1, w2, float(score)))
    return pairs


def read_ud_pos(split: str = "train", lower: bool = False) -> list[tuple[list[str], list[str]]]:
    """UD English EWT as ``(words, upos_tags)`` per sentence; split train (12,544), dev (2,001) or
    test (2,077). Multi-word token lines (``3-4``) and empty nodes (``8.1``) are skipped, so words
    and tags line up one to one."""
    if split not in ("train", "dev", "test"):
        raise UnknownName(f"unknown UD EWT split {split!r}; splits: train, dev, test")
    sentences: list[tuple[list[str], list[str]]] = []
    words: list[str] = []
    tags: list[str] = []
    with open(fetch("ud-english-ewt", f"en_ewt-ud-{split}.conllu"), encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                if words:
                    sentences.append((words, tags))
                words, tags = [], []
            elif not line.startswith("#"):
                cols = line.split("\t")
                if cols[0].isdigit():
                    words.append(cols[1].lower() if lower else cols[1])
                    tags.append(cols[3])
    if words:
        sentences.append((words, tags))
    return sentences


def read_sst2(split: str = "train") -> list[tuple[str, int]]:
    """SST-2 as ``(sentence, label)``, label 1 = positive, 0 = negative; splits train (60,614),
    dev (6,735) and test (872: GLUE's SST-2 dev set, the one reported)."""
    if split not in ("train", "dev", "test"):
        raise UnknownName(f"unknown SST-2 split {split!r}; splits: train, dev, test")
    rows: list[tuple[str, int]] = []
    with open(fetch("sst2", f"{split}.tsv"), encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        if header != ["sentence", "label"]:
            raise DataError(f"unexpected SST-2 header {header}; expected sentence<TAB>label")
        for line in fh:
            if line.strip():
                sentence, label = line.rstrip("\n").rsplit("\t", 1)
                rows.append((sentence.strip(), int(label)))
    return rows


# ---------------------------------------------------------------------------------------------
# A dataset we write ourselves: dates in many human formats → ISO 8601 (notebook 06)

_DATE_FORMATS = (
    "{d} {Month} {Y}",  # 22 November 2026
    "{Month} {d}, {Y}",  # November 22, 2026
    "{Mon} {d}, {Y}",  # Nov 22, 2026
    "{dd}/{mm}/{Y}",  # 22/11/2026 (day first, as in Europe)
    "{Weekday}, {d} {Month} {Y}",  # Sunday, 22 November 2026
    "{Wkd} {d} {Mon} {Y}",  # Sun 22 Nov 2026
    "{Y} {Mon} {d}",  # 2026 Nov 22
    "{dd}.{mm}.{Y}",  # 22.11.2026
)

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)  # English whatever the locale
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def make_date_pairs(n: int, seed: int = 0, first_year: int = 1950, last_year: int = 2049) -> list[tuple[str, str]]:
    """`n` (human date, ISO date) pairs, e.g. ("Sun 22 Nov 2026", "2026-11-22"), drawn uniformly
    from the days of `first_year`…`last_year` and from eight formats (half lower-cased), seeded:
    the toy transduction task of notebook 06.

    Example:
        >>> make_date_pairs(1, seed=0)[0][1]
        '2019-02-15'
    """
    import datetime
    import random

    from .utils import check_int

    check_int(n, "n", 1, fix="the number of date pairs to make")
    if first_year > last_year:
        raise ValueError(f"first_year={first_year} is after last_year={last_year}")
    rng = random.Random(seed)
    start = datetime.date(first_year, 1, 1).toordinal()
    end = datetime.date(last_year, 12, 31).toordinal()
    pairs = []
    for _ in range(n):
        day = datetime.date.fromordinal(rng.randint(start, end))
        fields = dict(
            d=day.day,
            dd=f"{day.day:02d}",
            mm=f"{day.month:02d}",
            Y=day.year,
            Month=_MONTHS[day.month - 1],
            Mon=_MONTHS[day.month - 1][:3],
            Weekday=_WEEKDAYS[day.weekday()],
            Wkd=_WEEKDAYS[day.weekday()][:3],
        )
        text = rng.choice(_DATE_FORMATS).format(**fields)
        pairs.append((text.lower() if rng.random() < 0.5 else text, day.isoformat()))
    return pairs


# ---------------------------------------------------------------------------------------------
# Fine-tuning data for notebook 08: sentence pairs (SNLI) and extractive questions (SQuAD)


def read_snli(split: str = "dev") -> list[tuple[str, str, str]]:
    """SNLI 1.0 as ``(premise, hypothesis, label)``, label "entailment", "neutral" or
    "contradiction"; split dev (9,842 pairs) or test (9,824): pairs whose ``gold_label`` is "-"
    (the annotators did not agree) are skipped, as in Bowman et al. (2015)."""
    if split not in ("dev", "test"):
        raise UnknownName(f"unknown SNLI split {split!r}; splits: dev, test (train is not mirrored)")
    rows: list[tuple[str, str, str]] = []
    with open(fetch("snli", f"snli_1.0_{split}.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                pair = json.loads(line)
                if pair["gold_label"] != "-":
                    rows.append((pair["sentence1"], pair["sentence2"], pair["gold_label"]))
    return rows


def read_squad() -> list[dict[str, Any]]:
    """SQuAD 1.1 dev as one dict per question, in file order (10,570 questions on 2,067 paragraphs
    of 48 articles): ``{"id", "title", "context", "question", "answers": [{"text",
    "answer_start"}, …]}``, ``answer_start`` a character offset into ``context``; ``title`` lets
    train and test be split by article."""
    with open(fetch("squad-v1.1", "dev-v1.1.json"), encoding="utf-8") as fh:
        articles = json.load(fh)["data"]
    return [
        {
            "id": qa["id"],
            "title": article["title"],
            "context": paragraph["context"],
            "question": qa["question"],
            "answers": [{"text": a["text"], "answer_start": a["answer_start"]} for a in qa["answers"]],
        }
        for article in articles
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def read_fra_eng() -> list[tuple[str, str]]:
    """Tatoeba's 167,130 English–French pairs as ``(english, french)``, shortest English first. An
    English sentence often has several translations, each on its own line: group by the English
    side before splitting train from test. Attribute tatoeba.org and manythings.org/anki (CC BY 2.0
    FR) when you show them."""
    pairs: list[tuple[str, str]] = []
    with open(fetch("fra-eng", "fra-eng.zip"), encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise DataError(
                    f"fra.txt line {number} is not 'english<TAB>french': {line[:60]!r}; "
                    f"the file is damaged: delete it from the cache ({cache_dir()}) and fetch again"
                )
            pairs.append((fields[0], fields[1]))
    return pairs
