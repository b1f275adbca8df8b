"""A fleet behind a router: one replica is the single-replica simulation under every policy, a workload that shares
nothing loads every replica alike, and a conversation's history survives only the routers that keep its turns
together (sticky, prefix-aware); round-robin and random spread them and the hit rate falls as routing at random
says it must."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.fleet import FleetResult, simulate_fleet, split
from recommender.perf.sim.fleet_live import replay_routed
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.routing import POLICIES, Router, RoutingPolicy
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import SharedPrefix, Workload, make_workload

_, LLAMA_8B = load_architecture("llama-3.1-8b")
#: 4-turn sessions of docs/levers.md (1,500 + 3 x 350 tokens, 150 out), at 4 req/s per replica: every history
#: a replica is sent stays cached through the 30 s think time.
CONVERSATION = Conversation(turns=4, think_time_s=30.0, message_tokens=200)
PER_REPLICA_RATE, REQUESTS = 4.0, 4000


def _conversations(replicas: int) -> Workload:
    """1,000 conversations at 4 req/s per replica (a replica's share of the traffic is the same at any N)."""
    return make_workload(
        prompt=1500, output=150, n_requests=REQUESTS, rate=PER_REPLICA_RATE * replicas, conversation=CONVERSATION
    )


def _single(cost: object, config: SchedulerConfig) -> float:
    """The hit rate a plan counts: one replica serving its share of the traffic, every turn on it."""
    return simulate(cost, _conversations(1), config).prefix_hit_rate  # type: ignore[arg-type]


def _fleet(cost: object, workload: Workload, config: SchedulerConfig, n: int, policy: RoutingPolicy) -> FleetResult:
    return simulate_fleet(cost, workload, config, replicas=n, router=Router(policy=policy))  # type: ignore[arg-type]


def _same(a: SimulationResult, b: SimulationResult) -> None:
    for field in dataclasses.fields(SimulationResult):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=True), field.name
        else:
            assert x == y, field.name


@pytest.mark.parametrize("policy", POLICIES)
def test_one_replica_is_exactly_the_single_replica_simulation_under_every_policy(
    cost: object, config: SchedulerConfig, policy: RoutingPolicy
) -> None:
    workload = make_workload(
        prompt=1500, output=150, n_requests=300, rate=6.0, conversation=CONVERSATION, prefix=SharedPrefix(256)
    )
    alone = simulate(cost, workload, config, ttft_sla_ms=100.0, tpot_sla_ms=10.0)  # type: ignore[arg-type]
    fleet = simulate_fleet(
        cost,  # type: ignore[arg-type]
        workload,
        config,
        replicas=1,
        router=Router(policy=policy),
        ttft_sla_ms=100.0,
        tpot_sla_ms=10.0,
    )
    _same(fleet.fleet, alone)
    assert fleet.replicas[0] is not None
    _same(fleet.replicas[0], alone)
    assert fleet.requests_per_replica == (300,) and fleet.prefix_hit_rate == alone.prefix_hit_rate > 0.5
    assert (fleet.fleet.ttft_ms, fleet.fleet.tpot_ms) == (alone.ttft_ms, alone.tpot_ms)


def test_a_workload_sharing_nothing_loads_every_replica_alike_under_every_policy(
    cost: object, config: SchedulerConfig
) -> None:
    """No prefix keys: nothing to hit anywhere, and every policy gives each replica about a quarter of the requests
    (random within four binomial standard deviations; the others within a few requests)."""
    n, replicas = 1600, 4
    workload = make_workload(prompt=1200, output=150, n_requests=n, rate=4.0 * replicas)
    for policy in POLICIES:
        fleet = _fleet(cost, workload, config, replicas, policy)
        assert fleet.prefix_hit_rate == 0.0 and set(fleet.replica_hit_rates) == {0.0}, policy
        counts = np.array(fleet.requests_per_replica)
        spread = 4 * np.sqrt(n / replicas * (1 - 1 / replicas)) if policy == "random" else 8
        assert np.abs(counts - n / replicas).max() <= spread, (policy, counts)
        assert fleet.fleet.ttft_ms.p99 < 200 and fleet.fleet.tpot_ms.p99 < 20, policy  # nobody overloaded


