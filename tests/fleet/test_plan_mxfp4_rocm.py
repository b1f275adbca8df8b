"""`plan` for an FP4 model on AMD's CDNA 4: MXFP4 as vLLM's ROCm build serves it on MI355X, refused on MI300X.

gpt-oss-120b at fp4 on an MI355X plans the MXFP4 W4A4 checkpoint (the first fp4 scheme an engine launches there:
NVFP4 has no ROCm kernel), launched with AITER switched on (``VLLM_ROCM_USE_AITER=1``: vLLM's native MXFP4 linear and
MoE kernels on gfx950, sources in recommender/engines/vllm_rocm.py). Its step cost is the datasheet's, scaled by the
MI300X and MI325X audited rows with widened intervals, and the provenance says both.
"""

from __future__ import annotations

import json
import subprocess
import sys

PLAN = [sys.executable, "-m", "recommender.cli.main", "plan", "--model", "gpt-oss-120b", "--precision", "fp4"]


def _plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PLAN, *args, "--json"], capture_output=True, text=True, timeout=300)


def test_gpt_oss_120b_mxfp4_plans_on_mi355x_with_vllm_and_aiter_switched_on() -> None:
    result = _plan("--hardware", "mi355x", "--engine", "vllm")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 1
    row = rows[0]
    assert (row["hardware"], row["method"], row["engine"]) == ("mi355x", "mxfp4", "vllm")
    assert float(row["max_rps_per_replica"]) > 0
    launch = str(row["launch"])
    # AITER's native MXFP4 kernels need its switch; the compressed-tensors MXFP4 checkpoint names its own scheme.
    assert launch.startswith("VLLM_ROCM_USE_AITER=1 vllm serve gpt-oss-120b-mxfp4 ")
    assert "--quantization" not in launch
    detail = str(row["provenance"]["detail"])
    assert "audited MLPerf rows of mi300x, mi325x" in detail and "intervals widened" in detail
    assert "fp4 linear layers at the datasheet's fp4 peak and 4.25 bits per weight" in detail


def test_gpt_oss_120b_fp4_is_refused_on_mi300x_and_by_sglang_on_mi355x() -> None:
    on_cdna3 = _plan("--hardware", "mi300x", "--engine", "vllm")
    assert on_cdna3.returncode == 2 and "AMD ROCm gfx942" in on_cdna3.stderr
    by_sglang = _plan("--hardware", "mi355x", "--engine", "sglang")
    assert by_sglang.returncode == 2 and "sglang" in by_sglang.stderr
