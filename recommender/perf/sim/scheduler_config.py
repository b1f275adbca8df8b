"""The serving engine's batching knobs, as the scheduler simulation reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.perf.sim.workload import Workload

__all__ = ["BLOCK_SIZE", "SchedulerConfig", "fits_kv_cache"]

BLOCK_SIZE = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """The serving engine's batching knobs, named as vLLM names them.

    Args:
        kv_cache_tokens: KV-cache capacity in tokens (see ``memory.kv_cache_tokens``).
        max_num_seqs: most sequences running at once.
        max_num_batched_tokens: tokens per step, decodes (one each) and prefill chunks together.
        chunked_prefill: split prompts across steps; off, a prompt runs whole, one per step.
        block_size: tokens per KV-cache block.
        mixed_prefill: prefill chunks ride in the same step as the decodes (vLLM, TensorRT-LLM). Off,
            a step with prompt chunks runs them alone and the decoders wait (SGLang's default
            scheduler, which prioritises a prefill batch over the running decode batch).
        reserve_whole_request: admit a request only when the KV blocks of its whole length (prompt and
            every output token) fit beside those reserved by the running ones, so nothing is ever
            preempted (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler; SGLang's admission,
            which reserves the running requests' remaining output, is closer to this than to vLLM's).
    """

    kv_cache_tokens: int
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    block_size: int = BLOCK_SIZE
    mixed_prefill: bool = True
    reserve_whole_request: bool = False

    def __post_init__(self) -> None:
        if min(self.max_num_seqs, self.max_num_batched_tokens, self.block_size) < 1:
            raise ValueError(f"scheduler limits must be >= 1: {self}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= max_num_seqs "
                f"({self.max_num_seqs}), as vLLM requires"
            )
        if self.kv_blocks < 1:
            raise ValueError(f"KV cache of {self.kv_cache_tokens} tokens holds no {self.block_size}-token block")

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size


def fits_kv_cache(workload: Workload, config: SchedulerConfig) -> bool:
    """Whether every request fits the KV cache alone (its last token is never stored); else it could never run."""
    return -(-int((workload.prompt_tokens + workload.output_tokens - 1).max()) // config.block_size) <= config.kv_blocks
