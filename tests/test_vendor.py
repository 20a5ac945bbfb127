"""The JavaScript shipped for bertviz (onehot2gpt.vendor): the files, their manifest, and the pages
bertviz_view returns, which must load nothing from the network. That they draw with no network is
checked in a real browser by tests/test_browser.py::test_bertviz_draws_with_no_network."""

import fnmatch
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import tomllib
from onehot2gpt import vendor

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("requirejs", "jquery", "d3")


def _maps(layers=2, heads=3, n=5, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.softmax(torch.randn(1, heads, n, n, generator=g), -1) for _ in range(layers)]


def _pages():
    from onehot2gpt.widgets import bertviz_view

    tokens = ["[CLS]", "</script>", "<!--", "[SEP]", "x"]
    return {
        "head": bertviz_view(_maps(), tokens, view="head").data,
        "model": bertviz_view(_maps(), tokens, view="model").data,
        "pair": bertviz_view(_maps(), tokens, view="model", sentence_b_start=3).data,
    }


def test_each_shipped_file_matches_its_manifest_and_has_its_licence():
    libraries = vendor.manifest()
    assert set(libraries) == set(LIBRARIES)
    for name, entry in libraries.items():
        for key in ("file", "license_file"):
            data = (vendor.VENDOR_DIR / entry[key]).read_bytes()
            digest = entry["sha256" if key == "file" else "license_sha256"]
            assert hashlib.sha256(data).hexdigest() == digest, f"{entry[key]} differs from the manifest"
        assert entry["version"] in entry["file"] and entry["license"] in ("MIT", "BSD-3-Clause")
        assert (
            "Permission is hereby granted" in (vendor.VENDOR_DIR / entry["license_file"]).read_text()
            or "Redistribution and use" in (vendor.VENDOR_DIR / entry["license_file"]).read_text()
        )
        assert entry["origin"] and (entry.get("npm_tarball_integrity") or entry.get("published_sri"))
        # The version is the one the file itself announces.
        assert entry["version"] in vendor.vendored_script(name)[:400], f"{name}: version not in its header"


def test_the_shipped_versions_are_the_ones_installed_bertviz_asks_for():
    import bertviz

    package = Path(bertviz.__file__).parent
    python = (package / "head_view.py").read_text() + (package / "model_view.py").read_text()
    asked = {"requirejs": set(re.findall(r"/require\.js/([^/]+)/require", python))}
    for js in ("head_view.js", "model_view.js"):
        for name, version in re.findall(r"(d3|jquery): '[^']*/(?:d3|jquery)/([^/]+)/", (package / js).read_text()):
            asked.setdefault(name, set()).add(version)
    shipped = {name: {entry["version"]} for name, entry in vendor.manifest().items()}
    assert asked == shipped


def test_package_data_declares_every_shipped_file():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["onehot2gpt"]
    package = vendor.VENDOR_DIR.parents[1]
    files = [p.relative_to(package).as_posix() for p in vendor.VENDOR_DIR.rglob("*") if p.is_file()]
    assert len(files) == 1 + 2 * len(LIBRARIES)  # the manifest, each library and its licence
    missing = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not missing, f"not declared as package data in pyproject.toml: {missing}"


@pytest.mark.parametrize("view", ["head", "model", "pair"])
def test_the_page_loads_nothing_from_the_network(view):
    """Each shipped library appears once, unmodified; with their texts taken out, nothing in the page
    names a URL, a <script src> or a CDN. (The libraries' own texts hold URLs in comments, error
    messages and XML namespaces; they load nothing.)"""
    page = _pages()[view]
    rest = page
    for name in LIBRARIES:
        text = vendor.vendored_script(name)
        assert page.count(text) == 1, f"{name} is not inline exactly once, unmodified"
        rest = rest.replace(text, "")
    found = re.findall(r"(?i)https?:|//[a-z0-9.-]+\.[a-z]{2,}/|\bsrc\s*=|\bhref\s*=|cdnjs|require\.config", rest)
    assert not found, f"the {view} page still points outside itself: {found}"
    assert page.lower().count("</script") == 1 and "<!--" not in page, (
        "a token ('</script>', '<!--') must not end the page's one script"
    )
    assert "\\u003c/script>" in page and "\\u003c!--" in page  # the tokens, escaped, still there


def test_the_libraries_come_before_the_view_script_that_uses_them():
    page = _pages()["head"]
    order = [page.index(vendor.vendored_script(name)) for name in LIBRARIES]
    assert order == sorted(order) and order[-1] < page.index("requirejs(['jquery', 'd3']")
    assert page.index('<script type="text/javascript">') < order[0]
    assert page.rstrip().endswith("})();\n</script>"), "the view's script must end the page"


def test_bertviz_asking_for_other_versions_is_refused():
    import bertviz

    page = _pages()["head"]
    raw = bertviz.head_view(_maps(), ["a", "b", "c", "d", "e"], html_action="return").data
    assert vendor.offline_bertviz_page(raw).count("</script>") == 1
    with pytest.raises(RuntimeError, match=r"bertviz asks for .*'d3': '6\.0\.0'.*onehot2gpt ships"):
        vendor.offline_bertviz_page(raw.replace("/d3/5.7.0/", "/d3/6.0.0/"))
    with pytest.raises(RuntimeError, match=r"'requirejs': '2\.3\.7'"):
        vendor.offline_bertviz_page(raw.replace("/require.js/2.3.6/", "/require.js/2.3.7/"))
    with pytest.raises(RuntimeError, match="changed shape.*require.js"):
        vendor.offline_bertviz_page(page)  # already rewritten: no <script src>
    with pytest.raises(RuntimeError, match="changed shape.*require.config"):
        vendor.offline_bertviz_page(raw.replace("require.config(", "require.setup("))


def test_a_changed_shipped_file_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "vendor"
    shutil.copytree(vendor.VENDOR_DIR, copy)
    d3 = copy / vendor.manifest()["d3"]["file"]
    d3.write_text(d3.read_text().replace("5.7.0", "5.7.1", 1))
    monkeypatch.setattr(vendor, "VENDOR_DIR", copy)
    vendor.vendored_script.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"d3-5\.7\.0/d3\.min\.js has sha256 [0-9a-f]{64}, the manifest says"):
            vendor.vendored_script("d3")
        with pytest.raises(ValueError, match=r"no shipped library 'vue'"):
            vendor.vendored_script("vue")
    finally:
        vendor.vendored_script.cache_clear()


def test_a_missing_manifest_says_to_reinstall(tmp_path, monkeypatch):
    monkeypatch.setattr(vendor, "MANIFEST", tmp_path / "MANIFEST.json")
    vendor.manifest.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="reinstall"):
            vendor.manifest()
    finally:
        monkeypatch.undo()
        vendor.manifest.cache_clear()
    assert set(json.loads(vendor.MANIFEST.read_text())["libraries"]) == set(LIBRARIES)
