"""AMD Quark FP8 end to end with real Quark runs: quantize, export, reload as served, score; refused without the extra.

amd-quark is the optional ``amd`` extra. Without it (the default install) the scheme is refused with the one line
that installs it: those tests run in every venv that lacks it. With it (.ci/run's Quark step builds such a venv
and runs ``pytest -m quark``) the demo model is quantized with Quark's LLM template, written with Quark's
``export_safetensors``, loaded back through `recommender.quantize.quark.load_quark_checkpoint` (the loader quality
is scored with), checked against Quark's in-process model, and scored with lm-eval.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recommender.cli.checkpoint_export import checkpoint_scheme
from recommender.device import DeviceInfo
from recommender.errors import BadInputError
from recommender.models.source import ModelSource
from recommender.quality.calibration_docs import quantize_context
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import get_scheme
from recommender.quantize.checkpoint import CalibrationSet
from recommender.quantize.model_cache import ModelCache
from recommender.quantize.quark import QuarkScheme, load_quark_checkpoint, quark_missing, read_quark_fp8
from tests.conftest import write_suite

CPU = DeviceInfo("cpu")
needs_quark = pytest.mark.skipif(quark_missing(), reason="amd-quark is not installed (pip install 'recommender[amd]')")
without_quark = pytest.mark.skipif(not quark_missing(), reason="amd-quark is installed: the refusal cannot happen")


def _scheme() -> QuarkScheme:
    scheme = get_scheme("quark-fp8")
    assert isinstance(scheme, QuarkScheme)
    return scheme


def _source(demo_model_dir: Path) -> ModelSource:
    return ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)


def _calibration(source: ModelSource, rows: int = 4, tokens: int = 128) -> CalibrationSet:
    text = Path(json.__file__).read_text()  # stdlib text the demo tokenizer knows; not a scored document
    ids = source.load_tokenizer()(text, add_special_tokens=False)["input_ids"]
    return CalibrationSet(tuple(tuple(ids[i * tokens : (i + 1) * tokens]) for i in range(rows)), "json/__init__.py")


def _probe(source: ModelSource) -> torch.Tensor:
    text = Path(json.decoder.__file__).read_text()  # other text than the calibration rows
    return torch.tensor([source.load_tokenizer()(text, add_special_tokens=False)["input_ids"][:256]])


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits.float()


@without_quark
def test_scheme_is_refused_with_the_install_line_without_the_extra() -> None:
    reason = _scheme().unavailable_reason(CPU)
    assert reason == "quark-fp8 needs amd-quark (the amd extra), which is not installed: pip install 'recommender[amd]'"
    with pytest.raises(BadInputError, match=r"^--scheme: quark-fp8 needs amd-quark .*pip install 'recommender\[amd\]'"):
        checkpoint_scheme(_scheme())


@without_quark
def test_quantize_cli_refuses_in_one_line_and_writes_nothing(tmp_path: Path, demo_model_dir: Path) -> None:
    out = tmp_path / "ckpt"
    args = ["quantize", "--model", str(demo_model_dir), "--scheme", "quark-fp8", "--out", str(out)]
    result = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --scheme: quark-fp8 needs amd-quark (the amd extra), which is not installed "
        "(fix: pip install 'recommender[amd]')"
    ]
    assert result.stdout == "" and not out.exists() and list(tmp_path.iterdir()) == []


def test_a_directory_that_is_not_quark_is_refused_in_one_line(demo_model_dir: Path) -> None:
    with pytest.raises(BadInputError, match="not a Quark checkpoint"):
        read_quark_fp8(demo_model_dir)


@pytest.mark.slow
@pytest.mark.quark
@needs_quark
def test_export_reloads_to_quarks_in_process_logits(tmp_path: Path, demo_model_dir: Path) -> None:
    from safetensors.torch import load_file

    source, scheme = _source(demo_model_dir), _scheme()
    calibration = _calibration(source)
    in_process = scheme.quantized_model(source, calibration)
    scheme.write_checkpoint(source, tmp_path / "ckpt", calibration)
    quant = json.loads((tmp_path / "ckpt" / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "quark" and "lm_head" in read_quark_fp8(tmp_path / "ckpt")
    stored = {}
    for shard in (tmp_path / "ckpt").glob("*.safetensors"):
        stored.update(load_file(str(shard)))
    assert stored["model.layers.0.mlp.up_proj.weight"].dtype == torch.float8_e4m3fn
    served = load_quark_checkpoint(tmp_path / "ckpt", CPU).float()
    linears = {n: m for n, m in served.named_modules() if type(m).__name__ == "ServedLinear"}
    assert len(linears) == 28  # 4 layers x (q, k, v, o, gate, up, down); lm_head stays 16-bit
    for prefix, layer in linears.items():  # the weights as stored: fp8 x scale, bit for bit
        assert torch.equal(layer.weight.data, stored[f"{prefix}.weight"].float() * stored[f"{prefix}.weight_scale"])
        assert layer.input_scale is not None  # static activation scales, calibrated

    # Quark's frozen in-process model holds each weight as fp8 x scale rounded to bf16 (86 % of one demo layer's
    # weights move by that rounding); the export keeps the fp8 codes and the scale, which vLLM multiplies in float32.
    # So the in-process weights are the reload's rounded to bf16, and the in-process model is then given the exact
    # weights (on the fp8 grid, which its own weight quantizer keeps) to compare the rest in float32: its static
    # input quantization, attention and norms against the reload's.
    in_process = in_process.float()
    for prefix, layer in linears.items():
        mine = in_process.get_submodule(prefix)
        assert torch.equal(mine.weight.data, layer.weight.data.bfloat16().float()), prefix
        mine.weight.data = layer.weight.data.clone()
    ids = _probe(source)
    original = source.load_model(dtype=torch.bfloat16, device=CPU).float()
    got, expected, unquantized = _logits(served, ids), _logits(in_process, ids), _logits(original, ids)
    reload_error = (got - expected).abs().mean().item()
    quantization_effect = (expected - unquantized).abs().mean().item()
    assert quantization_effect > 0  # quantized, not the bf16 model
    assert reload_error < 0.05 * quantization_effect, (reload_error, quantization_effect)
    assert (got.argmax(-1) == expected.argmax(-1)).float().mean().item() > 0.99


@pytest.mark.slow
@pytest.mark.quark
@needs_quark
def test_demo_model_quantized_exported_reloaded_and_scored_with_lm_eval(tmp_path: Path, demo_model_dir: Path) -> None:
    """The study's path: calibrated on the use case's training split, scored on the reloaded export."""
    use_case = load_use_case(write_suite(tmp_path / "suite.yaml", limit=8, max_mean_kl=1.0))
    source, manager = _source(demo_model_dir), task_manager(use_case)
    context = quantize_context(use_case, manager, source)
    evaluator = QualityEvaluator(use_case, ModelCache(source, CPU, context), manager=manager)
    result = evaluator.evaluate(_scheme())
    assert result.verdict in ("pass", "fail", "inconclusive")
    assert result.fidelity is not None and 1e-5 < result.fidelity.mean_kl < 0.1  # quantized, and FP8-close
    assert {c.name for c in result.checks} == {"demo_code_ppl", "demo_code_next_line", "fidelity"}
    served = _scheme().checkpoint(source, context)  # made once, found again: the very files scored
    assert (served / "quark_recipe.json").is_file()
