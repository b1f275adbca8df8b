"""The device a model is loaded on, and which one this machine has.

Its own module because both sides of model loading need it: `ModelSource` places weights
on a device and every quantization method decides from it whether its kernels can run.
Kept below both, it lets neither import the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """The device a model would be loaded on: "cpu" or "cuda", with CUDA's compute capability."""

    kind: str
    compute_capability: tuple[int, int] | None = None

    @property
    def label(self) -> str:
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
