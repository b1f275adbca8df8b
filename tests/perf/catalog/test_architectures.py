"""Shipped architectures found by hub id: a quantized re-upload resolves to its base model only when unambiguous."""

from __future__ import annotations

from recommender.perf.catalog.architectures import load_architecture


def test_a_quantized_re_upload_resolves_to_its_base_models_shape_only_when_unambiguous() -> None:
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    assert shipped_for_hub_id("Qwen/Qwen3-32B") == "qwen3-32b"  # listed
    assert shipped_for_hub_id("Qwen/Qwen3-32B-FP8") == "qwen3-32b"
    assert shipped_for_hub_id("nvidia/Qwen3-235B-A22B-FP8") == "qwen3-235b-a22b"
    assert shipped_for_hub_id("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8") == "llama-3.1-8b"
    assert shipped_for_hub_id("Qwen/Qwen3-30B-A3B-GPTQ-Int4") == "qwen3-30b-a3b"
    assert shipped_for_hub_id("Some/Unknown-Model-FP8") is None
    assert shipped_for_hub_id("Qwen3-32B-FP8") is None  # not a hub id: no organisation
    assert load_architecture("nvidia/Llama-3.1-70B-Instruct-FP8")[0] == load_architecture("llama-3.1-70b")[0]
