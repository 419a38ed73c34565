# Two set-up commands do everything on a fresh machine: `make build` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CHECKPOINT ?= BAAI/bge-m3
QUANT ?= int8

.PHONY: build test test-quick demo lint clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python 3.11) on PATH"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools

# `pip install edge-m3` alone is the device side (embed, bench, check); the builder is the
# [build] extra, the tests and references the [dev] extra (which includes [build]).
$(VENV)/.build: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[build]"
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $(VENV)/.build $@

## The main job: BGE-M3 int8 bundle into dist/ and the platform kits.
build: $(VENV)/.build
	$(BIN)/edge-m3 build --checkpoint $(CHECKPOINT) --quant $(QUANT)

## The test suite (installs the dev extra: torch CPU, transformers, FlagEmbedding).
test: $(VENV)/.dev
	$(BIN)/python -m pytest -q

## The fast loop (under a minute): everything but the tests that build models, bundles or references.
test-quick: $(VENV)/.dev
	$(BIN)/python -m pytest -q -m "not models and not slow"

## The main job offline on a real trained model shipped on PyPI (multilingual-e5-small).
demo: $(VENV)/.dev
	$(BIN)/python tools/demo.py

lint: $(VENV)/.dev
	$(BIN)/ruff check edge_m3 tests tools
	$(BIN)/python tools/gen_kit_contract.py --check

clean:
	rm -rf build dist .pytest_cache
