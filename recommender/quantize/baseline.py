"""The unquantized baselines: the model's weights cast to bf16 or fp16, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.device import DeviceInfo
from recommender.quantize._base import QuantScheme

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


@dataclass(frozen=True, kw_only=True)
class CastScheme(QuantScheme):
    """Load in a 16-bit dtype; the reference every other method is compared with."""

    dtype_name: str

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        import torch

        return source.load_model(dtype=getattr(torch, self.dtype_name), device=device)


METHODS: tuple[QuantScheme, ...] = (
    CastScheme(
        name="baseline",
        precision="bf16",
        library="torch",
        bits_per_weight=16.0,
        weight_only=False,
        devices=frozenset({"cpu", "cuda", "rocm"}),
        kernel_family="bf16",
        dtype_name="bfloat16",
        description="bf16 weights and activations (no quantization)",
    ),
    CastScheme(
        name="fp16",
        precision="fp16",
        library="torch",
        bits_per_weight=16.0,
        weight_only=False,
        devices=frozenset({"cpu", "cuda", "rocm"}),
        kernel_family="fp16",
        dtype_name="float16",
        description="fp16 weights and activations (no quantization)",
    ),
)
