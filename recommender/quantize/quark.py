"""AMD Quark FP8: the checkpoint vLLM on ROCm loads for MI300X-class GPUs, scored as served.

AMD's own FP8 path for Instinct GPUs is a Quark checkpoint (``quantization_config.quant_method: quark``).
vLLM reads it with ``QuarkConfig`` (vllm/model_executor/layers/quantization/quark/quark.py @ 006bce4:
``_is_fp8_w8a8`` takes static FP8 e4m3 weights per tensor or channel with static per-tensor or dynamic
activations) and runs it with ``QuarkW8A8Fp8`` (.../quark/schemes/quark_w8a8_fp8.py @ 037cffe: minimum
capability 89; on gfx94x, ``is_fp8_fnuz``, the e4m3fn weights are reinterpreted as e4m3fnuz with the
scales doubled — the same values — and a fused QKV/MLP module's per-tensor weight scales are requantized to
their maximum). ``quark`` is in ``RocmPlatform.supported_quantization`` (vllm/platforms/rocm.py @ 001eda3).

The scheme applies Quark's own LLM template (``LLMTemplate.get(model_type).get_config(scheme="fp8")``:
FP8 e4m3 per tensor, static min-max weight and input scales, lm_head left in 16 bits) with
``ModelQuantizer.quantize_model`` on the use case's calibration rows, and writes the checkpoint with
``quark.torch.export_safetensors`` (Quark's HF export). Quality is measured on that directory loaded back
(`load_quark_checkpoint`: exact dequantization and the static FP8 input rounding, through the same served
layers as the ModelOpt FP8 checkpoints), never on Quark's in-process fake-quantized model.

amd-quark is an optional extra (``pip install 'recommender[amd]'``): it pulls about 223 MB of dependencies
and compiles a C++ extension on first import, so without it the scheme is refused with that one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from recommender.device import DeviceInfo
from recommender.errors import BadInputError
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint import CalibrationSet
from recommender.quantize.checkpoint_scheme import CheckpointScheme

if TYPE_CHECKING:
    from torch import nn
    from torch.utils.data import Dataset

    from recommender.models.source import ModelSource

#: ``QuantScheme.checkpoint_format`` and ``quantization_config.quant_method`` of Quark checkpoints.
QUARK_FORMAT = "quark"
#: The distribution that provides ``quark`` (the ``amd`` extra pins it).
QUARK_DISTRIBUTION = "amd-quark"
#: The line a user without the extra reads.
INSTALL_HINT = "pip install 'recommender[amd]'"


def quark_missing() -> bool:
    """True when amd-quark is not installed (asked of the package metadata: importing it compiles an extension)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(QUARK_DISTRIBUTION)
    except PackageNotFoundError:
        return True
    return False


@dataclass(frozen=True, kw_only=True)
class QuarkScheme(CheckpointScheme):
    """A Quark LLM-template scheme applied by ``ModelQuantizer``, exported with ``export_safetensors``.

    Args:
        template_scheme: the scheme name Quark's ``LLMTemplate.get_config`` takes ("fp8").
    """

    template_scheme: str
    recipe_file = "quark_recipe.json"
    quant_method = QUARK_FORMAT

    def missing_library(self) -> tuple[str, str] | None:
        return (f"{QUARK_DISTRIBUTION} (the amd extra)", INSTALL_HINT) if quark_missing() else None

    def library_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"amd-quark": version(QUARK_DISTRIBUTION), "transformers": version("transformers")}

    def quantized_model(self, source: ModelSource, calibration: CalibrationSet | None) -> nn.Module:
        """`source` quantized in memory by Quark (its frozen fake quantization), calibrated on `calibration`'s rows."""
        import torch

        with _quiet_quark():
            from quark.torch import LLMTemplate, ModelQuantizer

            model = source.load_model(dtype=torch.bfloat16, device=DeviceInfo("cpu"))
            model_type = str(getattr(model.config, "model_type", ""))
            if model_type not in LLMTemplate.list_available():
                raise BadInputError(
                    "--model",
                    f"Quark has no LLM template for model type {model_type!r}",
                    f"known: {', '.join(sorted(LLMTemplate.list_available()))}",
                )
            config = LLMTemplate.get(model_type).get_config(scheme=self.template_scheme)
            rows = [torch.tensor([list(r)]) for r in (calibration.rows if calibration is not None else ())]
            quantizer = ModelQuantizer(config)
            batches = torch.utils.data.DataLoader(cast("Dataset[torch.Tensor]", rows), batch_size=None)
            with torch.no_grad():
                model = quantizer.quantize_model(model, batches)
                frozen: nn.Module = quantizer.freeze(model)
        return frozen

    def write_checkpoint(self, source: ModelSource, out: Path, calibration: CalibrationSet | None) -> None:
        """Calibrate on `calibration`'s rows, quantize, export with Quark's HF export (plus tokenizer and recipe)."""
        import torch

        model = self.quantized_model(source, calibration)
        with _quiet_quark(), torch.no_grad():
            from quark.torch import export_safetensors

            export_safetensors(model, str(out), custom_mode="quark")
        source.load_tokenizer().save_pretrained(str(out))
        (out / self.recipe_file).write_text(self.recipe)

    def load_saved(self, path: Path, device: DeviceInfo) -> nn.Module:
        return load_quark_checkpoint(path, device)

    def serve_hint(self, out: Path) -> str:
        return f"vllm serve {out} --quantization quark"


