"""vLLM's launch notes: what a ``vllm serve`` line cannot say, written beside it.

A quantization flag or a checkpoint does not carry everything that decides whether vLLM runs the numerics that
were measured: the GPUs where it falls back to a weight-only kernel, an optional package that rounds scales, the
full-precision load before online quantization, the FP8 KV cache's default scales. The engine (``vllm.py``)
appends these sentences to its command; their sources are cited in that module's docstring. Kept apart so the
engine reads as the command it builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.engines._base import LaunchSettings, checkpoint_note, double_quant_note
from recommender.engines.vllm_rocm import rocm_kernel_notes

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

__all__ = ["kv_cache_notes", "quantization_notes", "token_budget_notes"]


def quantization_notes(method: QuantScheme, flag: str, *, rocm: bool = False) -> list[str]:
    """What `method` served with `flag` needs beyond the command (none where nothing is lost); `rocm`: the command
    carries the ROCm environment its kernel needs (its note replaces the CUDA one)."""
    checkpoint = checkpoint_note(method, "vLLM", flag)
    if checkpoint is not None:
        kernel = rocm_kernel_notes(method) if rocm else _checkpoint_kernel_notes(method)
        return [checkpoint, *kernel]
    if flag == "fp8":
        return _fp8_notes(method)
    if flag == "bitsandbytes":
        notes = [
            "vLLM quantizes in flight to 4-bit NF4 (the only in-flight bitsandbytes format) and needs bitsandbytes "
            "installed next to vLLM (its loader checks >= 0.46.1; the current docs ask for >= 0.49.2).",
        ]
        double_quant = double_quant_note(method, "vLLM")
        return notes + ([double_quant + "."] if double_quant else [])
    return []


def _checkpoint_kernel_notes(method: QuantScheme) -> list[str]:
    """What a compressed-tensors checkpoint needs beyond the command to run as it was measured."""
    if method.kernel_family == "ct-fp8-block":
        return [
            "With the optional deep_gemm package installed, vLLM runs FP8 block layers on Hopper and Blackwell "
            "through DeepGEMM and rounds the block scales up to powers of two (UE8M0, VLLM_USE_DEEP_GEMM_E8M0); "
            f"start it with VLLM_USE_DEEP_GEMM=0 to keep the FP32 scales {method.name} was measured with."
        ]
    if method.kernel_family == "ct-mxfp4":
        return [
            "vLLM runs MXFP4 W4A4 only through FlashInfer's CuTe-DSL kernel (compute capability >= 10.0); without "
            "it, or on an older vLLM, it serves the checkpoint weight-only through FP4 Marlin (activations "
            f"unquantized), which is not what {method.name} measured — check the log for FlashInferMxFp4LinearKernel."
        ]
    return []


def _fp8_notes(method: QuantScheme) -> list[str]:
    """Online fp8: where it runs W8A8, its load peak, its activation scales."""
    return [
        "vLLM's online `--quantization fp8` runs W8A8 only on compute capability >= 8.9 (Ada, Hopper) and on "
        "ROCm; on Ampere (8.0-8.6) it falls back to weight-only W8A16 through FP8 Marlin kernels, which is not "
        f"what {method.name} measured, so the search does not count those GPUs.",
        "vLLM loads the model at its original precision before quantizing, so each GPU needs room for "
        "its 16-bit shard at startup (the memory check counts it).",
        "vLLM quantizes dynamic activations per token where its CUTLASS FP8 kernels run (per tensor on ROCm); "
        f"{method.name} was evaluated as {method.description}.",
    ]


def kv_cache_notes(kv_cache_dtype: str) -> list[str]:
    """The FP8 KV cache's scales."""
    if kv_cache_dtype != "fp8":
        return []
    return [
        "`--kv-cache-dtype fp8` stores the KV cache as FP8 E4M3; without scales in the checkpoint they default "
        "to 1.0 (add --calculate-kv-scales to compute them), which vLLM warns may cost accuracy.",
    ]


def token_budget_notes(settings: LaunchSettings) -> list[str]:
    """A step's token budget below the longest request: chunked prefill."""
    if settings.max_num_batched_tokens >= settings.max_model_len:
        return []
    return [
        "--max-num-batched-tokens is below --max-model-len, which vLLM accepts only with chunked prefill "
        "(on by default in the V1 engine); long prompts are prefilled in chunks.",
    ]
