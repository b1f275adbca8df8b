"""Configs read as Hugging Face writes them: a wrapper's nested ``text_config`` and ``Infinity``/``NaN`` literals.

Each case is a small config.json in a temporary directory (no hub is asked), read by the real reader and, where the
plan itself is the claim, planned through the real CLI.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture, read_architecture
from recommender.perf.catalog.hf_config import TEXT_CONFIG_KEYS
from tests.conftest import run_cli_in_process

#: Llama-4-Scout-17B-16E's language model (meta-llama/Llama-4-Scout-17B-16E config.json ``text_config``), the
#: fields the shape model reads.
TEXT = {
    "model_type": "llama4_text",
    "num_hidden_layers": 48,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 202048,
    "max_position_embeddings": 10485760,
    "num_local_experts": 16,
    "num_experts_per_tok": 1,
}
#: The wrapper around it, as Llama-4-Scout's config.json writes it: the vision tower beside the text model, the
#: dtype, architectures and quantization block at the top level only.
WRAPPER = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    "text_config": TEXT,
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408, "num_hidden_layers": 34},
}
PLAN = ("--hardware", "h200", "--precision", "fp8", "--engine", "vllm", "--tensor-parallel", "8", "--json")


def _write(tmp: Path, name: str, config: dict[str, Any] | str) -> Path:
    path = tmp / name / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    return path


def test_transformers_decoder_text_config_names_are_read() -> None:
    from transformers import PretrainedConfig

    config = PretrainedConfig()
    config.text_config = PretrainedConfig(num_hidden_layers=3)
    assert config.get_text_config() is config.text_config  # the key this reader mirrors
    assert {"decoder", "generator", "text_config"} <= set(TEXT_CONFIG_KEYS)


def test_a_nested_text_config_is_planned_as_the_flat_language_model(tmp_path: Path) -> None:
    wrapped = _write(tmp_path, "scout", WRAPPER)
    flat = _write(tmp_path, "flat", TEXT)
    name, config = read_architecture(str(wrapped))
    assert name == "scout (language model of text_config; vision_config not priced)"
    assert load_architecture(str(wrapped))[1] == load_architecture(str(flat))[1]
    # the wrapper's top-level fields the text config lacks stay readable
    assert config.torch_dtype == "bfloat16"
    assert config.architectures == ["Llama4ForConditionalGeneration"]
    assert config.quantization_config["quant_method"] == "fp8"
    assert not hasattr(config, "vision_config")
    nested = run_cli_in_process("plan", "--model", str(wrapped), *PLAN)
    plain = run_cli_in_process("plan", "--model", str(flat), *PLAN)
    assert nested.returncode == plain.returncode == 0, nested.stderr + plain.stderr
    assert json.loads(nested.stdout) == json.loads(plain.stdout) != []


def test_the_text_config_wins_over_the_wrappers_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "m", {**WRAPPER, "vocab_size": 7})  # a wrapper's own vocab is its tokenizer's, not the LM
    assert read_architecture(str(path))[1].vocab_size == TEXT["vocab_size"]


def test_infinity_and_nan_are_read_as_floats_where_no_count_is(tmp_path: Path) -> None:
    # Nemotron-H writes its Mamba layers' time_step_limit as [0.0, Infinity]; transformers reads it back
    text = json.dumps(TEXT)[:-1] + ', "time_step_limit": [0.0, Infinity], "rope_theta": NaN, "eps": -Infinity}'
    name, config = read_architecture(str(_write(tmp_path, "nemotron", text)))
    assert config.time_step_limit[1] == math.inf and math.isnan(config.rope_theta) and config.eps == -math.inf
    assert load_architecture(str(tmp_path / "nemotron" / "config.json"))[1].n_layers == 48


def test_an_infinite_count_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = json.dumps({**WRAPPER, "text_config": {**TEXT, "max_position_embeddings": 0}}).replace(
        '"max_position_embeddings": 0', '"max_position_embeddings": Infinity'
    )
    with pytest.raises(BadInputError) as refusal:
        read_architecture(str(_write(tmp_path, "m", text)))
    assert "(text_config)" in refusal.value.field
    assert "config max_position_embeddings is Infinity, and a count must be finite" in refusal.value.problem


def test_a_language_model_nested_twice_is_ambiguous(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="both text_config and llm_config"):
        read_architecture(str(_write(tmp_path, "m", {**WRAPPER, "llm_config": TEXT})))
