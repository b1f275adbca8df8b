"""The compressed-tensors FP8 per-tensor / block and FP4 rows: which engine serves each family, on which GPUs,
and what the refusal names below the kernel's minimum.

Checked through `SUPPORT` and `kernel_refusal` with a stand-in method (the functions read only its `name`,
`precision` and `kernel_family`), so these tests pin the rows whether or not the schemes are registered.
Every row is sourced in its engine module's docstring.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pytest

from recommender.device import DeviceInfo
from recommender.engines import ENGINE_NAMES, SUPPORT
from recommender.engines.kernels import FP8_W8A16_FALLBACK, Kernel, kernel_refusal

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

NEW_FAMILIES = ("ct-fp8-tensor", "ct-fp8-block", "ct-nvfp4", "ct-nvfp4a16", "ct-mxfp4")
ROCM = DeviceInfo("rocm", arch="gfx942")  # MI300X / MI325X
GFX950 = DeviceInfo("rocm", arch="gfx950")  # MI350X / MI355X
CPU = DeviceInfo("cpu")


@dataclass(frozen=True)
class _Method:
    name: str
    precision: str
    kernel_family: str


def method(family: str) -> QuantScheme:
    precision = "fp8" if family.startswith("ct-fp8") else "fp4"
    return cast("QuantScheme", _Method(f"{family}-scheme", precision, family))


def cuda(major: int, minor: int) -> DeviceInfo:
    return DeviceInfo("cuda", (major, minor))


def row(engine: str, family: str) -> Kernel:
    return SUPPORT[(engine, family)]


def why(engine: str, family: str, device: DeviceInfo) -> str | None:
    return kernel_refusal(SUPPORT.get((engine, family)), method(family), device)


def test_which_engine_has_which_new_family() -> None:
    served = {(engine, family) for engine, family in SUPPORT if family in NEW_FAMILIES}
    assert served == {
        ("vllm", "ct-fp8-tensor"),
        ("vllm", "ct-fp8-block"),
        ("vllm", "ct-nvfp4"),
        ("vllm", "ct-nvfp4a16"),
        ("vllm", "ct-mxfp4"),
        ("sglang", "ct-fp8-tensor"),
        ("sglang", "ct-fp8-block"),
        ("sglang", "ct-nvfp4"),
        ("trtllm", "ct-fp8-block"),
        ("trtllm", "ct-nvfp4"),
    }
    # A family an engine has no row for is refused as "no scheme", on every device.
    for engine in ENGINE_NAMES:
        for family in NEW_FAMILIES:
            if (engine, family) not in SUPPORT:
                assert why(engine, family, cuda(10, 0)) == f"no {family}-scheme scheme", (engine, family)


def test_new_rows_are_checkpoint_schemes_without_a_flag_and_never_on_the_cpu() -> None:
    for (_, family), kernel in SUPPORT.items():
        if family in NEW_FAMILIES:
            assert kernel.flag == "" and not kernel.cpu and kernel.load_bits_per_weight is None, kernel
            assert "does not run on the CPU" in (kernel_refusal(kernel, method(family), CPU) or "")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_nvfp4_w4a4_needs_blackwell_and_names_the_marlin_fallback(engine: str) -> None:
    assert row(engine, "ct-nvfp4").nvidia == (10, 0)
    for capability in ((10, 0), (12, 0)):
        assert why(engine, "ct-nvfp4", cuda(*capability)) is None, capability
    for capability in ((9, 0), (8, 9), (8, 0)):
        refused = why(engine, "ct-nvfp4", cuda(*capability)) or ""
        assert "needs 10.0" in refused and "weight-only through FP4 Marlin (W4A16)" in refused, capability
        assert "not the W4A4 numerics that were measured" in refused
    assert "does not run on ROCm" in (why(engine, "ct-nvfp4", ROCM) or "")


def test_trtllm_nvfp4_is_blackwell_only() -> None:
    assert why("trtllm", "ct-nvfp4", cuda(10, 0)) is None
    assert why("trtllm", "ct-nvfp4", cuda(12, 0)) is None
    assert why("trtllm", "ct-nvfp4", cuda(9, 0)) == "TensorRT-LLM's NVFP4 W4A4 (FP4 CUTLASS) needs 10.0"
    assert "does not run on ROCm" in (why("trtllm", "ct-nvfp4", ROCM) or "")


def test_vllm_serves_nvfp4_weight_only_through_marlin_on_every_gpu_with_bf16() -> None:
    kernel = row("vllm", "ct-nvfp4a16")
    assert kernel.nvidia == (7, 5) and kernel.nvidia_below is None and not kernel.amd
    for capability in ((8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)):
        assert why("vllm", "ct-nvfp4a16", cuda(*capability)) is None, capability
    # The kernel runs on Turing, but the scheme computes in bf16, which a T4 lacks.
    assert "computes in bf16 as measured, which needs 8.0" in (why("vllm", "ct-nvfp4a16", cuda(7, 5)) or "")
    assert "does not run on ROCm" in (why("vllm", "ct-nvfp4a16", ROCM) or "")


def test_vllm_mxfp4_w4a4_needs_blackwell_or_gfx950() -> None:
    kernel = row("vllm", "ct-mxfp4")
    assert kernel.nvidia == (10, 0) and kernel.amd and kernel.amd_archs == ("gfx950",)
    assert why("vllm", "ct-mxfp4", cuda(10, 0)) is None
    refused = why("vllm", "ct-mxfp4", cuda(9, 0)) or ""
    assert refused.startswith("vLLM's MXFP4 W4A4 (FlashInfer on CUDA, AITER on gfx950) needs 10.0")
    assert "MXFP4 weight-only through FP4 Marlin (W4A16)" in refused
    # Native MXFP4 (AITER) runs only where vLLM's supports_mx() holds: gfx95x. MI300X (gfx942) gets the emulation.
    assert why("vllm", "ct-mxfp4", GFX950) is None
    assert "runs on ROCm only on gfx950 (this GPU is gfx942)" in (why("vllm", "ct-mxfp4", ROCM) or "")
    assert "gfx target is not known" in (why("vllm", "ct-mxfp4", DeviceInfo("rocm")) or "")
    # SGLang's compressed-tensors dispatch has no MXFP4 branch on any GPU (it serves MXFP4 through quark/mxfp4).
    assert why("sglang", "ct-mxfp4", GFX950) == "no ct-mxfp4-scheme scheme"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fp8_per_tensor_from_ada_on_nvidia_and_amd(engine: str) -> None:
    kernel = row(engine, "ct-fp8-tensor")
    assert kernel.nvidia == (8, 9) and kernel.nvidia_below is None and kernel.amd
    assert kernel.fallback == FP8_W8A16_FALLBACK
    for capability in ((8, 9), (9, 0), (10, 0)):
        assert why(engine, "ct-fp8-tensor", cuda(*capability)) is None, capability
    assert why(engine, "ct-fp8-tensor", ROCM) is None
    refused = why(engine, "ct-fp8-tensor", cuda(8, 0)) or ""
    assert "needs 8.9" in refused and "weight-only FP8 Marlin (W8A16)" in refused


def test_fp8_block_rows() -> None:
    # vLLM: CompressedTensorsW8A8Fp8 with blocks from 8.9 (CUTLASS, DeepGEMM or Triton), AITER/Triton on ROCm.
    assert row("vllm", "ct-fp8-block").nvidia == (8, 9) and row("vllm", "ct-fp8-block").amd
    for capability in ((8, 9), (9, 0), (10, 0)):
        assert why("vllm", "ct-fp8-block", cuda(*capability)) is None, capability
    assert why("vllm", "ct-fp8-block", ROCM) is None
    assert "refuses 128x128 block scales" in (why("vllm", "ct-fp8-block", cuda(8, 0)) or "")
    # SGLang: Blackwell's DeepGEMM uses UE8M0 scales, so the measured FP32 scales run below 10.0 only.
    assert why("sglang", "ct-fp8-block", cuda(8, 9)) is None and why("sglang", "ct-fp8-block", cuda(9, 0)) is None
    assert "runs only below 10.0" in (why("sglang", "ct-fp8-block", cuda(10, 0)) or "")
    assert "does not run on ROCm" in (why("sglang", "ct-fp8-block", ROCM) or "")
    # TensorRT-LLM: FP8_BLOCK_SCALES with FP32 scales is the Hopper recipe; not on Ada, UE8M0 on Blackwell.
    assert why("trtllm", "ct-fp8-block", cuda(9, 0)) is None
    assert "needs 9.0" in (why("trtllm", "ct-fp8-block", cuda(8, 9)) or "")
    assert "runs only below 10.0" in (why("trtllm", "ct-fp8-block", cuda(10, 0)) or "")


def test_trtllm_fp8_rowwise_row_is_unchanged_by_the_new_families() -> None:
    kernel = row("trtllm", "ct-fp8-w8a8")
    assert (kernel.nvidia, kernel.nvidia_below) == ((9, 0), (10, 0))
    # Per-tensor FP8 is not read from a compressed-tensors checkpoint at all, so Blackwell gains no FP8 row.
    assert ("trtllm", "ct-fp8-tensor") not in SUPPORT


def _launch(engine: str, family: str, gpu: DeviceInfo) -> list[str]:
    """The notes of `engine`'s launch for an FP8 checkpoint scheme re-labelled as `family` (no new scheme needed)."""
    from recommender.engines import LaunchSettings, get_engine
    from recommender.quantize import get_scheme

    stand_in = dataclasses.replace(get_scheme("fp8-dynamic"), name=f"{family}-standin", kernel_family=family)
    config = get_engine(engine).emit(
        LaunchSettings(
            model="/ckpt/standin",
            method=stand_in,
            dtype="bfloat16",
            tensor_parallel=1,
            max_num_seqs=8,
            max_num_batched_tokens=2048,
            kv_cache_dtype="auto",
            gpu_memory_utilization=0.9,
            max_model_len=4096,
            device=gpu,
        )
    )
    assert config.supported and config.command is not None, config.notes
    assert "--quantization" not in config.command
    return config.notes


def test_launch_notes_say_what_the_command_cannot() -> None:
    block = " ".join(_launch("vllm", "ct-fp8-block", cuda(9, 0)))
    assert "VLLM_USE_DEEP_GEMM=0" in block and "UE8M0" in block
    mxfp4 = " ".join(_launch("vllm", "ct-mxfp4", cuda(10, 0)))
    assert "FlashInfer" in mxfp4 and "weight-only through FP4 Marlin" in mxfp4
    on_amd = " ".join(_launch("vllm", "ct-mxfp4", GFX950))
    assert "AiterMxfp4LinearKernel" in on_amd and "VLLM_ROCM_USE_AITER=1" in on_amd and "FlashInfer" not in on_amd
    assert "VLLM_USE_DEEP_GEMM" not in " ".join(_launch("vllm", "ct-fp8-tensor", cuda(9, 0)))
    assert "FP8_BLOCK_SCALES" in " ".join(_launch("trtllm", "ct-fp8-block", cuda(9, 0)))
    assert "Blackwell only" in " ".join(_launch("trtllm", "ct-nvfp4", cuda(10, 0)))
