"""Colab readiness: every notebook opens from a badge and installs the course in Colab; slides."""

import json
import os
import re
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from onehot2gpt_teach import course

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDENT = sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def first_code_cell(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_course_notebooks_are_prepared(path):
    """Badge, set-up cell and slide metadata present: preparing again changes nothing."""
    text = path.read_text(encoding="utf-8")
    nb = course.prepare(json.loads(text), f"notebooks/{path.name}")
    assert json.dumps(nb, indent=1, ensure_ascii=False) + "\n" == text, f"run: onehot2gpt-prepare notebooks/{path.name}"


@pytest.mark.parametrize("path", NOTEBOOKS + STUDENT, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS + STUDENT])
def test_every_notebook_starts_with_its_badge_and_the_colab_cell(path):
    nb = load(path)
    relative = path.relative_to(ROOT).as_posix()
    assert course.badge_targets(source(nb["cells"][0]).split("\n")[0]) == [relative]
    cell = first_code_cell(nb)
    assert source(cell) == course.COLAB_CELL and course.SETUP_TAG in cell["metadata"]["tags"]
    assert cell["metadata"]["slideshow"]["slide_type"] == "skip" or "student" in relative


def test_students_are_in_step_with_the_course():
    assert [p.name for p in STUDENT] == [p.name for p in NOTEBOOKS]


def test_readme_badges_open_existing_notebooks_and_every_notebook_has_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = course.badge_targets(readme)
    student_links = re.findall(
        r"\[student\]\(https://colab\.research\.google\.com/github/"
        + re.escape(course.REPOSITORY)
        + r"/blob/main/([^)]*)\)",
        readme,
    )
    for target in targets + student_links:
        assert (ROOT / target).is_file(), f"README links {target}, which does not exist"
    expected = {p.relative_to(ROOT).as_posix() for p in NOTEBOOKS + STUDENT}
    assert set(targets) | set(student_links) == expected


def test_badges_outside_the_repository_are_refused():
    with pytest.raises(ValueError, match="outside"):
        course.badge_targets(
            "[![Open in Colab](x.svg)](https://colab.research.google.com/github/someone/else/blob/main/a.ipynb)"
        )


def test_slide_types_follow_the_headings():
    cells = [
        {"cell_type": "markdown", "source": "## 2. A section\ntext"},
        {"cell_type": "markdown", "source": "### A part"},
        {"cell_type": "markdown", "source": "plain text"},
        {"cell_type": "code", "source": "# a comment, not a heading"},
        {"cell_type": "code", "source": "", "metadata": {"tags": [course.SETUP_TAG]}},
    ]
    assert [course.slide_type(c) for c in cells] == ["slide", "subslide", "-", "-", "skip"]
    with pytest.raises(ValueError, match="title"):
        course.prepare({"cells": [{"cell_type": "code", "source": "x = 1"}]}, "notebooks/x.ipynb")


# On Colab, sys.modules holds google.colab from the kernel's start: a test puts a stand-in there.
AS_ON_COLAB = 'import sys, types\nsys.modules["google.colab"] = types.ModuleType("google.colab")\n'


def cell_from_this_checkout():
    """The set-up cell with its address of onehot2gpt/colab.py (GitHub, at the release) replaced by
    this checkout's copy of that file."""
    assert course.SETUP_URL in course.COLAB_CELL
    return course.COLAB_CELL.replace(course.SETUP_URL, (ROOT / "lib" / "onehot2gpt" / "colab.py").as_uri())


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("ONEHOT2GPT_")}


def test_colab_cell_is_three_lines_that_ruff_leaves_as_they_are(tmp_path):
    """At most 3 lines, each within the line length, and ruff (format and lint, the project's settings)
    changes and reports nothing in it as a notebook cell."""
    import nbformat

    lines = course.COLAB_CELL.splitlines()
    assert len(lines) <= 3 and all(len(line) <= 120 for line in lines), lines
    path = tmp_path / "setup.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(course.COLAB_CELL)])
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)
    config = ["--config", str(ROOT / "pyproject.toml")]
    for command in (["format", "--check", "--diff"], ["check"]):
        out = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *config, str(path)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, f"ruff {command[0]}: {out.stdout}{out.stderr}"


