"""An fp8 KV cache on top of any weight method, for measuring what it does to quality.

vLLM's ``--kv-cache-dtype fp8`` stores keys and values (after rotary embedding) as
float8 e4m3 with a per-tensor scale of 1.0 unless the checkpoint carries calibrated
scales, saturating at the format's finite range, and reads them back in 16-bit for
attention. Quality evaluation runs the model in transformers, which has no fp8 cache, so
the same numerics are applied where they act: every key and value entering attention is
rounded through float8_e4m3fn (clamped to +-448, scale 1.0) by an attention function
registered with transformers' ``AttentionInterface``. The rounding is real; the memory
saving is not realised here, so the search refuses fp8 KV on the local device's speed
probe and models its memory and bandwidth for catalog GPUs instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from recommender.device import DeviceInfo
from recommender.quantize._base import QuantScheme

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext

#: The attention implementation name registered with transformers.
FP8_KV_ATTENTION = "recommender_fp8_kv_sdpa"
#: Appended to a method's name when its KV cache is fp8 (``get_scheme`` understands it).
FP8_KV_SUFFIX = "+kv-fp8"
#: Largest finite float8 e4m3fn value; vLLM's conversion saturates here.
FP8_E4M3_MAX = 448.0


def _fp8_kv_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def round_trip(t: torch.Tensor) -> torch.Tensor:
        return t.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn).to(t.dtype)

    return sdpa_attention_forward(module, query, round_trip(key), round_trip(value), attention_mask, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(FP8_KV_ATTENTION, _fp8_kv_sdpa)


@dataclass(frozen=True, kw_only=True)
class FP8KVCache(QuantScheme):
    """`base`'s weights with keys and values rounded through fp8 e4m3 (see module docstring)."""

    base: QuantScheme

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        model = self.base.load(source, device, context)
        _register()
        # Typed nn.Module (unknown attributes read as Tensor | Module); the loaded model is a transformers one.
        cast("PreTrainedModel", model).set_attn_implementation(FP8_KV_ATTENTION)
        return model


def with_kv_cache(method: QuantScheme, kv_cache_dtype: str) -> QuantScheme:
    """`method` itself for the model's own KV dtype ("auto"); for "fp8", its own KV variant where it has one
    (a ModelOpt checkpoint with calibrated KV scales), else wrapped (scale 1.0)."""
    if kv_cache_dtype == "auto":
        return method
    if kv_cache_dtype != "fp8":
        raise ValueError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (known: auto, fp8)")
    variant = method.fp8_kv_variant()
    if variant is not None:  # its checkpoint carries calibrated KV scales, which the engines read
        return variant
    fields = {
        f: getattr(method, f)
        for f in (
            "precision",
            "library",
            "bits_per_weight",
            "weight_only",
            "devices",
            "min_cuda_capability",
            "kernel_family",
            "checkpoint_format",
        )
    }
    return FP8KVCache(
        name=f"{method.name}{FP8_KV_SUFFIX}",
        description=f"{method.description}; fp8 e4m3 KV cache",
        base=method,
        **fields,
    )
