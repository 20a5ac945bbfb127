"""JavaScript shipped with the package, so that bertviz's views draw with no network.

bertviz's views load require.js, jQuery and d3 from a CDN. The package ships the releases bertviz
asks for, unmodified, with their licences and a manifest (``static/vendor/MANIFEST.json``: version,
origin, licence, sha256). :func:`offline_bertviz_page` puts them inline, in the function scope of
the script that draws the view: the page needs nothing outside itself (in JupyterLab, the classic
notebook, a saved or exported notebook), and the page's own ``require``, ``define``, ``jQuery`` and
``$`` are left as they were.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

VENDOR_DIR = Path(__file__).resolve().parent / "static" / "vendor"
MANIFEST = VENDOR_DIR / "MANIFEST.json"


@functools.cache
def manifest() -> dict:
    """The libraries shipped in ``static/vendor``: name → version, file, licence, origin, sha256."""
    try:
        return json.loads(MANIFEST.read_text(encoding="utf-8"))["libraries"]
    except FileNotFoundError:
        raise RuntimeError(
            f"{MANIFEST} is missing: the package was installed without its data files; "
            f"reinstall onehot2gpt (pip install -e .)"
        ) from None


@functools.cache
def vendored_script(name: str) -> str:
    """The text of the shipped library `name` ("requirejs", "jquery" or "d3"), checked against the
    sha256 in the manifest."""
    libraries = manifest()
    if name not in libraries:
        raise ValueError(f"no shipped library {name!r}; the manifest lists {sorted(libraries)}")
    entry = libraries[name]
    data = (VENDOR_DIR / entry["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise RuntimeError(
            f"{VENDOR_DIR / entry['file']} has sha256 {digest}, the manifest says "
            f"{entry['sha256']}: the shipped file was changed; restore it from git"
        )
    text = data.decode("utf-8")
    # Inline in a <script>, these would end the script early or change how the HTML parser reads it.
    for marker in ("</script", "<!--"):
        if marker in text.lower():
            raise RuntimeError(f"{entry['file']} contains {marker!r} and cannot be inlined in a <script>")
    return text


# What bertviz 1.4.1's 'return' HTML holds: a <script src> for require.js, the view's <div>, and one
# inline script that configures require.js with the CDN paths of d3 and jQuery and then draws.
_REQUIRE_TAG = re.compile(r'<script src="[^"]*/require\.js/(?P<version>[^/"]+)/require(?:\.min)?\.js"></script>')
_INLINE_SCRIPT = re.compile(r'(<script type="text/javascript">\n)(.*?)(\n</script>)', re.S)
_CONFIG = re.compile(r"require\.config\(\{.*?\}\);", re.S)
_PATH = re.compile(r"(?P<name>\w+)\s*:\s*'[^']*/(?P=name)/(?P<version>[^/']+)/[^']*'")
_PARAMS = re.compile(r"^[ \t]*const params = .*$", re.M)

_LOADER = """(function () {{
// onehot2gpt: RequireJS {requirejs}, jQuery {jquery} and d3 {d3} as published (onehot2gpt/static/vendor,
// with their licences), inline and in this function's scope: the view needs no network, and the
// page's own require, define, jQuery and $ stay as they were.
{requirejs_js}
;function onehot2gptDefineAs(name) {{  // an AMD define() that registers a library under `name`
    var named = function (id, deps, factory) {{
        if (typeof id !== "string") {{ factory = deps; deps = id; }}
        if (!Array.isArray(deps)) {{ factory = deps; deps = []; }}
        define(name, deps, factory);
    }};
    named.amd = define.amd;
    return named;
}}
(function (define, module, exports) {{
{jquery_js}
}}).call(window, onehot2gptDefineAs("jquery"));
if (window.jQuery && window.jQuery.fn && window.jQuery.fn.jquery === "{jquery}") {{
    window.jQuery.noConflict(true);  // give the page back its own jQuery and $ (if any)
}}
(function (define, module, exports) {{
{d3_js}
}}).call(window, onehot2gptDefineAs("d3"));
// bertviz's view script from here on, less its first lines (which set the CDN paths):
{view_js}
}})();"""


def _changed(what: str) -> RuntimeError:
    return RuntimeError(
        f"bertviz's page has changed shape ({what}); onehot2gpt.vendor.offline_bertviz_page "
        f"must be updated for this bertviz version"
    )


def offline_bertviz_page(page: str) -> str:
    """bertviz's head or model view page (``html_action="return"``) made to draw with no network:
    the CDN's require.js, jQuery and d3 replaced by the shipped copies, inline. Raises RuntimeError
    if bertviz asks for other versions than the ones shipped, or its page has another shape."""
    libraries = manifest()
    tags = list(_REQUIRE_TAG.finditer(page))
    if len(tags) != 1:
        raise _changed(f"{len(tags)} <script src> tags for require.js, expected 1")
    wanted = {"requirejs": tags[0]["version"]}
    page = page[: tags[0].start()] + page[tags[0].end() :]
    scripts = list(_INLINE_SCRIPT.finditer(page))
    if len(scripts) != 1:
        raise _changed(f"{len(scripts)} inline scripts, expected 1")
    script = scripts[0]
    view_js = script[2]
    start = view_js.find("requirejs([")
    config = _CONFIG.search(view_js[:start]) if start >= 0 else None
    if config is None:
        raise _changed("no require.config(...) before requirejs([...])")
    wanted.update((m["name"], m["version"]) for m in _PATH.finditer(config[0]))
    shipped = {name: entry["version"] for name, entry in libraries.items()}
    if wanted != shipped:
        raise RuntimeError(
            f"bertviz asks for {wanted}, onehot2gpt ships {shipped}: vendor the versions "
            f"bertviz asks for in {VENDOR_DIR} (see MANIFEST.json)"
        )
    # The tokens sit in a JSON literal inside the script: a token such as "</script>" or "<!--"
    # must not end it, so every "<" there is written as the JSON escape \u003c (the same string).
    view_js, n = _PARAMS.subn(lambda m: m[0].replace("<", "\\u003c"), view_js[start:])
    if n != 1:
        raise _changed(f"{n} lines 'const params = ...', expected 1")
    # each library's version ({jquery}) and text ({jquery_js}): shipped holds requirejs, jquery and d3
    texts = {f"{name}_js": vendored_script(name) for name in shipped}
    loader = _LOADER.format(view_js=view_js, **shipped, **texts)
    return page[: script.start()] + script[1] + loader + script[3] + page[script.end() :]
