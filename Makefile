# Verbs for a fresh machine: `make demo` and `make test` set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-all wheel-check lint clean train-demo train-demo-v2 releases-demo

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

# The long real runs (fault injection with killed workers, a full disk, corrupted checkpoints, MLflow down mid-search,
# hostile-input properties at 10x, every checkpoint scheme quantized then scored, two releases gated, the ready spaces
# planned, and the plan- and search-heavy CLI tests): 41 tests, about 35-40 min on two cores (the ready spaces' plans
# alone about 16 min). CI runs them too.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not gpu" --durations=10

# The built wheel installed into a fresh virtualenv outside the checkout and run from an empty directory (CI runs it).
wheel-check: $(STAMP)
	.ci/wheel_check

test-all: $(STAMP)
	$(BIN)/python -m pytest

# ruff (rules and the complexity limit in pyproject.toml), mypy --strict on recommender/ ([tool.mypy] names
# the package), and the layer order ([tool.importlinter] in pyproject.toml; docs/architecture.md).
lint: $(STAMP)
	$(BIN)/ruff check recommender tests evals benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

train-demo: $(STAMP)
	$(BIN)/python -m recommender.demo.train --output recommender/demo/model

train-demo-v2: $(STAMP)
	$(BIN)/python -m recommender.demo.finetune --output recommender/demo/model-v2

# Two releases of the demo model through the same search, then compared and gated (the gate's
# exit code is shown, not fatal: a regression is a result here).
releases-demo: $(STAMP)
	$(BIN)/recommender search
	$(BIN)/recommender search search_spaces/demo-v2.yaml
	$(BIN)/recommender compare --model demo-code-llama --releases v1 --releases v2 --plot mlruns/compare/demo-code-llama.png
	-$(BIN)/recommender gate --model demo-code-llama --candidate v2 --against v1

clean:
	rm -rf $(VENV) mlruns
