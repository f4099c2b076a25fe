# Thin wrappers: CI (.ci/run) calls `make test`, exactly the README's test command.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: help venv cluster-binaries test test-unit check lint fmt typecheck imports demo clean

help:
	@echo "make test      - virtualenv + control-plane binaries + the whole test suite"
	@echo "make check     - ruff (lint + format), mypy --strict, import-linter, then the tests"
	@echo "make test-unit - unit tests only (no control plane)"
	@echo "make fmt       - format the code with ruff"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint]'
	@touch $(STAMP)

venv:
	@scripts/timed venv $(MAKE) --no-print-directory $(STAMP)

cluster-binaries: venv
	@scripts/timed build-control-plane $(BIN)/kube-reloader dev-cluster build

test: cluster-binaries
	@scripts/timed tests $(BIN)/pytest $(PYTEST_ARGS)

test-unit: venv
	@scripts/timed unit-tests $(BIN)/pytest tests/unit $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

fmt: venv
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

typecheck: venv
	$(BIN)/mypy

imports: venv
	$(BIN)/lint-imports

check: lint typecheck imports test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
