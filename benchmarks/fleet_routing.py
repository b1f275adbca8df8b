"""What the router in front of N replicas does to the prefix-cache hit rate and the P99s, and what a fleet costs
to simulate.

    PYTHONPATH=. .venv/bin/python benchmarks/fleet_routing.py [--requests-per-replica 1000]

Llama-3.1-8B bf16 on an H100 under vLLM (the shipped calibrated step cost, its KV cache at 256 sequences), each
replica at the same share of the traffic whatever N (the fleet's rate is N times it), two workloads:

- ``conversation``: docs/levers.md's 4-turn sessions (1,500-token first prompt, + 150 out and 200 new tokens a
  turn, 30 s think time) at 4 req/s per replica, where one replica keeps every history it is sent;
- ``system-prompt``: 3,000-token prompts sharing a 2,048-token system prompt, 64 out, at 20 req/s per replica.

For N = 1, 2, 4, 8, 16 and each policy (``recommender/perf/sim/routing.py``): the fleet's hit rate (prompt tokens
served from the replicas' caches), P99 TTFT and TPOT over every request, the spread of requests per replica and
the wall time of ``simulate_fleet`` (routing included; prefix-aware routes twice). Then, for the speed budget, a
16-replica fleet against one replica simulating the same total requests. Each replica serves
`--requests-per-replica` requests, so a fleet of N simulates N times as many.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.fleet import simulate_fleet
from recommender.perf.sim.routing import POLICIES, Router
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import SharedPrefix, Workload, make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.perf.step.cost import StepCostModel

FLEETS = (1, 2, 4, 8, 16)


def _workloads(per_replica: int) -> dict[str, Callable[[int], Workload]]:
    conversation = Conversation(turns=4, think_time_s=30.0, message_tokens=200)
    return {
        "conversation": lambda n: make_workload(
            prompt=1500, output=150, n_requests=per_replica * n, rate=4.0 * n, conversation=conversation
        ),
        "system-prompt": lambda n: make_workload(
            prompt=3000, output=64, n_requests=per_replica * n, rate=20.0 * n, prefix=SharedPrefix(2048)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-per-replica", type=int, default=1000)
    args = parser.parse_args()
    _, shape = load_architecture("llama-3.1-8b")
    method, h100 = get_scheme("baseline"), load_catalog().get("h100-sxm")
    cost: StepCostModel = CalibratedModel(load_fit(), None).step_cost(shape, method, h100, "vllm")
    kv = kv_cache_tokens(shape, method, h100, max_num_seqs=256)
    config = PROFILES["vllm"].batching(SchedulerConfig(kv_cache_tokens=kv, max_num_seqs=256))
    workloads = _workloads(args.requests_per_replica)
    simulate(cost, workloads["conversation"](1), config)  # load the compiled loop once, outside the timings
    print(f"llama-3.1-8b bf16 on h100-sxm, vllm, {kv:,} KV tokens per replica, {args.requests_per_replica} requests")
    print("per replica\n")
    for name, make in workloads.items():
        print(f"### {name}\n")
        print("| N | policy | hit rate | P99 TTFT ms | P99 TPOT ms | requests/replica | wall s |")
        print("|---|---|---|---|---|---|---|")
        for n in FLEETS:
            workload = make(n)
            for policy in POLICIES:
                t0 = time.perf_counter()
                fleet = simulate_fleet(cost, workload, config, replicas=n, router=Router(policy=policy))
                wall = time.perf_counter() - t0
                counts = fleet.requests_per_replica
                print(
                    f"| {n} | {policy} | {fleet.prefix_hit_rate:.3f} | {fleet.fleet.ttft_ms.p99:.0f} | "
                    f"{fleet.fleet.tpot_ms.p99:.1f} | {min(counts)}-{max(counts)} | {wall:.2f} |"
                )
        print()
    _speed(cost, config, workloads["conversation"])


def _speed(cost: StepCostModel, config: SchedulerConfig, make: Callable[[int], Workload]) -> None:
    """A 16-replica fleet against one replica simulating the same requests at one replica's share of the rate (the
    same work: 16 x the requests, the same load per replica; its think time stretched 16 x, which only the hit rate
    notices)."""
    fleet_workload = make(16)
    alone = fleet_workload.at_rate(4.0)
    t0 = time.perf_counter()
    simulate(cost, alone, config)
    one = time.perf_counter() - t0
    print(f"speed: one replica, {len(alone):,} requests at 4 req/s: {one:.2f} s")
    for policy in POLICIES:
        t0 = time.perf_counter()
        simulate_fleet(cost, fleet_workload, config, replicas=16, router=Router(policy=policy))
        wall = time.perf_counter() - t0
        print(f"speed: 16 replicas, {len(fleet_workload):,} requests at 64 req/s, {policy}: {wall:.2f} s")


if __name__ == "__main__":
    main()
