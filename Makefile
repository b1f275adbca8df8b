# Verbs for a fresh machine: `make demo` and `make test` set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all lint clean train-demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/recommender search

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not gpu"

test-all: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check recommender tests evals benchmarks

train-demo: $(STAMP)
	$(BIN)/python -m recommender.demo.train --output recommender/demo/model

clean:
	rm -rf $(VENV) mlruns
