"""The launch commands of a recommended candidate, in every serving engine that has its scheme."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.engines import EngineLaunch, LaunchSettings, emit_all
from recommender.engines.kernels import compute_dtype
from recommender.perf.model.memory import DEFAULT_GPU_MEMORY_UTILIZATION

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.device import DeviceInfo


def launch_commands(
    candidate: Candidate,
    *,
    model: str,
    max_model_len: int,
    checkpoint: str | None = None,
    device: DeviceInfo | None = None,
    engine: str = "",
) -> list[EngineLaunch]:
    """Each engine's command (or its plain refusal) for `candidate`, `engine`'s first (the one its estimate is for).

    Args:
        candidate: the recommended configuration.
        model: the original model (hub id or directory).
        max_model_len: the traffic's longest request, prompt + output tokens (`Traffic.max_model_len`) — what
            the memory model sized the KV cache for; a note says to raise it for longer requests.
        checkpoint: the checkpoint directory of a checkpoint scheme; it replaces `model` as the
            served model (engines read the scheme from its config.json).
        device: the GPU it runs on; an engine that does not serve the scheme there as measured refuses.
        engine: the engine the latencies and price were estimated for ('' keeps the engines' order).
    """
    method = candidate.base_scheme
    served = checkpoint if checkpoint is not None and method.checkpoint_format is not None else model
    settings = LaunchSettings(
        model=served,
        method=method,
        dtype=compute_dtype(method),
        tensor_parallel=candidate.tensor_parallel,
        max_num_seqs=candidate.batch_size,
        max_num_batched_tokens=max(candidate.max_num_batched_tokens, candidate.batch_size),
        kv_cache_dtype=candidate.kv_cache_dtype,
        gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
        max_model_len=max_model_len,
        device=device,
        speculative=candidate.speculative,
    )
    note = (
        f"max_model_len {max_model_len} = the traffic profile's prompt + output tokens; "
        "raise it for longer requests (the KV cache must hold one full request)"
    )
    emitted = sorted(emit_all(settings), key=lambda e: e.engine != engine)  # stable: the rest keep their order
    return [replace(e, notes=[*e.notes, note]) if e.supported else e for e in emitted]
