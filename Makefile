# Two set-up commands do everything on a fresh machine: `make build` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CHECKPOINT ?= BAAI/bge-m3
QUANT ?= int8

# The lock: the exact packages CI passed with, one file per install set, for CPython 3.11 on
# Linux x86-64 (the machines CI and the developers run on). Every target below installs from it;
# `make lock` refreshes it on purpose (see README, "The lock").
LOCK := requirements
UV_VERSION := 0.13.9
# torch's CPU build is a wheel on local disk (pip's find-links here; PyPI's torch is the CUDA
# build, several GB): the lock pins torch==X+cpu, so a machine without that wheel fails at once.
WHEELS ?= /opt/wheels
PIP_INSTALL = $(BIN)/pip install -q $(if $(wildcard $(WHEELS)),--find-links $(WHEELS))
LOCK_OPTS := --find-links $(WHEELS) --quiet --custom-compile-command "make lock"
LOCK_TARGET := --python-version 3.11 --python-platform x86_64-manylinux_2_28 $(LOCK_OPTS)

# The Debian packages some tests need beyond the venv, the one list of them: the Kotlin kit's
# tests (tests/test_kits.py, test_kit_tokenizer.py, test_kit_retrieval.py: JNA; their Kotlin 2
# compiler is a wheel of the dev lock, tools/kit/kotlin2.py, not Debian's 2019 kotlinc), the
# kits' writable index (tests/test_kit_writable.py: the xerial SQLite JDBC driver for the desktop
# JVM, libsqlite3-dev for the Swift package's CSQLite module on Linux), the conformance suite's JVM
# runner (tests/test_conformance.py: junit4, JUnit 4 and its hamcrest) and the
# emulated Raspberry Pi (tests/test_arm64.py: debootstrap, qemu-aarch64-static). `make test`
# installs the missing ones as root (apt-get) and otherwise stops with one line naming them;
# `make test ALLOW_SKIPS=1` runs without them, their tests skipped. .ci/run runs `make test`.
DEBIAN_PACKAGES := libjna-java libxerial-sqlite-jdbc-java junit4 debootstrap qemu-user-static libsqlite3-dev

.PHONY: build test test-quick demo demo-minilm lint lock clean debian-packages

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python 3.11) on PATH"; exit 2; }
	$(PY) -m venv $(VENV)
	$(PIP_INSTALL) -r $(LOCK)/bootstrap.txt

# `pip install edge-m3` alone is the device side (embed, bench, check); the builder is the
# [build] extra, the tests and references the [dev] extra (which includes [build]).
# Each installs its lock file, then edge-m3 itself without resolving anything again.
$(VENV)/.build: $(LOCK)/build.txt pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r $(LOCK)/build.txt
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.dev: $(LOCK)/dev.txt pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r $(LOCK)/dev.txt
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	$(BIN)/pip check
	touch $(VENV)/.build $@

## The main job: BGE-M3 int8 bundle into dist/ and the platform kits.
build: $(VENV)/.build
	$(BIN)/edge-m3 build --checkpoint $(CHECKPOINT) --quant $(QUANT)

## The test suite (installs the dev extra: torch CPU, transformers, FlagEmbedding, and DEBIAN_PACKAGES).
test: $(VENV)/.dev debian-packages
	$(BIN)/python -m pytest -q --durations=15

debian-packages:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q ' installed$$' || echo $$p; done); \
	missing=$$(echo $$missing); \
	if [ -z "$$missing" ] || [ -n "$(ALLOW_SKIPS)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian packages the kit and aarch64 tests need: $$missing"; \
	  apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	else \
	  echo "make test needs the Debian packages $$missing: run 'sudo apt-get install -y $$missing', or 'make test ALLOW_SKIPS=1' to skip their tests" >&2; \
	  exit 2; \
	fi

## The fast loop (under a minute): everything but the tests that build models, bundles or references.
test-quick: $(VENV)/.dev
	$(BIN)/python -m pytest -q -m "not models and not slow"

## The main job offline on a real trained model shipped on PyPI (multilingual-e5-small).
demo: $(VENV)/.dev
	$(BIN)/python -m tools.run.demo

## The same job on the BERT family: the real all-MiniLM-L6-v2 (PyPI), against sentence-transformers.
demo-minilm: $(VENV)/.dev
	$(BIN)/python -m tools.run.demo --model minilm

## Ruff, then every generator's --check (tools.codegen.GENERATORS; tests/test_generated.py keeps this
## list equal to it): a generated file that differs from what its generator writes now fails, named.
lint: $(VENV)/.dev
	$(BIN)/ruff check edge_m3 tests tools
	$(BIN)/python -m tools.codegen.gen_kit_contract --check
	$(BIN)/python -m tools.codegen.gen_index_spec --check
	$(BIN)/python -m tools.codegen.gen_tokenizer_tables --check
	$(BIN)/python -m tools.codegen.gen_wordpiece_tables --check
	$(BIN)/python -m tools.codegen.gen_bpe_tables --check
	$(BIN)/python -m tools.codegen.gen_cli_doc --check
	$(BIN)/python -m tools.codegen.make_corpus --check

## Refresh the lock: newest versions the ranges in pyproject.toml allow. Run it on purpose
## (a new dependency, a wanted upgrade), then `make test` and commit requirements/ with the change.
## dev is resolved first; every other set is held to dev's versions, so they never disagree.
## `make lock LOCK_UPGRADE=` adds a new dependency and keeps every existing pin where it is.
LOCK_UPGRADE ?= --upgrade
lock: | $(BIN)/python
	$(BIN)/pip install -q "uv==$(UV_VERSION)"
	$(BIN)/uv pip compile pyproject.toml --extra dev $(LOCK_UPGRADE) -c $(LOCK)/constraints.in $(LOCK_TARGET) -o $(LOCK)/dev.txt
	$(BIN)/uv pip compile pyproject.toml --extra build -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/build.txt
	$(BIN)/uv pip compile pyproject.toml --extra onnx -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/onnx.txt
	$(BIN)/uv pip compile pyproject.toml --extra tflite-runtime -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/tflite-runtime.txt
	$(BIN)/uv pip compile pyproject.toml --extra parquet -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/parquet.txt
	$(BIN)/uv pip compile pyproject.toml --extra ray -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/ray.txt
	$(BIN)/uv pip compile pyproject.toml -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/runtime.txt
	$(BIN)/uv pip compile $(LOCK)/bootstrap.in -c $(LOCK)/dev.txt $(LOCK_TARGET) -o $(LOCK)/bootstrap.txt
	# The emulated Raspberry Pi's runtime install (tools/run/arm64_rig.py, tests/test_arm64.py):
	# bookworm's Python 3.11 (with tflite-runtime) and trixie's 3.13, for their glibc (2.36, 2.41).
	$(BIN)/uv pip compile pyproject.toml --extra tflite-runtime -c $(LOCK)/dev.txt --python-version 3.11 \
		--python-platform aarch64-manylinux_2_36 $(LOCK_OPTS) -o $(LOCK)/aarch64-py311.txt
	$(BIN)/uv pip compile pyproject.toml -c $(LOCK)/constraints.in --python-version 3.13 \
		--python-platform aarch64-manylinux_2_40 $(LOCK_OPTS) -o $(LOCK)/aarch64-py313.txt

clean:
	rm -rf build dist .pytest_cache
