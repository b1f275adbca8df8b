"""The fleet's router in the deployment files (`deploy/router_config.py`): for every routing policy and framework,
the file written parses back and holds the router settings the policy maps to (llm-d's EndpointPickerConfig in the
InferencePool values, Dynamo's Frontend router mode); a policy a framework has no setting for leaves its file as the
default and says so; without a policy every file is what it was."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from recommender.deploy.disaggregated import DisaggregatedLaunch, disaggregated_launch, engine_launches
from recommender.deploy.expert_parallel import expert_parallel_deployments
from recommender.deploy.router_config import Unmapped, dynamo_router, epp_config, plain_service_note
from recommender.engines import EngineLaunch, LaunchSettings, get_engine
from recommender.engines.expert_parallel import ExpertParallelLaunch
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.routing import POLICIES, RoutingPolicy
from recommender.quantize import get_scheme

VLLM = "vllm serve org/m --tensor-parallel-size 2 --port 8000"
#: What each policy maps to: llm-d's scorers with their weights and picker (None: no setting), Dynamo's router mode.
LLM_D: dict[str, tuple[dict[str, float], str] | None] = {
    "round-robin": None,
    "random": ({}, "random-picker"),
    "sticky": ({"session-affinity-scorer": 100, "queue-scorer": 1}, "max-score-picker"),
    "prefix-aware": ({"prefix-cache-scorer": 2, "queue-scorer": 1}, "max-score-picker"),
    # llm-d's default profile (pkg/epp/config/loader/defaults.go @ 520af478)
    "load-aware": (
        {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3},
        "max-score-picker",
    ),
}
DYNAMO = {"round-robin": "round-robin", "random": "random", "sticky": None, "prefix-aware": "kv", "load-aware": "kv"}


def _pools(routing: RoutingPolicy | None = None) -> DisaggregatedLaunch:
    launch = disaggregated_launch(
        "vllm", prefill_command=VLLM, decode_command=VLLM, prefill_workers=3, decode_workers=2, routing=routing
    )
    assert launch is not None
    return launch


def _expert_parallel(engine: str, routing: RoutingPolicy | None = None) -> list[EngineLaunch]:
    layout = ExpertParallelLaunch(ep=8, attention_dp=8)
    settings = LaunchSettings(
        model="deepseek-ai/DeepSeek-V3",
        method=get_scheme("fp8-dynamic"),
        dtype="bfloat16",
        tensor_parallel=8,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.9,
        max_model_len=2500,
        device=load_catalog().get("h200").device,
        expert_parallel=layout,
    )
    node = get_engine(engine).emit(settings)
    return expert_parallel_deployments(engine, node, layout=layout, replicas=3, routing=routing)


def _epp(values: dict[str, Any]) -> dict[str, Any]:
    """The EndpointPickerConfig inside the InferencePool chart's values, parsed back."""
    extension = values["inferenceExtension"]
    config: dict[str, Any] = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    declared = {p["type"] for p in config["plugins"]}
    for profile in config["schedulingProfiles"]:  # every plugin a profile names is declared
        assert {ref["pluginRef"] for ref in profile["plugins"]} <= declared
    return config


def _scored(profile: dict[str, Any]) -> tuple[dict[str, float], str]:
    refs = profile["plugins"]
    pickers = [r["pluginRef"] for r in refs if r["pluginRef"].endswith("-picker")]
    return {r["pluginRef"]: r["weight"] for r in refs if "weight" in r}, pickers[0]


@pytest.mark.parametrize("policy", POLICIES)
def test_disaggregated_llm_d_router_values_parse_back_with_the_policys_scorers_in_both_profiles(
    policy: RoutingPolicy,
) -> None:
    launch = _pools(policy)
    expected = LLM_D[policy]
    if expected is None:
        assert launch.llm_d_router == ""
        assert any(n.startswith(f"llm-d has no {policy} routing") for n in launch.notes)
        return
    values = yaml.safe_load(launch.llm_d_router)
    labels = values["inferencePool"]["modelServers"]["matchLabels"]
    assert yaml.safe_load(launch.llm_d)["modelArtifacts"]["labels"] == labels  # the router selects the pools' pods
    assert values["inferencePool"]["targetPorts"] == [{"number": 8000}]
    config = _epp(values)
    profiles = {p["name"]: p for p in config["schedulingProfiles"]}
    assert set(profiles) == {"prefill", "decode"}
    [handler] = [p for p in config["plugins"] if p["type"] == "disagg-profile-handler"]
    assert handler["parameters"]["deciders"]["prefill"] == "always-disagg-pd-decider"  # every prompt prefilled apart
    assert _scored(profiles["decode"]) == expected
    prefill_scorers = {k: v for k, v in expected[0].items() if k != "session-affinity-scorer"}
    assert _scored(profiles["prefill"]) == (prefill_scorers, expected[1])
    assert profiles["prefill"]["plugins"][0] == {"pluginRef": "prefill-filter"}


