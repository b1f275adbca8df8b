"""A fleet's replicas found by simulating the fleet: behind round-robin a conversation's hit rate is about the single
replica's over N, and traffic that shares no prompt needs the same replicas behind every router."""

from __future__ import annotations

import pytest

from recommender.config.spec import Traffic
from recommender.config.traffic import traffic_load
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.fleet import simulate_fleet
from recommender.perf.sim.fleet_sizing import size_fleet
from recommender.perf.sim.routing import POLICIES, Router
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import make_workload

_, LLAMA_8B = load_architecture("llama-3.1-8b")
CONVERSATION = Conversation(turns=4, think_time_s=30.0, message_tokens=200)


@pytest.mark.parametrize("replicas", [2, 4, 8])
def test_round_robin_on_4_turn_conversations_hits_about_the_single_replica_rate_over_n(
    cost: object, config: SchedulerConfig, replicas: int
) -> None:
    """4 req/s per replica of docs/levers.md's sessions (1,000 per replica): one replica serves 73.7 % of prompt
    tokens from its cache; N replicas behind round-robin serve that over N, a few points more (an older turn's
    shorter history is found on some replicas too): within 6 points, never below it."""
    n = 1000 * replicas
    one = make_workload(prompt=1500, output=150, n_requests=1000, rate=4.0, conversation=CONVERSATION)
    single = simulate(cost, one, config).prefix_hit_rate  # type: ignore[arg-type]
    fleet_traffic = make_workload(prompt=1500, output=150, n_requests=n, rate=4.0 * replicas, conversation=CONVERSATION)
    routed = simulate_fleet(cost, fleet_traffic, config, replicas=replicas, router=Router(policy="round-robin"))  # type: ignore[arg-type]
    assert single == pytest.approx(0.737, abs=0.005)
    assert single / replicas <= routed.prefix_hit_rate <= single / replicas + 0.06


def test_traffic_sharing_no_prompt_needs_the_same_replicas_behind_every_router(
    cost: object, config: SchedulerConfig
) -> None:
    """512 + 128 tokens at 40 req/s, nothing shared: no router changes what a replica's cache holds (every hit rate
    0), so every policy's fleet needs the same replicas within a 300 ms / 30 ms SLA; and more than one, so the
    count was searched, not the floor."""
    load = traffic_load(Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=40))
    found = {
        policy: size_fleet(
            cost,  # type: ignore[arg-type]
            config,
            traffic=load,
            router=Router(policy=policy),
            ttft_p99_ms=300.0,
            tpot_p99_ms=30.0,
            start=1,
            max_replicas=12,
        )
        for policy in POLICIES
    }
    counts = {policy: sizing.replicas for policy, sizing in found.items()}
    assert all(sizing.met for sizing in found.values()), counts
    assert len(set(counts.values())) == 1 and counts["random"] > 1, counts
    assert all(sizing.result.prefix_hit_rate == 0.0 for sizing in found.values())


def test_a_fleet_is_sized_down_from_a_start_that_holds_and_up_from_one_that_does_not(
    cost: object, config: SchedulerConfig
) -> None:
    load = traffic_load(Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=40))
    kwargs = {"traffic": load, "router": Router(policy="round-robin"), "ttft_p99_ms": 300.0, "tpot_p99_ms": 30.0}
    up = size_fleet(cost, config, start=1, max_replicas=12, **kwargs)  # type: ignore[arg-type]
    down = size_fleet(cost, config, start=up.replicas + 2, max_replicas=12, **kwargs)  # type: ignore[arg-type]
    assert up.replicas == down.replicas and up.met and down.met
    assert up.tried == tuple(range(1, up.replicas + 1))
    assert down.tried == (up.replicas + 2, up.replicas + 1, up.replicas, up.replicas - 1)
    with pytest.raises(ValueError, match="start <= max_replicas"):
        size_fleet(cost, config, start=13, max_replicas=12, **kwargs)  # type: ignore[arg-type]
