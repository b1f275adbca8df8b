"""bitsandbytes methods: LLM.int8() and 4-bit NF4/FP4, loaded through transformers.

bitsandbytes >= 0.47 ships CPU kernels for both, so the demo quantizes for real on
the CPU. Effective bits: LLM.int8 stores one fp32 scale per output row (negligible at
real widths: 8 + 32/in_features); 4-bit stores one fp32 absmax per 64-weight block
(4 + 32/64 = 4.5); with double quantization (NF4 as vLLM and TGI quantize it in flight) the
absmax is itself 8-bit with one fp32 scale per 256 blocks (4 + 8/64 + 32/(64*256) = 4.127).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recommender.device import DeviceInfo
from recommender.quantize._base import QuantScheme

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


@dataclass(frozen=True, kw_only=True)
class BitsAndBytesScheme(QuantScheme):
    """Quantize at load time with transformers' BitsAndBytesConfig."""

    config: tuple[tuple[str, Any], ...]

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        import torch
        from transformers import BitsAndBytesConfig

        kwargs = dict(self.config)
        if "bnb_4bit_compute_dtype" in kwargs:
            kwargs["bnb_4bit_compute_dtype"] = getattr(torch, kwargs["bnb_4bit_compute_dtype"])
        # LLM.int8 logs at every matmul that it casts bf16 inputs to fp16; that is its design.
        logging.getLogger("bitsandbytes.autograd._functions").setLevel(logging.ERROR)
        return source.load_model(
            dtype=torch.bfloat16,
            device=device,
            # transformers leaves BitsAndBytesConfig.__init__ unannotated.
            quantization_config=BitsAndBytesConfig(**kwargs),  # type: ignore[no-untyped-call]
        )


METHODS: tuple[QuantScheme, ...] = (
    BitsAndBytesScheme(
        name="bnb-llm-int8",
        precision="int8",
        library="bitsandbytes",
        bits_per_weight=8.0,
        weight_only=False,
        devices=frozenset({"cpu", "cuda"}),
        kernel_family="bnb-int8",
        config=(("load_in_8bit", True),),
        description="LLM.int8(): int8 weights, int8 matmul with fp16 outlier columns",
    ),
    BitsAndBytesScheme(
        name="bnb-nf4",
        precision="int4",
        library="bitsandbytes",
        bits_per_weight=4.0 + 8.0 / 64 + 32.0 / (64 * 256),
        weight_only=True,
        devices=frozenset({"cpu", "cuda"}),
        kernel_family="bnb-nf4",
        config=(
            ("load_in_4bit", True),
            ("bnb_4bit_quant_type", "nf4"),
            ("bnb_4bit_use_double_quant", True),
            ("bnb_4bit_compute_dtype", "bfloat16"),
        ),
        description="4-bit NormalFloat weights, block 64, double-quantized absmax, bf16 compute (as vLLM serves it)",
    ),
    BitsAndBytesScheme(
        name="bnb-fp4",
        precision="int4",
        library="bitsandbytes",
        bits_per_weight=4.5,
        weight_only=True,
        devices=frozenset({"cpu", "cuda"}),
        kernel_family="bnb-fp4",
        config=(
            ("load_in_4bit", True),
            ("bnb_4bit_quant_type", "fp4"),
            ("bnb_4bit_compute_dtype", "bfloat16"),
        ),
        description="4-bit float weights, block 64, bf16 compute",
    ),
)
