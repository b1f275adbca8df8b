"""Wall time of the simulation per GPU at 100, 500 and 1,500 requests in flight, settled as `plan` settles it.

    .venv/bin/python benchmarks/simulator_speed.py [--hardware b200] [--json out.json]

Llama 3.1 8B in FP8 (``fp8-dynamic``) under vLLM with an FP8 KV cache and a batch cap of 2048, on the shipped
calibrated step cost (datasheet fit, no kernel tables: the same on every machine), short chat turns (prompts
~128, outputs ~256 tokens, lognormal CV 0.5). For each target, the arrival rate is set (a
bisection below the capacity) so that one replica holds that many requests at once, and then timed:

- ``settle``: the P99s at that rate as `plan` reports them at a replica's load (``serving.settled_at``: one
  run of at least twice the Little's-law count, doubled while the batch fills or its P99s move >= 5 % from its
  own first half's);
- ``capacity`` (once: the same replica): its capacity search for P99 TTFT <= 2 s and TPOT <= 150 ms
  (``capacity.max_rate_within_sla``: 600-request probes judged for overload, the answer alone at steady
  state and doubled once, stepping down if refused there), which holds more than 1,500 at once;

so ``settle + capacity`` is what one GPU x configuration x engine costs `plan` (an engine's interval adds a
second settle at the load). A first small simulation is timed apart: what a process pays once (loading the compiled
loop, tabulating the configuration's step costs). Prints a table and, with --json, writes the rows.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.capacity import max_rate_within_sla
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving import TrafficLoad, settled_at
from recommender.perf.sim.settle import in_flight, steady
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import LengthDist, make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme

PROMPT, OUTPUT = LengthDist(128, 0.5), LengthDist(256, 0.5)
TARGETS = (100, 500, 1500)
#: An SLA loose enough that the replica's capacity holds more than the largest target at once.
TTFT_MS, TPOT_MS = 2000.0, 150.0


def _rate_for(target: float, cost: Any, config: SchedulerConfig, hi: float) -> float:
    """The arrival rate below `hi` at which a settled replica holds about `target` requests at once (bisection:
    the requests in flight grow with the rate)."""
    lo, rate = 0.0, hi
    for _ in range(12):

        def run(n: int, r: float = rate) -> Any:
            return simulate(
                cost,
                make_workload(prompt=PROMPT, output=OUTPUT, n_requests=n, rate=r),
                config,
            )

        got = steady(run, rate)
        flight = in_flight(got.result, rate)
        if not got.overloaded and abs(flight / target - 1) < 0.08:
            return rate
        lo, hi = (lo, rate) if got.overloaded or flight > target else (rate, hi)
        rate = (lo + hi) / 2
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", default="b200")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    _, shape = load_architecture("llama-3.1-8b")
    method, accel = get_scheme("fp8-dynamic"), load_catalog().get(args.hardware)
    cost = CalibratedModel(load_fit(), None).step_cost(shape, method, accel, "vllm", kv_cache_dtype="fp8")
    kv = kv_cache_tokens(shape, method, accel, max_num_seqs=2048, kv_cache_dtype="fp8")
    config = PROFILES["vllm"].batching(SchedulerConfig(kv_cache_tokens=kv, max_num_seqs=2048))
    print(f"llama-3.1-8b fp8-dynamic on {accel.name}, vllm, fp8 KV ({kv:,} tokens), max_num_seqs 2048")
    # What a process pays once, before any figure below: loading the compiled loop and tabulating this
    # configuration's step costs (nothing to load on the Python scheduler).
    started = time.perf_counter()
    simulate(cost, make_workload(prompt=PROMPT, output=OUTPUT, n_requests=20, rate=1.0), config)
    print(f"first simulation (loading, tabulating the steps): {time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    search = max_rate_within_sla(
        cost,
        config,
        prompt=PROMPT,
        output=OUTPUT,
        ttft_p99_ms=TTFT_MS,
        tpot_p99_ms=TPOT_MS,
    )
    capacity_s = time.perf_counter() - started
    assert search.settled is not None
    print(
        f"capacity for P99 TTFT <= {TTFT_MS:g} ms, TPOT <= {TPOT_MS:g} ms: {search.rate_per_s:.1f} req/s, "
        f"{in_flight(search.settled.result, search.rate_per_s):.0f} in flight, {search.evaluations} simulations, "
        f"{capacity_s:.3f} s; P99s over {search.settled.describe()}"
    )
    rows: list[dict[str, Any]] = []
    for target in TARGETS:
        rate = _rate_for(target, cost, config, search.rate_per_s)
        started = time.perf_counter()
        settled = settled_at(cost, config, TrafficLoad(rate, 128, 256, PROMPT, OUTPUT), rate, None)
        settle_s = time.perf_counter() - started
        rows.append(
            {
                "target_in_flight": target,
                "rate_per_s": round(rate, 2),
                "in_flight": round(in_flight(settled.result, rate)),
                "requests": settled.requests,
                "p99s": settled.describe(),
                "ttft_p99_ms": round(settled.result.ttft_ms.p99, 1),
                "tpot_p99_ms": round(settled.result.tpot_ms.p99, 2),
                "settle_s": round(settle_s, 3),
                "capacity_rps": round(search.rate_per_s, 2),
                "capacity_simulations": search.evaluations,
                "capacity_s": round(capacity_s, 3),
                "per_gpu_s": round(settle_s + capacity_s, 3),
            }
        )
    header = (
        "in flight",
        "req/s",
        "requests",
        "P99 TTFT ms",
        "P99 TPOT ms",
        "settle s",
        "capacity s (sims)",
        "per GPU s",
    )
    print(" | ".join(header))
    for r in rows:
        print(
            " | ".join(
                str(x)
                for x in (
                    r["in_flight"],
                    r["rate_per_s"],
                    f"{r['requests']:,}",
                    r["ttft_p99_ms"],
                    r["tpot_p99_ms"],
                    r["settle_s"],
                    f"{r['capacity_s']} ({r['capacity_simulations']})",
                    r["per_gpu_s"],
                )
            )
        )
    for r in rows:
        print(f"  {r['in_flight']} in flight: P99s over {r['p99s']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"hardware": args.hardware, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
