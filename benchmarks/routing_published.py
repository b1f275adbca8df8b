"""llm-d's published prefix-cache-aware routing benchmark, set up as closely as the simulator can, and compared.

    PYTHONPATH=. .venv/bin/python benchmarks/routing_published.py [--requests 1000]

Source: llm-d/llm-d-kv-cache-manager ``benchmarking/37-capacity/README.md`` @ edb766fd (the inference-perf report
behind llm-d's "KV-Cache Wins You Can See" post, llm-d/llm-d.github.io
``blog/2025-09-24_kvcache-wins-you-can-see.md`` @ 4a7d0965, which links the kv-cache-manager's benchmarking reports).
Its setup: 4 vLLM pods serving meta-llama/Llama-3.1-70B-Instruct, each with a KV cache of 461,376 tokens ("effective,
min TP rank"), behind llm-d's endpoint picker; inference-perf's ``shared_prefix`` data: 83 groups x 3 prompts, an
8,000-token system prompt per group + a 1,000-token question, 1,000 output tokens (``ignore_eos``), constant-rate
stages 3 -> 20 req/s. Published (its "Summary" and per-QPS tables): behind ``random-picker`` the fleet saturates
(TTFT p90 22.8 s at 4 req/s, 56 s at 6 req/s, growing every stage) at 2,956 / 3,109 / 3,117 / 3,141 / 3,126 / 3,241
output tokens/s at 6 / 8 / 10 / 12 / 15 / 20 req/s: a mean of 3,115 tokens/s, the fleet's capacity behind a random
router; behind the precise prefix-cache scorer (weight 2, with kv-cache 1 and active-request 1) TTFT p90 stays at
0.40 s up to 20 req/s, the highest stage: no saturation there.

The simulation: the same model (bf16), on H100-SXM at TP4 (the GPU is not named in the report; its 461,376-token KV
cache matches 4 x 80 GB less 141 GB of weights at vLLM's default memory fraction; the tool's memory model prints its
own figure), vLLM's calibrated step costs, the same prompt shape (``SharedPrefix(8000, templates=83)``: each request
picks its group uniformly, inference-perf cycles through them), Poisson arrivals at each offered rate, 4 replicas
behind ``random`` and behind ``prefix-aware`` (``perf/sim/routing.py``: the longest cached prefix, the queue
breaking ties; llm-d's precise scorer reads the pods' KV events, the simulation's router predicts each replica's
cache from its own routing, as llm-d's approximate scorer does). Compared: the simulated fleet's output tokens/s at
the saturated offered rates (6-20 req/s) behind random against the published 3,115, and whether prefix-aware
holds 20 req/s where the published precise scorer did. Each replica starts cold; the report's runs had a 25 s
warm-up stage at 10 req/s.
"""

from __future__ import annotations

import argparse
import statistics

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.fleet import simulate_fleet
from recommender.perf.sim.routing import Router
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.workload import SharedPrefix, make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme

SOURCE = "llm-d/llm-d-kv-cache-manager benchmarking/37-capacity/README.md @ edb766fd"
#: Published output tokens/s behind random-picker at the saturated stages (req/s -> tokens/s).
PUBLISHED_RANDOM = {6.0: 2955.9, 8.0: 3108.8, 10.0: 3117.3, 12.0: 3140.8, 15.0: 3126.2, 20.0: 3241.0}
#: Published output tokens/s behind the precise prefix-cache scorer at the 20 req/s stage.
PUBLISHED_PRECISE_20 = 8003.9
PUBLISHED_KV_TOKENS = 461_376
REPLICAS, TP, MAX_NUM_SEQS = 4, 4, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per offered rate (the whole fleet)")
    args = parser.parse_args()
    _, shape = load_architecture("llama-3.1-70b")
    method, h100 = get_scheme("baseline"), load_catalog().get("h100-sxm")
    cost = CalibratedModel(load_fit(), None).step_cost(shape, method, h100, "vllm", tensor_parallel=TP)
    kv = kv_cache_tokens(shape, method, h100, tensor_parallel=TP, max_num_seqs=MAX_NUM_SEQS)
    config = PROFILES["vllm"].batching(SchedulerConfig(kv_cache_tokens=kv, max_num_seqs=MAX_NUM_SEQS))
    print(f"source: {SOURCE}")
    print(
        f"llama-3.1-70b bf16, h100-sxm TP{TP}, vllm: {kv:,} KV tokens per replica (published {PUBLISHED_KV_TOKENS:,})"
    )
    print("| offered req/s | policy | output tok/s | published | hit rate | P90 TTFT s |")
    print("|---|---|---|---|---|---|")
    found: dict[str, list[float]] = {"random": [], "prefix-aware": []}
    for rate, published in PUBLISHED_RANDOM.items():
        workload = make_workload(
            prompt=9000, output=1000, n_requests=args.requests, rate=rate, prefix=SharedPrefix(8000, templates=83)
        )
        for policy in found:
            fleet = simulate_fleet(cost, workload, config, replicas=REPLICAS, router=Router(policy=policy))
            tokens = fleet.fleet.output_tokens_per_s
            found[policy].append(tokens)
            shown = f"{published:,.0f}" if policy == "random" else "not saturated"
            p90 = float(sorted(fleet.fleet.ttft_s)[int(0.9 * len(fleet.fleet.ttft_s))])
            print(f"| {rate:g} | {policy} | {tokens:,.0f} | {shown} | {fleet.prefix_hit_rate:.2f} | {p90:.2f} |")
    simulated, published = statistics.mean(found["random"]), statistics.mean(PUBLISHED_RANDOM.values())
    print(
        f"\nrandom, saturated (6-20 req/s): simulated {simulated:,.0f} output tok/s, published {published:,.0f}: "
        f"{simulated / published - 1:+.0%}"
    )
    ratio = found["prefix-aware"][-1] / found["random"][-1]
    published_ratio = PUBLISHED_PRECISE_20 / PUBLISHED_RANDOM[20.0]
    print(
        f"at 20 req/s, prefix-aware's output tok/s over random's: simulated x{ratio:.2f}, published (precise "
        f"scorer) x{published_ratio:.2f}: {ratio / published_ratio - 1:+.0%}"
    )


if __name__ == "__main__":
    main()
