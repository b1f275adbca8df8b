"""torchao methods: quantize_() applied to the loaded bf16 model.

On the CPU torchao 0.18 runs int8 weight-only, int8 dynamic-activation (W8A8), float8
weight-only and intx (int4) weight-only; float8 dynamic activation needs CUDA
capability >= 8.9. Effective bits: per-channel methods store one bf16 scale per output
row (~0 at real widths); int4 group-wise stores one bf16 scale per group (4 + 16/group).

Every torchao scheme is evaluation only (no `kernel_family`: no engine launches it): no engine
serves these numerics as evaluated. vLLM's `--quantization fp8` is per-tensor W8A8 (or FP8
Marlin), not per-channel weight-only; SGLang removed `--torchao-config` (PR #34304); vLLM's
`torchao` route needs a serialized torchao config (PR #23014); TGI's `eetq` casts weights
to fp16 and computes in fp16, not bf16. `recommender eval` still scores them, as references.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recommender.device import DeviceInfo, quality_compute_dtype
from recommender.quantize._base import QuantScheme

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


@dataclass(frozen=True, kw_only=True)
class TorchAoScheme(QuantScheme):
    """Load bf16, then quantize every linear layer but lm_head in place with a torchao config."""

    make_config: Callable[[], Any]

    def identity(self) -> str:
        """The base identity plus the torchao config the factory makes (its settings decide the weights)."""
        return f"{super().identity()}{self.make_config()!r}"

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        import torch
        from torchao.quantization import quantize_

        model = source.load_model(dtype=torch.bfloat16, device=device)
        if quality_compute_dtype(device) == "float32":  # bf16 weights, widened exactly, quantized in float32
            model = model.float()
        # lm_head stays bf16, as in serving engines' default recipes.
        quantize_(model, self.make_config(), filter_fn=_is_body_linear)
        return model


def _is_body_linear(module: nn.Module, fqn: str) -> bool:
    import torch

    return isinstance(module, torch.nn.Linear) and not fqn.endswith("lm_head")


def _float8_weight_only() -> Any:
    from torchao.quantization import Float8WeightOnlyConfig

    return Float8WeightOnlyConfig()


def _float8_dynamic() -> Any:
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow

    return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())


def _int8_weight_only() -> Any:
    from torchao.quantization import Int8WeightOnlyConfig

    return Int8WeightOnlyConfig()


def _int8_dynamic() -> Any:
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig

    return Int8DynamicActivationInt8WeightConfig()


def _int4_weight_only(group_size: int) -> Callable[[], Any]:
    def make() -> Any:
        import torch
        from torchao.quantization import IntxWeightOnlyConfig
        from torchao.quantization.granularity import PerGroup

        # torch's stubs omit the sub-byte dtypes (int1..int7) that exist at runtime.
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size))  # type: ignore[attr-defined]

    return make


_ANY = frozenset({"cpu", "cuda"})

METHODS: tuple[QuantScheme, ...] = (
    TorchAoScheme(
        name="torchao-float8-wo",
        precision="fp8",
        library="torchao",
        bits_per_weight=8.0,
        weight_only=True,
        devices=_ANY,
        make_config=_float8_weight_only,
        description="float8 e4m3 weights, per-channel scale, bf16 compute",
    ),
    TorchAoScheme(
        name="torchao-float8-dynamic",
        precision="fp8",
        library="torchao",
        bits_per_weight=8.0,
        weight_only=False,
        devices=frozenset({"cuda"}),
        min_cuda_capability=(8, 9),
        make_config=_float8_dynamic,
        description="float8 W8A8: per-row weights, dynamic per-token activations, fp8 tensor cores",
    ),
    TorchAoScheme(
        name="torchao-int8-wo",
        precision="int8",
        library="torchao",
        bits_per_weight=8.0,
        weight_only=True,
        devices=_ANY,
        make_config=_int8_weight_only,
        description="int8 weights, per-channel scale, bf16 compute",
    ),
    TorchAoScheme(
        name="torchao-int8-dynamic",
        precision="int8",
        library="torchao",
        bits_per_weight=8.0,
        weight_only=False,
        devices=_ANY,
        make_config=_int8_dynamic,
        description="int8 W8A8: per-channel weights, dynamic per-token int8 activations",
    ),
    *(
        TorchAoScheme(
            name=f"torchao-int4-wo-g{group}",
            precision="int4",
            library="torchao",
            bits_per_weight=4.0 + 16.0 / group,
            weight_only=True,
            devices=_ANY,
            make_config=_int4_weight_only(group),
            description=f"int4 weights, symmetric, one bf16 scale per {group} weights, bf16 compute",
        )
        for group in (32, 64, 128)
    ),
)
