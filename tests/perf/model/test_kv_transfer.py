"""The KV transfer between a prefill and a decode pool: bytes from the architecture, prefix-cache hits excluded."""

from __future__ import annotations

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.kv_transfer import kv_transfer, missing_kv_bytes

H200 = load_catalog().get("h200")
IB, NVLINK = resolve_link("infiniband-ndr", H200), resolve_link("nvlink", H200)
_, DEEPSEEK_V3 = load_architecture("deepseek-v3")
_, GPT_OSS_120B = load_architecture("gpt-oss-120b")
_, LLAMA_70B = load_architecture("llama-3.1-70b")


def test_mla_sends_the_latent_over_the_network_whole_to_each_decode_rank() -> None:
    move = kv_transfer(DEEPSEEK_V3, prompt_tokens=8192, link=IB, prefill_tp=8, decode_tp=8)
    assert move.sent_bytes == 8192 * 61 * 576 * 2  # 576 MB: 61 layers x (512 + 64) x bf16 per token
    assert move.bytes_per_link == move.sent_bytes  # tensor parallelism does not split the latent
    assert move.seconds == pytest.approx(50e-6 + move.sent_bytes / 50e9)  # 11.6 ms over one 400 Gb/s NIC


def test_grouped_query_heads_split_over_the_narrower_pool() -> None:
    per_token = 80 * 8 * 128 * 2 * 2  # Llama-3.1-70B: 80 layers x 8 KV heads x 128 x K and V x bf16
    wide = kv_transfer(LLAMA_70B, prompt_tokens=4096, link=IB, prefill_tp=8, decode_tp=4)
    assert wide.sent_bytes == 4096 * per_token and wide.bytes_per_link == wide.sent_bytes / 4
    assert kv_transfer(LLAMA_70B, prompt_tokens=4096, link=IB, prefill_tp=8, decode_tp=8).seconds < wide.seconds


def test_prefix_cache_hits_are_not_sent_but_the_whole_prompt_is_reserved() -> None:
    cold = kv_transfer(DEEPSEEK_V3, prompt_tokens=8192, link=NVLINK)
    warm = kv_transfer(DEEPSEEK_V3, prompt_tokens=8192, cached_tokens=6144, link=NVLINK)
    assert warm.sent_bytes == pytest.approx(cold.sent_bytes / 4)
    assert warm.reserved_bytes == cold.reserved_bytes == cold.sent_bytes
    hit = kv_transfer(DEEPSEEK_V3, prompt_tokens=8192, cached_tokens=8192, link=NVLINK)
    assert hit.sent_bytes == 0 and hit.seconds == 0


def test_window_layers_send_only_the_window_the_decode_side_lacks() -> None:
    layer_token = 8 * 64 * 2 * 2  # gpt-oss: 8 KV heads x head_dim 64 x K and V x bf16
    # 18 full layers send all 8,192 tokens; 18 window layers the last 128.
    assert missing_kv_bytes(GPT_OSS_120B, 8192, 0, 2.0) == (18 * 8192 + 18 * 128) * layer_token
    # The prefix cache holds up to 8,100: the window (8,064..8,191) lacks 92 positions, as do the full layers.
    assert missing_kv_bytes(GPT_OSS_120B, 8192, 8100, 2.0) == 36 * 92 * layer_token
    # A hit that ends before the window leaves the whole window to send.
    assert missing_kv_bytes(GPT_OSS_120B, 8192, 4000, 2.0) == (18 * 4192 + 18 * 128) * layer_token


def test_fp8_kv_halves_the_transfer() -> None:
    bf16 = kv_transfer(LLAMA_70B, prompt_tokens=2048, link=IB)
    fp8 = kv_transfer(LLAMA_70B, prompt_tokens=2048, link=IB, kv_cache_dtype="fp8")
    assert fp8.sent_bytes == bf16.sent_bytes / 2


def test_a_transfer_needs_a_prompt_and_positive_degrees() -> None:
    with pytest.raises(BadInputError) as info:
        kv_transfer(LLAMA_70B, prompt_tokens=0, link=IB)
    assert info.value.field == "prompt_tokens"
    with pytest.raises(BadInputError):
        kv_transfer(LLAMA_70B, prompt_tokens=10, link=IB, decode_tp=0)