@pytest.mark.parametrize("policy", POLICIES)
def test_the_dynamo_graphs_frontend_runs_the_policys_router_mode_or_says_it_has_none(policy: RoutingPolicy) -> None:
    launch = _pools(policy)
    frontend = yaml.safe_load(launch.dynamo)["spec"]["services"]["Frontend"]
    default = yaml.safe_load(_pools().dynamo)["spec"]["services"]["Frontend"]
    mode = DYNAMO[policy]
    if mode is None:
        assert frontend == default and any(n.startswith(f"Dynamo has no {policy} routing") for n in launch.notes)
        return
    container = frontend["extraPodSpec"]["mainContainer"]
    assert container["command"] == ["python3"] and container["args"][:2] == ["-m", "dynamo.frontend"]
    args = container["args"]
    assert args[args.index("--router-mode") + 1] == mode
    assert frontend["envs"] == [{"name": "DYN_ROUTER_MODE", "value": mode}]
    assert ("--no-router-kv-events" in args) == (mode == "kv")  # the router's own index, as simulated
    assert container["image"] == default["extraPodSpec"]["mainContainer"]["image"]


@pytest.mark.parametrize("policy", POLICIES)
def test_expert_parallel_files_carry_the_router_for_every_engine(policy: RoutingPolicy) -> None:
    for engine in ("vllm", "sglang", "trtllm"):
        entries = _expert_parallel(engine, policy)
        [graph_entry] = [e for e in entries if e.engine.startswith("Dynamo")]
        graph = list(yaml.safe_load_all(graph_entry.config_yaml or ""))[-1]
        frontend = graph["spec"]["services"]["Frontend"]
        if DYNAMO[policy] is None:
            assert "envs" not in frontend and any(f"Dynamo has no {policy}" in n for n in graph_entry.notes)
        else:
            assert frontend["envs"] == [{"name": "DYN_ROUTER_MODE", "value": DYNAMO[policy]}]
    entries = _expert_parallel("vllm", policy)
    routers = [e for e in entries if e.engine.startswith("llm-d InferencePool")]
    if LLM_D[policy] is None:
        assert not routers and any(f"llm-d has no {policy}" in n for e in entries for n in e.notes)
        return
    [router] = routers
    values = yaml.safe_load(router.config_yaml or "")
    [lws] = [e for e in entries if e.engine.startswith("llm-d wide-EP")]
    pod = yaml.safe_load(lws.config_yaml or "")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    assert values["inferencePool"]["modelServers"]["matchLabels"].items() <= pod["labels"].items()
    [profile] = _epp(values)["schedulingProfiles"]  # one profile over aggregated replicas, no role filter
    assert profile["name"] == "default" and _scored(profile) == LLM_D[policy]


def test_without_a_policy_the_files_are_what_they_were() -> None:
    launch = _pools()
    assert launch.llm_d_router == "" and "envs" not in yaml.safe_load(launch.dynamo)["spec"]["services"]["Frontend"]
    assert "labels" not in yaml.safe_load(launch.llm_d)["modelArtifacts"]
    assert not [e for e in engine_launches(launch) if "InferencePool" in e.engine]
    assert not [e for e in _expert_parallel("vllm") if "InferencePool" in e.engine]


def test_engine_launches_carry_the_llm_d_router_values_with_their_sources() -> None:
    [entry] = [e for e in engine_launches(_pools("prefix-aware")) if e.engine.startswith("llm-d InferencePool")]
    assert entry.supported and entry.config_yaml and any("pd-epp-config.yaml" in s for s in entry.sources)


def test_an_unmapped_policy_is_said_in_words_never_the_nearest_setting() -> None:
    round_robin, sticky = epp_config("round-robin", disaggregated=True), dynamo_router("sticky")
    assert isinstance(round_robin, Unmapped) and "none round-robin" in round_robin.reason
    assert isinstance(sticky, Unmapped) and "none keeping a session on one worker" in sticky.reason


def test_a_plain_service_says_what_it_gives_up_with_the_fleet_benchmarks_numbers() -> None:
    note = plain_service_note("prefix-aware")
    assert note.startswith("the plan counted the hits of a prefix-aware router")
    assert "0.737 on one replica" in note and "0.225 at N = 4" in note and "per connection" in note
