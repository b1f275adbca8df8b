"""Parameter counts and the memory plan with known answers: Llama-3-8B's shape, its weights and KV cache on one
device, fp8 KV, tensor parallelism, and a refusal that gives the numbers."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.model.memory import plan_memory
from recommender.quantize import get_method

_, LLAMA3_8B = load_architecture("llama-3.1-8b")  # the shipped config.json numbers


def test_shape_counts_llama3_8b() -> None:
    total = LLAMA3_8B.body_params + 2 * LLAMA3_8B.lm_head_params
    assert total == pytest.approx(8.03e9, rel=0.01)
    # 32 layers x 8 kv heads x 128 x 2 (K,V) x 2 bytes = 128 KiB per token.
    assert LLAMA3_8B.kv_bytes_per_token() == 131072


def test_memory_plan_known_architecture() -> None:
    bf16 = get_method("baseline")
    plan = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, max_num_batched_tokens=8192, max_num_seqs=256)
    # 8.03 B parameters at 2 bytes; the KV cache is 128 KiB per token.
    assert plan.weights_gb == pytest.approx(16.06, rel=0.01)
    assert plan.kv_bytes_per_token == 131072
    assert plan.kv_cache_tokens == int((72.0 - plan.fixed_gb) * 1e9 // 131072)
    assert 0.1 < plan.activation_gb < 2.0
    # fp8 KV doubles the tokens; tensor parallel 2 halves weights and KV per device.
    fp8 = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, kv_cache_dtype="fp8")
    assert fp8.kv_cache_tokens == pytest.approx(2 * plan.kv_cache_tokens, rel=1e-6)
    tp2 = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, tensor_parallel=2)
    assert tp2.weights_gb == pytest.approx(plan.weights_gb / 2) and tp2.kv_bytes_per_token == 65536
    # More devices than KV heads: each keeps one head's replica, not a fraction of one.
    assert plan_memory(LLAMA3_8B, bf16, device_gb=80.0, tensor_parallel=16).kv_bytes_per_token == 16384


def test_memory_refusal_gives_the_numbers() -> None:
    plan = plan_memory(LLAMA3_8B, get_method("baseline"), device_gb=16.0)  # an 8B bf16 model on a 16 GB card
    why = plan.shortfall(1, 2048)
    assert why is not None and "weights 16.06" in why and "14.4 GB usable" in why
    assert plan.kv_cache_tokens == 0 and plan.max_concurrent_seqs(2048) == 0
    nf4 = plan_memory(LLAMA3_8B, get_method("bnb-nf4"), device_gb=16.0)
    assert nf4.shortfall(1, 2048) is None and nf4.max_concurrent_seqs(2048) > 1
