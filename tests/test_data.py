"""Tests for onehot2gpt.data: the registry, the verified cache/mirror/download path, the readers.

Offline: files come from the data mirror (``$ONEHOT2GPT_DATA_MIRROR``, else ``<repo>/../shared/data``)
and downloads are faked by monkeypatching ``urllib.request.urlopen``. Without a mirror the tests
that read files fail, naming the variable (docs/install.md says how to get one).
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from onehot2gpt import data

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "lib" / "onehot2gpt" / "assets" / "registry.json"
GH = "https://raw.githubusercontent.com"


def _mirror_path() -> Path:
    """The offline mirror: $ONEHOT2GPT_DATA_MIRROR, else the shared folder beside the repo."""
    return Path(os.environ.get("ONEHOT2GPT_DATA_MIRROR") or REPO.parent / "shared" / "data")


def _require_mirror() -> Path:
    """The mirror path; a test that needs it fails when it is missing."""
    mirror = _mirror_path()
    if not (mirror / "MANIFEST.md").is_file():
        msg = (
            f"data mirror not found at {mirror} (no MANIFEST.md); set ONEHOT2GPT_DATA_MIRROR "
            "to the folder holding <dataset>/<file> copies and MANIFEST.md"
        )
        pytest.fail(msg)
    return mirror


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _registry_files() -> list[tuple[str, dict]]:
    """(dataset, file entry) for every file in the repo's registry (read at collection time)."""
    reg = data.load_registry()
    return [(name, f) for name, ds in reg["datasets"].items() for f in ds["files"]]


def _leftovers(folder: Path) -> list[str]:
    """Everything in a cache folder (temp files included), as names."""
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def _no_network(*args, **kwargs):
    raise AssertionError("test tried to reach the network")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the repo registry and make any real network access fail loudly."""
    monkeypatch.setenv("ONEHOT2GPT_REGISTRY", str(REGISTRY))
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache in tmp_path, with the mirror enabled."""
    mirror = _require_mirror()
    monkeypatch.setenv("ONEHOT2GPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ONEHOT2GPT_DATA_MIRROR", str(mirror))
    return tmp_path / "cache"


