"""What a quantization method is: a precision, a real kernel library, and where it can run.

A method knows its effective bits per weight (scales included, for the memory model),
the devices its kernels support (so the search can refuse it before loading anything),
and the flag a serving engine uses for the same scheme, or ``None`` where no engine has
one (the report then says so instead of inventing a flag).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from recommender.device import DeviceInfo
from recommender.errors import SchemeUnavailableError

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


@dataclass(frozen=True, kw_only=True)
class QuantScheme(ABC):
    """One way to put a model at a precision.

    Args:
        name: registry key, e.g. ``bnb-nf4``.
        precision: the precision family it belongs to (bf16, fp16, fp8, int8, int4).
        library: the library whose kernels run it.
        bits_per_weight: effective storage bits per linear-layer weight, scales included.
        weight_only: True when activations stay in 16-bit (dequantize-then-matmul).
        devices: device kinds with kernels for it.
        min_cuda_capability: lowest CUDA capability its CUDA kernels need.
        kernel_family: the kernel path serving engines run it with ("" = none: evaluation only); each
            engine's `kernels` (`recommender.engines`) say where it runs that family and with which flag.
        description: one line for tables and --help.
        checkpoint_format: the format of the checkpoint this scheme writes and an engine loads
            ("compressed-tensors"), or None when engines quantize the original weights in flight.
    """

    name: str
    precision: str
    library: str
    bits_per_weight: float
    weight_only: bool
    devices: frozenset[str]
    min_cuda_capability: tuple[int, int] = (7, 0)
    kernel_family: str = ""
    description: str = ""
    checkpoint_format: str | None = None

    def identity(self) -> str:
        """Everything that decides the quantized weights, as text that is the same in every process.

        The quality cache and the workers' quality claims key on it. (`repr` is not stable:
        a frozenset's order follows string hashes, which differ per process.) The kernel
        family and the description change no weight and are left out.
        """

        def plain(value: Any) -> Any:
            if isinstance(value, QuantScheme):
                return value.identity()
            if isinstance(value, (set, frozenset)):
                return sorted(value)
            if callable(value):  # a factory: its name (its repr holds an address); subclasses add what it makes
                return getattr(value, "__qualname__", type(value).__name__)
            return str(value)

        left_out = ("kernel_family", "description")
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in left_out}
        return f"{type(self).__name__}{json.dumps(settings, sort_keys=True, default=plain)}"

    def unavailable_reason(self, device: DeviceInfo) -> str | None:
        """Why this method cannot run on `device`, or None when it can."""
        if device.kind not in self.devices:
            return f"{self.name} has no {device.kind} kernels (runs on: {', '.join(sorted(self.devices))})"
        capability = device.compute_capability
        if device.kind == "cuda" and capability is not None and capability < self.min_cuda_capability:
            need = ".".join(map(str, self.min_cuda_capability))
            have = ".".join(map(str, capability))
            return f"{self.name} needs CUDA capability >= {need}, this GPU has {have}"
        return None

    def fp8_kv_variant(self) -> QuantScheme | None:
        """This scheme with an FP8 KV cache, where its checkpoint carries the KV scales (ModelOpt); None where the
        KV cache is quantized on top of the weights with the engine's default scale (`quantize.kv_cache`)."""
        return None

    def check_device(self, device: DeviceInfo) -> None:
        reason = self.unavailable_reason(device)
        if reason is not None:
            raise SchemeUnavailableError(reason)

    def load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None = None) -> nn.Module:
        """Load the model from `source` and quantize it with this method's real kernels.

        `context` says where checkpoint schemes keep their checkpoints and where their
        calibration documents come from; in-flight schemes ignore it.
        """
        self.check_device(device)
        return self._load(source, device, context)

    @abstractmethod
    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module: ...
