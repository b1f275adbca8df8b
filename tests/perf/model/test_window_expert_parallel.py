"""Sliding-window layers bounded per sequence in the expert-parallel and disaggregated plans and the physics ceiling,
as the aggregated memory plan and step bound them (``test_window_memory.py``), by hand on gpt-oss-120b.

gpt-oss-120b (its shipped config.json): 36 layers alternating ``sliding_attention`` (window 128) and
``full_attention``, 8 KV heads of 64: one layer caches 8 x 64 x 2 (K, V) x 2 bytes = 2,048 B per token in bf16, the
18 full layers 36,864 B, the 18 window layers as much for at most their window. A decoding sequence holds
``window - 1 + 1 + 16 = 144`` tokens of each window layer (vLLM ``SlidingWindowManager`` @ 002f3491, a block beyond).
Models without window layers (Qwen3-30B-A3B) keep every layer per token, exactly as before.
"""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_kv_bytes_per_token_per_gpu, ep_memory
from recommender.perf.model.memory import kv_bytes_per_token_per_device
from recommender.perf.sim.physics_capacity import physics_capacity
from recommender.perf.step.expert_parallel import ExpertParallelStepFeatures
from recommender.quantize import get_scheme

_, GPT_OSS_120B = load_architecture("gpt-oss-120b")
_, QWEN3_MOE = load_architecture("qwen3-30b-a3b")
LAYOUT = ExpertParallelLayout(ep=8, attention_dp=4)  # attention ranks of 2 GPUs: 4 of the 8 KV heads each
FULL, WINDOW, HELD = 18 * 2_048 / 2, 18 * 2_048 / 2, 144


def _memory(shape, pool_context: int | None):  # type: ignore[no-untyped-def]
    return ep_memory(shape, LAYOUT, bits_per_weight=4.25, device_gb=141.0, pool_context=pool_context)


def test_the_pool_holds_the_full_layers_per_token_and_a_window_per_sequence() -> None:
    every_layer, bounded = _memory(GPT_OSS_120B, None), _memory(GPT_OSS_120B, 512)
    assert every_layer.kv_bytes_per_token == FULL + WINDOW  # no pool context: every layer per token, as before
    assert (bounded.kv_bytes_per_token, bounded.window_kv_bytes_per_token) == (FULL, WINDOW)
    per_token = FULL + HELD * WINDOW / 512  # a 512-token sequence: 144 of its tokens in the window layers
    assert bounded.kv_tokens_per_rank == int(bounded.kv_cache_gb * 1e9 // per_token)
    assert bounded.kv_tokens_per_rank > 1.5 * every_layer.kv_tokens_per_rank


def test_a_model_without_windows_keeps_every_layer_per_token() -> None:
    with_context, without = _memory(QWEN3_MOE, 512), _memory(QWEN3_MOE, None)
    assert with_context == without
    assert without.kv_bytes_per_token == QWEN3_MOE.kv_bytes_per_token(2.0) * 2 / 4  # 4 KV heads: 2 per rank GPU
    assert ep_kv_bytes_per_token_per_gpu(QWEN3_MOE, "auto", LAYOUT) == without.kv_bytes_per_token


def test_the_expert_parallel_step_reads_the_window_per_sequence_not_per_token() -> None:
    h200 = load_catalog().get("h200")
    f = ExpertParallelStepFeatures(GPT_OSS_120B, get_scheme("mxfp4"), h200, LAYOUT)
    bandwidth = h200.memory_bandwidth_gbps * 1e9
    assert ep_kv_bytes_per_token_per_gpu(GPT_OSS_120B, "auto", LAYOUT) == FULL
    assert f._kv_s == pytest.approx(FULL / bandwidth)
    assert f._rank.rates.window_kv_bytes_per_seq == 128 * WINDOW  # the window's keys, once per sequence


def test_the_physics_ceiling_reads_and_holds_the_window_per_sequence() -> None:
    h200, mxfp4 = load_catalog().get("h200"), get_scheme("mxfp4")
    ceiling = physics_capacity(GPT_OSS_120B, mxfp4, h200, tensor_parallel=2, prompt_tokens=512, output_tokens=256)
    assert ceiling.kv_bytes_per_token_per_device == FULL  # the full layers, 4 of 8 heads per GPU
    window_read = ceiling.batch * 128 * WINDOW
    full_read = ceiling.batch * (512 + 128) * FULL
    assert ceiling.decode_step_s * h200.memory_bandwidth_gbps * 1e9 == pytest.approx(
        ceiling.weight_bytes_per_device + full_read + window_read
    )
    dense = physics_capacity(QWEN3_MOE, mxfp4, h200, tensor_parallel=2, prompt_tokens=512, output_tokens=256)
    assert dense.kv_bytes_per_token_per_device == kv_bytes_per_token_per_device(QWEN3_MOE, "auto", 2)


def test_the_physics_ceiling_reads_a_window_longer_than_the_context_only_as_far_as_it_is_cached() -> None:
    # Gemma-4-26B-A4B's window of 1,024 over a mean context of 512 + 128 = 640 tokens: 640 keys per window layer
    _, gemma = load_architecture("gemma-4-26b-a4b")
    h200 = load_catalog().get("h200")
    ceiling = physics_capacity(gemma, get_scheme("fp16"), h200, tensor_parallel=1, prompt_tokens=512, output_tokens=256)
    read = ceiling.batch * 640 * (20_480 + 204_800)  # full layers and window layers both at the 640 cached tokens
    assert ceiling.decode_step_s * h200.memory_bandwidth_gbps * 1e9 == pytest.approx(
        ceiling.weight_bytes_per_device + read
    )
