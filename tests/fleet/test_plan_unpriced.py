"""A GPU the price set does not price: `plan` and `estimate` still give its fit, latency and capacity; the search
still never recommends it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.engines import PROFILES
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.estimate import EstimateRequest, estimate
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme
from recommender.quantize.precisions import PLANNED_PRECISIONS

#: The batch caps 64, 256 with the 16-bit KV cache: the plan as it was before the ladder.
CAPS_64_256 = PlanScope(
    batch_sizes=(
        64,
        256,
    ),
    kv_cache_dtypes=("auto",),
)

TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100)
_, LLAMA8 = load_architecture("llama-3.1-8b")
#: A dated price set without the L4 (RunPod Secure Cloud of 2026-09-25; the default union prices it), and what
#: it says of the L4.
NO_L4 = "runpod-secure-2026-09-25"
NO_L4_PRICE = f"l4 has no price in price set {NO_L4}"
PLAN_L4 = [
    sys.executable,
    "-m",
    "recommender.cli.main",
    "plan",
    "--model",
    "llama-3.1-8b",
    "--prompt-tokens",
    "512",
    "--output-tokens",
    "128",
    "--rps",
    "5",
    "--ttft-ms",
    "2000",
    "--tpot-ms",
    "100",
    "--hardware",
    "l4",
    "--batch-size",
    "64",
    "--price-set",
    NO_L4,
]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_plan_json_gives_an_unpriced_gpu_latency_and_capacity_but_no_dollars() -> None:
    rows = json.loads(_run([*PLAN_L4, "--json"]).stdout)
    assert {r["hardware"] for r in rows} == {"l4"} and len(rows) == len(PLANNED_PRECISIONS)
    fp4 = next(r for r in rows if r["precision"] == "fp4")  # the L4 (8.9) has no FP4 tensor cores: refused, one line
    assert fp4["note"].startswith("refused: no engine in engines: [vllm, sglang] launches nvfp4 on l4")
    fp8 = next(r for r in rows if r["precision"] == "fp8")
    assert math.isfinite(fp8["ttft_p99_ms"]) and math.isfinite(fp8["tpot_p99_ms"])
    assert fp8["max_rps_per_replica"] > 0 and fp8["replicas"] >= 1 and fp8["tensor_parallel"] >= 1
    assert fp8["usd_per_1m_tokens"] is None and fp8["usd_per_month"] is None and fp8["price_set"] == ""
    # Each served row carries its engine's command: a checkpoint scheme serves the directory quantize writes.
    assert "Llama-3.1-8B-Instruct-fp8-dynamic" in fp8["launch"]
    assert fp8["launch"].startswith({"vllm": "vllm serve", "sglang": "python -m sglang"}[fp8["engine"]])
    assert fp4["launch"] == ""
    assert all(r["unpriced"].startswith(NO_L4_PRICE) for r in rows if r is not fp4)  # a refused row is not priced


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_plan_table_says_why_the_dollars_are_empty_once() -> None:
    out = _run(PLAN_L4).stdout
    assert "$" not in out.split("no $ figures")[0].split("$/month")[1]  # no dollar figure in any row
    assert out.count("no $ figures: l4 has no price") == 1 and "hardware_catalog" in out


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_an_unpriced_row_is_the_configuration_a_price_would_pick(tmp_path: Path) -> None:
    """Every dollar figure of one GPU is its hourly price times a price-free count: the choice needs no price."""
    contract = tmp_path / "contract.yaml"
    contract.write_text("accelerators:\n  l4: {price_per_hour_usd: 0.80, price_source: our contract}\n")
    for precision in ("bf16", "fp8"):
        unpriced = plan_one(
            LLAMA8,
            load_catalog(price_set=NO_L4).get("l4"),
            precision,
            traffic=TRAFFIC,
            sla=SLA,
            scope=CAPS_64_256,
            catalog=load_catalog(price_set=NO_L4),
        )
        contracted = load_catalog(contract, price_set=NO_L4)
        priced = plan_one(
            LLAMA8, contracted.get("l4"), precision, traffic=TRAFFIC, sla=SLA, scope=CAPS_64_256, catalog=contracted
        )
        assert priced.usd_per_month is not None and priced.unpriced == ""
        assert unpriced.usd_per_month is None and unpriced.unpriced.startswith(NO_L4_PRICE)
        assert (unpriced.tensor_parallel, unpriced.batch_size, unpriced.replicas) == (
            priced.tensor_parallel,
            priced.batch_size,
            priced.replicas,
        )
        assert unpriced.ttft_p99_ms == priced.ttft_p99_ms and unpriced.max_rps_per_replica == priced.max_rps_per_replica


def test_the_search_still_prunes_an_unpriced_gpu_and_plan_evaluates_it() -> None:
    candidate = Candidate("fp8", "fp8-dynamic", "l4", 64)
    searched = PerformanceEvaluator(load_catalog(price_set=NO_L4), LLAMA8, TRAFFIC, SLA).evaluate(candidate)
    assert searched.status == "pruned" and searched.cost is None and NO_L4_PRICE in searched.broken[0]
    no_l4 = load_catalog(price_set=NO_L4)
    planned = PerformanceEvaluator(no_l4, LLAMA8, TRAFFIC, SLA, require_price=False).evaluate(candidate)
    assert planned.status == "evaluated" and planned.cost is None and not planned.feasible
    assert planned.serving is not None and planned.serving.requests_per_s > 0


def test_estimate_gives_an_unpriced_gpu_its_latencies() -> None:
    accel = load_catalog(price_set=NO_L4).get("l4")
    assert accel.price_per_hour_usd is None
    request = EstimateRequest(
        model="llama-3.1-8b",
        shape=LLAMA8,
        method=get_scheme("fp8-dynamic"),
        accel=accel,
        profile=PROFILES["vllm"],
        tensor_parallel=1,
        concurrency=8,
        prompt_tokens=512,
        output_tokens=128,
    )
    got = estimate(request, CalibratedModel(load_fit()))
    assert got.hardware == "l4" and 0 < got.ttft_ms["p99"].value < math.inf and 0 < got.tpot_ms["p99"].value < 1000
    assert got.output_tokens_per_s.value > 0


def test_estimate_cli_on_an_unpriced_gpu() -> None:
    out = _run(
        [
            sys.executable,
            "-m",
            "recommender.cli.main",
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "l4",
            "--concurrency",
            "4",
            "--prompt-tokens",
            "512",
            "--output-tokens",
            "128",
            "--precision",
            "fp8",
            "--json",
        ]
    ).stdout
    data = json.loads(out)
    assert data["hardware"] == "l4" and data["ttft_ms"]["p99"]["value"] > 0 and data["tpot_ms"]["p99"]["value"] > 0
