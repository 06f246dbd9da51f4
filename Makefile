# One gate for CI, pre-commit and people: `make test`. `make demo` runs the main job.
# Two installs into one venv: `install` (treadle and what running it needs, for `make
# demo`) and `setup` (that plus the `dev` extra: tests, linters, docs, for `make test`).
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PYTHON ?= python3
OUT ?= results/demo

.PHONY: install setup demo test lint typecheck unit docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(VENV)/.installed-run

$(VENV)/.installed-run: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-run

demo: install
	$(BIN)/treadle compare demo --policies all --seeds 3 --out $(OUT) --force
	@echo "treadle is in $(BIN): run '. $(BIN)/activate' to put it on your PATH"

lint: setup
	$(PY) -m treadle.rpc.protogen --check
	$(PY) -m treadle.event_codegen --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest tests/unit -q

test: lint typecheck
	$(BIN)/pytest

docs: setup  # the documentation site in site/ (strict: a warning fails the build)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

BENCH ?= sim
bench: setup  # make bench BENCH=sim|heartbeats|fidelity|decisions|carbyne|dp
	$(PY) -m tests.benchmarks $(BENCH)

clean:
	rm -rf $(VENV) results site .mypy_cache .pytest_cache .ruff_cache
