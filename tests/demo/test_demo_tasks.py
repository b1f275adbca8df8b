"""Tests for the offline demo-code lm-eval tasks (recommender/demo/tasks/demo_code).

Why: these tasks are what every quantized variant of the demo model is scored on, so
they must be discoverable by lm-eval's TaskManager, their data must be byte-for-byte
reproducible from the held-out stdlib files, and a real `simple_evaluate` must yield
finite metrics, all without network access.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from recommender.demo import eval_data
from recommender.demo.corpus import iter_source_files

REPO = Path(__file__).resolve().parents[2]
TASKS_DIR = REPO / "recommender" / "demo" / "tasks"
DEMO_MODEL = REPO / "recommender" / "demo" / "model"
TASK_NAMES = [eval_data.PPL_TASK, eval_data.NEXT_LINE_TASK]


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the tool's cache at a temporary directory and forbid network access."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RECOMMENDER_CACHE_DIR", str(cache))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.fixture(scope="module")
def task_manager() -> Any:
    """One TaskManager (built-in tasks + ours) for the module: indexing takes seconds."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(TASKS_DIR))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_tasks_are_found_by_task_manager(task_manager: Any) -> None:
    for name in TASK_NAMES:
        assert name in task_manager.all_tasks


def test_data_generation_is_deterministic_and_well_formed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[Path, Path]] = []
    for sub in ("a", "b"):
        monkeypatch.setenv("RECOMMENDER_CACHE_DIR", str(tmp_path / sub))
        ppl, nxt = eval_data.build_ppl_data(), eval_data.build_next_line_data()
        assert ppl.is_relative_to(tmp_path / sub / "eval_data" / eval_data.PPL_TASK)
        assert nxt.is_relative_to(tmp_path / sub / "eval_data" / eval_data.NEXT_LINE_TASK)
        built.append((ppl, nxt))
    (ppl_a, nxt_a), (ppl_b, nxt_b) = built
    assert ppl_a.name == ppl_b.name and nxt_a.name == nxt_b.name
    assert ppl_a.read_bytes() == ppl_b.read_bytes()
    assert nxt_a.read_bytes() == nxt_b.read_bytes()

    files = {f.relpath: f.text for f in iter_source_files("eval")}

    ppl_docs = _read_jsonl(ppl_a)
    assert ppl_docs
    assert all(d["text"].strip() and d["source"] in files for d in ppl_docs)
    # Chunks are line-aligned and, concatenated per file, give the file back.
    rebuilt: dict[str, str] = {}
    for d in ppl_docs:
        rebuilt[d["source"]] = rebuilt.get(d["source"], "") + d["text"]
    assert all(rebuilt[src] == files[src] for src in rebuilt)

    docs = _read_jsonl(nxt_a)
    assert 100 <= len(docs) <= eval_data.NEXT_LINE_NUM_DOCS
    for d in docs:
        choices, label = d["choices"], d["label"]
        assert len(choices) == 4 and len(set(choices)) == 4
        assert 0 <= label < 4
        lines = files[d["source"]].split("\n")
        true_line = lines[d["line"] - 1].rstrip()
        assert choices[label] == true_line
        assert all(len(c.strip()) >= eval_data.NEXT_LINE_MIN_CHARS for c in choices)
        assert d["context"].endswith("\n") and d["context"].strip()
        preceding = "\n".join(ln.rstrip() for ln in lines[: d["line"] - 1]) + "\n"
        assert preceding.endswith(d["context"])
    # The answer position is spread over the four slots, not stuck in one.
    assert len({d["label"] for d in docs}) == 4


def _evaluate(model_dir: Path, limit: int, task_manager: Any) -> dict[str, Any]:
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=8, dtype="float32")
    return lm_eval.simple_evaluate(
        model=lm,
        tasks=TASK_NAMES,
        task_manager=task_manager,
        limit=limit,
        bootstrap_iters=0,
        log_samples=False,
    )


@pytest.mark.skipif(
    not (DEMO_MODEL / "config.json").is_file(),
    reason=f"demo model not present at {DEMO_MODEL} (it is trained separately and committed later)",
)
def test_simple_evaluate_on_demo_model(offline_cache: Path, task_manager: Any) -> None:
    results = _evaluate(DEMO_MODEL, limit=8, task_manager=task_manager)["results"]
    ppl = results[eval_data.PPL_TASK]
    for key in ("word_perplexity,none", "byte_perplexity,none", "bits_per_byte,none"):
        assert math.isfinite(ppl[key]) and ppl[key] > 0, key
    nxt = results[eval_data.NEXT_LINE_TASK]
    for key in ("acc,none", "acc_norm,none"):
        assert 0.0 <= nxt[key] <= 1.0, key
