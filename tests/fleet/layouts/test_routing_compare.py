"""Routing as a planned lever: a spec plans with and without its routers side by side, each row sized again as a
fleet behind each policy; the winner's router settings parse back as llm-d and Dynamo read them; a policy no
router knows is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from recommender.fleet.layouts.routing_compare import router_settings
from recommender.fleet.spec_plan import plan_fleet
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from tests.conftest import REPO, run_cli_in_process, spec_mapping, write_spec

CONVERSATIONS = REPO / "search_spaces" / "chat-8b-conversations.yaml"


def test_prefix_aware_settings_parse_back_as_llm_d_s_endpoint_picker_and_dynamo_s_kv_router() -> None:
    settings = router_settings("prefix-aware", "meta-llama/Llama-3.1-8B-Instruct")
    values = yaml.safe_load(settings.llm_d_values)
    extension = values["inferenceExtension"]
    epp = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    assert epp["kind"] == "EndpointPickerConfig"
    (profile,) = epp["schedulingProfiles"]
    weights = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
    assert weights == {"max-score-picker": None, "prefix-cache-scorer": 2, "queue-scorer": 1}
    assert values["inferencePool"]["modelServers"]["matchLabels"]["llm-d.ai/model"] == "llama-3-1-8b-instruct"
    assert settings.dynamo_frontend_args == ["-m", "dynamo.frontend", "--router-mode", "kv", "--no-router-kv-events"]


def test_round_robin_has_no_llm_d_setting_and_says_why() -> None:
    settings = router_settings("round-robin", "m")
    assert settings.llm_d_values == "" and "no round-robin" in " ".join(settings.notes)
    assert settings.dynamo_frontend_args[-1] == "round-robin"


def test_a_conversation_spec_plans_with_and_without_a_prefix_aware_router_side_by_side() -> None:
    """The same rows with and without ``space.routing``; with it, each row's fleet behind round-robin and
    prefix-aware, prefix-aware keeping most of a conversation's history cached and round-robin about a replica's
    share of it, the winner the one with fewer replicas and its router settings with it."""
    spec = load_spec(CONVERSATIONS)
    _, shape = load_architecture("llama-3.1-8b")
    catalog = load_catalog(price_set=spec.price_set)
    routed = plan_fleet(spec, shape, catalog)
    plain = plan_fleet(
        spec.model_copy(update={"space": spec.space.model_copy(update={"routing": None})}), shape, catalog
    )
    assert plain.routing == [] and [r.usd_per_month for r in plain.rows] == [r.usd_per_month for r in routed.rows]
    (compared,) = routed.routing
    by_policy = {f.policy: f for f in compared.fleets}
    assert list(by_policy) == ["round-robin", "prefix-aware", "load-aware"]
    assert by_policy["prefix-aware"].prefix_hit_rate > 0.6 > 0.3 > by_policy["round-robin"].prefix_hit_rate
    met = [f for f in compared.fleets if f.met]
    assert compared.winner == min(met, key=lambda f: f.replicas).policy
    assert compared.router is not None and compared.router.policy == compared.winner
    assert compared.winner in compared.reason and "hit rates" in compared.reason
    # The winner's fleet deploys behind its router: Dynamo's graph runs the fleet's replicas behind the kv router
    # (round-robin when the tie goes to it), the spec's model served.
    [dynamo] = [e for e in compared.launch if e.engine.startswith("Dynamo") and e.supported]
    graph = yaml.safe_load(dynamo.config_yaml or "")
    winner = next(f for f in compared.fleets if f.policy == compared.winner)
    assert graph["spec"]["services"]["VllmDecodeWorker"]["replicas"] == winner.replicas
    frontend = graph["spec"]["services"]["Frontend"]["extraPodSpec"]["mainContainer"]["args"]
    mode = frontend[frontend.index("--router-mode") + 1]
    assert mode == ("round-robin" if compared.winner == "round-robin" else "kv")


def test_an_unknown_routing_policy_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="routing"):
        load_spec(write_spec(tmp_path / "s.yaml", {"space.routing": ["least-latency"]}))
    done = run_cli_in_process("plan", "--model", "llama-3.1-8b", "--routing", "round-robin,least-latency")
    assert done.returncode == 2 and "--routing" in done.stderr and "least-latency" in done.stderr
    assert "Traceback" not in done.stderr
    beside = run_cli_in_process("plan", "--model", "llama-3.1-8b", "--routing", "sticky", "--layout", "disaggregated")
    assert beside.returncode == 2 and "--routing" in beside.stderr


def test_a_spec_lists_each_routing_policy_once() -> None:
    from recommender.config.spec import spec_from_mapping

    with pytest.raises(Exception, match="listed twice"):
        spec_from_mapping(spec_mapping({"space.routing": ["sticky", "sticky"]}), spec_path=REPO, label="s")
