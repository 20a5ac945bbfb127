# One-Hot to GPT: `make lab` opens the course, `make test` runs every test.
# Both create the virtual environment .venv first if it is missing or out of date.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test student bench clean-env

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

test: $(STAMP)
	$(PY) -m pytest

# Regenerate the student notebooks (solutions removed, outputs cleared) from the course notebooks.
student: $(STAMP)
	$(PY) -m onehot2gpt.exercises notebooks/[0-9][0-9]_*.ipynb --out notebooks/student

# Benchmarks print one JSON object as their last line; see README for the numbers.
bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean-env:
	rm -rf $(VENV)
