"""`plan --expert-parallel`'s printed answer ends with the expert-parallel command of the cheapest EP row (the one
expert parallelism wins first), never a tensor-parallel command under an EP row; nothing when no row has one."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from recommender.config.spec import LatencySLA, Traffic
from recommender.engines import EngineLaunch
from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow
from recommender.fleet.layouts.parallelism import ParallelismComparison
from recommender.fleet.plan_row import PlanRow
from recommender.report.layout_table import render_parallelism

TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=50)
COMMAND = "vllm serve DeepSeek-V3-fp8-dynamic --tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"


def _comparison(hardware: str, winner: str, usd: float, launch: str) -> ParallelismComparison:
    tp = PlanRow(hardware, "fp8", "fp8-dynamic", None, 5.0, None, "prior", "unverified", "")
    ep = ExpertParallelRow(
        hardware, "fp8", "fp8-dynamic", engine="vllm", ep=8, attention_dp=8, usd_per_month=usd, launch=launch
    )
    return ParallelismComparison(hardware, "fp8", tp, ep, winner, "why")


def _printed(found: list[ParallelismComparison]) -> str:
    console = Console(record=True, width=400)
    render_parallelism(found, name="deepseek-v3", traffic=TRAFFIC, sla=SLA, console=console)
    return console.export_text()


def test_the_cheapest_winning_expert_parallel_rows_command_is_printed() -> None:
    text = _printed(
        [
            _comparison("h100-sxm", "tensor-parallel", 1000.0, "vllm serve other"),
            _comparison("h200", "expert-parallel", 2000.0, COMMAND),
        ]
    )
    assert "Launch, expert parallelism (h200/fp8, vllm, EP8 with 8 attention rank(s)):" in text
    assert f"  {COMMAND}" in text and "vllm serve other" not in text


def test_no_launch_is_printed_when_no_expert_parallel_row_has_one() -> None:
    assert "Launch, expert parallelism" not in _printed([_comparison("h200", "tensor-parallel", 1000.0, "")])


def test_the_rows_deployment_files_follow_its_command_with_their_notes() -> None:
    comparison = _comparison("h200", "expert-parallel", 2000.0, COMMAND)
    lws = "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
    files = [
        EngineLaunch(
            engine="llm-d wide-EP LeaderWorkerSet (vllm, 5 x 1 node(s))",
            supported=True,
            command=None,
            config_yaml=lws,
            notes=["5 replica(s)"],
        ),
        EngineLaunch(engine="Dynamo (not emitted)", supported=False, command=None, notes=["why not"]),
    ]
    text = _printed([replace(comparison, expert_parallel=replace(comparison.expert_parallel, deployments=files))])
    assert text.index(COMMAND) < text.index("llm-d wide-EP LeaderWorkerSet (vllm, 5 x 1 node(s)):")
    assert "kind: LeaderWorkerSet" in text and "  # 5 replica(s)" in text and "  # why not" in text
