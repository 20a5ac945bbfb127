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


def test_colab_cell_does_nothing_outside_colab(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEHOT2GPT_")}
    out = subprocess.run(
        [sys.executable, "-c", course.COLAB_CELL + "\nprint(os.getcwd())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == str(tmp_path) and not out.stderr
    assert list(tmp_path.iterdir()) == []


def test_colab_cell_says_what_failed_and_what_to_do(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEHOT2GPT_")}
    env.update(
        ONEHOT2GPT_FORCE_COLAB="1",
        ONEHOT2GPT_REPO=(tmp_path / "no-such-repo").as_uri(),
        ONEHOT2GPT_HOME=str(tmp_path / "course"),
    )
    out = subprocess.run(
        [sys.executable, "-c", course.COLAB_CELL],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "the course set-up failed running:\n  git clone" in out.stderr
    assert "no-such-repo" in out.stderr and "Check the address" in out.stderr and "run this cell again" in out.stderr
    assert "Username" not in out.stderr  # git never asked for a password
    (tmp_path / "course").mkdir()  # a folder in the way that is not a clone
    out = subprocess.run(
        [sys.executable, "-c", course.COLAB_CELL], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0 and "is not a clone of the course: delete it" in out.stderr


def test_the_repository_and_release_are_written_in_one_place():
    """The badges and the set-up cell come from course.REPOSITORY and course.RELEASE: a fork edits
    those two lines and re-prepares the notebooks."""
    assert course.REPOSITORY_URL in course.COLAB_CELL and f'"{course.RELEASE}"' in course.COLAB_CELL
    assert course.badge_url("notebooks/01_onehot.ipynb").endswith(
        f"{course.REPOSITORY}/blob/{course.RELEASE}/notebooks/01_onehot.ipynb"
    )
    assert "GIT_TERMINAL_PROMPT" in course.COLAB_CELL


def test_colab_cell_installs_the_course_in_a_fresh_environment(tmp_path):
    """The Colab branch, forced, in a new virtual environment whose "preinstalled" packages (torch,
    transformers, …, as on Colab) come from this one; the repository is this checkout."""
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
        ONEHOT2GPT_FORCE_COLAB="1",
        ONEHOT2GPT_REPO=ROOT.as_uri(),
        ONEHOT2GPT_HOME=str(home),
        ONEHOT2GPT_REF="" if branch in ("", "HEAD") else branch,  # a detached CI checkout: default
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    probe = (
        "\nimport onehot2gpt, torch\nprint(onehot2gpt.__file__)\nprint(os.getcwd())\n"
        "from onehot2gpt.checkpoints import checkpoint_path\nprint(checkpoint_path('zero-shot-qa100'))"
    )
    (tmp_path / "content").mkdir()  # Colab's working directory
    out = subprocess.run(
        [str(python), "-c", course.COLAB_CELL + probe],
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
    # Run twice (Colab's "Run all" again): the existing clone is reused.
    second = subprocess.run(
        [str(python), "-c", course.COLAB_CELL],
        cwd=tmp_path / "content",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert second.returncode == 0, second.stderr[-2000:]


def test_a_notebook_becomes_a_slide_deck(tmp_path):
    """nbconvert's slides exporter makes one <section> per slide/sub-slide and leaves the set-up cell out."""
    import nbformat
    from nbconvert import SlidesExporter

    path = ROOT / "notebooks" / "11_beyond.ipynb"
    nb = load(path)
    html, _ = SlidesExporter().from_notebook_node(nbformat.read(path, as_version=4))
    starts = sum(c["metadata"]["slideshow"]["slide_type"] in ("slide", "subslide") for c in nb["cells"])
    assert starts >= 5 and html.count("<section") >= starts
    assert "ONEHOT2GPT_FORCE_COLAB" not in html  # the skipped cell is not shown
    assert "XLNet" in html


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
