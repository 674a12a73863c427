# Set-up is part of every target: a fresh machine needs only Python 3.11, gcc and pip.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-ray setup-onnx demo lint lint-imports test test-all test-slow docs precompute cross-tools clean

setup: $(VENV)/.installed

# the docs extra (mkdocs-material) too, so that wherever the tests run the docs build
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench,docs]'
	touch $@

# setup-ray: the optional ray extra (precompute --ray; the Ray tests, which skip without it)
setup-ray: $(VENV)/.ray-installed

$(VENV)/.ray-installed: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test,bench,docs,ray]'
	touch $@

# setup-onnx: the optional onnx extra (onnx, onnxruntime: morello_asp.onnx, `morello-asp
# onnx`, tests/test_onnx.py, which skips without it)
setup-onnx: $(VENV)/.onnx-installed

$(VENV)/.onnx-installed: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test,bench,docs,onnx]'
	touch $@

# demo: numpy at the full ISA of this CPU (a hold-back some machines set for old OpenBLAS
# builds, OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, is lifted for this command alone)
demo: setup
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
		$(BIN)/morello-asp synth "Matmul(64x64x64, f32)" --run --bench

# lint: ruff (lint and format) and mypy, configured in pyproject.toml; about 20 s.
LINTED := morello_asp solver codegen tests benchmarks examples docs/gen_cli.py
lint: setup
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(MAKE) --no-print-directory lint-imports

# lint-imports: the layer contracts of pyproject.toml ([tool.importlinter]), checked by
# import-linter on the package as it is installed (solver/, codegen/ and encodings/ inside
# morello_asp/), laid out from a copy of the sources under build/.
IMPORT_TREE := build/import-lint
lint-imports: setup
	rm -rf $(IMPORT_TREE) && mkdir -p $(IMPORT_TREE)
	cp -r morello_asp $(IMPORT_TREE)/morello_asp
	cp -r solver codegen encodings $(IMPORT_TREE)/morello_asp/
	cd $(IMPORT_TREE) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --no-cache --config $(CURDIR)/pyproject.toml

# test: lint, then the default suite (pyproject.toml's addopts deselect tests marked slow;
# about 3 minutes on 2 cores). test-all: every test. test-slow: only the slow ones.
# The tests run in TEST_WORKERS processes (pytest-xdist; `auto`: one per core), a whole
# test file to a process so that a file's shared table and engine are built once;
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
test: lint
	$(PYTEST)

test-all: lint setup-ray
	$(PYTEST) -m "slow or not slow"

test-slow: lint setup-ray
	$(PYTEST) -m slow

# docs: the docs site (mkdocs.yml, pages under docs/) into site/, strictly: a broken link
# or anchor, a page missing from the nav or a warning fails. `$(BIN)/mkdocs serve` to browse.
# (NO_MKDOCS_2_WARNING: mkdocs-material's notice about its successor, printed on every build.)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# precompute: a memo table for the default rules and target, every Matmul f32 up to
# PRECOMPUTE_SIZE (default 64) per dimension, on all local cores (see README, Precompute);
# then `morello-asp synth SPEC --db $(PRECOMPUTE_DB)` starts warm. Resumes if interrupted.
PRECOMPUTE_DB ?= morello.db
PRECOMPUTE_SIZE ?= 64
precompute: setup
	$(BIN)/morello-asp precompute --db $(PRECOMPUTE_DB) --kinds matmul --dtypes f32 --max-size $(PRECOMPUTE_SIZE) --resume

# cross-tools: the aarch64 cross compiler and qemu the neon target's tests use (they skip,
# naming the tool, without them); Debian/Ubuntu, as root or with SUDO=sudo.
cross-tools:
	command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends \
	    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user; }

clean:
	rm -rf $(VENV) build *.egg-info
