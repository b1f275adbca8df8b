"""Shared fixtures: the committed demo model, the demo suite, and offline settings for every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO_MODEL = REPO / "recommender" / "demo" / "model"
DEMO_SPEC = REPO / "search_spaces" / "demo.yaml"
TASKS_DIR = REPO / "evals" / "tasks"

# Nothing in the tests may reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Task data and quality results go to a per-session cache, never the user's."""
    os.environ["RECOMMENDER_CACHE_DIR"] = str(tmp_path_factory.mktemp("recommender-cache"))


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    assert (DEMO_MODEL / "model.safetensors").is_file(), "the demo model is committed; run `make train-demo`"
    return DEMO_MODEL


def write_suite(path: Path, *, limit: int = 8, max_mean_kl: float = 0.02) -> Path:
    """A small copy of the demo suite for fast tests (same tasks, fewer documents)."""
    path.write_text(
        f"""
name: demo-python-code-small
include_path: {TASKS_DIR}
limit: {limit}
batch_size: 8
tasks:
  - task: demo_code_ppl
    metric: bits_per_byte
    higher_is_better: false
    threshold: {{max_relative_drop: 0.02}}
    limit: 4
  - task: demo_code_next_line
    metric: acc
    higher_is_better: true
    threshold: {{max_absolute_drop: 0.03}}
fidelity:
  max_mean_kl: {max_mean_kl}
  text_task: demo_code_ppl
  text_windows: 4
  window_tokens: 128
""",
        encoding="utf-8",
    )
    return path
