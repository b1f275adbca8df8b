"""The search's disaggregated candidates with the decode pool at each tensor-parallel degree: what each pair costs.

Llama-3.1-70B in FP8 (fp8-dynamic) on H100 SXM, 4,000-token prompts and 256-token answers at 10 requests/s, P99
TTFT 2 s and TPOT 40 ms, vLLM, a batch cap of 32, the KV over one 400 Gb/s InfiniBand NIC per GPU: each candidate
(prefill degree x decode degree, ``decode_tensor_parallel``) evaluated as the search evaluates it
(``evaluate_disaggregated``), with its $/month (the default price set), its pools, and the seconds its evaluation
took here:

    .venv/bin/python benchmarks/search_decode_degrees.py
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

DEGREES = (2, 4, 8)


def main() -> None:
    catalog = load_catalog()
    traffic = Traffic(prompt_tokens=4000, output_tokens=256, requests_per_second=10)
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=40)
    performance = PerformanceEvaluator(catalog, load_architecture("llama-3.1-70b")[1], traffic, sla, engines=("vllm",))
    print(
        "| candidate | $/month | prefill workers x TP | decode workers x TP | P99 TPOT high (ms) | evaluated in (s) |"
    )
    print("|---|---|---|---|---|---|")
    for prefill in DEGREES:
        for decode in DEGREES:
            c = Candidate(
                "fp8", "fp8-dynamic", "h100-sxm", 32, prefill, layout="disaggregated", decode_tensor_parallel=decode
            )
            start = time.perf_counter()
            result = evaluate_disaggregated(performance, c, link="infiniband-ndr")
            took = time.perf_counter() - start
            pools, serving = result.pools, result.serving
            if pools is None or serving is None:
                print(f"| `{c.key}` | {'; '.join(result.broken)[:120]} | | | | {took:.1f} |")
                continue
            print(
                f"| `{c.key}` | {usd(result.usd_per_month)} | {pools.prefill.estimate.workers} x TP{prefill} | "
                f"{pools.decode.estimate.workers} x TP{decode} | {serving.tpot_p99_high_ms or 0:.1f} | {took:.1f} |"
            )


if __name__ == "__main__":
    main()
