# Set-up is part of every target: a fresh machine needs only Python 3.11, gcc and pip.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@

demo: setup
	OPENBLAS_NUM_THREADS=1 $(BIN)/morello-asp synth "Matmul(64x64x64, f32)" --run --bench

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
