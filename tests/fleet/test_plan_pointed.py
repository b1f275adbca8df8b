"""`plan` pointed at one configuration, at one price set's GPUs, and batch caps up to the engines' maxima."""

from __future__ import annotations

import json
import subprocess
import sys

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.device import DeviceInfo
from recommender.engines.batch_limits import batch_ladder, fp8_kv_refusal, max_running
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog

PLAN = [sys.executable, "-m", "recommender.cli.main", "plan"]
TRAFFIC = Traffic(prompt_tokens=512, output_tokens=256, requests_per_second=10)
SLA = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50)


def _rows(args: list[str]) -> list[dict[str, object]]:
    result = subprocess.run([*PLAN, *args, "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


def test_a_pointed_plan_answers_for_exactly_that_configuration() -> None:
    rows = _rows(
        [
            "--model",
            "llama-3.1-70b",
            "--engine",
            "trtllm",
            "--precision",
            "fp8",
            "--tensor-parallel",
            "2",
            "--kv-cache-dtype",
            "fp8",
            "--hardware",
            "h100-sxm",
        ]
    )
    assert len(rows) == 1
    row = rows[0]
    assert (row["hardware"], row["precision"], row["engine"], row["tensor_parallel"], row["kv_cache_dtype"]) == (
        "h100-sxm",
        "fp8",
        "trtllm",
        2,
        "fp8",
    )
    assert "FP8 KV cache: a prior" in str(row["quality"]) and row["quality_verdict"] == "unverified"
    assert str(row["launch"]).startswith("trtllm-serve") and "--tp_size 2" in str(row["launch"])


def test_a_price_set_without_hardware_plans_the_gpus_it_prices() -> None:
    rows = _rows(["--model", "llama-3.1-8b", "--price-set", "aws-on-demand-us-east-1-2026-06", "--precision", "int8"])
    assert {r["hardware"] for r in rows} == {"a10g", "t4"}
    assert all(r["price_set"] == "aws-on-demand-us-east-1-2026-06" for r in rows if r["usd_per_month"] is not None)


def test_engine_maxima_and_the_ladder_reach_past_256() -> None:
    assert max_running("vllm", 8192) == 8192 and max_running("sglang", 8192) == 4096
    assert max_running("trtllm", 8192) == 2048 and max_running("trtllm", 1024) == 1024
    assert batch_ladder(("vllm", "sglang"), 8192) == [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    assert batch_ladder(("trtllm",), 8192)[-1] == 2048


def test_fp8_kv_only_where_the_gpu_converts_fp8_natively() -> None:
    assert fp8_kv_refusal("vllm", DeviceInfo("cuda", (9, 0))) is None
    assert fp8_kv_refusal("trtllm", DeviceInfo("cuda", (8, 9))) is None
    assert "8.0" in str(fp8_kv_refusal("vllm", DeviceInfo("cuda", (8, 0))))
    assert fp8_kv_refusal("vllm", DeviceInfo("rocm")) is None and fp8_kv_refusal("trtllm", DeviceInfo("rocm"))


def test_a_cap_the_kv_cache_cannot_hold_is_pruned_with_the_reason() -> None:
    catalog = load_catalog()
    _, llama70 = load_architecture("llama-3.1-70b")
    evaluator = PerformanceEvaluator(catalog, llama70, TRAFFIC, SLA, require_price=False)
    over = evaluator.evaluate(Candidate("fp8", "fp8-dynamic", "h100-sxm", 4096, 2))
    assert over.status == "pruned" and "batch cap 4096 never fills: the KV cache holds" in over.broken[0]
    fp8_on_a100 = evaluator.evaluate(Candidate("int8", "int8-w8a8", "a100-80gb", 64, 2, kv_cache_dtype="fp8"))
    assert fp8_on_a100.status == "pruned" and "native FP8 conversion" in fp8_on_a100.broken[0]


def test_the_plan_climbs_past_256_and_fp8_kv_holds_more() -> None:
    """70B FP8 on two H100s: the 16-bit KV cache holds ~450 prompts of 512 tokens, the FP8 one ~900."""
    catalog = load_catalog()
    _, llama70 = load_architecture("llama-3.1-70b")
    h100 = catalog.get("h100-sxm")
    busy = Traffic(prompt_tokens=512, output_tokens=256, requests_per_second=40)
    rows = {
        kv: plan_one(
            llama70,
            h100,
            "fp8",
            traffic=busy,
            sla=SLA,
            catalog=catalog,
            engines=("trtllm",),
            scope=PlanScope(tensor_parallel=(2,), kv_cache_dtypes=(kv,)),
        )
        for kv in ("auto", "fp8")
    }
    fp8_pruned, auto_pruned = rows["fp8"].batch_caps_pruned, rows["auto"].batch_caps_pruned
    assert "batch caps 1024, 2048 pruned" in fp8_pruned and "prompts of 512 tokens" in fp8_pruned
    assert auto_pruned.startswith("batch caps 512, 1024, 2048 pruned") and rows["fp8"].note == ""
    assert rows["fp8"].max_rps_per_replica is not None and rows["auto"].max_rps_per_replica is not None
    assert rows["fp8"].max_rps_per_replica > rows["auto"].max_rps_per_replica
