"""The decode side's prefix cache credited in the KV transfer: a RAG-like traffic against the same traffic unshared.

Llama-3.1-8B in FP8 on H100 SXM, prefill and decode pools of TP 1 (batch cap 32) over one 400 Gb/s InfiniBand NIC
per GPU, 8,000-token prompts (7,000 of them a shared system prompt where shared), 200 output tokens, 10 requests/s,
P99 TTFT 1 s, TPOT 30 ms. Prints each plan's KV transfer (the TTFT's leg), P99 TTFT (steps at their upper end),
pool sizes and what the row's provenance says was sent. Runs on any checkout (it imports only the planner), so the
same command on a tree before the credit gives the whole-prompt figures:

    .venv/bin/python benchmarks/disaggregated_prefix_credit.py
"""

from __future__ import annotations

import re

from recommender.config.spec import LatencySLA, Traffic
from recommender.config.traffic import PromptPrefix
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_plan import plan_disaggregated
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.quantize import get_scheme


def main() -> None:
    catalog = load_catalog()
    shape, accel = load_architecture("llama-3.1-8b")[1], catalog.get("h100-sxm")
    link = resolve_link("infiniband-ndr", accel)
    sla = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=30)
    scope = PlanScope(tensor_parallel=(1,), batch_sizes=(32,), kv_cache_dtypes=("auto",))
    print("| engine | traffic | KV transfer (ms) | P99 TTFT high (ms) | prefill + decode workers | sent per request |")
    print("|---|---|---|---|---|---|")
    for engine in ("vllm", "sglang"):
        for prefix in (None, PromptPrefix(tokens=7000)):
            traffic = Traffic(prompt_tokens=8000, output_tokens=200, requests_per_second=10, shared_prefix=prefix)
            performance = PerformanceEvaluator(catalog, shape, traffic, sla, engines=(engine,), require_price=False)
            row = plan_disaggregated(performance, accel, "fp8", get_scheme("fp8-dynamic"), link=link, scope=scope)
            assert row.prefill is not None and row.decode is not None, row.note
            detail = row.provenance.detail if row.provenance else ""
            sent = re.search(r"KV sent per request ([^(]*)\(prefix credit saves (\d+%)", detail)
            print(
                f"| {engine} | {'7,000-token system prompt' if prefix else 'unshared'} | {row.transfer_ms:.2f} "
                f"| {row.ttft_p99_high_ms:.1f} | {row.prefill.estimate.workers} + {row.decode.estimate.workers} "
                f"| {f'{sent.group(1).strip()} (saves {sent.group(2)})' if sent else 'whole prompt'} |"
            )


if __name__ == "__main__":
    main()
