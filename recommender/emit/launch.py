"""The launch commands of a recommended candidate, in every serving engine that has its scheme."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.emit import EmittedConfig, LaunchSettings, emit_all
from recommender.perf.memory import DEFAULT_GPU_MEMORY_UTILIZATION
from recommender.quantize import get_method

if TYPE_CHECKING:
    from recommender.candidate import Candidate


def launch_commands(candidate: Candidate, *, model: str, max_model_len: int) -> list[EmittedConfig]:
    """Each engine's command (or its plain refusal) for `candidate`.

    ``max_model_len`` is the traffic profile's prompt + output tokens — what the memory
    model sized the KV cache for; a note says to raise it for longer requests.
    """
    method = get_method(candidate.method)
    settings = LaunchSettings(
        model=model,
        method=method,
        dtype="float16" if method.precision == "fp16" else "bfloat16",
        tensor_parallel=candidate.tensor_parallel,
        max_num_seqs=candidate.batch_size,
        max_num_batched_tokens=max(candidate.max_num_batched_tokens, candidate.batch_size),
        kv_cache_dtype=candidate.kv_cache_dtype,
        gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
        max_model_len=max_model_len,
    )
    note = (
        f"max_model_len {max_model_len} = the traffic profile's prompt + output tokens; "
        "raise it for longer requests (the KV cache must hold one full request)"
    )
    return [replace(e, notes=[*e.notes, note]) if e.supported else e for e in emit_all(settings)]
