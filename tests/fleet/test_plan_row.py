"""A plan row holds its evaluated result: its figures are the result's, and `plan --json` keeps its keys."""

from __future__ import annotations

import json

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan import plan_one, rows_to_json
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.serialization import from_data, to_data

CAPS_64 = PlanScope(batch_sizes=(64,), tensor_parallel=(1,), kv_cache_dtypes=("auto",))
TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100)
_, LLAMA8 = load_architecture("llama-3.1-8b")
CATALOG = load_catalog()

#: What `plan --json` has written per row since rows held copies of their result's figures, in this order.
PLAN_JSON_KEYS = [
    "hardware",
    "precision",
    "method",
    "tensor_parallel",
    "batch_size",
    "usd_per_1m_tokens",
    "replicas",
    "usd_per_month",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "max_rps_per_replica",
    "weights_gb_per_gpu",
    "quality",
    "quality_verdict",
    "note",
    "provenance",
    "price_set",
    "engine",
    "ttft_p99_high_ms",
    "tpot_p99_high_ms",
    "unpriced",
    "physics_rps_per_replica",
    "physics_alarm",
    "launch",
    "kv_cache_dtype",
    "batch_caps_pruned",
    "p99_requests",
    "p99s_settled",
]


@pytest.fixture(scope="module")
def priced() -> PlanRow:
    return plan_one(LLAMA8, CATALOG.get("h100-sxm"), "fp8", traffic=TRAFFIC, sla=SLA, scope=CAPS_64, catalog=CATALOG)


def test_a_rows_figures_are_its_results_not_copies(priced: PlanRow) -> None:
    result = priced.result
    assert result is not None and result.cost is not None and result.serving is not None
    assert priced.usd_per_month is result.cost.usd_per_month
    assert priced.usd_per_1m_tokens is result.cost.usd_per_1m_tokens
    assert priced.price_set is result.cost.price_set and priced.price_set == "runpod-secure"
    assert priced.replicas == result.cost.replicas
    assert priced.ttft_p99_ms is result.serving.ttft_ms.p99 and priced.tpot_p99_ms is result.serving.tpot_ms.p99
    assert priced.max_rps_per_replica is result.serving.requests_per_s
    assert priced.provenance is result.serving.provenance and priced.engine == result.serving.engine
    candidate = result.candidate
    assert (priced.hardware, priced.precision, priced.method) == (candidate.hardware, "fp8", candidate.method)
    assert (priced.tensor_parallel, priced.batch_size) == (1, 64) == (candidate.tensor_parallel, candidate.batch_size)


def test_a_refused_or_unfitting_row_has_no_result_and_no_figures() -> None:
    _, llama70 = load_architecture("llama-3.1-70b")
    too_big = plan_one(llama70, CATALOG.get("rtx-4090"), "bf16", traffic=TRAFFIC, sla=SLA, scope=CAPS_64)
    assert too_big.result is None and too_big.note.startswith("does not fit")
    assert (too_big.usd_per_month, too_big.replicas, too_big.engine, too_big.kv_cache_dtype) == (None, None, "", "auto")


def test_plan_json_keeps_its_keys_and_writes_the_results_figures(priced: PlanRow) -> None:
    [written] = json.loads(rows_to_json([priced]))
    assert list(written) == PLAN_JSON_KEYS
    assert written["usd_per_month"] == priced.usd_per_month and written["replicas"] == priced.replicas
    assert written["provenance"] == to_data(priced.provenance)
    assert "result" not in written and "target_rps" not in written


def test_a_written_row_is_not_read_back_as_a_row_without_its_result(priced: PlanRow) -> None:
    with pytest.raises(ValueError, match="not a PlanRow"):
        from_data(PlanRow, json.loads(rows_to_json([priced]))[0])
