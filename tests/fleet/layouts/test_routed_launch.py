"""The router in the launch of a routed plan's winner: an aggregated row's engine command becomes llm-d's
InferencePool values and Dynamo's DynamoGraphDeployment for the fleet behind the winning router, and the written
files parse back with the policy's scorer weights, router mode and the fleet's replica count."""

from __future__ import annotations

import shlex

import pytest
import yaml

from recommender.config.spec import LatencySLA, Traffic
from recommender.config.traffic import ConversationTurns
from recommender.engines import EngineLaunch
from recommender.fleet.layouts.routing_compare import RoutedFleet, routed_launch
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.routing import RoutingPolicy

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TRAFFIC = Traffic(
    prompt_tokens=1500,
    output_tokens=150,
    requests_per_second=20,
    conversation=ConversationTurns(turns=4, think_time_s=30, message_tokens=200),
)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100)
SCOPE = PlanScope(batch_sizes=(64,), tensor_parallel=(1,), kv_cache_dtypes=("auto",))
_, LLAMA8 = load_architecture("llama-3.1-8b")
CATALOG = load_catalog()


def _request(engine: str) -> PlanRequest:
    return PlanRequest(
        shape=LLAMA8,
        catalog=CATALOG,
        hardware=("h100-sxm",),
        precisions=("bf16",),
        traffic=TRAFFIC,
        sla=SLA,
        engines=(engine,),
        scope=SCOPE,
        model=MODEL,
    )


def _row(engine: str) -> PlanRow:
    row = plan_one(
        LLAMA8,
        CATALOG.get("h100-sxm"),
        "bf16",
        traffic=TRAFFIC,
        sla=SLA,
        scope=SCOPE,
        catalog=CATALOG,
        engines=(engine,),
    )
    assert row.engine == engine and row.replicas, row
    return row


def _winner(policy: RoutingPolicy, replicas: int) -> RoutedFleet:
    """The winning fleet as `compare_routing` reports it (only its policy and replica count reach the launch)."""
    return RoutedFleet(policy, replicas, True, 0.7, 100.0, 10.0, None, 4_000, (replicas,), (900, 1_100))


@pytest.fixture(scope="module")
def vllm_row() -> PlanRow:
    return _row("vllm")


def _files(entries: list[EngineLaunch]) -> dict[str, str]:
    return {e.engine.split(" ")[0]: e.config_yaml or "" for e in entries if e.supported and e.config_yaml}


def test_the_prefix_aware_winner_deploys_with_llm_d_s_scorer_weights_and_dynamo_s_kv_router(vllm_row: PlanRow) -> None:
    entries = routed_launch(_request("vllm"), vllm_row, _winner("prefix-aware", 7))
    assert entries[0].engine == "vllm" and entries[0].command
    assert any("plain Kubernetes Service" in n for n in entries[0].notes)  # what the bare command gives up
    files = _files(entries)
    values = yaml.safe_load(files["llm-d"])
    extension = values["inferenceExtension"]
    epp = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    (profile,) = epp["schedulingProfiles"]
    weights = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
    assert weights == {"max-score-picker": None, "prefix-cache-scorer": 2, "queue-scorer": 1}
    assert values["inferencePool"]["modelServers"]["matchLabels"]["llm-d.ai/model"] == "llama-3-1-8b-instruct"
    graph = yaml.safe_load(files["Dynamo"])
    assert graph["kind"] == "DynamoGraphDeployment"
    frontend = graph["spec"]["services"]["Frontend"]
    args = frontend["extraPodSpec"]["mainContainer"]["args"]
    assert args[args.index("--router-mode") + 1] == "kv" and "--no-router-kv-events" in args
    assert frontend["envs"] == [{"name": "DYN_ROUTER_MODE", "value": "kv"}]
    worker = graph["spec"]["services"]["VllmDecodeWorker"]
    assert worker["replicas"] == 7 and worker["resources"]["limits"]["gpu"] == "1"
    served = worker["extraPodSpec"]["mainContainer"]["args"]
    command = shlex.split(entries[0].command or "")
    assert served[:2] == ["--model", command[2]]
    # The worker runs the row's engine flags (its batch cap and context), less the port Dynamo's runtime owns.
    for flag in ("--max-num-seqs", "--max-model-len", "--tensor-parallel-size"):
        if flag in command:
            assert served[served.index(flag) + 1] == command[command.index(flag) + 1]
    assert "--port" not in served


