"""ModelOpt schemes end to end with real ModelOpt runs: quantize, export, reload as served, score.

Each test quantizes the committed demo model with ``mtq.quantize`` (FP8 and NVFP4 calibrate in seconds on a
few rows), writes ModelOpt's own HF export, and loads it back through `recommender.quantize.modelopt_load`,
the loader quality is scored with. FP8's in-process model runs on the CPU, so the reloaded checkpoint's logits
are checked against it; NVFP4's in-process fake quantization asserts CUDA, so its dequantized weights and
emulated activations are checked against ModelOpt's own ``NVFP4QTensor`` on the exported tensors instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recommender.device import DeviceInfo
from recommender.errors import BadInputError
from recommender.models.source import ModelSource
from recommender.quality.calibration_docs import quantize_context
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import get_scheme
from recommender.quantize import modelopt_numerics as numerics
from recommender.quantize.checkpoint import CalibrationSet
from recommender.quantize.model_cache import ModelCache
from recommender.quantize.modelopt import ModelOptScheme
from recommender.quantize.modelopt_load import load_modelopt_checkpoint, read_modelopt_config
from tests.conftest import write_suite

CPU = DeviceInfo("cpu")


def _source(demo_model_dir: Path) -> ModelSource:
    return ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)


def _calibration(source: ModelSource, rows: int = 4, tokens: int = 128) -> CalibrationSet:
    text = Path(json.__file__).read_text()  # stdlib text the demo tokenizer knows; not a scored document
    ids = source.load_tokenizer()(text, add_special_tokens=False)["input_ids"]
    return CalibrationSet(tuple(tuple(ids[i * tokens : (i + 1) * tokens]) for i in range(rows)), "json/__init__.py")


def _scheme(name: str) -> ModelOptScheme:
    scheme = get_scheme(name)
    assert isinstance(scheme, ModelOptScheme)
    return scheme


def _probe(source: ModelSource) -> torch.Tensor:
    text = Path(json.decoder.__file__).read_text()  # other text than the calibration rows
    return torch.tensor([source.load_tokenizer()(text, add_special_tokens=False)["input_ids"][:256]])


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits.float()


def _in_process(source: ModelSource, scheme: ModelOptScheme, calibration: CalibrationSet) -> torch.nn.Module:
    """The model ModelOpt quantized in memory (its fake quantization), calibrated on the same rows."""
    import modelopt.torch.quantization as mtq

    model = source.load_model(dtype=torch.bfloat16, device=CPU)
    rows = [torch.tensor([list(r)]) for r in calibration.rows]
    mtq.quantize(model, scheme.quant_config(), forward_loop=lambda m: [m(r) for r in rows])
    return model


def _served_linears(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    return {n: m for n, m in model.named_modules() if type(m).__name__ == "ServedLinear"}


@pytest.mark.parametrize("name", ["modelopt-fp8", "modelopt-fp8+kv-fp8"])
def test_fp8_export_reloads_to_the_in_process_models_logits(tmp_path: Path, demo_model_dir: Path, name: str) -> None:
    from safetensors.torch import load_file

    source = _source(demo_model_dir)
    scheme, calibration = _scheme(name), _calibration(source)
    scheme.write_checkpoint(source, tmp_path / "ckpt", calibration)
    described = read_modelopt_config(tmp_path / "ckpt")
    assert described.quant_algo == "FP8"
    assert described.kv_cache_quant_algo == ("FP8" if scheme.kv_fp8 else None)
    assert json.loads((tmp_path / "ckpt" / "hf_quant_config.json").read_text())["quantization"]["quant_algo"] == "FP8"
    served = load_modelopt_checkpoint(tmp_path / "ckpt", CPU).float()
    stored = load_file(str(tmp_path / "ckpt" / "model.safetensors"))
    linears = _served_linears(served)
    assert len(linears) == 28  # 4 layers x (q, k, v, o, gate, up, down); lm_head stays 16-bit
    for prefix, layer in linears.items():  # the weights as stored: fp8 x scale, bit for bit
        assert torch.equal(layer.weight.data, stored[f"{prefix}.weight"].float() * stored[f"{prefix}.weight_scale"])

    # ModelOpt's export divides bf16 weights by their scale in bf16 before the fp8 cast, so a few weights land
    # one fp8 step from the in-process model's (2 % of one demo layer): the export, not the in-process model, is
    # what engines serve. The in-process model is therefore given the exported weights (on its fp8 grid, so its
    # own weight quantizer keeps them) and compared in float32: its activation and KV quantization, attention and
    # norms against the reload's. Activation rounding is compared as computed, x / scale here and x * (448 / amax)
    # in ModelOpt, so a value on an fp8 rounding boundary may go either way: the logits agree closely, not bitwise.
    in_process = _in_process(source, scheme, calibration).float()
    for prefix, layer in linears.items():
        in_process.get_submodule(prefix).weight.data = layer.weight.data.clone()
    original = source.load_model(dtype=torch.bfloat16, device=CPU).float()
    ids = _probe(source)
    got, expected, unquantized = _logits(served, ids), _logits(in_process, ids), _logits(original, ids)
    reload_error = (got - expected).abs().mean().item()
    quantization_effect = (expected - unquantized).abs().mean().item()
    bound = 0.2 if scheme.kv_fp8 else 0.05  # rounding every key and value adds boundary cases (measured 0.10, 0.02)
    assert reload_error < bound * quantization_effect, (reload_error, quantization_effect)
    assert (got.argmax(-1) == expected.argmax(-1)).float().mean().item() > 0.99


@pytest.mark.slow
def test_fp8_kv_variant_rounds_keys_and_values_with_the_calibrated_scales(tmp_path: Path, demo_model_dir: Path) -> None:
    source = _source(demo_model_dir)
    calibration = _calibration(source)
    for name in ("modelopt-fp8", "modelopt-fp8+kv-fp8"):
        _scheme(name).write_checkpoint(source, tmp_path / name, calibration)
    plain = load_modelopt_checkpoint(tmp_path / "modelopt-fp8", CPU)
    kv = load_modelopt_checkpoint(tmp_path / "modelopt-fp8+kv-fp8", CPU)
    attention = kv.get_submodule("model.layers.0.self_attn")
    assert 0 < float(attention.recommender_k_scale) < 1  # calibrated, not vLLM's default 1.0
    ids = _probe(source)
    assert not torch.equal(_logits(plain, ids), _logits(kv, ids))  # the same weights; only the KV rounding differs


def test_nvfp4_export_dequantizes_as_modelopt_does(tmp_path: Path, demo_model_dir: Path) -> None:
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
    from safetensors.torch import load_file

    source = _source(demo_model_dir)
    _scheme("modelopt-nvfp4").write_checkpoint(source, tmp_path / "ckpt", _calibration(source))
    assert read_modelopt_config(tmp_path / "ckpt").group_size == 16
    stored = load_file(str(tmp_path / "ckpt" / "model.safetensors"))
    model = load_modelopt_checkpoint(tmp_path / "ckpt", CPU)
    prefix = "model.layers.1.mlp.down_proj"
    weight, scale, scale_2 = (stored[f"{prefix}.{k}"] for k in ("weight", "weight_scale", "weight_scale_2"))
    assert weight.dtype == torch.uint8 and scale.dtype == torch.float8_e4m3fn
    shape = (weight.shape[0], weight.shape[1] * 2)
    theirs = NVFP4QTensor(shape, torch.float32, weight).dequantize(
        torch.float32, scale=scale, double_scale=scale_2, block_sizes={-1: 16}
    )
    assert torch.equal(model.get_submodule(prefix).weight.data, theirs)  # bit for bit
    torch.manual_seed(0)
    x = torch.randn(3, 5, shape[1]) * 2
    input_scale = stored[f"{prefix}.input_scale"]
    packed, block, global_scale = NVFP4QTensor.quantize(x, 16, weights_scaling_factor_2=input_scale)
    expected = packed.dequantize(torch.float32, scale=block, double_scale=global_scale, block_sizes={-1: 16})
    assert torch.equal(numerics.quantize_nvfp4_dynamic(x, input_scale), expected)


def test_e2m1_rounding_ties_go_to_the_even_code() -> None:
    values = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75, 9.0])
    assert numerics.round_e2m1(values).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -1.0, 6.0]


def test_a_directory_that_is_not_modelopt_is_refused_in_one_line(demo_model_dir: Path) -> None:
    with pytest.raises(BadInputError, match="not a ModelOpt checkpoint"):
        read_modelopt_config(demo_model_dir)


@pytest.mark.slow  # 107 s (FP8) and 161 s (NVFP4) on the shared 2-core CPU: lm-eval twice plus the fidelity windows
@pytest.mark.parametrize("name", ["modelopt-fp8", "modelopt-nvfp4"])
def test_demo_model_quantized_exported_reloaded_and_scored_with_lm_eval(
    tmp_path: Path, demo_model_dir: Path, name: str
) -> None:
    """The study's path: calibrated on the use case's training split, scored on the reloaded export."""
    use_case = load_use_case(write_suite(tmp_path / "suite.yaml", limit=8, max_mean_kl=1.0))
    source, manager = _source(demo_model_dir), task_manager(use_case)
    context = quantize_context(use_case, manager, source)
    evaluator = QualityEvaluator(use_case, ModelCache(source, CPU, context), manager=manager)
    result = evaluator.evaluate(get_scheme(name))
    assert result.verdict in ("pass", "fail", "inconclusive")
    assert result.fidelity is not None and result.fidelity.mean_kl > 1e-5  # quantized, not the bf16 model
    assert {c.name for c in result.checks} == {"demo_code_ppl", "demo_code_next_line", "fidelity"}
    served = _scheme(name).checkpoint(source, context)  # made once, found again: the very files scored
    assert (served / "hf_quant_config.json").is_file() and (served / "modelopt_recipe.json").is_file()


@pytest.mark.slow
def test_awq_export_reloads_with_its_pre_quant_scales(tmp_path: Path, demo_model_dir: Path) -> None:
    source = _source(demo_model_dir)
    _scheme("modelopt-w4a16-awq").write_checkpoint(source, tmp_path / "ckpt", _calibration(source, rows=2))
    described = read_modelopt_config(tmp_path / "ckpt")
    assert (described.quant_algo, described.group_size) == ("W4A16_AWQ", 128)
    model = load_modelopt_checkpoint(tmp_path / "ckpt", CPU)
    scaled = [n for n, m in model.named_modules() if getattr(m, "pre_quant_scale", None) is not None]
    assert scaled  # AWQ's scales that ModelOpt could not fold into a norm are applied to the input
    ids = _probe(source)
    served, original = _logits(model, ids), _logits(source.load_model(dtype=torch.bfloat16, device=CPU), ids)
    loss = torch.nn.functional.cross_entropy
    nll = loss(served[0, :-1], ids[0, 1:]).item()
    reference = loss(original[0, :-1], ids[0, 1:]).item()
    assert reference < nll < reference * 1.05  # int4 costs a little, a misread packing would cost far more
