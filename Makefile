# One-Hot to GPT: `make lab` opens the course, `make test` runs every test.
# Both create the virtual environment .venv first if it is missing or out of date.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-colab student slides bench lock clean-env

# The pinned set: requirements-lock.txt's two halves by two pip processes at once (every package
# pinned, nothing to resolve), then requirements.txt and pip check (tools/lock.py).
$(STAMP): requirements.txt requirements-lock.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) tools/lock.py install
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The venv is installed without byte-compiling (tools/lock.py): Python compiles what is imported on
# first use and keeps it, also where the shell sets PYTHONDONTWRITEBYTECODE.
# Jupyter refuses to start as root unless told to; containers and lab machines often run as root.
# LAB_ARGS passes options to JupyterLab, e.g. make lab LAB_ARGS="--port 8890 --no-browser".
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS   ?=
lab: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/jupyter lab $(ALLOW_ROOT) $(LAB_ARGS) notebooks/

# Three pytest-xdist workers, each process on one torch thread (conftest.py sets it, and groups the
# tests so that each test module stays on one worker): the browser test in two halves, one per
# worker (every notebook's one run: its student version and the course's stored outputs), then the
# library tests. The third worker uses the time the others spend waiting (kernels starting, the
# browser, the grader's timeouts): on 2 cores the suite took 13 min 57 s, against 16 min 43 s with
# two workers (docs/testing.md).
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n 3 --dist loadgroup

# The course on Google Colab's package versions (requirements-colab.txt; see the README's Colab
# section): a separate environment, the install check, the library and widget tests, every
# notebook top to bottom (nbval-lax: errors, not exact outputs), and the widget notebooks in a real
# browser on the classic Notebook 6.5 front end with ipywidgets 7.7.1. About half an hour on 2 cores.
COLAB_PYTHON ?= python3.11
COLAB_VENV   ?= .venv-colab
COLAB_PY     := $(COLAB_VENV)/bin/python
COLAB_TOOLS  := pytest==9.0.3 nbval==0.11.0 nbclient==0.10.4 nbformat==5.11.1 pyyaml==6.0.3 playwright==1.65.2

test-colab:
	test -x $(COLAB_PY) || $(COLAB_PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_PY) -m pip install --quiet -r requirements-colab.txt $(COLAB_TOOLS)
	$(COLAB_PY) tests/colab_check.py
	$(COLAB_PY) -m pip install --quiet -e ".[hf]"
	$(COLAB_PY) -m pip install --quiet --no-deps -r requirements-colab.txt
	$(COLAB_PY) -m pytest -o addopts="-p no:cacheprovider" tests --ignore=tests/test_browser.py \
		--ignore=tests/test_course.py --ignore=tests/test_notebooks.py --ignore=tests/test_environment.py \
		--ignore=tests/test_habits.py --ignore=tests/test_install.py
	$(COLAB_PY) -m pytest -o addopts="-p no:cacheprovider" --nbval-lax --nbval-current-env \
		--nbval-cell-timeout 600 notebooks/[0-9][0-9]_*.ipynb
	$(COLAB_PY) -m pytest -o addopts="-p no:cacheprovider" tests/colab_classic_notebook.py

# Regenerate the student notebooks (solutions removed, outputs cleared) from the course notebooks.
student: $(STAMP)
	$(PY) -m onehot2gpt_teach.student notebooks/[0-9][0-9]_*.ipynb --out notebooks/student

# A lecture deck of every notebook (reveal.js, 1280 x 720, no network needed; docs/teaching.md):
# open build/decks/NN_topic/index.html.
slides: $(STAMP)
	for nb in notebooks/[0-9][0-9]_*.ipynb; do \
		$(PY) -m onehot2gpt_teach.slides $$nb --out build/decks/$$(basename $$nb .ipynb) || exit 1; done

# Every script in bench/ is a living benchmark: it runs with no arguments and prints one JSON object
# as its last line, which this keeps in bench/results/<script>.json (with its command, commit and
# date: tools/tables.py --stamp); `python tools/tables.py` then
# rewrites the tables in README.md and docs/ from those files (docs/benchmarks.md). A script that
# fails stops the run. The whole run is long (docs/benchmarks.md); `python bench/<script>.py` runs one.
# Like `make test`, it lets Python keep the bytecode it compiles (see above): where the shell sets
# PYTHONDONTWRITEBYTECODE, every kernel would otherwise compile torch and transformers again.
BENCH_RESULTS ?= bench/results
bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench: $(STAMP)
	mkdir -p $(BENCH_RESULTS)
	for b in bench/*.py; do n=$$(basename $$b .py); log=$$(mktemp); echo "== $$b"; \
		env -u PYTHONDONTWRITEBYTECODE $(PY) $$b | tee $$log || exit 1; \
		tail -n 1 $$log | $(PY) tools/tables.py --stamp $$b > $$log.json || exit 1; \
		mv $$log.json $(BENCH_RESULTS)/$$n.json; rm -f $$log; done

# Rewrite requirements-lock.txt from .venv after a change to requirements.txt (install that first).
lock:
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) tools/lock.py write

clean-env:
	rm -rf $(VENV)