def _hit_rate_routed_at_random(replicas: int, block: int = 16) -> float:
    """The expected fleet hit rate when every turn lands on a replica drawn uniformly (no eviction): turn j reads
    the history kept by the latest earlier turn k on its replica, which is turn k with probability
    (1/N)(1 - 1/N)^(j-1-k); turn k keeps its prompt and answer (turn k+1's shared tokens), full blocks only."""
    turns = CONVERSATION.turns
    # One conversation's turns: the first prompt 1,500, then + 150 out + 200 message per turn.
    prompts = [1500 + j * 350 for j in range(turns)]
    kept = [((prompts[k] + 150 - 1) // block) * block for k in range(turns)]  # what turn k leaves cached
    p = 1 / replicas
    hits = sum(p * (1 - p) ** (j - 1 - k) * kept[k] for j in range(1, turns) for k in range(j))
    return hits / sum(prompts)


@pytest.mark.parametrize("replicas", [2, 4, 8])
def test_round_robin_and_random_spread_a_conversation_as_routing_at_random_says(
    cost: object, config: SchedulerConfig, replicas: int
) -> None:
    """With a KV cache nothing is evicted from (1,000 conversations), turn j finds turn j-1's history only where
    turn j-1 went (1/N), an older turn's shorter one otherwise: the fleet's hit rate is that expectation to within
    2.5 points under round-robin and random alike."""
    roomy = dataclasses.replace(config, kv_cache_tokens=8_000_000)
    workload = _conversations(replicas)
    expected = _hit_rate_routed_at_random(replicas)
    for policy in ("round-robin", "random"):
        got = _fleet(cost, workload, roomy, replicas, policy).prefix_hit_rate
        assert got == pytest.approx(expected, abs=0.025), policy


@pytest.mark.parametrize("replicas", [2, 4])
def test_behind_round_robin_or_random_a_conversation_s_hit_rate_falls_toward_single_over_n(
    cost: object, config: SchedulerConfig, replicas: int
) -> None:
    """Single replica: 74 % of prompt tokens from the cache. Behind round-robin or random, between single/N and
    the no-eviction expectation above (each replica now holds the histories of N times as many conversations, so
    the older turns' entries that gave partial hits are evicted first)."""
    workload = _conversations(replicas)
    single = _single(cost, config)
    assert single == pytest.approx(0.737, abs=0.005)
    for policy in ("round-robin", "random"):
        got = _fleet(cost, workload, config, replicas, policy).prefix_hit_rate
        assert single / replicas < got < _hit_rate_routed_at_random(replicas) + 0.02, policy


@pytest.mark.parametrize("replicas", [2, 4])
def test_sticky_and_prefix_aware_keep_a_conversation_s_history_on_its_replica(
    cost: object, config: SchedulerConfig, replicas: int
) -> None:
    workload = _conversations(replicas)
    single = _single(cost, config)
    for policy in ("sticky", "prefix-aware"):
        fleet = _fleet(cost, workload, config, replicas, policy)
        assert fleet.prefix_hit_rate == pytest.approx(single, abs=0.01), policy
        assert all(rate is not None and rate > 0.7 for rate in fleet.replica_hit_rates), policy
        # Every turn of a conversation on one replica.
        assert workload.history_keys is not None
        for key in np.unique(workload.history_keys)[:50]:
            assert len(set(fleet.assignment[workload.history_keys == key].tolist())) == 1, policy


def test_a_shared_system_prompt_survives_any_router_each_replica_computing_it_once(
    cost: object, config: SchedulerConfig
) -> None:
    """A 2,048-token system prompt on every 3,000-token prompt: each replica misses it once, whatever the router,
    so over 4 replicas every policy keeps one replica's hit rate (at its share of the traffic) within a point."""
    workload = make_workload(prompt=3000, output=64, n_requests=1200, rate=20.0, prefix=SharedPrefix(2048))
    single = simulate(cost, workload.at_rate(5.0), config).prefix_hit_rate  # type: ignore[arg-type]
    for policy in POLICIES:
        assert _fleet(cost, workload, config, 4, policy).prefix_hit_rate == pytest.approx(single, abs=0.01), policy


def test_prefix_aware_keeps_a_hot_prefix_on_one_replica_until_the_loads_are_imbalanced(
    cost: object, config: SchedulerConfig
) -> None:
    """SGLang's cache-aware policy sends every request that matches to the replica holding the prefix until its
    in-flight count exceeds the least loaded's by 64 (and by 1.5x): at 20 req/s one replica carries the fleet's
    traffic and never falls that far behind; at 160 req/s it does, and the prefix spills onto the others."""
    light = make_workload(prompt=3000, output=64, n_requests=1200, rate=20.0, prefix=SharedPrefix(2048))
    assert _fleet(cost, light, config, 4, "prefix-aware").requests_per_replica == (1200, 0, 0, 0)
    heavy = _fleet(cost, light.at_rate(160.0), config, 4, "prefix-aware")
    assert min(heavy.requests_per_replica) > 100, heavy.requests_per_replica


def test_the_routers_decide_as_their_sources_do() -> None:
    workload = make_workload(prompt=400, output=50, n_requests=40, rate=2.0, conversation=CONVERSATION)
    assert np.array_equal(Router(policy="round-robin").route(workload, 3), np.arange(40) % 3)
    random_a = Router(policy="random", seed=1).route(workload, 3)
    assert np.array_equal(random_a, Router(policy="random", seed=1).route(workload, 3))
    assert not np.array_equal(random_a, Router(policy="random", seed=2).route(workload, 3))
    # prefix-aware: a conversation's first turn to the least loaded, its later turns to where its history went.
    routed = Router(policy="prefix-aware").route(workload, 4)
    assert workload.history_keys is not None and workload.prefix_tokens is not None
    first = workload.prefix_tokens == 0
    assert sorted(np.bincount(routed[first], minlength=4).tolist())[-1] - min(np.bincount(routed[first])) <= 1
    # An index too small for two histories forgets the older one: its next turn goes by load, not by history.
    tiny = Router(policy="prefix-aware", index_blocks=150).route(workload, 4)
    assert not np.array_equal(tiny, routed)
    with pytest.raises(ValueError, match="unknown routing policy"):
        Router(policy="least-loaded")  # type: ignore[arg-type]


def test_split_gives_each_replica_its_requests_in_arrival_order() -> None:
    parts = split(np.array([2, 0, 2, 1, 0]), 4)
    assert [p.tolist() for p in parts] == [[1, 4], [3], [0, 2], []]


def test_a_policy_that_reads_load_is_routed_again_after_the_first_pass_s_completions(
    cost: object, config: SchedulerConfig
) -> None:
    workload = _conversations(2)
    once = simulate_fleet(cost, workload, config, replicas=2, router=Router(policy="prefix-aware"), passes=1)  # type: ignore[arg-type]
    twice = simulate_fleet(cost, workload, config, replicas=2, router=Router(policy="prefix-aware"))  # type: ignore[arg-type]
    assert (once.passes, twice.passes) == (1, 2)
    assert _fleet(cost, workload, config, 2, "round-robin").passes == 1


def test_load_aware_replayed_alone_is_exactly_the_single_replica_simulation(
    cost: object, config: SchedulerConfig
) -> None:
    """The replicas routed as they run (``fleet_live``): one replica sent every request replays ``simulate``'s steps,
    stopped at each arrival for the router and resumed, to the last bit."""
    workload = make_workload(
        prompt=1500, output=150, n_requests=300, rate=6.0, conversation=CONVERSATION, prefix=SharedPrefix(256)
    )
    alone = simulate(cost, workload, config, ttft_sla_ms=100.0, tpot_sla_ms=10.0)  # type: ignore[arg-type]
    assignment, runs = replay_routed(
        cost,  # type: ignore[arg-type]
        workload,
        config,
        replicas=1,
        router=Router(policy="load-aware"),
        ttft_sla_ms=100.0,
        tpot_sla_ms=10.0,
    )
    assert runs[0] is not None and not assignment.any()
    _same(runs[0], alone)


@pytest.mark.parametrize("replicas", [2, 4])
def test_load_aware_keeps_a_conversation_s_history_and_balances_in_one_pass(
    cost: object, config: SchedulerConfig, replicas: int
) -> None:
    """llm-d's default weights (queue 2, KV usage 2, prefix 3): a turn whose history is cached on one replica scores
    3 more there, which an equal queue and usage never outweigh, so the hit rate is one replica's; the first turns go
    where the queue is shortest and the KV usage lowest, so no replica takes more than its share by 10 %."""
    workload = _conversations(replicas)
    fleet = _fleet(cost, workload, config, replicas, "load-aware")
    assert (fleet.passes, fleet.settled) == (1, True)
    assert fleet.prefix_hit_rate == pytest.approx(_single(cost, config), abs=0.01)
    assert max(fleet.requests_per_replica) < 1.1 * REQUESTS / replicas
    # Every request's replica comes from the replicas' state at its arrival: the router's own record agrees.
    assert sum(fleet.requests_per_replica) == REQUESTS and (fleet.assignment < replicas).all()


def test_load_aware_spills_a_hot_prefix_where_the_queue_builds(cost: object, config: SchedulerConfig) -> None:
    """A 2,048-token prefix on every request scores 3 x 2048/3000 = 2 on the replica holding it: at 20 req/s no
    queue forms and the holder takes most of the traffic; at 160 req/s its queue and KV usage outweigh the bonus
    and the others take a share each (llm-d's queue scorer scales the longest queue to 0, the shortest to 1)."""
    light = make_workload(prompt=3000, output=64, n_requests=1200, rate=20.0, prefix=SharedPrefix(2048))
    heavy = _fleet(cost, light.at_rate(160.0), config, 4, "load-aware")
    assert min(heavy.requests_per_replica) > 100, heavy.requests_per_replica


def test_load_aware_is_refused_where_it_cannot_be_routed_ahead() -> None:
    workload = make_workload(prompt=400, output=50, n_requests=40, rate=2.0)
    with pytest.raises(ValueError, match="as they run"):
        Router(policy="load-aware").route(workload, 3)
