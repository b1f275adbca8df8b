"""Parameter counts and the memory plan with known answers: Llama-3-8B's shape, its weights and KV cache on one
device, fp8 KV, tensor parallelism, a refusal that gives the numbers, and the memory the device reports."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens, plan_memory
from recommender.quantize import get_scheme

_, LLAMA3_8B = load_architecture("llama-3.1-8b")  # the shipped config.json numbers


def test_shape_counts_llama3_8b() -> None:
    total = LLAMA3_8B.body_params + 2 * LLAMA3_8B.lm_head_params
    assert total == pytest.approx(8.03e9, rel=0.01)
    # 32 layers x 8 kv heads x 128 x 2 (K,V) x 2 bytes = 128 KiB per token.
    assert LLAMA3_8B.kv_bytes_per_token() == 131072


def test_memory_plan_known_architecture() -> None:
    bf16 = get_scheme("baseline")
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
    plan = plan_memory(LLAMA3_8B, get_scheme("baseline"), device_gb=16.0)  # an 8B bf16 model on a 16 GB card
    why = plan.shortfall(1, 2048)
    assert why is not None and "weights 16.06" in why and "14.4 GB usable" in why
    assert plan.kv_cache_tokens == 0 and plan.max_concurrent_seqs(2048) == 0
    nf4 = plan_memory(LLAMA3_8B, get_scheme("bnb-nf4"), device_gb=16.0)
    assert nf4.shortfall(1, 2048) is None and nf4.max_concurrent_seqs(2048) > 1


def test_kv_capacity_comes_from_the_memory_the_device_reports() -> None:
    catalog = load_catalog()
    h100 = catalog.get("h100-sxm")
    assert h100.memory_gb == 80 and h100.device_memory_gb == pytest.approx(81559 * 2**20 / 1e9)  # 85.5 GB
    shape, method = load_architecture("qwen3-32b")[1], get_scheme("baseline")
    more = kv_cache_tokens(shape, method, h100, tensor_parallel=2)
    less = kv_cache_tokens(shape, method, h100.model_copy(update={"memory_mib": None}), tensor_parallel=2)
    assert more > less * 1.08  # 5.5 GB more per GPU, all of it KV cache
    assert catalog.get("b200").device_memory_gb == pytest.approx(192.3, abs=0.05)  # "180 GB" = 179 GiB to CUDA
    a10g = catalog.get("a10g")
    assert a10g.memory_mib is None and a10g.device_memory_gb == a10g.memory_gb  # unknown: the datasheet figure
