"""The ready search spaces plan offline on the schemes engines serve (`plan --spec`: architecture only).

`slow` (chat-70b 9 min, rag-8b 7 min on two busy cores, nearly all of it the continuous-batching simulation at
the point and upper step costs): CI runs them in its slow step, so the spaces cannot drift
from the catalog, the price sets and the engines' support rows unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _plan(space: str) -> list[dict[str, object]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # no route to the hub: a shipped architecture, nothing fetched
    done = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "plan", "--spec", str(REPO / "search_spaces" / space), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,  # chat-70b: 7 GPUs x 5 precisions x degrees x ladders
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)["rows"]
    return rows


def test_chat_70b_plans_fp4_on_blackwell_and_fp8_on_the_mi300x() -> None:
    rows = {(r["hardware"], r["precision"]): r for r in _plan("chat-70b.yaml")}
    assert rows[("b200", "fp4")]["method"] == "nvfp4" and rows[("b200", "fp4")]["usd_per_month"]
    assert rows[("mi300x", "fp8")]["usd_per_month"] and rows[("mi300x", "fp8")]["engine"]
    refused = str(rows[("h100-sxm", "fp4")]["note"])
    assert refused.startswith("refused: no engine in engines: [vllm, sglang] launches nvfp4 on h100-sxm")
    assert "\n" not in refused


def test_rag_8b_prices_every_gpu_of_its_space() -> None:
    rows = _plan("rag-8b.yaml")
    assert {r["hardware"] for r in rows} == {"l4", "l40s", "a40", "a100-80gb", "h100-sxm"}
    assert all(r["price_set"] == "runpod-secure-2026-08-27" for r in rows if r["usd_per_month"])
    assert not any(str(r.get("unpriced") or "") for r in rows)
