"""The KV transfer credits the decode side's prefix cache only where the engine does, and only what the P99 request
finds there; traffic without shared prefixes prices the whole longest prompt, as before.

Real parts: the shipped architectures and link catalog, the simulator's own workload draw of the traffic.
"""

from __future__ import annotations

import pytest

from recommender.config.spec import Traffic
from recommender.config.traffic import PromptPrefix, traffic_load
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.kv_transfer import kv_transfer
from recommender.perf.sim.serving import TrafficLoad
from recommender.perf.sim.transfer_credit import CreditedTransfer, credited_transfer, decode_prefix_credit

H100 = load_catalog().get("h100-sxm")
IB = resolve_link("infiniband-ndr", H100)
LLAMA_8B = load_architecture("llama-3.1-8b")[1]
GPT_OSS_20B = load_architecture("gpt-oss-20b")[1]


def _load(prefix: PromptPrefix | None) -> TrafficLoad:
    return traffic_load(Traffic(prompt_tokens=8000, output_tokens=200, requests_per_second=10, shared_prefix=prefix))


def _credited(
    engine: str, prefix: PromptPrefix | None, *, tp: int = 1, decode_hit_rate: float | None = None
) -> CreditedTransfer:
    return credited_transfer(
        LLAMA_8B,
        _load(prefix),
        engine=engine,
        longest_prompt=8000,
        link=IB,
        prefill_tp=tp,
        decode_tp=2 * tp,
        decode_hit_rate=decode_hit_rate,
    )


def test_a_long_shared_system_prompt_held_by_the_decode_side_is_not_sent() -> None:
    whole = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB, decode_tp=2)
    got = _credited("vllm", PromptPrefix(tokens=7000))
    assert got.credited_tokens == 7000 and got.held == 1.0
    assert got.transfer.sent_bytes == pytest.approx(whole.sent_bytes / 8)  # 1,000 of 8,000 tokens cross the link
    assert got.transfer.seconds < whole.seconds / 4
    assert got.transfer.reserved_bytes == whole.reserved_bytes  # the decode side still reserves the whole prompt
    assert got.mean_sent_bytes == pytest.approx(got.mean_whole_bytes / 8)
    assert "saves 88%" in got.detail() and "NixlConnector" in got.detail()


def test_sglang_without_its_decode_radix_cache_flag_sends_the_whole_prompt() -> None:
    whole = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB, decode_tp=2)
    got = _credited("sglang", PromptPrefix(tokens=7000))
    assert got.transfer == whole and got.held == 0.0 and got.credited_tokens == 0
    assert got.mean_sent_bytes == got.mean_whole_bytes
    assert "--disaggregation-decode-enable-radix-cache" in got.detail() and "saves 0%" in got.detail()


def test_tensorrt_llm_credits_one_kv_pool_and_sends_every_block_of_a_window_model() -> None:
    assert decode_prefix_credit("trtllm", LLAMA_8B)
    assert not decode_prefix_credit("trtllm", GPT_OSS_20B)  # full and 128-token window layers: two KV pools
    assert decode_prefix_credit("vllm", GPT_OSS_20B) and not decode_prefix_credit("tgi", LLAMA_8B)


def test_without_shared_prefixes_the_transfer_is_the_whole_longest_prompt_as_before() -> None:
    whole = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB, prefill_tp=2, decode_tp=4)
    got = _credited("vllm", None, tp=2, decode_hit_rate=0.0)
    assert got.transfer == whole and got.detail() == ""


def test_the_p99_leg_keeps_the_whole_prompt_where_more_than_one_request_in_a_hundred_misses_the_prefix() -> None:
    whole = kv_transfer(LLAMA_8B, prompt_tokens=8000, link=IB, decode_tp=2)
    half = _credited("vllm", PromptPrefix(tokens=7000, fraction=0.5))  # half the prompts carry no shared prefix
    assert half.transfer == whole and half.credited_tokens == 0
    assert half.mean_sent_bytes == pytest.approx(half.mean_whole_bytes * (1 - 0.5 * 7 / 8), rel=0.05)
    cold = _credited("vllm", PromptPrefix(tokens=7000), decode_hit_rate=0.4)  # an evicted cache: 46 % held
    assert cold.transfer == whole and cold.held == pytest.approx(0.4 * 8 / 7)
    assert cold.mean_sent_bytes < cold.mean_whole_bytes
