"""Every CPU method really quantizes the demo model with its library's kernels; GPU-only ones refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recommender.device import DeviceInfo
from recommender.errors import SchemeUnavailableError
from recommender.models.source import ModelSource
from recommender.quantize import all_schemes, get_scheme
from recommender.quantize.checkpoint_scheme import CheckpointScheme

CPU = DeviceInfo("cpu")
# Checkpoint schemes (llm-compressor, ModelOpt) are made, saved and loaded back in tests/quantize/test_checkpoints.py,
# tests/quantize/test_modelopt.py and tests/cli/test_quantize_cli.py: here, the methods that quantize as they load.
CPU_METHODS = sorted(
    name
    for name, m in all_schemes().items()
    if m.unavailable_reason(CPU) is None and not isinstance(m, CheckpointScheme)
)


def _weight_class(model: torch.nn.Module) -> str:
    layer = model.model.layers[0].mlp.up_proj
    return f"{type(layer).__name__}/{type(layer.weight).__name__}"


@pytest.mark.parametrize("name", CPU_METHODS)
def test_cpu_method_quantizes_and_runs(demo_model_dir: Path, name: str) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    model = get_scheme(name).load(source, CPU)
    kind = _weight_class(model)
    expected = {
        "baseline": "Linear/Parameter",
        "fp16": "Linear/Parameter",
        "bnb-llm-int8": "Linear8bitLt/Int8Params",
        "bnb-nf4": "Linear4bit/Params4bit",
        "bnb-fp4": "Linear4bit/Params4bit",
        "torchao-float8-wo": "Linear/Float8Tensor",
        "torchao-int8-wo": "Linear/Int8Tensor",
        "torchao-int8-dynamic": "Linear/Int8Tensor",
    }.get(name, "Linear/IntxUnpackedToInt8Tensor")
    assert kind == expected
    # lm_head stays 16-bit for every method, as in serving engines' recipes.
    assert model.lm_head.weight.dtype in (torch.bfloat16, torch.float16)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.inference_mode():
        logits = model(ids).logits
    assert torch.isfinite(logits.float()).all()


def test_float8_dynamic_refuses_cpu_with_reason(demo_model_dir: Path) -> None:
    method = get_scheme("torchao-float8-dynamic")
    reason = method.unavailable_reason(CPU)
    assert reason is not None and "no cpu kernels" in reason
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    with pytest.raises(SchemeUnavailableError):
        method.load(source, CPU)
    assert "capability" in (method.unavailable_reason(DeviceInfo("cuda", (8, 0))) or "")
    assert method.unavailable_reason(DeviceInfo("cuda", (9, 0))) is None


def test_local_directory_checks(tmp_path: Path) -> None:
    from recommender.errors import BadInputError

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BadInputError, match="no \\*.safetensors weights"):
        ModelSource.resolve(str(tmp_path), base_dir=tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0")
    with pytest.raises(BadInputError, match="pickle"):
        ModelSource.resolve(str(tmp_path), base_dir=tmp_path)
    assert ModelSource.resolve(str(tmp_path), base_dir=tmp_path, allow_pickle=True).is_local
    assert not ModelSource.resolve("meta-llama/Llama-3.1-8B", base_dir=tmp_path).is_local


def test_fp8_kv_cache_rounds_keys_and_values_through_float8(demo_model_dir: Path) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    ids = torch.tensor([list(range(1, 65))])
    base = get_scheme("baseline").load(source, CPU)
    method = get_scheme("baseline+kv-fp8")
    assert method.name == "baseline+kv-fp8" and method.precision == "bf16" and repr(method) != repr(base)
    fp8 = method.load(source, CPU)
    with torch.inference_mode():
        reference, rounded = base(ids).logits.float(), fp8(ids).logits.float()
    # Rounding K and V to 3 mantissa bits moves the logits a little, never to NaN.
    difference = (reference - rounded).abs().max().item()
    assert torch.isfinite(rounded).all() and 1e-4 < difference < 2.0
    # Generation with the cache goes through the same rounding: first new token's logits match the full pass.
    with torch.inference_mode():
        cached = fp8(ids[:, :-1], use_cache=True)
        step = fp8(ids[:, -1:], past_key_values=cached.past_key_values, use_cache=True).logits[0, -1].float()
    assert (step - rounded[0, -1]).abs().mean().item() < 0.02, (step - rounded[0, -1]).abs().mean().item()
    assert get_scheme("bnb-nf4+kv-fp8").bits_per_weight == get_scheme("bnb-nf4").bits_per_weight
