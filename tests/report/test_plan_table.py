"""The plan table says how many simulated requests each row's P99s rest on, and whether they settled."""

from __future__ import annotations

from rich.console import Console

from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan_row import PlanRow
from recommender.report.plan_table import render_plan


def _row(p99_requests: int | None, settled: bool | None) -> PlanRow:
    return PlanRow(
        hardware="h100-sxm", precision="fp8", method="fp8-dynamic", tensor_parallel=1, batch_size=256,
        usd_per_1m_tokens=0.1, replicas=2, usd_per_month=5095.0, ttft_p99_ms=166.0, tpot_p99_ms=13.5,
        max_rps_per_replica=12.99, weights_gb_per_gpu=8.5, quality="prior", quality_verdict="unverified", note="",
        provenance=None, engine="vllm", p99_requests=p99_requests, p99s_settled=settled,
    )  # fmt: skip


def test_each_row_names_the_requests_its_p99s_rest_on_and_whether_they_settled() -> None:
    console = Console(record=True, width=400)
    render_plan([_row(2106, True), _row(24120, False), _row(None, None)], name="m",
                traffic=Traffic(requests_per_second=20, prompt_tokens=2048, output_tokens=256),
                sla=LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50), console=console)  # fmt: skip
    text = console.export_text()
    assert "P99s over" in text and "2,106 settled" in text and "24,120 not settled" in text
    assert "settled when doubling the requests moved them under 5%" in text
