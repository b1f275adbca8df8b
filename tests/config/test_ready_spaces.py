"""The ready search spaces plan offline on the schemes engines serve (`plan --spec`: architecture only).

`slow`: CI runs them in its slow step, so the spaces' GPUs, schemes and price sets cannot drift from the catalog,
the price sets and the engines' support rows unnoticed. Each spec is planned with its simulated settings narrowed
to one batch cap, one token budget and the 16-bit KV cache (``_narrowed``): every GPU x precision x degree is
still planned and priced, but the whole spaces (the batch-cap ladders, FP8 KV, steady-state simulations) take
20-30 minutes of CPU each, which is the closing note's benchmark, not a test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _narrowed(space: str, into: Path, batch_size: int) -> Path:
    """The shipped spec with one batch cap, one token budget and the 16-bit KV cache (its use case by absolute path)."""
    shipped = REPO / "search_spaces" / space
    spec = yaml.safe_load(shipped.read_text())
    spec["use_case"] = str((shipped.parent / spec["use_case"]).resolve())
    spec["space"].update(batch_sizes=[batch_size], max_num_batched_tokens=[8192], kv_cache_dtypes=["auto"])
    narrowed = into / space
    narrowed.write_text(yaml.safe_dump(spec))
    return narrowed


def _plan(space: str, into: Path, batch_size: int) -> list[dict[str, object]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # no route to the hub: a shipped architecture, nothing fetched
    # The rows on every core, not the pytest-xdist worker's share (tests/conftest.py): these two plans are the slow
    # step's longest tests, and they end it while the other workers have nothing left to run.
    env.pop("RECOMMENDER_PLAN_PROCESSES", None)
    spec = _narrowed(space, into, batch_size)
    done = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "plan", "--spec", str(spec), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,  # chat-70b: 7 GPUs x 5 precisions x degrees
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)["rows"]
    return rows


def test_chat_70b_plans_fp4_on_blackwell_and_fp8_on_the_mi300x(tmp_path: Path) -> None:
    rows = {(r["hardware"], r["precision"]): r for r in _plan("chat-70b.yaml", tmp_path, 256)}
    assert rows[("b200", "fp4")]["method"] == "nvfp4" and rows[("b200", "fp4")]["usd_per_month"]
    assert rows[("mi300x", "fp8")]["usd_per_month"] and rows[("mi300x", "fp8")]["engine"]
    refused = str(rows[("h100-sxm", "fp4")]["note"])
    assert refused.startswith("refused: no engine in engines: [vllm, sglang] launches nvfp4 on h100-sxm")
    assert "\n" not in refused


def test_rag_8b_prices_every_gpu_of_its_space(tmp_path: Path) -> None:
    rows = _plan("rag-8b.yaml", tmp_path, 64)
    assert {r["hardware"] for r in rows} == {"l4", "l40s", "a40", "a100-80gb", "h100-sxm"}
    assert all(r["price_set"] == "runpod-secure-2026-08-27" for r in rows if r["usd_per_month"])
    assert not any(str(r.get("unpriced") or "") for r in rows)