def test_colab_cell_does_nothing_outside_colab(tmp_path):
    """Outside Colab the cell fetches nothing, defines nothing, imports nothing and stays where it is."""
    probe = '\nimport os, sys\nprint(os.getcwd(), "url" in dir(), "urllib.request" in sys.modules)'
    out = subprocess.run(
        [sys.executable, "-c", course.COLAB_CELL + probe],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.split() == [str(tmp_path), "False", "False"] and not out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_repository_and_release_are_written_in_one_place():
    """The badges and the set-up cell come from onehot2gpt.colab's REPOSITORY and RELEASE: a fork
    edits those two lines and prepares the notebooks again. The cell fetches colab.py at the release
    from where it is in the repository."""
    from onehot2gpt import colab

    assert (course.REPOSITORY, course.RELEASE) == (colab.REPOSITORY, colab.RELEASE)
    assert colab.SETUP_URL == f"https://github.com/{colab.REPOSITORY}/raw/{colab.RELEASE}/lib/onehot2gpt/colab.py"
    assert (ROOT / "lib" / "onehot2gpt" / "colab.py").is_file()
    assert course.badge_url("notebooks/01_onehot.ipynb").endswith(
        f"{colab.REPOSITORY}/blob/{colab.RELEASE}/notebooks/01_onehot.ipynb"
    )


def test_docs_show_the_cell_as_it_is():
    assert course.COLAB_CELL in (ROOT / "docs" / "colab.md").read_text(encoding="utf-8")


def test_colab_setup_says_what_failed_and_what_to_do(tmp_path):
    env = clean_env()
    env.update(ONEHOT2GPT_REPO=(tmp_path / "no-such-repo").as_uri(), ONEHOT2GPT_HOME=str(tmp_path / "course"))
    run = dict(cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    out = subprocess.run([sys.executable, "-c", AS_ON_COLAB + cell_from_this_checkout()], **run)
    assert out.returncode != 0
    assert "the course set-up failed running:\n  git clone" in out.stderr
    assert "no-such-repo" in out.stderr and "Check the address" in out.stderr and "run this cell again" in out.stderr
    assert "Username" not in out.stderr  # git never asked for a password
    (tmp_path / "course").mkdir()  # a folder in the way that is not a clone
    out = subprocess.run([sys.executable, "-c", AS_ON_COLAB + cell_from_this_checkout()], **run)
    assert out.returncode != 0 and "is not a clone of the course: delete it" in out.stderr


def test_colab_cell_installs_the_course_in_a_fresh_environment(tmp_path):
    """The cell as on Colab (google.colab imported, colab.py from this checkout) in a new virtual
    environment whose "preinstalled" packages (torch, transformers, ..., as on Colab) come from this
    one; the repository it clones is this checkout."""
    env_dir = tmp_path / "colab-env"
    # No pip or setuptools of its own (ensurepip's setuptools is too old to build an editable wheel
    # offline): Colab's are recent, as are this environment's, which the .pth file below provides;
    # pip run by the new interpreter installs into the new environment.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    own_site = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # A path line in a .pth file adds this environment's packages without running its .pth files,
    # so the editable install of this checkout is not visible there: only the fresh clone's will be.
    Path(own_site, "zz_preinstalled.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    home = tmp_path / "content" / "one-hot-to-gpt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEHOT2GPT_", "PYTHON", "VIRTUAL_ENV"))}
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    env.update(
        ONEHOT2GPT_REPO=ROOT.as_uri(),
        ONEHOT2GPT_HOME=str(home),
        ONEHOT2GPT_REF="" if branch in ("", "HEAD") else branch,  # a detached CI checkout: default
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    probe = (
        "\nimport os\nimport onehot2gpt, torch\nprint(onehot2gpt.__file__)\nprint(os.getcwd())\n"
        "from onehot2gpt.checkpoints import checkpoint_path\nprint(checkpoint_path('zero-shot-qa100'))"
    )
    (tmp_path / "content").mkdir()  # Colab's working directory
    cell = AS_ON_COLAB + cell_from_this_checkout()
    out = subprocess.run(
        [str(python), "-c", cell + probe],
        cwd=tmp_path / "content",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    library, cwd, checkpoint = out.stdout.strip().splitlines()[-3:]
    assert Path(library).is_relative_to(home / "lib") and cwd == str(home / "notebooks")
    assert Path(checkpoint).is_relative_to(home / "lib" / "onehot2gpt" / "assets" / "checkpoints")
    # The install outlives the kernel: a new process imports the clone, and torch was not reinstalled.
    again = subprocess.run(
        [str(python), "-c", "import onehot2gpt; print(onehot2gpt.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert Path(again.stdout.strip()).is_relative_to(home / "lib")
    assert not (Path(own_site) / "torch").exists()
    # Run twice (Colab's "Run all" again): the existing clone and install are reused.
    second = subprocess.run(
        [str(python), "-c", cell], cwd=tmp_path / "content", env=env, capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0, second.stderr[-2000:]


def test_markdown_cells_are_cut_at_their_headings():
    from onehot2gpt_teach.slides import split_at_headings

    cell = {
        "cell_type": "markdown",
        "id": "a",
        "metadata": {},
        "source": "Text before.\n\n## 4. A section\nIts text.\n```\n# not a heading\n```\n### A part\nmore",
    }
    parts = split_at_headings(cell)
    assert [p["source"] for p in parts] == [
        "Text before.",
        "## 4. A section\nIts text.\n```\n# not a heading\n```",
        "### A part\nmore",
    ]
    assert [p["id"] for p in parts] == ["a", "a-1", "a-2"] and cell["source"].startswith("Text before.")
    assert [course.slide_type(p) for p in parts] == ["-", "slide", "subslide"]
    assert split_at_headings({"cell_type": "markdown", "source": "## Only a heading\ntext"})[0]["source"].startswith(
        "##"
    )
    assert len(split_at_headings({"cell_type": "code", "source": "x = 1\n## 2"})) == 1


def test_a_notebook_becomes_a_deck_that_needs_no_network(tmp_path):
    """onehot2gpt-slides writes index.html, deck.js, deck.css and the shipped reveal.js and MathJax; a
    slide for each #/##/### heading, the set-up cell and the badge left out, nothing fetched from
    outside the folder. (tests/test_browser.py shows it in a browser.)"""
    from onehot2gpt_teach import slides

    path = ROOT / "notebooks" / "11_beyond.ipynb"
    index = slides.build_deck(path, tmp_path / "deck")
    html = index.read_text(encoding="utf-8")
    headings = [
        line
        for c in load(path)["cells"]
        if c["cell_type"] == "markdown"
        for line in source(c).splitlines()
        if re.match(r"#{1,3} ", line)
    ]
    assert len(headings) >= 5 and html.count("<section") >= len(headings)
    assert "XLNet" in html and "google.colab" not in html and "colab-badge" not in html
    cells = slides.deck_notebook(load(path))["cells"]
    assert source(cells[0]).startswith("# 11") and all(source(c).strip() for c in cells if c["cell_type"] == "markdown")
    assert slides.external_addresses(html) == []
    for relative in slides.vendor_files():
        assert (tmp_path / "deck" / "vendor" / relative).is_file()
    assert 'src="vendor/reveal.js-5.2.1/dist/reveal.js"' in html and (tmp_path / "deck" / "deck.js").is_file()
    # The same notebook through nbconvert's own slides template asks CDNs for its scripts.
    from nbconvert import SlidesExporter

    cdn, _ = SlidesExporter().from_notebook_node(nbformat_read(path))
    assert any("unpkg.com/reveal.js" in a for a in slides.external_addresses(cdn))


def nbformat_read(path):
    import nbformat

    return nbformat.read(path, as_version=4)


def test_external_addresses_are_the_ones_a_browser_would_fetch():
    from onehot2gpt_teach.slides import external_addresses

    html = (
        "<script src=\"https://cdn.example/r.js\"></script><img src='//img.example/a.png'>"
        '<link rel="stylesheet" href="http://css.example/t.css"><style>@import url("https://f.example/f.css");'
        'x { background: url(https://bg.example/b.png) }</style><a href="https://docs.example/">a link</a>'
        '<img src="data:image/png;base64,AAAA"><script src="vendor/reveal.js"></script>'
    )
    assert external_addresses(html) == [
        "//img.example/a.png",
        "http://css.example/t.css",
        "https://bg.example/b.png",
        "https://cdn.example/r.js",
        "https://f.example/f.css",
    ]


def test_the_deck_command_names_bad_input(tmp_path, capsys):
    from onehot2gpt_teach import slides

    with pytest.raises(SystemExit):
        slides.main([str(tmp_path / "missing.ipynb"), "--out", str(tmp_path / "deck")])
    assert "notebook=" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit):
        slides.main([str(ROOT / "notebooks" / "11_beyond.ipynb"), "--out", str(tmp_path / "file")])
    err = capsys.readouterr().err
    assert "out=" in err and "is a file" in err
    with pytest.raises(ValueError, match="no cells"):
        slides.deck_notebook({"cells": []})


def test_the_shipped_reveal_js_and_mathjax_are_the_published_files(tmp_path, monkeypatch):
    """Each shipped file has the sha256 the manifest records (taken from the npm packages), the
    versions the files themselves say, a licence; a changed file stops the deck."""
    import shutil

    from onehot2gpt_teach import slides

    libraries = slides.manifest()
    assert set(libraries) == {"reveal.js", "mathjax"}
    assert libraries["reveal.js"]["license"] == "MIT" and libraries["mathjax"]["license"] == "Apache-2.0"
    for entry in libraries.values():
        assert (slides.VENDOR_DIR / entry["license_file"]).is_file()
        assert "npm package" in entry["origin"] and len(entry["npm_tarball_sha256"]) == 64
    files = slides.vendor_files()  # checks every sha256
    assert len(files) == sum(len(e["files"]) for e in libraries.values())
    reveal = (slides.VENDOR_DIR / "reveal.js-5.2.1" / "dist" / "reveal.js").read_text(encoding="utf-8")
    assert reveal.startswith("/*!\n * reveal.js 5.2")
    mathjax = (slides.VENDOR_DIR / "mathjax-3.2.2" / "es5" / "tex-svg-full.js").read_text(encoding="utf-8")
    assert '"3.2.2"' in mathjax[:200_000]
    copy = tmp_path / "vendor"
    shutil.copytree(slides.VENDOR_DIR, copy)
    with open(copy / files[0], "ab") as f:
        f.write(b" ")
    monkeypatch.setattr(slides, "VENDOR_DIR", copy)
    with pytest.raises(RuntimeError, match="restore it from git"):
        slides.vendor_files()


def test_prepare_drops_the_saved_state_of_widgets_that_store_their_own_picture():
    """A course widget's saved state would make nbconvert draw it from a CDN script instead of its
    stored picture; prepare removes it and the models only it refers to, and keeps the others."""
    import nbformat
    from nbconvert import HTMLExporter
    from onehot2gpt_teach.course import WIDGET_STATE, WIDGET_VIEW, drop_saved_view_widget_state

    def output(model, html):
        return {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                WIDGET_VIEW: {"model_id": model, "version_major": 2, "version_minor": 0},
                "text/html": html,
                "text/plain": "x",
            },
        }

    state = {
        "course": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_child"]}},
        "child": {"model_name": "LabelModel", "state": {"layout": "IPY_MODEL_layout"}},
        "layout": {"model_name": "LayoutModel", "state": {}},
        "bar": {"model_name": "FloatProgressModel", "state": {}},
    }
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "id": "a",
                "metadata": {},
                "source": "w",
                "outputs": [
                    output("course", "<div class='onehot2gpt-snapshot'>picture</div>"),
                    output("bar", "<div>tqdm</div>"),
                ],
            }
        ],
        "metadata": {
            "widgets": {WIDGET_STATE: {"state": json.loads(json.dumps(state)), "version_major": 2, "version_minor": 0}}
        },
    }
    before, _ = HTMLExporter().from_notebook_node(nbformat.from_dict(json.loads(json.dumps(notebook))))
    assert "onehot2gpt-snapshot" not in before  # with its state saved, the picture is not shown
    assert sorted(drop_saved_view_widget_state(notebook)) == ["child", "course", "layout"]
    assert list(notebook["metadata"]["widgets"][WIDGET_STATE]["state"]) == ["bar"]
    after, _ = HTMLExporter().from_notebook_node(nbformat.from_dict(notebook))
    assert "onehot2gpt-snapshot" in after
    assert drop_saved_view_widget_state(notebook) == []
