"""The device a model is loaded on, and which one this machine has.

Its own module because both sides of model loading need it: `ModelSource` places weights
on a device and every quantization method decides from it whether its kernels can run.
Kept below both, it lets neither import the other. Also the dtype quality runs compute in there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from recommender.errors import BadInputError


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """The device a model would be loaded on: "cpu", "cuda" with CUDA's compute capability, or "rocm" with the AMD
    GPU's gfx target (``arch``: "gfx942" MI300X/MI325X, "gfx950" MI350X/MI355X), which decides on ROCm what CUDA's
    capability decides on NVIDIA (vLLM's ``supports_mx``: native MXFP4 on gfx95x only)."""

    kind: str
    compute_capability: tuple[int, int] | None = None
    arch: str | None = None

    @property
    def label(self) -> str:
        if self.arch is not None:
            return f"{self.kind} ({self.arch})"
        if self.compute_capability is None:
            return self.kind
        major, minor = self.compute_capability
        return f"{self.kind} (sm_{major}{minor})"


def local_device() -> DeviceInfo:
    """The device this process would load models on: CUDA when present, else the CPU."""
    import torch

    if torch.cuda.is_available():
        return DeviceInfo("cuda", torch.cuda.get_device_capability(0))
    return DeviceInfo("cpu")


def local_memory_gb() -> float:
    """This machine's memory in GB (0 where the OS does not say): what a local candidate must fit in."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        return 0.0


#: Overrides the dtype quality runs compute in on the CPU ("bfloat16" or "float32"; unset: detected).
CPU_COMPUTE_DTYPE_ENV = "RECOMMENDER_CPU_COMPUTE_DTYPE"
_COMPUTE_DTYPES = ("bfloat16", "float32")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bfloat16 arithmetic (x86 AVX512-BF16 or AMX; Arm's BF16 extension).

    Without it torch emulates bfloat16 matmuls, about 7x slower than float32 on a 2-core AVX2 EPYC: a
    64x960x256 by 256x256 linear took 577 ms in bfloat16 and 81 ms in float32 (issue 29's profile).
    """
    import torch

    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        probe = getattr(torch.cpu, check, None)
        if probe is not None and probe():
            return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            features = [line for line in f if line.startswith("Features")]  # Arm: "Features : ... bf16 ..."
    except OSError:
        return False
    return any(" bf16" in line.split(":", 1)[-1] for line in features)


def quality_compute_dtype(device: DeviceInfo) -> str:
    """The dtype quality runs compute in on `device`: bfloat16, as engines serve, except on a CPU without native
    bfloat16, where float32 gives the same comparison several times faster. The reference and every candidate
    use the same one; stored weights and simulated activation quantization do not change, only the arithmetic
    around them. `RECOMMENDER_CPU_COMPUTE_DTYPE` overrides the detection on the CPU."""
    if device.kind != "cpu":
        return "bfloat16"
    forced = os.environ.get(CPU_COMPUTE_DTYPE_ENV, "").strip().lower()
    if forced:
        if forced not in _COMPUTE_DTYPES:
            fix = f"use {' or '.join(_COMPUTE_DTYPES)}, or unset it"
            raise BadInputError(CPU_COMPUTE_DTYPE_ENV, f"unknown dtype {forced!r}", fix)
        return forced
    return "bfloat16" if cpu_has_native_bf16() else "float32"
