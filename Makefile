# One gate for CI, pre-commit and people: `make test`. `make demo` runs the main job.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PYTHON ?= python3
OUT ?= results/demo

.PHONY: setup demo test lint typecheck unit bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/treadle compare demo --policies all --out $(OUT)

lint: setup
	$(PY) -m treadle.rpc.protogen --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest tests/unit -q

test: lint typecheck
	$(BIN)/pytest

BENCH ?= sim
bench: setup  # make bench BENCH=sim|heartbeats|fidelity|decisions|carbyne|dp
	$(PY) -m tests.benchmarks $(BENCH)

clean:
	rm -rf $(VENV) results .mypy_cache .pytest_cache .ruff_cache
