"""Gemma-4: sliding and full-attention layers of their own head widths and KV heads, and (26B-A4B) a dense MLP beside
the experts, by hand.

Sources of the numbers below:
- the shipped ``gemma-4-26b-a4b.json`` and ``gemma-4-31b.json`` (aiconfigurator-core 0.12 ``model_configs``:
  google--gemma-4-26B-A4B_config.json and nvidia--Gemma-4-31B-IT-NVFP4_config.json, Apache-2.0), their
  ``text_config``: 26B-A4B 30 layers (every 6th full attention: 5 full, 25 sliding of 1,024 tokens), hidden 2,816,
  16 query heads, sliding layers 8 KV heads of 256, full layers 2 KV heads of 512 (``global_head_dim``,
  ``num_global_key_value_heads`` with ``attention_k_eq_v``), a dense MLP of 2,112 and 128 experts of 704, top-8;
  31B 60 layers (10 full, 50 sliding), hidden 5,376, 32 query heads, sliding 16 KV heads of 256, full 4 of 512, dense
  MLP of 21,504; both vocab 262,144, tied embeddings, gated GELU MLPs (3 matrices).
- the layer shapes of vLLM ``model_executor/models/gemma4.py`` @ 001cabc1 (``Gemma4DecoderLayer``: a full layer's
  head_dim is ``global_head_dim`` and its KV heads ``num_global_key_value_heads`` where ``attention_k_eq_v``;
  ``Gemma4Attention``: ``QKVParallelLinear`` with K loaded into the V slot too, so the cache holds K and V;
  the MLP runs unconditionally and the MoE block beside it on the same residual, outputs summed; ``Gemma4Router``:
  hidden x experts).
- the model card's counts (vast.ai and featherless.ai's pages for google/gemma-4-26B-A4B-it: 25.2B total, 3.8B active;
  vLLM's Gemma 4 recipe, docs.vllm.ai/projects/recipes/en/latest/Google/Gemma4.html: 31B, 26B-A4B 1 x 80 GB in BF16).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architecture_check import tensor_parallel_refusal
from recommender.perf.catalog.architectures import load_architecture, read_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.kv_transfer import missing_kv_bytes
from recommender.perf.model.memory import plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.features import StepFeatures
from recommender.quantize import get_scheme

MOE_NAME, MOE = load_architecture("google/gemma-4-26B-A4B-it")
DENSE_NAME, DENSE = load_architecture("google/gemma-4-31B-it")
H = 2816  # 26B-A4B hidden
FULL_ATTN = H * 512 * (2 * 16 + 2 * 2)  # q and o of 16 heads, k and v of 2 heads, 512 wide
SLIDING_ATTN = H * 256 * (2 * 16 + 2 * 8)  # q and o of 16 heads, k and v of 8 heads, 256 wide
MLP, ROUTER, EXPERT = 3 * H * 2112, H * 128, 3 * H * 704
EMBEDDING = 262144 * H  # tied: one matrix


def test_hub_ids_resolve_to_the_shipped_configs_with_each_kind_s_widths() -> None:
    assert MOE_NAME.startswith("gemma-4-26b-a4b ") and DENSE_NAME.startswith("gemma-4-31b ")  # "(language model ...)"
    assert (MOE.head_dim, MOE.n_kv_heads, MOE.widths(windowed=True)) == (512, 2, (8, 256))
    assert (DENSE.head_dim, DENSE.n_kv_heads, DENSE.widths(windowed=True)) == (512, 4, (16, 256))
    assert MOE.attention is not None and (MOE.window, MOE.attention.n_window_layers) == (1024, 25)
    assert MOE.moe is not None and MOE.moe.shared_intermediate == 2112  # the dense MLP beside the experts
    assert (MOE.moe.n_experts, MOE.moe.experts_per_token, MOE.moe.n_moe_layers) == (128, 8, 30)
    assert DENSE.moe is None and DENSE.intermediate == 21504


def test_kv_per_token_per_layer_kind_by_hand() -> None:
    # bf16: K and V of each kind's KV heads x its width x 2 bytes
    assert MOE.full_kv_bytes_per_token(2.0) == 5 * (2 * 512 * 2 * 2) == 20_480
    assert MOE.window_kv_bytes_per_token(2.0) == 25 * (8 * 256 * 2 * 2) == 204_800
    assert DENSE.full_kv_bytes_per_token(2.0) == 10 * (4 * 512 * 2 * 2) == 81_920
    assert DENSE.window_kv_bytes_per_token(2.0) == 50 * (16 * 256 * 2 * 2) == 819_200
    # one sequence of 131,072 tokens: every token in the full layers, the last 1,024 in the window layers
    assert MOE.kv_bytes_for_context(131_072, 2.0) == 131_072 * 20_480 + 1_024 * 204_800
    # the prefix a decode side lacks: the full layers' uncached tokens, the window's uncached part
    assert missing_kv_bytes(MOE, 4_096, 2_048, 2.0) == 2_048 * 20_480 + 1_024 * 204_800
    assert missing_kv_bytes(MOE, 4_096, 3_584, 2.0) == 512 * 20_480 + 512 * 204_800


def test_parameters_match_the_hand_count_and_the_model_card() -> None:
    total = 5 * FULL_ATTN + 25 * SLIDING_ATTN + 30 * (MLP + ROUTER + 128 * EXPERT) + EMBEDDING
    active = 5 * FULL_ATTN + 25 * SLIDING_ATTN + 30 * (MLP + ROUTER + 8 * EXPERT) + EMBEDDING
    assert MOE.total_params == total and MOE.active_params == active
    assert total / 1e9 == pytest.approx(25.2, rel=0.01) and active / 1e9 == pytest.approx(3.8, rel=0.015)
    assert DENSE.total_params / 1e9 == pytest.approx(30.7, rel=0.01)


def test_step_flops_split_by_layer_kind_by_hand() -> None:
    q, context = 3, 8_192
    full = 4 * 512 * q * 5 * context * 16  # QK^T and PV, 512 wide, 16 heads, every key in 5 layers
    window = 4 * 256 * q * 25 * 1_024 * 16  # 256 wide, the last 1,024 keys in 25 layers
    assert MOE.attention_flops(q, context) == full + window
    assert MOE.attention_flops(q, 100) == 4 * 512 * q * 5 * 100 * 16 + 4 * 256 * q * 25 * 100 * 16
    f = StepFeatures(MOE, get_scheme("fp8-dynamic"), load_catalog().get("h200"), 2, "fp8")
    assert f.rates.attention_flops == 4 * 512 * 5 * 16 / 2  # per query-key pair of the full layers, on 1 of 2 GPUs
    assert f.rates.query_attention_flops == 4 * 256 * 25 * 1_024 * 16 / 2
    assert f.rates.body_flops_per_token == 2 * MOE.active_body_params / 2
    # fp8 KV on TP 2: the full layers' 2 KV heads one per GPU, the window layers' 8 four per GPU
    assert f.rates.kv_bytes_per_token == 5 * 512 * 2 * 1
    assert f.rates.window_kv_bytes_per_seq == 1_024 * 25 * 4 * 256 * 2 * 1


def test_memory_splits_each_kind_s_kv_heads_over_tensor_parallelism() -> None:
    plan = plan_memory(MOE, get_scheme("fp16"), device_gb=141.0, tensor_parallel=8, kv_cache_dtype="auto")
    assert plan.kv_bytes_per_token == 20_480 / 2  # 2 full-layer KV heads on 8 GPUs: one replica each
    assert plan.window_kv_bytes_per_token == 204_800 / 8  # 8 window-layer KV heads: one each
    assert tensor_parallel_refusal(DENSE, 8) is None  # 4 full KV heads and 16 window KV heads both split 8 ways


def test_the_recipe_s_one_80_gb_gpu_holds_each_in_bf16() -> None:
    # vLLM's Gemma 4 recipe: 26B-A4B and 31B on one 80 GB GPU in BF16; its 26B-A4B page serves 131,072 tokens
    fp16 = get_scheme("fp16")
    moe = plan_memory(MOE, fp16, device_gb=80.0, max_num_seqs=1)
    assert moe.weights_gb == pytest.approx(2 * MOE.total_params / 1e9)
    assert moe.shortfall(1, 131_072) is None
    dense = plan_memory(DENSE, fp16, device_gb=80.0, max_num_seqs=1)
    # one GPU at vLLM's defaults (0.9 of it, 8,192 batched tokens) holds 8,192 tokens, not 16,384: the 50 window
    # layers' startup bound (1,023 + 8,192 + 16 tokens x 819,200 bytes = 7.56 GB) beside 61.6 GB of weights
    assert dense.shortfall(1, 8_192) is None and dense.shortfall(1, 16_384) is not None
    assert dense.shortfall(1, 131_072) is not None  # 131,072 tokens need a second GPU
    tp2 = plan_memory(DENSE, fp16, device_gb=80.0, max_num_seqs=1, tensor_parallel=2)
    assert tp2.shortfall(1, 262_144) is None


def _config(name: str) -> dict[str, Any]:
    return {k: v for k, v in vars(read_architecture(name)[1]).items() if not k.startswith("_")}  # the text_config


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_kv_shared_layers": 20}, "num_kv_shared_layers"),  # E2B / E4B: layers reading another's cache
        ({"hidden_size_per_layer_input": 256}, "hidden_size_per_layer_input"),  # E2B / E4B: per-layer embeddings
        ({"top_k_experts": 129}, "top_k_experts"),  # top-k above the experts
        ({"global_head_dim": 0}, "global_head_dim"),
    ],
    ids=["kv-sharing", "per-layer-embeddings", "top-k-above-experts", "zero-width"],
)
def test_a_bad_gemma4_config_is_refused_naming_the_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_config("gemma-4-26b-a4b"), **change}), encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        ModelShape.from_config(read_architecture(str(path))[1])
    assert field in str(caught.value)


def test_without_k_eq_v_the_full_layers_keep_the_sliding_kv_heads() -> None:
    # vLLM gemma4.py: num_global_key_value_heads is read only where attention_k_eq_v is set
    config = {**_config("gemma-4-31b"), "attention_k_eq_v": False}
    shape = ModelShape.from_config(SimpleNamespace(**config))
    assert (shape.head_dim, shape.n_kv_heads, shape.widths(windowed=True)) == (512, 16, (16, 256))


def test_full_layer_kv_heads_that_do_not_group_the_query_heads_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_config("gemma-4-31b"), "num_global_key_value_heads": 3}), encoding="utf-8")
    with pytest.raises(BadInputError, match="num_global_key_value_heads 3"):
        read_architecture(str(path))
