"""Wall time of the continuous-batching simulator: 10,000 requests, and a capacity search.

    .venv/bin/python benchmarks/simulator_speed.py [--requests 10000] [--repeats 3] [--ttft-ms 500] [--tpot-ms 50]

A Llama-3-8B-shaped model in bf16 (``baseline``) on the catalog's H100 SXM, roofline step
costs, vLLM-like defaults (256 sequences, 8192 tokens per step, chunked prefill, KV cache
from 90 % of memory). Prompts ~512 and outputs ~256 tokens, lognormal with CV 0.5.
First the highest Poisson rate whose P99 TTFT and TPOT meet the SLA (bisection, each
probe simulating all the requests), then the best-of-N wall time of one simulation at a
light load, at that rate, and at twice it (overload: the queue grows without bound).
Target: every simulation of 10,000 requests in <= 1 s on 2 CPU cores.

Then the cost at high load: 100, 500 and 1,500 requests running at once (max_num_seqs that many, arrivals
at 1.2x what that batch decodes, so it stays full), each simulating the Little's-law count a settled run
takes (``perf/sim/settle.py``: the requests in flight as warm-up, then 4x them measured), and one doubled
run, as the convergence check does.
"""

from __future__ import annotations

import argparse
import time

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.capacity import max_rate_within_sla
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.settle import requests_for
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import LengthDist, make_workload
from recommender.perf.step.cost import RooflineStepCost
from recommender.quantize import get_scheme

_, LLAMA3_8B = load_architecture("llama-3.1-8b")  # the shipped config.json numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ttft-ms", type=float, default=500.0)
    parser.add_argument("--tpot-ms", type=float, default=50.0)
    args = parser.parse_args()

    method, accel = get_scheme("baseline"), load_catalog().get("h100-sxm")
    cost = RooflineStepCost(LLAMA3_8B, method, accel)
    config = SchedulerConfig(kv_cache_tokens=kv_cache_tokens(LLAMA3_8B, method, accel))
    prompt, output = LengthDist(512, 0.5), LengthDist(256, 0.5)
    print(f"{accel.name}, {method.name}, {config}")

    start = time.perf_counter()
    search = max_rate_within_sla(
        cost,
        config,
        prompt=prompt,
        output=output,
        ttft_p99_ms=args.ttft_ms,
        tpot_p99_ms=args.tpot_ms,
        n_requests=args.requests,
    )
    search_s = time.perf_counter() - start
    print(
        f"max rate within P99 TTFT <= {args.ttft_ms:g} ms, TPOT <= {args.tpot_ms:g} ms: "
        f"{search.rate_per_s:.2f} req/s ({search.evaluations} simulations of {args.requests} requests, "
        f"{search_s:.2f} s)"
    )
    if search.result is not None:
        r = search.result
        print(
            f"  there: P99 TTFT {r.ttft_ms.p99:.0f} ms, P99 TPOT {r.tpot_ms.p99:.1f} ms, "
            f"{r.output_tokens_per_s:.0f} output tok/s"
        )

    rate = search.rate_per_s or 1.0
    for label, at in (("light load (1 req/s)", 1.0), ("at the max rate", rate), ("overload (2x max)", 2 * rate)):
        workload = make_workload(prompt=prompt, output=output, n_requests=args.requests, rate=at, seed=0)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = simulate(cost, workload, config)
            times.append(time.perf_counter() - start)
        print(
            f"{label:>22}: {min(times):.3f} s wall (best of {args.repeats}) for {args.requests} requests, "
            f"{result.steps} steps, {result.preemptions} preemptions, P99 TTFT {result.ttft_ms.p99:.0f} ms"
        )

    _in_flight(cost, prompt, output, args.repeats)


def _in_flight(cost: RooflineStepCost, prompt: LengthDist, output: LengthDist, repeats: int) -> None:
    """Wall time of a settled run's simulations with 100, 500 and 1,500 requests running at once."""
    for seats in (100, 500, 1500):
        config = SchedulerConfig(kv_cache_tokens=seats * 4096, max_num_seqs=seats, max_num_batched_tokens=8192)
        rate = 1.2 * seats / (output.mean * cost.step_seconds(0, seats, int(seats * (prompt.mean + output.mean / 2))))
        for n in (requests_for(seats), 2 * requests_for(seats)):
            workload = make_workload(prompt=prompt, output=output, n_requests=n, rate=rate, seed=0)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                result = simulate(cost, workload, config)
                times.append(time.perf_counter() - start)
            print(
                f"{seats:>5} in flight: {min(times):.3f} s wall (best of {repeats}) for {n} requests at "
                f"{rate:.1f} req/s, {result.steps} steps"
            )


if __name__ == "__main__":
    main()
