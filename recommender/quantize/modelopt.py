"""NVIDIA ModelOpt schemes: the checkpoints TensorRT-LLM serves (and vLLM and SGLang load), scored as served.

TensorRT-LLM reads llm-compressor's compressed-tensors only for FP8 per channel or in blocks (Hopper) and NVFP4
(Blackwell); on Ada (L40S, L4) its FP8 per tensor and W4A16 AWQ come from ModelOpt checkpoints
(``hf_quant_config.json``; docs/source/features/quantization.md @ 09d4c79). Each scheme here is a ModelOpt
quantization config (``modelopt.torch.quantization``'s ``FP8_DEFAULT_CFG``, ``NVFP4_DEFAULT_CFG``,
``INT4_AWQ_CFG``, plus ``FP8_KV_CFG`` for the KV-cache variant) applied with ``mtq.quantize`` on the use
case's calibration rows (the training split, never the scored documents: every one of these calibrates —
FP8's static activation scales, NVFP4's global input scale, AWQ's search) and written with
``modelopt.torch.export.export_hf_checkpoint``, ModelOpt's own HF export. Quality is measured on that
directory loaded back by `recommender.quantize.modelopt_load` (exact dequantization, the engines' activation
and KV quantization), never on the in-process model.

Effective bits per weight: FP8 8 (one fp32 scale per tensor); NVFP4 4.5 (an e4m3 scale per 16 values, plus
one fp32 global scale per tensor); W4A16 AWQ 4.25 (ModelOpt writes one fp32 scale per 128 weights: the
checkpoint's size, an upper bound on what an engine holds).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.device import DeviceInfo
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint import CalibrationSet
from recommender.quantize.checkpoint_scheme import CheckpointScheme
from recommender.quantize.kv_cache import FP8_KV_SUFFIX

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource

#: ``QuantScheme.checkpoint_format`` of these schemes.
MODELOPT_FORMAT = "modelopt"
#: ModelOpt's quantization config that adds calibrated FP8 KV-cache scales.
FP8_KV_CONFIG = "FP8_KV_CFG"


@dataclass(frozen=True, kw_only=True)
class ModelOptScheme(CheckpointScheme):
    """A ModelOpt quantization config applied by ``mtq.quantize``, exported with ``export_hf_checkpoint``.

    Args:
        config_name: the ``modelopt.torch.quantization`` config (``FP8_DEFAULT_CFG``).
        kv_fp8: also calibrate FP8 KV-cache scales (``FP8_KV_CFG``); the checkpoint carries them.
    """

    config_name: str
    kv_fp8: bool = False
    recipe_file = "modelopt_recipe.json"
    quant_method = MODELOPT_FORMAT

    def library_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"modelopt": version("nvidia-modelopt"), "transformers": version("transformers")}

    def fp8_kv_variant(self) -> QuantScheme | None:
        """The same scheme whose checkpoint carries calibrated FP8 KV scales (``name+kv-fp8``)."""
        if self.kv_fp8:
            return self
        recipe = json.dumps({"config": self.config_name, "kv_cache": FP8_KV_CONFIG}, sort_keys=True)
        return replace(
            self,
            name=f"{self.name}{FP8_KV_SUFFIX}",
            kv_fp8=True,
            recipe=recipe,
            description=f"{self.description}; FP8 KV cache with calibrated scales",
        )

    def quant_config(self) -> dict[str, Any]:
        """The ModelOpt config this scheme applies (a copy: ModelOpt's own constants stay untouched)."""
        import modelopt.torch.quantization as mtq

        config = copy.deepcopy(getattr(mtq, self.config_name))
        if self.kv_fp8:
            config["quant_cfg"] = [*config["quant_cfg"], *copy.deepcopy(getattr(mtq, FP8_KV_CONFIG)["quant_cfg"])]
        return dict(config)

    def write_checkpoint(self, source: ModelSource, out: Path, calibration: CalibrationSet | None) -> None:
        """Calibrate on `calibration`'s rows, quantize, export the HF checkpoint (plus tokenizer and recipe)."""
        import torch

        with _quiet_modelopt():
            import modelopt.torch.quantization as mtq
            from modelopt.torch.export import export_hf_checkpoint

            model = source.load_model(dtype=torch.bfloat16, device=DeviceInfo("cpu"))
            rows = [torch.tensor([list(r)]) for r in (calibration.rows if calibration is not None else ())]

            def forward_loop(quantized: nn.Module) -> None:
                with torch.no_grad():
                    for row in rows:
                        quantized(row)

            mtq.quantize(model, self.quant_config(), forward_loop=forward_loop)
            with torch.inference_mode():
                export_hf_checkpoint(model, export_dir=str(out))
        source.load_tokenizer().save_pretrained(str(out))
        (out / self.recipe_file).write_text(self.recipe)

    def load_saved(self, path: Path, device: DeviceInfo) -> nn.Module:
        from recommender.quantize.modelopt_load import load_modelopt_checkpoint

        return load_modelopt_checkpoint(path, device)

    def serve_hint(self, out: Path) -> str:
        return f"trtllm-serve {out}"


@contextlib.contextmanager
def _quiet_modelopt() -> Iterator[None]:
    """ModelOpt warns at import that it has not tested this transformers version, warns per layer on export and
    prints ("Inserted 106 quantizers") to stdout, where `--json` output belongs; none of it changes a value (the
    reload test checks the values), so it is kept off the terminal unless RECOMMENDER_VERBOSE is set."""
    from recommender.quiet import is_verbose

    if is_verbose():
        yield
        return
    with warnings.catch_warnings(action="ignore"), contextlib.redirect_stdout(io.StringIO()):
        yield


def _recipe(config_name: str) -> str:
    return json.dumps({"config": config_name, "kv_cache": None}, sort_keys=True)


_ANY = frozenset({"cpu", "cuda"})

METHODS: tuple[QuantScheme, ...] = (
    ModelOptScheme(
        name="modelopt-fp8",
        precision="fp8",
        library="modelopt",
        bits_per_weight=8.0,
        weight_only=False,
        devices=_ANY,
        kernel_family="mo-fp8",
        checkpoint_format=MODELOPT_FORMAT,
        calibrates=True,
        config_name="FP8_DEFAULT_CFG",
        recipe=_recipe("FP8_DEFAULT_CFG"),
        description="FP8 W8A8 per-tensor (ModelOpt): one fp8 weight scale and one static activation scale per layer",
    ),
    ModelOptScheme(
        name="modelopt-nvfp4",
        precision="fp4",
        library="modelopt",
        bits_per_weight=4.0 + 8.0 / 16,
        weight_only=False,
        devices=_ANY,
        kernel_family="mo-nvfp4",
        checkpoint_format=MODELOPT_FORMAT,
        calibrates=True,
        config_name="NVFP4_DEFAULT_CFG",
        recipe=_recipe("NVFP4_DEFAULT_CFG"),
        description="NVFP4 W4A4 (ModelOpt): fp4 weights and activations, an fp8 scale per 16 values, global scales",
    ),
    ModelOptScheme(
        name="modelopt-w4a16-awq",
        precision="int4",
        library="modelopt",
        bits_per_weight=4.0 + 32.0 / 128,
        weight_only=True,
        devices=_ANY,
        kernel_family="mo-w4a16-awq",
        checkpoint_format=MODELOPT_FORMAT,
        calibrates=True,
        config_name="INT4_AWQ_CFG",
        recipe=_recipe("INT4_AWQ_CFG"),
        description="INT4 W4A16 AWQ (ModelOpt): symmetric int4, one scale per 128 weights, AWQ pre-quant scales",
    ),
)
