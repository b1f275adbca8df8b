"""The search's disaggregated candidates with the decode pool on each GPU of the space: what each pair costs.

Llama-3.1-8B in BF16, 8,000-token prompts and 256-token answers at 40 requests/s, P99 TTFT 2 s and TPOT 40 ms,
vLLM, both pools at TP 1 with a batch cap of 32, the KV over one 400 Gb/s InfiniBand NIC per GPU: each candidate
(prefill GPU x decode GPU) evaluated as the search evaluates it (``evaluate_disaggregated``), with its $/month (each
pool at its own GPU's price in the default price set), its pools, and the seconds its evaluation took here (a pair
of two GPU types simulates both GPUs' pools, about twice a one-GPU candidate):

    .venv/bin/python benchmarks/search_decode_pools.py
"""

from __future__ import annotations

import time

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.money import usd
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog

GPUS = ("h100-sxm", "h200")


def main() -> None:
    catalog = load_catalog()
    traffic = Traffic(prompt_tokens=8000, output_tokens=256, requests_per_second=40)
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=40)
    performance = PerformanceEvaluator(catalog, load_architecture("llama-3.1-8b")[1], traffic, sla, engines=("vllm",))
    evaluate_disaggregated(
        performance, Candidate("bf16", "baseline", GPUS[0], 32, layout="disaggregated"), link="nvlink"
    )
    print(
        "| candidate | $/month | prefill workers x GPU | decode workers x GPU | P99 TPOT high (ms) | evaluated in (s) |"
    )
    print("|---|---|---|---|---|---|")
    for prefill in GPUS:
        for decode in GPUS:
            c = Candidate("bf16", "baseline", prefill, 32, layout="disaggregated", decode_hardware=decode)
            start = time.perf_counter()
            result = evaluate_disaggregated(performance, c, link="infiniband-ndr")
            took = time.perf_counter() - start
            pools, serving = result.pools, result.serving
            if pools is None or serving is None:
                print(f"| `{c.key}` | {'; '.join(result.broken)} | | | | {took:.1f} |")
                continue
            print(
                f"| `{c.key}` | {usd(result.usd_per_month)} | {pools.prefill.estimate.workers} x {prefill} | "
                f"{pools.decode.estimate.workers} x {c.decode_gpu} | {serving.tpot_p99_high_ms or 0:.1f} | {took:.1f} |"
            )


if __name__ == "__main__":
    main()
