"""llm-compressor schemes: checkpoints in the compressed-tensors format that vLLM and SGLang load.

Each scheme is an llm-compressor recipe (YAML, the library's own format), applied with
`llmcompressor.oneshot` and saved with `save_compressed=True`; the resulting directory is
what `vllm serve DIR` loads (its config.json carries `quantization_config` with
`quant_method: compressed-tensors` and the config groups) and what quality is scored on,
loaded back with transformers. The recipe text is the scheme's identity: it decides the
weights, it is written beside a study for a model too large to quantize here, and
`llmcompressor.oneshot(recipe=...)` takes it as is. Most recipes are one modifier applying one of
compressed-tensors' preset schemes to the Linear layers but the lm_head: those schemes are rows of data
(``PresetRow``) whose text one function writes (``preset_recipe``); the others are written out whole.

Effective bits per weight (the memory model): per-channel schemes store one scale per
output row (~0 at real widths); group-128 INT4 stores one bf16 scale per 128 weights
(4 + 16/128), plus an int4 zero point when asymmetric (AWQ: 4 + 20/128 = 4.16, packed);
NVFP4 one fp8 scale per 16 fp4 values (4.5, plus one fp32 global scale per tensor), MXFP4 one
e8m0 scale per 32 (4.25), FP8 block one fp32 scale per 128x128 block.

FP4 and FP8 activations on a device without their kernels (this CPU, any GPU below Blackwell for
FP4): the checkpoint is dequantized on load (weights = scale x stored value, exactly what the
engine multiplies), and each quantized layer's forward pass quantizes its input with the scheme's
own rules (fp4 e2m1 or fp8 e4m3 rounding, per group of 16 or 32 or per tensor, with the scheme's
scale format) before the matmul, in compressed-tensors' fake-quantization code: the values an FP4
tensor core would see, computed at a higher precision.
Schemes that calibrate (GPTQ, AWQ, SmoothQuant) run the use case's own calibration
documents (`QuantizeContext.calibration`), never the scored ones.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from recommender.device import DeviceInfo
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint import CalibrationSet
from recommender.quantize.checkpoint_scheme import CheckpointScheme

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

    from recommender.models.source import ModelSource

#: Where engines read compressed-tensors checkpoints from config.json; no launch flag is needed.
COMPRESSED_TENSORS = "compressed-tensors"


@dataclass(frozen=True, kw_only=True)
class LlmCompressorScheme(CheckpointScheme):
    """A recipe applied by `llmcompressor.oneshot`, saved compressed, loaded back for scoring.

    Args:
        recipe: the llm-compressor recipe YAML.
        calibrates: True when the recipe runs calibration data through the model.
    """

    quant_method = COMPRESSED_TENSORS

    def library_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"llmcompressor": version("llmcompressor"), "compressed_tensors": version("compressed-tensors")}

    def write_checkpoint(self, source: ModelSource, out: Path, calibration: CalibrationSet | None) -> None:
        """Quantize `source` with the recipe and save it compressed (plus tokenizer and recipe) to `out`."""
        import torch
        from llmcompressor.entrypoints.oneshot import oneshot

        model = cast("PreTrainedModel", source.load_model(dtype=torch.bfloat16, device=DeviceInfo("cpu")))
        kwargs = _calibration_kwargs(calibration) if calibration is not None else {}
        with _cpu_calibration():
            oneshot(model=model, recipe=self.recipe, **kwargs)
        model.save_pretrained(str(out), save_compressed=True)
        source.load_tokenizer().save_pretrained(str(out))
        (out / self.recipe_file).write_text(self.recipe)

    def load_saved(self, path: Path, device: DeviceInfo) -> nn.Module:
        return load_checkpoint(path, device)


def load_checkpoint(path: Path, device: DeviceInfo) -> nn.Module:
    """A compressed-tensors checkpoint loaded with transformers for scoring.

    On the CPU the weights are dequantized at load time, which leaves the weights the model
    computes with equal to the checkpoint's (scale x quantized value, rounded to bf16);
    activation quantization of the A8 schemes stays simulated in each quantized layer's
    forward pass. On CUDA the weights stay compressed and transformers' optimized path runs
    the kernels it has (FP8 W8A8 on capability >= 8.9), the rest decompress on first use.
    """
    import torch
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    on_cpu = device.kind == "cpu"
    config = CompressedTensorsConfig(dequantize=on_cpu, use_optimized_inference=not on_cpu)
    model: nn.Module = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=torch.bfloat16, device_map=device.kind, quantization_config=config
    )
    return model.eval()


def _calibration_kwargs(calibration: CalibrationSet) -> dict[str, Any]:
    from datasets import Dataset

    rows = [list(r) for r in calibration.rows]
    dataset = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})
    return {
        "dataset": dataset,
        "num_calibration_samples": len(rows),
        "max_seq_length": max(len(r) for r in rows),
        "shuffle_calibration_samples": False,
    }


class _cpu_calibration:  # noqa: N801 - used as a context manager, named like one
    """Skip llm-compressor's pinning of cached activations where there is no accelerator.

    `IntermediatesCache` pins CPU tensors for faster host-to-device copies; without a CUDA
    device `pin_memory()` raises "Cannot access accelerator device" (seen with AWQ on CPU).
    Pinning changes no value, so on a CPU-only machine it is skipped for the call.
    """

    def __enter__(self) -> None:
        import torch
        from llmcompressor.pipelines.cache import IntermediatesCache

        self._original = IntermediatesCache.__dict__.get("_pin_intermediate")
        if not torch.cuda.is_available() and self._original is not None:
            IntermediatesCache._pin_intermediate = classmethod(lambda cls, value: None)  # type: ignore[method-assign,assignment]

    def __exit__(self, *exc: object) -> None:
        from llmcompressor.pipelines.cache import IntermediatesCache

        if self._original is not None:
            IntermediatesCache._pin_intermediate = self._original  # type: ignore[method-assign]


def _recipe(modifiers: str) -> str:
    return "quant_stage:\n  quant_modifiers:\n" + textwrap.indent(textwrap.dedent(modifiers).strip() + "\n", "    ")


def preset_recipe(
    preset: str,
    *,
    modifier: str = "QuantizationModifier",
    targets: tuple[str, ...] = ("Linear",),
    ignore: tuple[str, ...] = ("lm_head",),
) -> str:
    """The recipe that applies compressed-tensors' preset scheme `preset` to `targets` with `modifier`.

    llm-compressor resolves a preset name with the modifier's targets into the preset's weight and activation
    arguments (``QuantizationMixin.resolve_quantization_config``, llmcompressor 0.14.0,
    ``llmcompressor/modifiers/quantization/quantization/mixin.py``, via ``preset_name_to_scheme``); the names
    are the keys of ``PRESET_SCHEMES`` (compressed-tensors 0.19.0, vllm-project/compressed-tensors,
    ``compressed_tensors/quantization/quant_scheme.py``: W4A16, W4A16_ASYM, W8A8, FP8, FP8_DYNAMIC, FP8_BLOCK,
    NVFP4, NVFP4A16, MXFP4, ...). The text is byte for byte what these schemes' recipes have always been:
    it keys their checkpoints.
    """
    return _recipe(
        f"{modifier}:\n  targets: [{', '.join(targets)}]\n  scheme: {preset}\n  ignore: [{', '.join(ignore)}]\n"
    )


_ANY = frozenset({"cpu", "cuda"})


@dataclass(frozen=True, kw_only=True)
class PresetRow:
    """A scheme whose recipe is one modifier applying a compressed-tensors preset (``preset_recipe``), as data.

    Args:
        name, precision, bits_per_weight, weight_only, kernel_family, calibrates, description: the scheme's
            (``QuantScheme``); it runs anywhere llm-compressor does and writes compressed-tensors.
        preset: the ``PRESET_SCHEMES`` name.
        modifier: the llm-compressor modifier that applies it (``GPTQModifier`` calibrates the rounding;
            ``QuantizationModifier`` rounds to nearest, calibrating only static activation scales).
        targets: the layers it quantizes; ignore: the layers it leaves in 16-bit.
    """

    name: str
    preset: str
    precision: str
    bits_per_weight: float
    weight_only: bool
    kernel_family: str
    calibrates: bool
    description: str
    modifier: str = "QuantizationModifier"
    targets: tuple[str, ...] = ("Linear",)
    ignore: tuple[str, ...] = ("lm_head",)

    def recipe(self) -> str:
        return preset_recipe(self.preset, modifier=self.modifier, targets=self.targets, ignore=self.ignore)

    def scheme(self) -> LlmCompressorScheme:
        return LlmCompressorScheme(
            name=self.name,
            precision=self.precision,
            library="llmcompressor",
            bits_per_weight=self.bits_per_weight,
            weight_only=self.weight_only,
            devices=_ANY,
            kernel_family=self.kernel_family,
            checkpoint_format=COMPRESSED_TENSORS,
            calibrates=self.calibrates,
            recipe=self.recipe(),
            description=self.description,
        )


#: The schemes in registry order: preset ones as rows, the others (two modifiers, or explicit config groups) whole.
_TABLE: tuple[PresetRow | LlmCompressorScheme, ...] = (
    PresetRow(
        name="fp8-dynamic",
        preset="FP8_DYNAMIC",
        precision="fp8",
        bits_per_weight=8.0,
        weight_only=False,
        kernel_family="ct-fp8-w8a8",
        calibrates=False,
        description="FP8 W8A8: per-channel fp8 weights, dynamic per-token fp8 activations (llm-compressor)",
    ),
    LlmCompressorScheme(
        name="int8-w8a8",
        precision="int8",
        library="llmcompressor",
        bits_per_weight=8.0,
        weight_only=False,
        devices=_ANY,
        kernel_family="ct-int8-w8a8",
        checkpoint_format=COMPRESSED_TENSORS,
        calibrates=True,
        recipe=_recipe("""
            SmoothQuantModifier:
              smoothing_strength: 0.8
            GPTQModifier:
              targets: [Linear]
              scheme: W8A8
              ignore: [lm_head]
        """),
        description="INT8 W8A8: SmoothQuant + GPTQ per-channel int8 weights, dynamic per-token int8 activations",
    ),
    PresetRow(
        name="w4a16-gptq-g128",
        preset="W4A16",
        modifier="GPTQModifier",
        precision="int4",
        bits_per_weight=4.0 + 16.0 / 128,
        weight_only=True,
        kernel_family="ct-w4a16",
        calibrates=True,
        description="INT4 W4A16: GPTQ, symmetric, one bf16 scale per 128 weights",
    ),
    LlmCompressorScheme(
        name="w4a16-awq-g128",
        precision="int4",
        library="llmcompressor",
        bits_per_weight=4.0 + 20.0 / 128,
        weight_only=True,
        devices=_ANY,
        kernel_family="ct-w4a16-asym",
        checkpoint_format=COMPRESSED_TENSORS,
        calibrates=True,
        recipe=_recipe("""
            AWQModifier: {}
            QuantizationModifier:
              targets: [Linear]
              scheme: W4A16_ASYM
              ignore: [lm_head]
        """),
        description="INT4 W4A16: AWQ, asymmetric, one bf16 scale and int4 zero point per 128 weights",
    ),
    PresetRow(
        name="w4a16-rtn-g128",
        preset="W4A16",
        precision="int4",
        bits_per_weight=4.0 + 16.0 / 128,
        weight_only=True,
        kernel_family="ct-w4a16",
        calibrates=False,
        description="INT4 W4A16: round-to-nearest, symmetric, group 128 (the cheap baseline of GPTQ and AWQ)",
    ),
    PresetRow(
        name="fp8-tensor",
        preset="FP8",
        precision="fp8",
        bits_per_weight=8.0,
        weight_only=False,
        kernel_family="ct-fp8-tensor",
        calibrates=True,
        description="FP8 W8A8 per-tensor: one fp8 weight scale and one static activation scale per layer (calibrated)",
    ),
    PresetRow(
        name="fp8-block",
        preset="FP8_BLOCK",
        precision="fp8",
        bits_per_weight=8.0 + 32.0 / (128 * 128),
        weight_only=False,
        kernel_family="ct-fp8-block",
        calibrates=False,
        description="FP8 block-scaled: fp8 weights in 128x128 blocks, dynamic fp8 activations per 128-value group",
    ),
    PresetRow(
        name="nvfp4",
        preset="NVFP4",
        precision="fp4",
        bits_per_weight=4.0 + 8.0 / 16,
        weight_only=False,
        kernel_family="ct-nvfp4",
        calibrates=True,
        description="NVFP4 W4A4: fp4 (e2m1) weights and activations, an fp8 scale per 16 values (calibrated)",
    ),
    PresetRow(
        name="nvfp4a16",
        preset="NVFP4A16",
        precision="fp4",
        bits_per_weight=4.0 + 8.0 / 16,
        weight_only=True,
        kernel_family="ct-nvfp4a16",
        calibrates=False,
        description="NVFP4 weight-only: fp4 (e2m1) weights with an fp8 scale per 16 values, 16-bit activations",
    ),
    PresetRow(
        name="mxfp4",
        preset="MXFP4",
        precision="fp4",
        bits_per_weight=4.0 + 8.0 / 32,
        weight_only=False,
        kernel_family="ct-mxfp4",
        calibrates=False,
        description="MXFP4 W4A4 (OCP microscaling): fp4 weights and activations, an e8m0 scale per 32 values",
    ),
    LlmCompressorScheme(
        name="fp8-online",
        precision="fp8",
        library="llmcompressor",
        bits_per_weight=8.0,
        weight_only=False,
        devices=_ANY,
        kernel_family="online-fp8",
        checkpoint_format=None,  # the engine quantizes the original 16-bit weights as it loads them
        calibrates=False,
        recipe=_recipe("""
            QuantizationModifier:
              ignore: [lm_head]
              config_groups:
                group_0:
                  targets: [Linear]
                  weights: {num_bits: 8, type: float, strategy: tensor, symmetric: true, dynamic: false}
                  input_activations: {num_bits: 8, type: float, strategy: tensor, symmetric: true, dynamic: true}
        """),
        description="vLLM's online --quantization fp8: per-tensor fp8 weights, dynamic per-tensor fp8 activations",
    ),
)

#: The schemes whose recipe is a compressed-tensors preset (``tests/quantize`` checks each against the preset).
PRESETS: tuple[PresetRow, ...] = tuple(row for row in _TABLE if isinstance(row, PresetRow))

METHODS: tuple[QuantScheme, ...] = tuple(row.scheme() if isinstance(row, PresetRow) else row for row in _TABLE)
