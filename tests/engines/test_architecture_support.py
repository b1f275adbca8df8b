"""Architectures per engine release: each engine's shipped model registry names its source, an architecture an
engine's registry lacks refuses that engine naming the registry and commit, a model none of the listed engines
registers is one `error:` line (exit 2, nothing written) through the real CLI, and every shipped model stays served."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.engines.architecture_support import architecture_refusal, check_served, registry
from recommender.engines.eligibility import eligibility
from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import known_architectures, load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme

#: Served natively by vLLM 0.34.0 and SGLang 0.5.23 (Llama's shape), absent from TensorRT-LLM's model zoo index.
ONLY_VLLM_AND_SGLANG = "InternLM3ForCausalLM"


def _config(tmp_path: Path, names: list[str], wrapper: list[str] | None = None) -> Path:
    """A two-layer Llama-shaped config.json listing `names` as its architectures (nested under ``text_config`` of a
    wrapper listing `wrapper`, when given)."""
    fields = {
        "architectures": names,
        "model_type": "llama",
        "hidden_size": 256,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 2048,
    }
    config = fields if wrapper is None else {"architectures": wrapper, "text_config": fields}
    path = tmp_path / "model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return path


def test_each_registry_names_its_repository_file_commit_and_version() -> None:
    for engine, repository in (
        ("vllm", "vllm-project/vllm"),
        ("sglang", "sgl-project/sglang"),
        ("trtllm", "NVIDIA/TensorRT-LLM"),
    ):
        known = registry(engine)
        assert known is not None and known.repository == repository
        assert known.path and known.commit and known.version
        assert known.cited.startswith(f"{repository} {known.path}@")
        assert {"LlamaForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM"} <= known.architectures
    assert registry("tgi") is None  # not read: never refused, never claimed


def test_an_architecture_missing_from_an_engines_registry_refuses_that_engine_naming_the_registry() -> None:
    assert architecture_refusal("vllm", [ONLY_VLLM_AND_SGLANG]) is None
    assert architecture_refusal("sglang", [ONLY_VLLM_AND_SGLANG]) is None
    why = architecture_refusal("trtllm", [ONLY_VLLM_AND_SGLANG])
    assert why is not None
    assert ONLY_VLLM_AND_SGLANG in why and "trtllm" in why
    assert "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/_arch_index.py@065ff9e93" in why
    h100 = load_catalog().get("h100-sxm").device
    served = eligibility(get_scheme("baseline"), h100, ("vllm", "trtllm"), 128, (ONLY_VLLM_AND_SGLANG,))
    assert served.engines == ("vllm",)
    assert served.refusals == (("trtllm", why),)


def test_trtllm_looks_up_the_first_name_and_vllm_any() -> None:
    listed = ["MadeUpForCausalLM", "LlamaForCausalLM"]
    assert architecture_refusal("vllm", listed) is None
    trtllm = architecture_refusal("trtllm", listed)
    assert trtllm is not None and "MadeUpForCausalLM" in trtllm


def test_no_architectures_field_or_an_unread_registry_is_not_refused() -> None:
    for engine in ("vllm", "sglang", "trtllm", "tgi"):
        assert architecture_refusal(engine, ()) is None
    assert architecture_refusal("tgi", ["MadeUpForCausalLM"]) is None
    check_served((), ("trtllm",), field="--model")


def test_a_model_none_of_the_engines_registers_is_bad_input_naming_each_registry() -> None:
    with pytest.raises(BadInputError) as raised:
        check_served(("MadeUpForCausalLM",), ("vllm", "trtllm"), field="--model")
    text = str(raised.value)
    assert text.startswith("--model:") and "vllm-project/vllm" in text and "NVIDIA/TensorRT-LLM" in text
    check_served(("MadeUpForCausalLM",), ("vllm", "tgi"), field="--model")  # TGI is not checked: no error


def test_every_shipped_architecture_stays_served_by_every_engine() -> None:
    for name in known_architectures():
        _, shape = load_architecture(name)
        for engine in ("vllm", "sglang", "trtllm", "tgi"):
            assert architecture_refusal(engine, shape.architectures) is None, (name, engine)


def test_a_wrappers_own_class_is_looked_up_not_its_text_configs(tmp_path: Path) -> None:
    """Kimi-K2.5 nests a text_config naming DeepseekV3ForCausalLM; engines look up KimiK25ForConditionalGeneration."""
    config = _config(tmp_path, ["DeepseekV3ForCausalLM"], wrapper=["KimiK25ForConditionalGeneration"])
    _, shape = load_architecture(str(config))
    assert shape.architectures == ("KimiK25ForConditionalGeneration",)


def test_plan_on_an_engine_without_the_architecture_is_one_error_line(tmp_path: Path) -> None:
    config = str(_config(tmp_path, [ONLY_VLLM_AND_SGLANG]))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "plan", "--model", config, "--hardware", "h100-sxm"]
        + ["--engine", "trtllm", "--precision", "bf16"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert ONLY_VLLM_AND_SGLANG in lines[0] and "_arch_index.py@065ff9e93" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
