"""MLA's fused down-projection (q_a + kv_a) is whole on every tensor-parallel GPU in vLLM, SGLang and TensorRT-LLM
(``attention.LatentAttention.replicated_params_per_layer``): each GPU holds and reads it, where it holds and reads
``1/tp`` of every other weight. Counted in memory, in a step's weight traffic and FLOPs, and in an EP rank's."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_memory
from recommender.perf.model.memory import plan_memory, weight_bytes, weight_bytes_per_gpu
from recommender.perf.step.rates import StepRates
from recommender.quantize import get_scheme

DEEPSEEK_V3 = load_architecture("deepseek-v3")[1]
LLAMA_70B = load_architecture("llama-3.1-70b")[1]
FP8 = get_scheme("fp8-dynamic")
H200 = load_catalog().get("h200")
#: 61 layers x 7,168 hidden x (1,536 q_lora_rank + 512 kv_lora_rank + 64 rope) (DeepSeek-V3's config.json).
REPLICATED = 61 * 7168 * (1536 + 512 + 64)


def test_deepseek_v3s_down_projection_is_replicated_and_grouped_query_attention_has_none() -> None:
    assert DEEPSEEK_V3.tp_replicated_params == REPLICATED == 923_467_776
    assert LLAMA_70B.tp_replicated_params == 0
    body = DEEPSEEK_V3.body_params
    assert DEEPSEEK_V3.per_gpu_params(body, 8) == pytest.approx((body - REPLICATED) / 8 + REPLICATED)
    assert DEEPSEEK_V3.per_gpu_params(body, 1) == body
    assert LLAMA_70B.per_gpu_params(LLAMA_70B.body_params, 8) == LLAMA_70B.body_params / 8


def test_each_gpu_holds_reads_and_multiplies_the_whole_projection() -> None:
    per_param = 1.0  # FP8
    extra = REPLICATED * per_param * (1 - 1 / 8)  # what 1/8 of it would have left out
    plan = plan_memory(DEEPSEEK_V3, FP8, device_gb=H200.device_memory_gb, tensor_parallel=8)
    split = (DEEPSEEK_V3.body_params / 8 + (DEEPSEEK_V3.lm_head_params + DEEPSEEK_V3.embedding_params) * 2 / 8) / 1e9
    assert plan.weights_gb == pytest.approx(split + extra / 1e9, rel=1e-9)
    assert weight_bytes_per_gpu(DEEPSEEK_V3, FP8, 8, 64) == pytest.approx(
        weight_bytes(DEEPSEEK_V3, FP8, 64) / 8 + extra, rel=1e-9
    )
    rates = StepRates(DEEPSEEK_V3, FP8, H200, 8)
    assert rates.weight_bytes_at(64) == pytest.approx(weight_bytes_per_gpu(DEEPSEEK_V3, FP8, 8, 64))
    assert rates.body_flops_per_token == pytest.approx(
        2 * ((DEEPSEEK_V3.active_body_params - REPLICATED) / 8 + REPLICATED)
    )

    # An EP replica's attention rank of 8 GPUs holds it whole too; a rank of one GPU held all of it already.
    def dense_gb(attention_dp: int) -> float:
        layout = ExpertParallelLayout(8, attention_dp)
        return ep_memory(
            DEEPSEEK_V3,
            layout,
            bits_per_weight=8,
            device_gb=H200.device_memory_gb,
            max_num_batched_tokens=8192,
            max_num_seqs=64,
        ).dense_gb

    dense = DEEPSEEK_V3.dense_body_params + (DEEPSEEK_V3.lm_head_params + DEEPSEEK_V3.embedding_params) * 2
    assert dense_gb(8) == pytest.approx(dense / 1e9, rel=1e-9)
    assert dense_gb(1) == pytest.approx((dense / 8 + extra) / 1e9, rel=1e-9)
