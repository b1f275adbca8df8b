"""Which attention head sizes each engine runs, counting every attention backend it falls back to on its own.

A model whose head size (``head_dim``, or ``hidden_size / num_attention_heads``) no attention kernel of an engine
takes fails when that engine starts, whatever the GPU, scheme or batch; planning it would recommend something
nothing runs. So each engine's eligibility for a model is checked here, and a model none of the listed engines
runs is refused as bad input (one line, exit 2) before anything is planned.

Read in each engine's source:

* vLLM picks the first backend, in priority order, whose checks pass (docs/design/attention_backends.md
  @ 0013943, "Automatic Selection"; FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION on CUDA):

  - FLASH_ATTN: ``head_size % 8 == 0 and head_size <= 256``
    (vllm/v1/attention/backends/flash_attn.py @ 5704f34, ``supports_head_size``);
  - FLASHINFER: 64, 128, 256, 512 (vllm/v1/attention/backends/flashinfer.py @ 5314c90,
    ``get_supported_head_sizes``, after FlashInfer's ``DISPATCH_HEAD_DIM``);
  - TRITON_ATTN: ``head_size >= 32`` (vllm/v1/attention/backends/triton_attn.py @ 6301388);
  - FLEX_ATTENTION: no list of its own (``get_supported_head_sizes`` is ``[]``, so ``supports_head_size`` is
    True: vllm/v1/attention/backend.py @ e379cf3; flex_attention.py @ 578b05d: "FlexAttention supports any
    head size"), but PyTorch's compiled FlexAttention kernel refuses an embedding dimension below 16 on CUDA
    ("tl.dot does not support embedding size less than 16": torch/_inductor/kernel/flex/flex_attention.py,
    torch 2.13.0).

  So vLLM serves every head size of 16 and above (those FlashAttention lacks, e.g. 20 or 36, through Triton or
  FlexAttention), and 8; below 16 only multiples of 8.
* SGLang picks one backend by GPU and does not fall back on head size (sglang 0.5.23,
  srt/arg_groups/model_override_base.py, the default attention backend for MHA models): ``fa3`` on Hopper,
  ``trtllm_mha`` on SM100, ``aiter`` on ROCm, ``flashinfer`` elsewhere. Its backends check no head size of
  their own (srt/layers/attention/*_backend.py); the kernels do:

  - FlashAttention 3 (Hopper): a multiple of 8 up to 256 (the FlashAttention rule vLLM checks above;
    flash-attention hopper/flash_api.cpp: "Currently only support head dims <= 256");
  - elsewhere FlashInfer and the TRT-LLM / AITER kernels: 64, 128, 256 (the sizes vLLM lists for FLASHINFER's
    TRT-LLM path and ROCM_AITER_FA in docs/design/attention_backends.md @ 0013943).
* TensorRT-LLM's generation-phase attention (masked multi-head attention) is compiled per head size: 32, 48,
  64, 80, 96, 104, 112, 128, 144, 160, 192, 224, 256
  (cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/instantiation/decoderMaskedMultiheadAttention<N>_*.cu
  @ 249d93d); no other backend replaces it.
* TGI: its head sizes are not read here; it is not refused on head size (unchecked, not cleared).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.engines.model_refusal import refuse_unless_one_serves

if TYPE_CHECKING:
    from recommender.device import DeviceInfo

__all__ = ["Backend", "check_runnable", "engine_backends", "head_size_refusal"]


@dataclass(frozen=True, slots=True)
class Backend:
    """One attention backend and the head sizes it takes.

    Args:
        name: the engine's name for it.
        takes: whether it runs a head size.
        sizes: the sizes it takes, in words (what a refusal names).
    """

    name: str
    takes: Callable[[int], bool]
    sizes: str


def _listed(*sizes: int) -> Callable[[int], bool]:
    return lambda h: h in sizes


_FLASH = Backend("FlashAttention", lambda h: h % 8 == 0 and h <= 256, "multiples of 8 up to 256")
_VLLM = (
    _FLASH,
    Backend("FlashInfer", _listed(64, 128, 256, 512), "64, 128, 256, 512"),
    Backend("Triton", lambda h: h >= 32, "32 and above"),
    Backend("FlexAttention", lambda h: h >= 16, "16 and above"),
)
_SGLANG_DEFAULT = (Backend("FlashInfer", _listed(64, 128, 256), "64, 128, 256"),)
_SGLANG_HOPPER = (Backend("FlashAttention 3", _FLASH.takes, _FLASH.sizes),)
_TRTLLM_SIZES = (32, 48, 64, 80, 96, 104, 112, 128, 144, 160, 192, 224, 256)
_TRTLLM = (Backend("masked multi-head attention", _listed(*_TRTLLM_SIZES), ", ".join(map(str, _TRTLLM_SIZES))),)


def _hopper(device: DeviceInfo | None) -> bool:
    return device is not None and device.kind == "cuda" and (device.compute_capability or (0, 0))[0] == 9


def engine_backends(engine: str, device: DeviceInfo | None = None) -> tuple[Backend, ...]:
    """The attention backends `engine` falls back through on `device` (None: every GPU's; () = not checked)."""
    if engine == "vllm":
        return _VLLM
    if engine == "sglang":
        if device is None:
            return _SGLANG_HOPPER + _SGLANG_DEFAULT
        return _SGLANG_HOPPER if _hopper(device) else _SGLANG_DEFAULT
    if engine == "trtllm":
        return _TRTLLM
    return ()


def head_size_refusal(engine: str, head_size: int, device: DeviceInfo | None = None) -> str | None:
    """Why `engine` cannot run attention heads of `head_size` on `device`, naming the sizes it takes; None if it can."""
    backends = engine_backends(engine, device)
    if not backends or any(b.takes(head_size) for b in backends):
        return None
    takes = "; ".join(f"{b.name}: {b.sizes}" for b in backends)
    return f"head size {head_size} is taken by none of its attention backends ({takes})"


def check_runnable(head_size: int, engines: Sequence[str], *, field: str) -> None:
    """Refuse a model whose head size none of `engines` runs on any GPU: one line naming `field` and the sizes."""
    refuse_unless_one_serves(
        engines,
        lambda e: head_size_refusal(e, head_size),
        field=field,
        problem=f"runs attention heads of size {head_size}",
        fix="serve a model whose head_dim (hidden_size / num_attention_heads) one of these takes, e.g. 64 or 128",
    )
