# Set-up is part of every target: a fresh machine needs only Python 3.11, gcc and pip.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo lint test test-all test-slow cross-tools clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@

demo: setup
	OPENBLAS_NUM_THREADS=1 $(BIN)/morello-asp synth "Matmul(64x64x64, f32)" --run --bench

# lint: ruff (lint and format) and mypy, configured in pyproject.toml; about 20 s.
LINTED := morello_asp solver codegen tests benchmarks examples
lint: setup
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

# test: lint, then the default suite (pyproject.toml's addopts deselect tests marked slow;
# under 5 minutes on 2 cores). test-all: every test. test-slow: only the slow ones.
test: lint
	$(BIN)/python -m pytest -q

test-all: lint
	$(BIN)/python -m pytest -q -m "slow or not slow"

test-slow: lint
	$(BIN)/python -m pytest -q -m slow

# cross-tools: the aarch64 cross compiler and qemu the neon target's tests use (they skip,
# naming the tool, without them); Debian/Ubuntu, as root or with SUDO=sudo.
cross-tools:
	command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends \
	    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user; }

clean:
	rm -rf $(VENV) build *.egg-info