def test_load_aware_writes_llm_d_s_default_profile(vllm_row: PlanRow) -> None:
    files = _files(routed_launch(_request("vllm"), vllm_row, _winner("load-aware", 3)))
    extension = yaml.safe_load(files["llm-d"])["inferenceExtension"]
    epp = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    weights = {p["pluginRef"]: p.get("weight") for p in epp["schedulingProfiles"][0]["plugins"]}
    assert weights == {
        "max-score-picker": None,
        "queue-scorer": 2,
        "kv-cache-utilization-scorer": 2,
        "prefix-cache-scorer": 3,
    }


def test_a_round_robin_winner_gets_dynamo_s_round_robin_and_says_why_llm_d_has_none(vllm_row: PlanRow) -> None:
    entries = routed_launch(_request("vllm"), vllm_row, _winner("round-robin", 4))
    [llm_d] = [e for e in entries if e.engine.startswith("llm-d")]
    assert not llm_d.supported and "no round-robin" in llm_d.notes[0]
    graph = yaml.safe_load(_files(entries)["Dynamo"])
    args = graph["spec"]["services"]["Frontend"]["extraPodSpec"]["mainContainer"]["args"]
    assert args[args.index("--router-mode") + 1] == "round-robin"
    assert graph["spec"]["services"]["VllmDecodeWorker"]["replicas"] == 4


def test_an_sglang_winner_gets_dynamo_s_graph_and_no_llm_d_values() -> None:
    row = _row("sglang")
    entries = routed_launch(_request("sglang"), row, _winner("prefix-aware", 5))
    [llm_d] = [e for e in entries if e.engine.startswith("llm-d")]
    assert not llm_d.supported and "sglang" in llm_d.notes[0]
    graph = yaml.safe_load(_files(entries)["Dynamo"])
    worker = graph["spec"]["services"]["decode"]
    assert worker["replicas"] == 5
    assert worker["extraPodSpec"]["mainContainer"]["command"] == ["python3", "-m", "dynamo.sglang"]
    assert worker["extraPodSpec"]["mainContainer"]["args"][0] == "--model-path"


def test_a_plan_without_a_model_has_no_routed_launch(vllm_row: PlanRow) -> None:
    from dataclasses import replace

    assert routed_launch(replace(_request("vllm"), model=""), vllm_row, _winner("prefix-aware", 2)) == []


def test_a_winner_at_the_same_hit_rates_is_said_to_win_on_load_not_hits(vllm_row: PlanRow) -> None:
    from recommender.fleet.layouts.routing_compare import _reason

    def fleet(policy: RoutingPolicy, replicas: int, hits: float) -> RoutedFleet:
        return RoutedFleet(policy, replicas, True, hits, 300.0, 30.0, None, 4_000, (replicas,), (900, 1_100))

    even = [fleet("round-robin", 12, 0.34), fleet("prefix-aware", 16, 0.34), fleet("load-aware", 11, 0.34)]
    said = _reason(vllm_row, even, even[2], shares=True)
    assert "same hit rates" in said and "how evenly they load" in said and "prefills less" not in said
    kept = [fleet("round-robin", 4, 0.28), fleet("prefix-aware", 2, 0.76)]
    assert "prefills less" in _reason(vllm_row, kept, kept[1], shares=True)


def test_a_fleet_sharing_nothing_names_the_router_that_needs_more_replicas(vllm_row: PlanRow) -> None:
    from recommender.fleet.layouts.routing_compare import _reason

    fleets = [
        RoutedFleet("round-robin", 4, True, 0.0, 721.0, 39.6, None, 4_000, (4,), (990, 1_010)),
        RoutedFleet("load-aware", 5, True, 0.0, 220.0, 25.0, None, 4_000, (4, 5), (790, 810)),
    ]
    said = _reason(vllm_row, fleets, fleets[0], shares=False)
    assert said.startswith("round-robin needs 4 replicas (load-aware 5") and "every policy" not in said
    even = [fleets[0], RoutedFleet("prefix-aware", 4, True, 0.0, 749.0, 39.6, None, 4_000, (4,), (990, 1_010))]
    assert _reason(vllm_row, even, even[0], shares=False).startswith("every policy needs 4 replicas")