@pytest.fixture
def no_mirror(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache and no mirror: only the (faked) network is left."""
    monkeypatch.delenv("ONEHOT2GPT_DATA_MIRROR")
    return cache


@pytest.fixture(scope="module")
def reader_env(tmp_path_factory: pytest.TempPathFactory):
    """One mirror-filled cache shared by the reader tests (files are copied only once)."""
    mirror = _require_mirror()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONEHOT2GPT_CACHE", str(tmp_path_factory.mktemp("reader_cache")))
        mp.setenv("ONEHOT2GPT_DATA_MIRROR", str(mirror))
        mp.setenv("ONEHOT2GPT_REGISTRY", str(REGISTRY))
        mp.setattr(urllib.request, "urlopen", _no_network)
        yield


class FakeResponse:
    """What urlopen returns: serves ``payload`` in chunks, then raises ``fail`` if given."""

    def __init__(self, payload: bytes, fail: BaseException | None = None, on_read=None):
        self.payload, self.fail, self.on_read, self.pos = payload, fail, on_read, 0
        self.headers = {"Content-Length": str(len(payload) if fail is None else len(payload) * 4)}

    def read(self, n: int = -1) -> bytes:
        if self.on_read:
            self.on_read()
        if self.pos >= len(self.payload) and self.fail is not None:
            raise self.fail
        n = min(n if n > 0 else len(self.payload), 1000)  # small chunks: several reads
        chunk = self.payload[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------------------------ registry


def _parse_manifest(path: Path) -> dict[str, dict]:
    """``{"folder/file": {size, sha256, url, licence, what}}`` from the MANIFEST markdown table."""
    rows: dict[str, dict] = {}
    last_licence = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.fullmatch(r"[0-9a-f]{64}", cells[2]):
            continue
        key, size, sha, url, licence, what = cells
        percent_encode = "percent-encode" in url
        url = url.split(" (")[0]
        if url.startswith("GH/"):
            url = GH + url[2:]
        if percent_encode:
            url = urllib.parse.quote(url, safe=":/")
        licence = last_licence if licence == "as above" else licence
        last_licence = licence
        rows[key] = dict(size=int(size.replace(",", "")), sha256=sha, url=url, licence=licence, what=what)
    return rows


def test_registry_agrees_with_manifest() -> None:
    manifest = _parse_manifest(_require_mirror() / "MANIFEST.md")
    assert len(manifest) >= 19, "MANIFEST table not parsed"
    reg = data.load_registry()["datasets"]
    ours = {f"{name}/{f['name']}": (ds, f) for name, ds in reg.items() for f in ds["files"]}
    assert sorted(ours) == sorted(manifest), "registry and MANIFEST list different files"
    for key, row in manifest.items():
        ds, f = ours[key]
        assert f["sha256"] == row["sha256"], key
        assert f["size"] == row["size"], key
        assert f["url"] == row["url"], key
        assert f.get("licence", ds["licence"]) == row["licence"], key
        unpacked = re.search(r"unpacked sha256 ([0-9a-f]{64})", row["what"])
        if unpacked:
            assert f.get("unpacked_sha256") == unpacked.group(1), key


def test_registry_schema() -> None:
    reg = data.load_registry()
    assert "add a dataset" in reg["_comment"].lower()
    assert data.list_datasets() == sorted(reg["datasets"])
    assert data.REGISTRY_PATH.name == "registry.json"
    assert data.ASSETS / "registry.json" == REGISTRY  # shipped inside the package (package data)
    for name, ds in reg["datasets"].items():
        for key in ("description", "licence", "homepage", "source", "files"):
            assert ds.get(key), f"{name}: missing {key}"
        names = [f["name"] for f in ds["files"]] + [f["unpacked_name"] for f in ds["files"] if f.get("unpacked_name")]
        assert len(names) == len(set(names)), f"{name}: duplicate file names"
        for f in ds["files"]:
            assert f["url"].startswith("https://") and " " not in f["url"], f
            assert re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) and f["size"] > 0, f
            assert f["unpack"] in (None, "gunzip", "zip"), f
            if f["unpack"]:
                assert f.get("unpacked_name") and re.fullmatch(r"[0-9a-f]{64}", f.get("unpacked_sha256", "")), f
            if f["unpack"] == "zip":
                assert f.get("member"), f


# ------------------------------------------------------------------------ fetch via mirror


@pytest.mark.parametrize(("name", "entry"), _registry_files(), ids=lambda v: v if isinstance(v, str) else v["name"])
def test_every_file_resolves_from_mirror(cache: Path, name: str, entry: dict) -> None:
    path = data.fetch(name, entry["name"], progress=False)
    raw = cache / name / entry["name"]
    assert raw.stat().st_size == entry["size"]
    assert _sha256(raw) == entry["sha256"]
    if entry["unpack"]:
        assert path == cache / name / entry["unpacked_name"]
        assert _sha256(path) == entry["unpacked_sha256"]
        if entry.get("unpacked_size"):
            assert path.stat().st_size == entry["unpacked_size"]
    else:
        assert path == raw
    assert not [n for n in _leftovers(cache) if n.endswith(".tmp")]


def test_cache_hit_needs_no_mirror(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = data.fetch_all("snli", progress=False)
    assert set(first) == {"snli_1.0_dev.jsonl", "snli_1.0_test.jsonl"}
    monkeypatch.delenv("ONEHOT2GPT_DATA_MIRROR")  # from now on only the cache can answer
    assert data.fetch_all("snli", progress=False) == first
    assert data.fetch("snli", "snli_1.0_dev.jsonl.gz", progress=False) == first["snli_1.0_dev.jsonl"]
    assert data.fetch("snli", "snli_1.0_dev.jsonl", progress=False) == first["snli_1.0_dev.jsonl"]


@pytest.mark.parametrize(
    ("name", "file", "corrupt"),
    [
        ("word-benchmarks", "wordsim353.tsv", "wordsim353.tsv"),
        ("snli", "snli_1.0_dev.jsonl.gz", "snli_1.0_dev.jsonl"),  # an unpacked file is checked too
    ],
)
def test_corrupted_cache_file_is_rejected_and_removed(cache: Path, name: str, file: str, corrupt: str) -> None:
    data.fetch(name, file, progress=False)
    bad = cache / name / corrupt
    bad.write_bytes(bad.read_bytes()[:-10] + b"tampered!!")
    with pytest.raises(data.ChecksumError) as err:
        data.fetch(name, file, progress=False)
    msg = str(err.value)
    assert not bad.exists()
    assert str(bad) in msg and "deleted" in msg and "again" in msg
    assert data.sha256_file(data.fetch(name, file, progress=False))  # the next call repairs it


def test_corrupt_mirror_file_is_rejected_but_kept(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad_mirror = tmp_path / "mirror"
    bad = bad_mirror / "word-benchmarks" / "wordsim353.tsv"
    bad.parent.mkdir(parents=True)
    bad.write_text("love\tsex\t0.0\n", encoding="utf-8")
    monkeypatch.setenv("ONEHOT2GPT_DATA_MIRROR", str(bad_mirror))
    with pytest.raises(data.ChecksumError) as err:
        data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert str(bad) in str(err.value) and "mirror" in str(err.value)
    assert bad.read_text(encoding="utf-8") == "love\tsex\t0.0\n"
    assert _leftovers(cache / "word-benchmarks") == []


# ------------------------------------------------------------------------ fetch via (fake) network


def test_network_failure_gives_dataset_unavailable(no_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def urlopen(url, *args, **kwargs):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    entry = next(f for _, f in _registry_files() if f["name"] == "questions-words.txt")
    with pytest.raises(data.DatasetUnavailable) as err:
        data.fetch("word-benchmarks", "questions-words.txt", progress=False)
    msg = str(err.value)
    assert entry["url"] in msg and "ONEHOT2GPT_DATA_MIRROR" in msg
    assert str(no_mirror / "word-benchmarks" / "questions-words.txt") in msg  # the manual fix
    assert _leftovers(no_mirror / "word-benchmarks") == []


@pytest.mark.parametrize(
    ("fail", "expected"),
    [
        (ConnectionResetError("connection reset by peer"), data.DatasetUnavailable),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_interrupted_download_leaves_nothing(no_mirror: Path, monkeypatch: pytest.MonkeyPatch, fail, expected) -> None:
    payload = (_mirror_path() / "word-benchmarks" / "wordsim353.tsv").read_bytes()[:3000]
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, *a, **k: FakeResponse(payload, fail=fail))
    with pytest.raises(expected):
        data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert _leftovers(no_mirror / "word-benchmarks") == []


def test_wrong_download_is_deleted(no_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, *a, **k: FakeResponse(b"<html>rate limited</html>"))
    with pytest.raises(data.ChecksumError, match="expected"):
        data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert _leftovers(no_mirror / "word-benchmarks") == []


def test_successful_download_lands_atomically(no_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = next(f for _, f in _registry_files() if f["name"] == "wordsim353.tsv")
    payload = (_mirror_path() / "word-benchmarks" / "wordsim353.tsv").read_bytes()
    dest = no_mirror / "word-benchmarks" / "wordsim353.tsv"
    requested = []

    def not_there_yet() -> None:
        assert not dest.exists(), "the final path appeared before the download finished"

    def urlopen(url, *args, **kwargs):
        requested.append(url)
        return FakeResponse(payload, on_read=not_there_yet)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    assert data.fetch("word-benchmarks", "wordsim353.tsv", progress=True) == dest
    assert requested == [entry["url"]]
    assert dest.read_bytes() == payload and _sha256(dest) == entry["sha256"]
    assert _leftovers(no_mirror / "word-benchmarks") == ["wordsim353.tsv"]
    assert len(data.read_wordsim353()) == 353  # served from the cache now


def test_every_file_has_addresses_on_more_than_one_host() -> None:
    """raw.githubusercontent.com rate-limits a classroom behind one address: each file can also
    come from another host."""
    for name, f in _registry_files():
        addresses = data.urls(f)
        hosts = {urllib.parse.urlsplit(u).netloc for u in addresses}
        assert len(addresses) >= 2 and len(hosts) >= 2, (name, f["name"], addresses)
        assert all(u.startswith("https://") and " " not in u for u in addresses), addresses


@pytest.mark.parametrize("first", ["rate limited", "wrong bytes"])
def test_a_failing_address_passes_to_the_next(no_mirror: Path, monkeypatch: pytest.MonkeyPatch, first) -> None:
    entry = next(f for _, f in _registry_files() if f["name"] == "wordsim353.tsv")
    payload = (_mirror_path() / "word-benchmarks" / "wordsim353.tsv").read_bytes()
    requested = []

    def urlopen(url, *args, **kwargs):
        requested.append(url)
        if len(requested) == 1:
            if first == "rate limited":
                raise urllib.error.HTTPError(url, 429, "Too Many Requests", {}, None)
            return FakeResponse(b"<html>you have been rate limited</html>")
        return FakeResponse(payload)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    dest = data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert requested == data.urls(entry)[:2]
    assert _sha256(dest) == entry["sha256"] and _leftovers(no_mirror / "word-benchmarks") == ["wordsim353.tsv"]


def test_when_every_address_fails_the_message_names_them_all(no_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def urlopen(url, *args, **kwargs):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    entry = next(f for _, f in _registry_files() if f["name"] == "wordsim353.tsv")
    with pytest.raises(data.DatasetUnavailable) as err:
        data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert all(u in str(err.value) for u in data.urls(entry))


# ------------------------------------------------------------------------ names


def test_unknown_dataset_lists_names(cache: Path) -> None:
    with pytest.raises(KeyError) as err:
        data.fetch("wikitext-103")
    assert isinstance(err.value, data.DataError)
    for name in data.list_datasets():
        assert name in str(err.value)


def test_unknown_or_missing_file_lists_files(cache: Path) -> None:
    with pytest.raises(data.DataError, match="train.txt.*valid.txt.*test.txt"):
        data.fetch("wikitext-2", "wiki.train.tokens")
    with pytest.raises(data.DataError, match="train.txt.*valid.txt.*test.txt"):
        data.fetch("wikitext-2")
    assert data.fetch("tinyshakespeare", progress=False).name == "input.txt"  # the only file


# ------------------------------------------------------------------------ readers
# Expected numbers are facts from the MANIFEST, not from a run of this code.


@pytest.mark.usefixtures("reader_env")
def test_read_wikitext_line_counts() -> None:
    assert [len(data.read_wikitext(s)) for s in ("train", "valid", "test")] == [36_718, 3_760, 4_358]
    with pytest.raises(data.DataError):
        data.read_wikitext("dev")


@pytest.mark.usefixtures("reader_env")
def test_wikitext_sentences() -> None:
    sents = data.wikitext_sentences("train")
    assert all(sents), "empty lines must be dropped"
    assert not [s for s in sents if s[0] == "=" and s[-1] == "="], "headings must be dropped"
    n_tokens = sum(map(len, sents))
    # MANIFEST: ≈2.1M tokens counting one end-of-line per line; without those 36,718 line ends
    # and the section headings, about 2.0M remain.
    assert 1_900_000 <= n_tokens <= 2_200_000
    assert all(t == t.lower() for s in sents[:500] for t in s)
    raw = data.wikitext_sentences("valid", lower=False)
    assert any(t != t.lower() for s in raw for t in s)


@pytest.mark.usefixtures("reader_env")
def test_read_analogies() -> None:
    questions = data.read_analogies()
    assert len(questions) == 19_544  # MANIFEST
    sections = {q[0] for q in questions}
    assert len(sections) == 14 and "capital-common-countries" in sections
    assert all(len(q) == 5 and all(w == w.lower() for w in q[1:]) for q in questions)
    assert data.read_analogies(lower=False)[0][1][0].isupper()


@pytest.mark.usefixtures("reader_env")
def test_read_wordsim353() -> None:
    pairs = data.read_wordsim353()
    assert len(pairs) == 353  # MANIFEST
    assert all(isinstance(s, float) and 0.0 <= s <= 10.0 for _, _, s in pairs)
    assert not any(w1.startswith("#") for w1, _, _ in pairs)


@pytest.mark.usefixtures("reader_env")
def test_read_tinyshakespeare() -> None:
    text = data.read_tinyshakespeare()
    assert len(text.encode("utf-8")) == 1_115_394  # MANIFEST bytes
    assert text.startswith("First Citizen:")


# ------------------------------------------------------------------ readers for notebooks 03-04


def test_read_ud_pos_sentence_counts_and_alignment(reader_env):
    for split, expected in [("train", 12_544), ("dev", 2_001), ("test", 2_077)]:  # MANIFEST facts
        sentences = data.read_ud_pos(split)
        assert len(sentences) == expected
        assert all(len(w) == len(t) and w for w, t in sentences)
    tags = {t for _, ts in data.read_ud_pos("dev") for t in ts}
    assert (
        {"NOUN", "VERB", "ADP", "PUNCT", "DET"}
        <= tags
        <= {
            "ADJ",
            "ADP",
            "ADV",
            "AUX",
            "CCONJ",
            "DET",
            "INTJ",
            "NOUN",
            "NUM",
            "PART",
            "PRON",
            "PROPN",
            "PUNCT",
            "SCONJ",
            "SYM",
            "VERB",
            "X",
        }
    )  # the 17 UPOS tags


def test_read_sst2_rows_and_labels(reader_env):
    for split, expected in [("train", 60_614), ("dev", 6_735), ("test", 872)]:
        rows = data.read_sst2(split)
        assert len(rows) == expected
        assert {label for _, label in rows} == {0, 1}
        assert all(sentence for sentence, _ in rows)


@pytest.mark.usefixtures("reader_env")
def test_read_fra_eng() -> None:
    pairs = data.read_fra_eng()
    assert len(pairs) == 167_130  # MANIFEST lines
    assert pairs[0] == ("Go.", "Va !")
    assert all(e and f and "\t" not in e + f for e, f in pairs)
    lengths = [len(e) for e, _ in pairs[:1000]]
    assert lengths[0] <= lengths[-1]  # shortest English first


# ------------------------------------------------------------------------ a shared cache


def test_cached_files_follow_the_umask_so_others_can_read_them(cache: Path) -> None:
    before = os.umask(0o022)
    try:
        path = data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
        unpacked = data.fetch("snli", "snli_1.0_dev.jsonl.gz", progress=False)
    finally:
        os.umask(before)
    for p in (path, unpacked, cache / "snli" / "snli_1.0_dev.jsonl.gz"):
        assert p.stat().st_mode & 0o777 == 0o644, f"{p} is {oct(p.stat().st_mode & 0o777)}"


def test_a_cache_that_cannot_be_written_names_the_variable(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, dir=None, **kwargs):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(data.tempfile, "mkstemp", refuse)
    with pytest.raises(data.CacheNotWritable) as err:
        data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    msg = str(err.value)
    assert "ONEHOT2GPT_CACHE" in msg and str(cache / "word-benchmarks") in msg
    assert isinstance(err.value, PermissionError)


def test_temp_files_of_a_killed_download_are_cleaned_up(cache: Path) -> None:
    folder = cache / "word-benchmarks"
    folder.mkdir(parents=True)
    stale, fresh = folder / ".wordsim353.tsv.dead1234.tmp", folder / ".wordsim353.tsv.live5678.tmp"
    stale.write_bytes(b"half a download")
    fresh.write_bytes(b"another process, still downloading")
    two_hours_ago = stale.stat().st_mtime - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    data.fetch("word-benchmarks", "wordsim353.tsv", progress=False)
    assert not stale.exists()
    assert fresh.exists()


# -- where the cache lives: a clone keeps data/cache, an installed package the user's cache folder ----


def test_the_cache_of_a_clone_is_its_data_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEHOT2GPT_CACHE", raising=False)
    assert data._in_checkout()
    assert data.cache_dir() == REPO / "data" / "cache"
    monkeypatch.setenv("ONEHOT2GPT_CACHE", "/somewhere/else")
    assert data.cache_dir() == Path("/somewhere/else")


def test_an_installed_package_caches_in_the_user_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed from a wheel, the package's parents hold no pyproject.toml and lib/onehot2gpt: the
    cache is $XDG_CACHE_HOME/onehot2gpt, else ~/.cache/onehot2gpt, never inside site-packages."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "onehot2gpt").mkdir(parents=True)
    monkeypatch.setattr(data, "_CHECKOUT", site.parent)
    monkeypatch.delenv("ONEHOT2GPT_CACHE", raising=False)
    assert not data._in_checkout()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "onehot2gpt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.cache_dir() == tmp_path / "home" / ".cache" / "onehot2gpt"
    monkeypatch.setenv("ONEHOT2GPT_CACHE", str(tmp_path / "mine"))
    assert data.cache_dir() == tmp_path / "mine"
    assert not data.cache_dir().is_relative_to(site)
