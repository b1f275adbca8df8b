"""Llama-4 (shipped ``llama-4-scout-17b-16e``, aiconfigurator-core 0.12's config): chunked local attention on three
layers in four, one routed expert of sixteen plus a shared one in every layer, pinned to a hand calculation from
transformers 5.17's ``Llama4TextConfig`` defaults and the model card (109B total with vision, 17B active)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.model.shape import ModelShape

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, EXPERT, VOCAB = 5120, 40, 8, 128, 48, 8192, 202048


def test_scout_counts_its_chunked_layers_and_experts_by_hand() -> None:
    shape = load_architecture("meta-llama/Llama-4-Scout-17B-16E-Instruct")[1]
    assert shape.attention is not None and shape.attention.window == 8192
    assert shape.attention.n_window_layers == 36  # every 4th layer global (no_rope_layer_interval 4): 12 of 48
    assert shape.moe is not None and (shape.moe.n_experts, shape.moe.experts_per_token) == (16, 1)
    assert shape.moe.n_moe_layers == LAYERS and shape.moe.shared_intermediate == EXPERT  # interleave step 1
    attention = HIDDEN * HEAD_DIM * (2 * HEADS + 2 * KV_HEADS)  # q, k, v, o
    expert = 3 * HIDDEN * EXPERT  # gate, up, down
    router = HIDDEN * 16
    active = LAYERS * (attention + 2 * expert + router) + 2 * VOCAB * HIDDEN  # shared + 1 routed; untied embeddings
    total = LAYERS * (attention + 17 * expert + router) + 2 * VOCAB * HIDDEN
    assert shape.active_params == active and shape.total_params == total
    assert active == pytest.approx(17.2e9, rel=0.01) and total == pytest.approx(107.8e9, rel=0.01)


def _config(**overrides: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "num_hidden_layers": 8,
        "intermediate_size": 256,
        "intermediate_size_mlp": 1024,
        "vocab_size": 1000,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
        "attention_chunk_size": 64,
    }
    return SimpleNamespace(**{**base, **overrides})


def test_interleaved_layers_keep_the_dense_width_and_chunks_follow_no_rope_layers() -> None:
    """Maverick's layout: every 2nd layer routed (layers 1, 3, 5, 7), the others dense at intermediate_size_mlp;
    an explicit no_rope_layers decides which layers are chunked."""
    shape = ModelShape.from_config(_config(no_rope_layers=[1, 1, 0, 0, 1, 1, 1, 0]))
    assert shape.moe is not None and shape.moe.n_moe_layers == 4 and shape.intermediate == 1024
    assert shape.attention is not None and (shape.attention.window, shape.attention.n_window_layers) == (64, 5)
    listed = ModelShape.from_config(_config(moe_layers=[0, 7]))
    assert listed.moe is not None and listed.moe.n_moe_layers == 2


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"attention_chunk_size": 0}, "attention_chunk_size"),
        ({"no_rope_layers": [1, 0]}, "no_rope_layers"),
        ({"layer_types": ["sliding_attention", "chunked_attention"] * 4, "sliding_window": 16}, "layer_types"),
    ],
)
def test_chunk_settings_not_modelled_are_refused_by_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(BadInputError) as info:
        ModelShape.from_config(_config(**overrides))
    assert info.value.field == field
