"""The report's "Buy" line for disaggregated pools on two GPU types: each pool with its GPU and its own price."""

from __future__ import annotations

from pathlib import Path

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic, load_spec
from recommender.decision.assumptions import assumptions_of
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.money import usd
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.report.assumptions_block import _buy
from tests.conftest import write_spec


def test_the_buy_line_names_each_pool_with_its_gpu_and_its_price(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(
            tmp_path / "s.yaml",
            {"space.layout": ["aggregated", "disaggregated"], "space.hardware": ["h100-sxm", "h200"]},
        )
    )
    catalog = load_catalog()
    traffic = Traffic(prompt_tokens=4000, output_tokens=128, requests_per_second=10)
    performance = PerformanceEvaluator(
        catalog,
        load_architecture("llama-3.1-8b")[1],
        traffic,
        LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=40),
        engines=("vllm",),
    )
    c = Candidate("bf16", "baseline", "h100-sxm", 32, layout="disaggregated", decode_hardware="h200")
    mixed = evaluate_disaggregated(performance, c, link="infiniband-ndr")
    assert mixed.pools is not None, mixed.broken
    a = assumptions_of(spec, catalog, winner=mixed, current=None)
    fleet = next(f for f in a.fleets if f.role == "recommended")
    line = "".join(span.text for block in _buy(a, mixed, fleet) for span in block.spans)  # type: ignore[union-attr]
    p, q = mixed.pools.prefill.estimate.gpus, mixed.pools.decode.estimate.gpus
    h100, h200 = catalog.get("h100-sxm"), catalog.get("h200")
    assert f"{p} x {h100.name} (prefill) at {usd(h100.price_per_hour_usd)} per GPU-hour" in line, line
    assert f" + {q} x {h200.name} (decode) at {usd(h200.price_per_hour_usd)} per GPU-hour" in line, line
    assert "/decode-h200" in line
