"""How an engine runs a scheme family on a device, with the numerics that were measured: one `Kernel` row each.

Each engine's module lists its rows (``KERNELS``, every row sourced in that module's docstring); the
search, `plan` and the engines read them through `recommender.engines.eligibility`: a candidate is
eligible only where one of the spec's engines runs its scheme as it was evaluated. A scheme names its
family in `QuantScheme.kernel_family`, so adding a scheme of a known family edits its `METHODS` entry
only; a new family adds a row to each engine that runs it.

Rules, and why:

- Compute dtype. Every scheme but `fp16` is evaluated computing in bf16, and bf16 needs
  NVIDIA compute capability >= 8.0 in every engine (vLLM: vllm/platforms/cuda.py @ 1c0d9ec,
  ``check_if_supports_dtype``). On a T4 or V100 only `fp16` runs as measured.
- Fallbacks do not count. Below ``CompressedTensorsW8A8Fp8.get_min_capability()`` (8.9) vLLM
  and SGLang load an FP8 W8A8 checkpoint as weight-only FP8 Marlin (W8A16), and vLLM's online
  ``--quantization fp8`` does the same below 8.9: launchable, but its numerics (and speed) are
  not the W8A8 ones that were scored, so an A10G or A100 is not eligible for FP8 schemes. The
  refusal names the fallback so a user can evaluate it as a scheme of its own.
- AMD (ROCm) and the CPU are rows of their own: a family counts there only where the engine's
  own source says it runs there (vLLM's ``RocmPlatform.supported_quantization``, its kernel
  registries), never by analogy with CUDA. A row that runs on some AMD GPUs only names their gfx targets
  (``amd_archs``): vLLM's native MXFP4 needs ``supports_mx`` (gfx95x: MI350X, MI355X), so an MI300X is refused.
- Load peak. vLLM's online fp8 loads the 16-bit checkpoint before quantizing it
  (``load_bits_per_weight`` 16); the memory check refuses a GPU where that does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.device import DeviceInfo
    from recommender.quantize import QuantScheme

Capability = tuple[int, int]

#: bf16 compute needs this NVIDIA compute capability (vllm/platforms/cuda.py @ 1c0d9ec).
BF16_MIN_CAPABILITY: Capability = (8, 0)
#: What vLLM and SGLang run for an FP8 W8A8 scheme below capability 8.9.
FP8_W8A16_FALLBACK = "it falls back to weight-only FP8 Marlin (W8A16), not the W8A8 numerics that were measured"


@dataclass(frozen=True, slots=True)
class Kernel:
    """How one engine runs one scheme family, where, and with which launch flag.

    Args:
        family: the `QuantScheme.kernel_family` it serves.
        kernel: the code path, as the refusal names it ("vLLM's Marlin W4A16").
        nvidia: lowest NVIDIA compute capability; None = no NVIDIA path.
        nvidia_below: first capability it no longer runs on (exclusive), if any.
        amd: runs on AMD GPUs (ROCm).
        amd_archs: the gfx targets it runs on, where not every AMD GPU's (empty: all, when `amd`).
        amd_env: environment settings (``NAME=VALUE``) its ROCm path needs, put before the launch command there.
        cpu: runs on the CPU.
        load_bits_per_weight: bits per linear weight held while loading, when above the served bits.
        fallback: what the engine runs instead below `nvidia`, and why that is not the measured scheme.
        flag: the engine's quantization flag for the family ("" = none: the engine reads the scheme from the
            checkpoint's config.json, or serves 16-bit weights as they are).
    """

    family: str
    kernel: str
    nvidia: Capability | None
    nvidia_below: Capability | None = None
    amd: bool = False
    amd_archs: tuple[str, ...] = ()
    amd_env: tuple[str, ...] = ()
    cpu: bool = False
    load_bits_per_weight: float | None = None
    fallback: str = ""
    flag: str = ""


def compute_dtype(method: QuantScheme) -> str:
    """The 16-bit dtype `method` was evaluated computing in, as engines name it."""
    return "float16" if method.precision == "fp16" else "bfloat16"


def version(capability: Capability) -> str:
    return ".".join(map(str, capability))


def describe(device: DeviceInfo) -> str:
    """A device as the refusals name it."""
    if device.kind == "cuda" and device.compute_capability is not None:
        return f"compute capability {version(device.compute_capability)}"
    if device.kind == "rocm" and device.arch is not None:
        return f"AMD ROCm {device.arch}"
    return {"rocm": "AMD ROCm", "cpu": "CPU"}.get(device.kind, device.kind)


def _nvidia_refusal(row: Kernel, method: QuantScheme, capability: Capability) -> str | None:
    if compute_dtype(method) == "bfloat16" and capability < BF16_MIN_CAPABILITY:
        return f"{method.name} computes in bf16 as measured, which needs {version(BF16_MIN_CAPABILITY)}"
    if row.nvidia is None:
        return f"{row.kernel} has no NVIDIA path"
    if capability < row.nvidia:
        return f"{row.kernel} needs {version(row.nvidia)}" + (f"; below that {row.fallback}" if row.fallback else "")
    if row.nvidia_below is not None and capability >= row.nvidia_below:
        return f"{row.kernel} runs only below {version(row.nvidia_below)}"
    return None


def _amd_refusal(row: Kernel, arch: str | None) -> str | None:
    if not row.amd:
        return f"{row.kernel} does not run on ROCm"
    if not row.amd_archs or arch in row.amd_archs:
        return None
    on = f"this GPU is {arch}" if arch else "this GPU's gfx target is not known"
    return f"{row.kernel} runs on ROCm only on {', '.join(row.amd_archs)} ({on})"


def kernel_refusal(row: Kernel | None, method: QuantScheme, device: DeviceInfo) -> str | None:
    """Why the engine whose row for `method`'s family is `row` (None: it has none) does not serve `method` on
    `device` as it was measured, or None when it does."""
    if row is None:
        return f"no {method.name} scheme"
    if device.kind == "cuda":
        if device.compute_capability is None:
            return "unknown compute capability"
        return _nvidia_refusal(row, method, device.compute_capability)
    if device.kind == "rocm":
        return _amd_refusal(row, device.arch)
    if device.kind == "cpu":
        return None if row.cpu else f"{row.kernel} does not run on the CPU"
    return f"no {device.kind} backend"
