"""The plan table says how many simulated requests each row's P99s rest on, and whether they settled."""

from __future__ import annotations

from rich.console import Console

from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.report.plan_table import render_plan

TRAFFIC = Traffic(requests_per_second=15, prompt_tokens=2048, output_tokens=256)
SLA = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50)


def test_each_row_names_the_requests_its_p99s_rest_on_and_whether_they_settled() -> None:
    _, llama8 = load_architecture("llama-3.1-8b")
    catalog = load_catalog()
    scope = PlanScope(batch_sizes=(64,), kv_cache_dtypes=("auto",), tensor_parallel=(1,))
    served = plan_one(llama8, catalog.get("h100-sxm"), "fp8", traffic=TRAFFIC, sla=SLA, scope=scope, catalog=catalog)
    refused = plan_one(llama8, catalog.get("t4"), "fp8", traffic=TRAFFIC, sla=SLA, scope=scope, catalog=catalog)
    assert served.p99_requests is not None and served.p99_requests >= 1000
    assert served.p99s_settled is True and refused.p99_requests is None
    console = Console(record=True, width=400)
    render_plan([served, refused], name="m", traffic=TRAFFIC, sla=SLA, console=console)
    text = console.export_text()
    assert "P99s over" in text and f"{served.p99_requests:,} settled" in text
    assert "settled when doubling the requests moved them under 5%" in text
