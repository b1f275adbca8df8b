"""Which engines run a candidate's batch cap and KV cache dtype, and whether its KV cache can ever fill the cap.

A batch cap above an engine's own maximum (``engines/batch_limits.py``) is one that engine refuses to launch;
an FP8 KV cache on a GPU without native FP8 conversion is not searched. A cap the KV cache cannot hold is
pruned with the reason: every running sequence holds at least its prompt's KV blocks, so a replica whose cache
holds N prompts never runs more than N sequences, and a larger cap only repeats the simulation of a smaller one.
Prompts that share a prefix (or a conversation's history) hold less each, so there nothing is pruned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.engines.batch_limits import fp8_kv_refusal, max_running
from recommender.perf.sim.scheduler_config import BLOCK_SIZE

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.device import DeviceInfo

__all__ = ["engines_for", "prompts_held", "unheld_cap"]


def engines_for(c: Candidate, engines: tuple[str, ...], device: DeviceInfo) -> tuple[tuple[str, ...], str]:
    """Those of `engines` that run `c`'s batch cap and KV cache dtype on `device`, and why each other does not."""
    kept, why = [], []
    budget = max(c.max_num_batched_tokens, c.batch_size)
    for engine in engines:
        most = max_running(engine, c.max_num_batched_tokens)
        kv = fp8_kv_refusal(engine, device) if c.kv_cache_dtype == "fp8" else None
        if c.batch_size > most:
            why.append(
                f"{engine}: batch cap {c.batch_size} > its maximum of {most} running sequences (token budget {budget})"
            )
        elif kv is not None:
            why.append(f"{engine}: {kv}")
        else:
            kept.append(engine)
    return tuple(kept), "; ".join(why)


def prompts_held(kv_cache_tokens: int, prompt_tokens: int) -> int:
    """How many prompts of `prompt_tokens` the KV cache holds at once (whole blocks each)."""
    return (kv_cache_tokens // BLOCK_SIZE) // max(1, -(-prompt_tokens // BLOCK_SIZE))


def unheld_cap(batch_size: int, kv_cache_tokens: int, prompt_tokens: int) -> str | None:
    """Why a cap of `batch_size` never fills a KV cache of `kv_cache_tokens` at `prompt_tokens` per prompt (None:
    it can)."""
    held = prompts_held(kv_cache_tokens, prompt_tokens)
    if batch_size <= held:
        return None
    return (
        f"batch cap {batch_size} never fills: the KV cache holds {kv_cache_tokens:,} tokens, {held} prompts of "
        f"{prompt_tokens} tokens at once — a cap of {held} or less serves the same"
    )
