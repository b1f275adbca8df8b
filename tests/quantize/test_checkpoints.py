"""Checkpoint schemes end to end with real llm-compressor runs: the files written are the weights scored.

Each test quantizes the committed demo model for real (FP8 dynamic and round-to-nearest in
under a second of library time, GPTQ on a few calibration rows), saves a compressed-tensors
checkpoint, loads it back the way quality is scored, and checks the loaded weights against
the checkpoint's own bytes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.quantize import get_scheme
from recommender.quantize.checkpoint import CalibrationSet, CheckpointStore, QuantizeContext
from recommender.quantize.llmcompressor import LlmCompressorScheme
from recommender.quantize.model_cache import ModelCache

CPU = DeviceInfo("cpu")
GROUP = 128


def _source(demo_model_dir: Path) -> ModelSource:
    return ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)


def _calibration(source: ModelSource, rows: int = 4, tokens: int = 64) -> CalibrationSet:
    text = Path(json.__file__).read_text()  # stdlib text the demo tokenizer knows; not a scored document
    ids = source.load_tokenizer()(text, add_special_tokens=False)["input_ids"]
    return CalibrationSet(tuple(tuple(ids[i * tokens : (i + 1) * tokens]) for i in range(rows)), "json/__init__.py")


def _scheme(name: str) -> LlmCompressorScheme:
    scheme = get_scheme(name)
    assert isinstance(scheme, LlmCompressorScheme)
    return scheme


def _checkpoint_tensors(path: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        tensors |= load_file(str(file))
    return tensors


def _loaded_and_checkpoint(tmp_path: Path, demo_model_dir: Path, name: str) -> tuple[torch.nn.Module, Path]:
    source = _source(demo_model_dir)
    context = QuantizeContext(CheckpointStore(tmp_path / "store"), lambda: _calibration(source))
    models = ModelCache(source, CPU, context)
    model = models.get(_scheme(name))  # what the quality evaluator scores
    return model, _scheme(name).checkpoint(source, context)


def _body_linears(model: torch.nn.Module) -> dict[str, torch.nn.Linear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not n.endswith("lm_head")}


def test_fp8_dynamic_checkpoint_is_what_is_scored(tmp_path: Path, demo_model_dir: Path) -> None:
    model, path = _loaded_and_checkpoint(tmp_path, demo_model_dir, "fp8-dynamic")
    quant = json.loads((path / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors"
    group = quant["config_groups"]["group_0"]
    assert group["weights"]["type"] == "float" and group["weights"]["strategy"] == "channel"
    assert group["input_activations"]["dynamic"] is True and group["input_activations"]["strategy"] == "token"
    stored = _checkpoint_tensors(path)
    linears = _body_linears(model)
    assert len(linears) == 28  # 4 layers x (q, k, v, o, gate, up, down)
    for name, layer in linears.items():
        weight, scale = stored[f"{name}.weight"], stored[f"{name}.weight_scale"]
        assert weight.dtype == torch.float8_e4m3fn and scale.shape == (weight.shape[0], 1)
        expected = (weight.to(torch.bfloat16) * scale).to(torch.bfloat16)
        assert torch.equal(layer.weight.data, expected), name  # bit for bit
    # Activations are quantized in the forward pass (per token, fp8): the output is not a plain bf16 matmul.
    layer = linears["model.layers.0.mlp.up_proj"]
    x = torch.randn(3, layer.in_features, dtype=torch.bfloat16)
    with torch.inference_mode():
        simulated, plain = layer(x), torch.nn.functional.linear(x, layer.weight)
    assert not torch.equal(simulated, plain)
    assert (simulated.float() - plain.float()).abs().max() < 0.1 * plain.float().abs().max()


def _unpack_int4(packed: torch.Tensor, shape: torch.Tensor) -> torch.Tensor:
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    return unpack_from_int32(packed, 4, torch.Size(shape.tolist()))


@pytest.mark.parametrize("name", ["w4a16-rtn-g128", "w4a16-gptq-g128"])
def test_w4a16_checkpoint_groups_and_weights(tmp_path: Path, demo_model_dir: Path, name: str) -> None:
    model, path = _loaded_and_checkpoint(tmp_path, demo_model_dir, name)
    group = json.loads((path / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"]
    assert group["weights"]["num_bits"] == 4 and group["weights"]["group_size"] == GROUP
    assert group.get("input_activations") is None  # weight-only
    stored = _checkpoint_tensors(path)
    for layer_name, layer in _body_linears(model).items():
        q = _unpack_int4(stored[f"{layer_name}.weight_packed"], stored[f"{layer_name}.weight_shape"])
        assert int(q.min()) >= -8 and int(q.max()) <= 7
        scale = stored[f"{layer_name}.weight_scale"]
        expected = (q.to(torch.bfloat16) * scale.repeat_interleave(GROUP, dim=1)).to(torch.bfloat16)
        assert torch.equal(layer.weight.data, expected), layer_name  # bit for bit
        rows, cols = layer.weight.shape
        groups = layer.weight.data.view(rows, cols // GROUP, GROUP)
        distinct = max(len(torch.unique(groups[r, g])) for r in range(0, rows, 7) for g in range(cols // GROUP))
        assert distinct <= 16, layer_name


def test_store_finds_a_checkpoint_instead_of_quantizing_again(tmp_path: Path, demo_model_dir: Path) -> None:
    source = _source(demo_model_dir)
    context = QuantizeContext(CheckpointStore(tmp_path / "store"))
    scheme = _scheme("w4a16-rtn-g128")
    first = scheme.checkpoint(source, context)
    written = (first / "config.json").stat().st_mtime_ns
    started = time.process_time()
    second = scheme.checkpoint(source, context)
    assert second == first and (second / "config.json").stat().st_mtime_ns == written
    assert time.process_time() - started < 5.0  # CPU s; found by key: hashing the weights, no oneshot
    assert [p.name for p in (tmp_path / "store").iterdir()] == [first.name]  # no staging left behind


def test_calibrating_scheme_without_documents_refuses(tmp_path: Path, demo_model_dir: Path) -> None:
    from recommender.errors import SchemeUnavailableError

    with pytest.raises(SchemeUnavailableError, match="calibrates on documents"):
        _scheme("w4a16-gptq-g128").checkpoint(_source(demo_model_dir), QuantizeContext(CheckpointStore(tmp_path)))
