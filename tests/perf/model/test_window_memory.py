"""Sliding-window layers' KV bounded per sequence in the memory plan and the step cost, by hand on gpt-oss-120b.

gpt-oss-120b (its shipped config.json, transformers ``GptOssConfig``): 36 layers, ``layer_types`` alternating
``sliding_attention`` (window 128) and ``full_attention``, 8 KV heads of 64, 64 query heads. One layer caches
8 x 64 x 2 (K, V) x 2 bytes = 2,048 B per token in bf16; the 18 full layers 36,864 B per token, the 18 window layers
as much per token but for at most their window. vLLM frees a window layer's blocks behind the window
(``SlidingWindowManager.remove_skipped_blocks``, ``vllm/v1/core/single_type_kv_cache_manager.py`` @ 002f3491) and
sizes one ``max_model_len`` request at ``min(window - 1 + max_num_batched_tokens, max_model_len)`` tokens plus a
block per window layer (``SlidingWindowSpec.max_memory_usage_bytes``, ``vllm/v1/kv_cache_interface.py`` @ 001cabc1).
The model card (arXiv 2508.10925) deploys gpt-oss-120b in MXFP4 on one 80 GB GPU at 131,072 tokens.
"""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_bytes_per_token_per_device, plan_memory
from recommender.perf.step.cost import RooflineStepCost
from recommender.perf.step.rates import StepRates
from recommender.quantize import get_scheme

_, GPT_OSS_120B = load_architecture("gpt-oss-120b")
_, LLAMA4_SCOUT = load_architecture("llama-4-scout-17b-16e")
_, LLAMA3_8B = load_architecture("llama-3.1-8b")
CONTEXT = 131_072
FULL_PER_TOKEN = 18 * 8 * 64 * 2 * 2  # 36,864 B: the 18 full layers
WINDOW_PER_TOKEN = 18 * 8 * 64 * 2 * 2  # the 18 window layers, for at most their window


def _card_plan(max_num_seqs: int = 1, pool_context: int | None = None):  # type: ignore[no-untyped-def]
    return plan_memory(
        GPT_OSS_120B,
        get_scheme("mxfp4"),
        device_gb=80.0,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=8192,
        pool_context=pool_context,
    )


def test_gpt_oss_120b_kv_per_sequence_at_131072_tokens_by_hand() -> None:
    plan = _card_plan()
    assert plan.kv_bytes_per_token == FULL_PER_TOKEN
    assert plan.window_kv_bytes_per_token == WINDOW_PER_TOKEN
    # vLLM's startup bound per window layer: 128 - 1 + 8,192 + one 16-token block = 8,335 tokens.
    assert plan.window_startup_tokens == 8_335
    kv = CONTEXT * FULL_PER_TOKEN + 8_335 * WINDOW_PER_TOKEN  # 4,831,838,208 + 307,261,440 B
    assert kv == 5_139_099_648
    assert plan.needed_gb(1, CONTEXT) == pytest.approx(plan.fixed_gb + kv / 1e9, rel=1e-12)
    # Every layer per token would be 9.66 GB; the card's one-GPU deployment now fits (it was refused at 74.98 GB).
    assert plan.shortfall(1, CONTEXT) is None
    assert plan.needed_gb(1, CONTEXT) < plan.usable_gb == pytest.approx(72.0)


def test_below_the_window_every_layer_keeps_every_token() -> None:
    plan = _card_plan()
    assert plan.needed_gb(1, 100) - plan.fixed_gb == pytest.approx(100 * (FULL_PER_TOKEN + WINDOW_PER_TOKEN) / 1e9)


def test_the_pool_counts_the_window_at_the_traffics_context() -> None:
    # A decoding sequence holds 128 - 1 + 1 + 16 = 144 tokens per window layer; at 2,048 tokens of context that is
    # (2,048 x 36,864 + 144 x 36,864) / 2,048 = 39,456 B per token of the pool, against 73,728 for every layer.
    plan = _card_plan(max_num_seqs=256, pool_context=2048)
    assert plan.window_held_tokens == 144
    per_token = (2048 * FULL_PER_TOKEN + 144 * WINDOW_PER_TOKEN) / 2048
    assert per_token == 39_456
    assert plan.kv_cache_tokens == int(plan.kv_cache_gb * 1e9 // per_token)
    unbounded = _card_plan(max_num_seqs=256)
    assert unbounded.kv_cache_tokens == int(unbounded.kv_cache_gb * 1e9 // (FULL_PER_TOKEN + WINDOW_PER_TOKEN))


def test_the_step_reads_the_window_per_sequence_and_attends_to_it_per_query() -> None:
    h200 = load_catalog().get("h200")
    rates = StepRates(GPT_OSS_120B, get_scheme("mxfp4"), h200, 1, "auto")
    assert rates.kv_bytes_per_token == FULL_PER_TOKEN
    assert rates.window_kv_bytes_per_seq == 128 * WINDOW_PER_TOKEN  # 4,718,592 B
    # 4 x head_dim FLOPs per query-key pair and head: 256 x 64 heads x 18 full layers per pair; the window layers'
    # 128 keys per query: 256 x 64 x 18 x 128.
    assert rates.attention_flops == rates.decode_attention_flops == 256 * 64 * 18
    assert rates.query_attention_flops == 256 * 64 * 18 * 128
    # A decode step of one sequence at 131,072 tokens (memory-bound) moves the weights plus 131,072 x 36,864 B of
    # the full layers and 128 x 36,864 B of the window layers.
    cost = RooflineStepCost(GPT_OSS_120B, get_scheme("mxfp4"), h200)
    moved = rates.weight_bytes_at(1) + CONTEXT * FULL_PER_TOKEN + 128 * WINDOW_PER_TOKEN
    flops = rates.body_flops_per_token + rates.head_flops_per_seq + rates.query_attention_flops
    flops += rates.decode_attention_flops * CONTEXT
    bandwidth, compute = rates.bandwidth * cost.efficiency.bandwidth, rates.peak * cost.efficiency.compute
    assert flops / compute < moved / bandwidth
    expected = moved / bandwidth + cost.efficiency.step_overhead_s
    assert cost.decode_steps_seconds(1, np.array([CONTEXT]))[0] == pytest.approx(expected, rel=1e-12)


def test_models_without_sliding_windows_keep_every_layer_per_token() -> None:
    h200 = load_catalog().get("h200")
    for shape in (LLAMA3_8B, LLAMA4_SCOUT):  # no windows; chunked layers stay per context token in the step
        rates = StepRates(shape, get_scheme("baseline"), h200, 2, "auto")
        assert rates.window_kv_bytes_per_seq == 0.0
        assert rates.query_attention_flops == 0.0
        assert rates.kv_bytes_per_token == kv_bytes_per_token_per_device(shape, "auto", 2)
    plan = plan_memory(LLAMA3_8B, get_scheme("baseline"), device_gb=80.0, pool_context=2048)
    assert plan.window_kv_bytes_per_token == 0.0
    assert plan.kv_cache_tokens == int(plan.kv_cache_gb * 1e9 // 131072)