def read_quark_fp8(path: Path, *, field: str = "--checkpoint") -> tuple[str, ...]:
    """The layers a Quark FP8 checkpoint leaves unquantized; a one-line refusal for any other Quark scheme."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    quant: dict[str, Any] = config.get("quantization_config") or {}
    if str(quant.get("quant_method", "")).lower() != QUARK_FORMAT:
        raise BadInputError(
            field,
            f"{path} is not a Quark checkpoint (no quant_method quark)",
            "give a directory written by `recommender quantize --scheme quark-fp8`",
        )
    glob = quant.get("global_quant_config") or {}
    weight, inputs = glob.get("weight") or {}, glob.get("input_tensors") or {}
    fp8 = weight.get("dtype") == "fp8_e4m3" and inputs.get("dtype") == "fp8_e4m3"
    per_tensor = weight.get("qscheme") == "per_tensor" and inputs.get("qscheme") == "per_tensor"
    static = not weight.get("is_dynamic") and not inputs.get("is_dynamic")
    if not (fp8 and per_tensor and static) or quant.get("layer_quant_config"):
        raise BadInputError(
            field,
            f"{path} holds a Quark scheme other than static FP8 per tensor, which is not reproduced here",
            "give a quark-fp8 checkpoint",
        )
    return tuple(quant.get("exclude") or ())


def load_quark_checkpoint(path: Path, device: DeviceInfo) -> nn.Module:
    """The Quark FP8 checkpoint at `path` as vLLM serves it: FP8 weights times their per-tensor scales, each
    input rounded to e4m3 with its static scale, float32 matmul (`modelopt_load.ServedLinear`'s FP8 path)."""
    from recommender.quantize.modelopt_load import ModelOptConfig, load_served_checkpoint

    excluded = read_quark_fp8(path)
    return load_served_checkpoint(path, device, ModelOptConfig("FP8", None, None, excluded))


@contextlib.contextmanager
def _quiet_quark() -> Iterator[None]:
    """Quark logs its banner, per-layer progress and config dumps to stdout, where `--json` output belongs; none of
    it changes a value (the reload test checks the values), so it stays off the terminal unless RECOMMENDER_VERBOSE."""
    from recommender.quiet import is_verbose

    if is_verbose():
        yield
        return
    with warnings.catch_warnings(action="ignore"), contextlib.redirect_stdout(io.StringIO()):
        yield


METHODS: tuple[QuantScheme, ...] = (
    QuarkScheme(
        name="quark-fp8",
        precision="fp8",
        library="quark",
        bits_per_weight=8.0,
        weight_only=False,
        devices=frozenset({"cpu", "cuda", "rocm"}),
        kernel_family="quark-fp8",
        checkpoint_format=QUARK_FORMAT,
        calibrates=True,
        template_scheme="fp8",
        recipe=json.dumps({"template": "fp8", "kv_cache": None}),
        description="FP8 W8A8 per-tensor (AMD Quark): one fp8 weight scale and one static activation scale per layer",
    ),
)
