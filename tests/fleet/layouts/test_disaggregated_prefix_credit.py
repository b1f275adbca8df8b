"""A RAG-like traffic (a 7,000-token system prompt in 8,000-token prompts): the decode pool's prefix cache holds the
system prompt, so vLLM's decode workers pull only the rest and the TTFT's transfer leg shrinks; SGLang (decode radix
cache off by default) moves the whole prompt; traffic without sharing prices the transfer exactly as before.

Real parts: the shipped calibrated step costs, the continuous-batching simulator with its prefix cache, the link
catalog; one degree and one batch cap, so each plan simulates a few configurations.
"""

from __future__ import annotations

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.config.traffic import PromptPrefix
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, plan_disaggregated
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.kv_transfer import kv_transfer
from recommender.quantize import get_scheme

CATALOG = load_catalog()
H100 = CATALOG.get("h100-sxm")
LLAMA_8B = load_architecture("llama-3.1-8b")[1]
IB = resolve_link("infiniband-ndr", H100)
SCOPE = PlanScope(tensor_parallel=(1,), batch_sizes=(32,), kv_cache_dtypes=("auto",))


def _plan(engine: str, prefix: PromptPrefix | None) -> DisaggregatedRow:
    traffic = Traffic(prompt_tokens=8000, output_tokens=200, requests_per_second=10, shared_prefix=prefix)
    sla = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=30)
    performance = PerformanceEvaluator(CATALOG, LLAMA_8B, traffic, sla, engines=(engine,), require_price=False)
    return plan_disaggregated(performance, H100, "fp8", get_scheme("fp8-dynamic"), link=IB, scope=SCOPE)


def test_the_decode_sides_prefix_cache_shortens_the_transfer_and_the_ttft_of_rag_traffic() -> None:
    alone, shared = _plan("vllm", None), _plan("vllm", PromptPrefix(tokens=7000))
    whole_ms = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB).seconds * 1e3
    assert alone.transfer_ms == pytest.approx(whole_ms)  # no sharing: the whole longest prompt, as before
    assert shared.transfer_ms is not None and shared.transfer_ms < whole_ms / 4  # 1,000 of 8,000 tokens moved
    assert shared.ttft_p99_high_ms is not None and alone.ttft_p99_high_ms is not None
    assert shared.ttft_p99_high_ms < alone.ttft_p99_high_ms
    assert shared.gpus is not None and alone.gpus is not None and shared.gpus <= alone.gpus
    assert shared.provenance is not None and "prefix credit saves" in shared.provenance.detail
    assert alone.provenance is not None and "KV sent per request" not in alone.provenance.detail


def test_an_engine_whose_decode_side_does_not_reuse_its_cache_keeps_the_whole_transfer() -> None:
    shared = _plan("sglang", PromptPrefix(tokens=7000))
    whole_ms = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB).seconds * 1e3
    assert shared.transfer_ms == pytest.approx(whole_ms)
    assert shared.provenance is not None and "SGLang sends the whole prompt" in shared.provenance.detail


def test_a_decode_pool_that_rarely_holds_the_prefix_is_replanned_with_the_whole_transfer() -> None:
    # 5,000 templates over the simulated requests: most prompts meet their template for the first time, so the TTFT
    # split's assumption (every shared prefix held) fails and the pools are planned again without the credit.
    shared = _plan("vllm", PromptPrefix(tokens=7000, templates=5000))
    whole_ms = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB).seconds * 1e3
    assert shared.transfer_ms == pytest.approx(whole_ms)
    assert shared.provenance is not None and "priced whole" in shared.provenance.detail
