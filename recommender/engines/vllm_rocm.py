"""vLLM on AMD GPUs: which of its FP4 paths run natively on which gfx target, and what the launch needs there.

The ct-mxfp4 row of ``vllm.py`` runs on ROCm only on gfx950 and only with AITER switched on; the sources, verified
against vllm-project/vllm:

- vllm/platforms/rocm.py @ e2a00c7 — ``supports_mx`` is gfx95x only: native MXFP4 (AITER) runs on MI350X/
  MI355X, not on MI300X (gfx942), which gets the emulation (dequantize, then a 16-bit matmul: not the measured
  speed), so the ct-mxfp4 row names gfx950 (``amd_archs``); @ 001eda3 ``_ROCM_DEVICE_ID_NAME_MAP``: gfx942 is
  MI300X/MI325X ("CDNA3"), gfx950 MI350X/MI355X ("CDNA4"); ``supported_quantization`` holds compressed-tensors,
  quark and mxfp4.
- vllm/model_executor/kernels/linear/mxfp4/aiter.py @ 01aae91 — ``AiterMxfp4LinearKernel`` ("AITER-based native
  MXFP4 GEMM kernel for ROCm"): supported where ``supports_mx()`` and AITER is installed (the ROCm images ship
  it); ``can_implement`` only with ``kMxfp4Dynamic`` activations, quantized per 32 values at run time
  (``dynamic_mxfp4_quant`` / ``per_1x32_f4_quant_hip``) before ``gemm_afp4wfp4`` / ``gemm_a4w4``: the W4A4
  numerics ct-mxfp4 measured.
- vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a4_mxfp4.py
  @ 0088231 — MoE experts of an MXFP4 checkpoint take ``select_mxfp4_moe_backend(moe, activation_key=kMxfp4Dynamic)``;
  vllm/model_executor/layers/fused_moe/experts/rocm_aiter_moe.py @ 07095d3 — ``AiterExperts`` runs
  (kMxfp4Static, kMxfp4Dynamic) ("CK MXFP4 MoE kernels are only supported on gfx950") only when AITER's fused MoE
  is on ("set VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE=1"); vllm/envs.py @ f218f9c —
  ``VLLM_ROCM_USE_AITER`` defaults to off ("Disable aiter ops unless specifically enabled"; its MoE switch
  defaults on beneath it), so the ROCm launch sets ``VLLM_ROCM_USE_AITER=1``, as vLLM's gpt-oss recipe does on
  MI355X (vllm-project/recipes@00143a1 OpenAI/GPT-OSS.md, "MI355x(gfx950)").
- The published gpt-oss checkpoints (``quant_method: mxfp4``: MXFP4 experts, 16-bit attention) are vLLM's
  ``Mxfp4Config`` (vllm/model_executor/layers/quantization/mxfp4.py @ 007d500: experts only, activations in
  bf16; on ROCm the AITER CK or Triton experts, fused_moe/oracle/mxfp4.py @ 001eda3), and AMD's
  ``amd/gpt-oss-120b-w-mxfp4-a-fp8`` is a Quark checkpoint (FP8 activations): neither is the ct-mxfp4 W4A4
  scheme, and no scheme here reproduces their numerics, so neither is a row.

SGLang on ROCm serves MXFP4 through its ``quark``/``quark_mxfp4`` and ``mxfp4`` loaders, not through its
compressed-tensors dispatch (no MXFP4 branch there, ``sglang.py``), so SGLang has no ct-mxfp4 row on any GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

__all__ = ["AITER_ON", "rocm_kernel_notes"]

#: vLLM's switch for AITER's kernels on ROCm (off by default, vllm/envs.py @ f218f9c): its fused MoE runs MXFP4 W4A4.
AITER_ON = "VLLM_ROCM_USE_AITER=1"


def rocm_kernel_notes(method: QuantScheme) -> list[str]:
    """What a checkpoint served on ROCm with AITER switched on needs beyond the command."""
    if method.kernel_family != "ct-mxfp4":
        return []
    return [
        "On ROCm vLLM runs MXFP4 W4A4 natively only on gfx950 (MI350X, MI355X): linear layers through "
        "AiterMxfp4LinearKernel, MoE experts through AITER's fused MoE, which needs VLLM_ROCM_USE_AITER=1 (off by "
        "default; the command sets it). Without AITER it emulates MXFP4 (dequantize, then a 16-bit matmul): the "
        f"numerics {method.name} measured at a slower step than planned; check the log for AiterMxfp4LinearKernel "
        "and the 'CK' Mxfp4 MoE backend."
    ]
