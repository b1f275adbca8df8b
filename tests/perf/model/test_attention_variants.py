"""Multi-head latent attention (DeepSeek-V3) and gpt-oss's sliding-window MoE, read from their shipped config.json.

Published counts the shapes must reproduce:
- DeepSeek-V3: 671B total, "Activation parameters: 36.6B (including 0.9B for the output Head)", the main model
  without its multi-token-prediction module (deepseek-ai/DeepSeek-V3 README_WEIGHTS.md; README: 671B / 37B).
- gpt-oss (model card, arXiv 2508.10925, Table 1): gpt-oss-120b 116.83B total / 5.13B active, gpt-oss-20b
  20.91B / 3.61B. The card counts the unembedding but not the embedding lookup as active, as DeepSeek's does; the
  shapes here leave out biases, norms and attention sinks (tens of millions).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture, read_architecture
from recommender.perf.model.checkpoint_weights import checkpoint_weight_bytes
from recommender.perf.model.memory import kv_bytes_per_token_per_device
from recommender.perf.model.shape import ModelShape

_, DEEPSEEK_V3 = load_architecture("deepseek-v3")
_, GPT_OSS_120B = load_architecture("gpt-oss-120b")
_, GPT_OSS_20B = load_architecture("gpt-oss-20b")


def _card_active(shape: ModelShape) -> float:
    """Active parameters as the model cards count them: what a token multiplies, the unembedding included."""
    return (shape.active_body_params + shape.lm_head_params) / 1e9


@pytest.mark.parametrize(
    ("shape", "total_b", "active_b"),
    [(DEEPSEEK_V3, 671.0, 36.6), (GPT_OSS_120B, 116.83, 5.13), (GPT_OSS_20B, 20.91, 3.61)],
    ids=["deepseek-v3", "gpt-oss-120b", "gpt-oss-20b"],
)
def test_shapes_reproduce_the_published_total_and_active_parameters(
    shape: ModelShape, total_b: float, active_b: float
) -> None:
    assert shape.total_params / 1e9 == pytest.approx(total_b, rel=0.002)
    assert _card_active(shape) == pytest.approx(active_b, rel=0.003)


def test_deepseek_v3_mla_caches_one_latent_per_token_and_layer() -> None:
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 bytes: DeepSeek-V2 paper's (d_c + d_h^R) l elements.
    assert DEEPSEEK_V3.kv_bytes_per_token(2.0) == 576 * 61 * 2
    # A grouped-query reading of the same config (128 KV heads x 192 wide, K and V) would be 44x larger.
    gqa = 61 * 128 * 192 * 2 * 2
    assert gqa / DEEPSEEK_V3.kv_bytes_per_token(2.0) > 40
    assert DEEPSEEK_V3.head_dim == 192 and DEEPSEEK_V3.attention_params / 1e9 == pytest.approx(11.41, abs=0.01)


def test_tensor_parallelism_does_not_split_an_mla_cache_but_splits_gqa_heads() -> None:
    one = kv_bytes_per_token_per_device(DEEPSEEK_V3, "auto", 1)
    assert kv_bytes_per_token_per_device(DEEPSEEK_V3, "auto", 8) == one  # every rank holds the whole latent
    assert (
        kv_bytes_per_token_per_device(GPT_OSS_120B, "auto", 8)
        == kv_bytes_per_token_per_device(GPT_OSS_120B, "auto", 1) / 8
    )


def test_gpt_oss_window_layers_keep_only_the_window() -> None:
    per_layer_token = 8 * 64 * 2 * 2  # 8 KV heads x head_dim 64 x K and V x bf16
    # Below the window every layer keeps every token; past it the 18 sliding layers stop at 128.
    assert GPT_OSS_120B.kv_bytes_for_context(100) == 36 * 100 * per_layer_token
    assert GPT_OSS_120B.kv_bytes_for_context(8192) == (18 * 8192 + 18 * 128) * per_layer_token
    # Per token: the exact mean at a context, or without one every layer's (never less than the truth).
    assert GPT_OSS_120B.kv_bytes_per_token(2.0, context=100) == 36 * per_layer_token
    assert GPT_OSS_120B.kv_bytes_per_token(2.0, context=8192) == (18 + 18 * 128 / 8192) * per_layer_token
    assert GPT_OSS_120B.kv_bytes_per_token(2.0) == 36 * per_layer_token


def test_window_layers_see_at_most_the_window_in_attention_flops() -> None:
    short, long = GPT_OSS_20B.attention_flops(1, 128), GPT_OSS_20B.attention_flops(1, 128 * 64)
    # 12 full layers grow 64x, 12 window layers stay: (12 * 64 + 12) / 24 = 32.5x.
    assert long / short == pytest.approx((12 * 64 + 12) / 24)


def test_mla_attention_flops_count_the_expanded_heads() -> None:
    # Per query-key pair and head: 2 x (qk 192 + v 128) FLOPs, 61 layers, 128 heads.
    assert DEEPSEEK_V3.attention_flops(1, 1) == 2 * (192 + 128) * 61 * 128


def test_hub_ids_of_the_new_architectures_resolve_offline() -> None:
    assert read_architecture("openai/gpt-oss-120b")[0] == "gpt-oss-120b"
    assert read_architecture("deepseek-ai/DeepSeek-R1")[0] == "deepseek-v3"


def _config(**overrides: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_hidden_layers": 4,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 1000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }
    return SimpleNamespace(**{**base, **overrides})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"layer_types": ["sliding_attention", "chunked_attention"] * 2}, "layer_types"),  # two bounded kinds in one
        ({"layer_types": ["sliding_attention", "linear_attention"] * 2}, "linear_num_key_heads"),  # no GDN widths
        ({"layer_types": ["full_attention"] * 3}, "layer_types"),  # not one per layer
        ({"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "qk_nope_head_dim"),  # half an MLA config
    ],
)
def test_attention_layouts_not_modeled_are_refused_by_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInputError) as info:
        ModelShape.from_config(_config(**overrides))
    assert info.value.field == field


def test_sliding_layers_without_a_window_are_priced_as_full_attention() -> None:
    shape = ModelShape.from_config(_config(sliding_window=None))
    assert shape.kv_bytes_for_context(1000) == 1000 * 4 * 8 * 64 * 2 * 2


@pytest.mark.parametrize(("name", "gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_checkpoints_weigh_what_the_model_card_says(name: str, gib: float) -> None:
    # MXFP4 routed experts (4.25 bits), BF16 attention, router, embeddings and lm_head: model card, Table 1.
    _, config = read_architecture(name)
    _, shape = load_architecture(name)
    assert checkpoint_weight_bytes(shape, config.quantization_config) / 2**30 == pytest.approx(gib, rel=0.005)


def test_a_published_format_not_sized_is_refused_by_field() -> None:
    with pytest.raises(BadInputError) as info:
        checkpoint_weight_bytes(GPT_OSS_20B, {"quant_method": "bitnet"})
    assert info.value.field == "quantization_config.quant_method"


def test_mla_decodes_absorbed_over_the_latent() -> None:
    # QK^T over latent + rotary key (576) and PV over the latent (512), per pair and head: 3.4x the expanded form.
    assert DEEPSEEK_V3.decode_attention_flops(1, 1) == 2 * (576 + 512) * 61 * 128
    assert GPT_OSS_20B.decode_attention_flops(1, 4096) == GPT_OSS_20B.attention_flops(1, 4096)
