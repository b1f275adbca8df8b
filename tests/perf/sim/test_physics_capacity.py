"""The physics ceiling on one replica's throughput (`perf.physics_capacity`) and `plan`'s alarm beside it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.physics_capacity import ALARM_FACTOR, physics_capacity
from recommender.quantize import get_scheme

#: The batch caps 256 with the 16-bit KV cache: the plan as it was before the ladder.
CAPS_256 = PlanScope(batch_sizes=(256,), kv_cache_dtypes=("auto",))

_, LLAMA70 = load_architecture("llama-3.1-70b")
_, LLAMA8 = load_architecture("llama-3.1-8b")
CATALOG = load_catalog()


def test_llama_70b_fp8_on_two_l40s_is_a_few_requests_per_second() -> None:
    """The issue's worked example: 70.6 GB of FP8 weights over 2 x 864 GB/s is >= 41 ms a decode step, ~10-20 GB
    of KV cache holds a few dozen 1,280-token requests, a 1,024-token prefill is ~145 TFLOP against 1,466 dense
    FP8 TFLOPS: roughly 1.5-3 requests/s per replica."""
    got = physics_capacity(
        LLAMA70,
        get_scheme("fp8-dynamic"),
        CATALOG.get("l40s"),
        tensor_parallel=2,
        prompt_tokens=1024,
        output_tokens=256,
    )
    assert 1.5 <= got.requests_per_s <= 6
    assert got.decode_step_s >= 0.041 and 0.08 <= got.prefill_s <= 0.15
    assert 15 <= got.batch <= 60  # the engine's 10 % reserve, activations and runtime leave ~10 GB, not 20
    assert got.kv_bytes_per_token_per_device == 80 * 8 * 128 * 2 * 2 / 2  # 16-bit K and V, 8 KV heads over 2 GPUs


def test_the_ceiling_follows_the_datasheet_and_the_memory() -> None:
    fp8, l40s = get_scheme("fp8-dynamic"), CATALOG.get("l40s")
    args = {"tensor_parallel": 2, "prompt_tokens": 1024, "output_tokens": 256}
    base = physics_capacity(LLAMA70, fp8, l40s, **args)
    faster = physics_capacity(LLAMA70, fp8, l40s.model_copy(update={"memory_bandwidth_gbps": 2 * 864}), **args)
    assert faster.decode_step_s == pytest.approx(base.decode_step_s / 2) and faster.requests_per_s > base.requests_per_s
    assert physics_capacity(LLAMA70, fp8, l40s, max_num_seqs=4, **args).batch == 4  # the engine's cap
    too_big = physics_capacity(LLAMA70, get_scheme("baseline"), l40s, **args | {"tensor_parallel": 1})
    assert too_big.batch == 0 and too_big.requests_per_s == 0.0  # 141 GB of bf16 weights on one 48 GB card


def _flag_is_consistent(row: PlanRow) -> None:
    capacity, ceiling = row.max_rps_per_replica, row.physics_rps_per_replica
    assert capacity is not None and ceiling is not None
    assert bool(row.physics_alarm) == (0 < capacity < ceiling / ALARM_FACTOR)


def _lone_ttft_high_ms() -> float:
    """The upper end of a lone request's P99 TTFT for Llama-3.1-8B FP8 on an H100 (a trickle of traffic, loose SLA)."""
    trickle = plan_one(
        LLAMA8,
        CATALOG.get("h100-sxm"),
        "fp8",
        traffic=Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=0.01),
        sla=LatencySLA(ttft_p99_ms=10_000, tpot_p99_ms=1000),
        scope=CAPS_256,
        catalog=CATALOG,
    )
    assert trickle.ttft_p99_high_ms is not None
    return trickle.ttft_p99_high_ms


def test_plan_flags_a_capacity_the_sla_holds_far_below_the_ceiling() -> None:
    """A TTFT SLA 10 % above a lone request's leaves no room to queue: the replica carries a sliver of what it could."""
    tight = LatencySLA(ttft_p99_ms=1.1 * _lone_ttft_high_ms(), tpot_p99_ms=1000)
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
    row = plan_one(LLAMA8, CATALOG.get("h100-sxm"), "fp8", traffic=traffic, sla=tight, scope=CAPS_256, catalog=CATALOG)
    _flag_is_consistent(row)
    assert row.physics_alarm and "the P99 TTFT SLA binds" in row.physics_alarm
    loose = plan_one(
        LLAMA8,
        CATALOG.get("h100-sxm"),
        "fp8",
        traffic=traffic,
        sla=LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100),
        scope=CAPS_256,
        catalog=CATALOG,
    )
    _flag_is_consistent(loose)
    assert loose.physics_alarm == "" and loose.physics_rps_per_replica == pytest.approx(
        physics_capacity(
            LLAMA8,
            get_scheme("fp8-dynamic"),
            CATALOG.get("h100-sxm"),
            tensor_parallel=1,
            prompt_tokens=512,
            output_tokens=128,
            max_num_seqs=256,
        ).requests_per_s
    )


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_plan_cli_shows_the_physics_column_and_the_flag() -> None:
    command = [
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
        f"{1.1 * _lone_ttft_high_ms():.3f}",
        "--tpot-ms",
        "1000",
        "--hardware",
        "h100-sxm",
        "--batch-size",
        "256",
    ]
    table = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "physics" in table.stdout and "(!)" in table.stdout and "throughput ceiling" in table.stdout
    rows = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=300).stdout)
    fp8 = next(r for r in rows if r["precision"] == "fp8")
    assert fp8["physics_rps_per_replica"] > ALARM_FACTOR * fp8["max_rps_per_replica"] > 0
    assert "SLA binds" in fp8["physics_alarm"]


def test_the_search_flags_a_far_off_capacity_in_its_line_and_the_recommendations_notes() -> None:
    """The ceiling travels on every catalog GPU's serving estimate, so the search's per-candidate line and the
    recommendation's notes flag what `plan` flags."""
    from dataclasses import replace

    from recommender.config.candidate import Candidate
    from recommender.decision.recommendation import build
    from recommender.decision.rules import pick
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.constraints import Constraints
    from recommender.perf.sim.results import Percentiles
    from recommender.perf.sim.serving import ServingEstimate
    from recommender.provenance import Provenance
    from recommender.report.console import _line

    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=80)
    serving = ServingEstimate(
        Percentiles(500, 900, 1000),
        Percentiles(40, 50, 60),
        0.2,
        256.0,
        0.2,
        Provenance("modeled", "test"),
        engine="vllm",
        ttft_p99_high_ms=1990,
        tpot_p99_high_ms=70,
        confidence=0.9,
        physics_rps_per_replica=3.0,
    )
    assert serving.physics_alarm and "P99 TTFT SLA binds" in serving.physics_alarm_reason(sla)
    near = replace(serving, physics_rps_per_replica=0.2 * ALARM_FACTOR * 0.9)
    assert not near.physics_alarm and near.physics_alarm_reason(sla) == ""
    assert not replace(serving, requests_per_s=0.0).physics_alarm  # no capacity at all is said elsewhere

    c = Candidate(precision="fp8", method="fp8-dynamic", hardware="l40s", batch_size=64, tensor_parallel=2)
    result = CandidateResult(c, "evaluated", Constraints(), [], serving=serving)
    assert "(!)" in _line(result)
    rec = build(
        [result], winner=pick([result]), current=result, study="s", model="m", release="r", use_case="u", sla=sla
    )
    assert any(n.startswith("physics alarm, current") and "throughput ceiling" in n for n in rec.notes)
