"""The decode side's prefix cache credited in the KV transfer: only the prompt tokens it lacks cross the link.

A decode worker keeps the KV of the prompts it served (its prefix cache), so a later request starting with the same
system prompt, template or conversation history finds that prefix already there. What the engines do with it:

- vLLM (``NixlConnector``, under llm-d and Dynamo): the decode scheduler asks the connector for
  ``len(prompt) - num_computed_tokens`` tokens, ``num_computed_tokens`` being its local prefix-cache hit, and pulls
  only the unhashed (newly allocated) blocks (vllm-project/vllm
  ``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` @ 002a1057,
  ``NixlConnectorScheduler.get_num_new_matched_tokens`` and ``update_state_after_alloc``). Prefix caching is on by
  default in the V1 engine. Credited.
- TensorRT-LLM (cache transceiver): "selective cache transfer": the generation side requests the hashes of its
  newly allocated blocks and the context side sends only those, the reused prefix blocks skipped
  (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/cacheFormatter.cpp`` @ 00c77b30,
  ``getBlockRangeForSending`` / ``getBlockRangeForReceiving``; MLA's formatter calls the same,
  ``mlaCacheFormatter.cpp`` @ 203cb191), with KV block reuse on by default (``KvCacheConfig.enable_block_reuse``,
  ``tensorrt_llm/llmapi/llm_args.py`` @ fcd3f316). A KV cache of more than one pool (several attention window
  sizes, e.g. gpt-oss's 128-token window layers) or ``TRTLLM_DISABLE_SELECTIVE_CACHE_TRANSFER`` sends every block:
  credited except for models with window layers.
- SGLang (PD mode): the decode side matches its radix cache and sends the prefill side the matched length only
  with ``--disaggregation-decode-enable-radix-cache`` (sgl-project/sglang
  ``python/sglang/srt/disaggregation/decode.py`` @ 0035ca42, ``use_decode_radix_cache``), off by default and not
  in the launch emitted here: the whole prompt moves. Not credited.
- Any other engine (TGI has no disaggregated mode here): not credited.

How much the decode side holds is what its pool's simulation says: the decode pool is simulated on the user's
traffic with its own prefix cache (``disaggregated.py``), so its hit rate ``h`` (prompt tokens served from the
cache, ``SimulationResult.prefix_hit_rate``) gives the share ``q = h x sum(prompt) / sum(shared)`` of the shared
tokens a request finds there. Per request ``i`` of the traffic's draw (prompt ``p_i``, shared prefix ``s_i``):

- the mean bytes sent: ``q x bytes(p_i lacking s_i) + (1 - q) x bytes(p_i)``, against ``bytes(p_i)`` without the
  credit (``kv_transfer.missing_kv_bytes``: the architecture's bytes, window layers included);
- the TTFT's transfer leg stays the longest prompt's (as without sharing), less ``c``, the prefix tokens at least
  99 % of requests find on the decode side (the 1st percentile of the cached tokens over the draw, each shared
  request cached with weight ``q``): a system prompt every request carries and the decode side holds is credited
  whole; where more than 1 % of requests miss it (a shared fraction under 0.99, a cold or evicted cache), the P99
  request may lack it and the leg is the whole longest prompt's.

Before the pools are simulated (the TTFT split) ``q = 1``; a plan whose simulated decode pool holds less than
that re-plans without the credit (``fleet/layouts/disaggregated_plan.py``). Traffic without shared prefixes, or an
engine
that does not credit, prices exactly the whole longest prompt, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.model.kv_transfer import KvTransfer, kv_transfer, missing_kv_bytes
from recommender.perf.model.memory import kv_dtype_bytes
from recommender.perf.sim.serving import SIMULATED_REQUESTS
from recommender.perf.sim.workload import make_workload

if TYPE_CHECKING:
    from recommender.perf.model.link import Link
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.sim.serving import TrafficLoad

__all__ = ["CreditedTransfer", "credited_transfer", "decode_prefix_credit"]

#: The share of requests allowed to miss the credit for the TTFT's (P99) transfer leg to keep it.
_TAIL = 0.01


def _has_windows(shape: ModelShape) -> bool:
    layout = shape.attention
    return layout is not None and bool(layout.window) and layout.n_window_layers > 0


def decode_prefix_credit(engine: str, shape: ModelShape) -> str:
    """Why `engine`'s decode side receives only the prompt tokens its prefix cache lacks ('' : it receives all)."""
    if engine == "vllm":
        return "vLLM's NixlConnector pulls only the blocks its prefix cache lacks"
    if engine == "trtllm":
        if _has_windows(shape):
            return ""  # several window sizes: several KV pools, selective transfer off
        return "TensorRT-LLM's selective cache transfer sends only the blocks the decode side did not reuse"
    return ""


def _whole_prompt_note(engine: str, shape: ModelShape, allow_credit: bool) -> str:
    if not allow_credit and decode_prefix_credit(engine, shape):
        return "priced whole: the simulated decode pool holds too little of the shared prefixes for the P99 request"
    if engine == "sglang":
        return (
            "SGLang sends the whole prompt (decode radix cache off without --disaggregation-decode-enable-radix-cache)"
        )
    if engine == "trtllm" and _has_windows(shape):
        return "TensorRT-LLM sends every block of a KV cache with several window pools"
    return f"{engine} sends the whole prompt"


@dataclass(frozen=True, slots=True)
class CreditedTransfer:
    """The TTFT's transfer leg and what a request sends on average, with and without the decode-side credit."""

    #: The longest prompt less the prefix the P99 request finds on the decode side (the TTFT's leg).
    transfer: KvTransfer
    #: Mean KV bytes a request sends, and what it would send without the credit.
    mean_sent_bytes: float
    mean_whole_bytes: float
    #: Share of the shared-prefix tokens the decode side holds (0 where the engine does not credit).
    held: float
    #: Prefix tokens credited to the TTFT's leg.
    credited_tokens: int
    #: How the engine treats the decode side's prefix cache ('' : no prompt shares a prefix).
    note: str

    def detail(self) -> str:
        """One clause for the row's provenance ('' where no prompt shares a prefix)."""
        if not self.note:
            return ""
        saved = 1 - self.mean_sent_bytes / self.mean_whole_bytes if self.mean_whole_bytes else 0.0
        return (
            f"KV sent per request {self.mean_sent_bytes / 1e6:.1f} MB of {self.mean_whole_bytes / 1e6:.1f} MB "
            f"(prefix credit saves {saved:.0%}: the decode side holds {self.held:.0%} of the shared prefix tokens, "
            f"{self.credited_tokens:,} tokens credited to the P99 transfer; {self.note})"
        )


def _held(traffic_hit: float | None, prompts: np.ndarray, shared: np.ndarray) -> float:
    total_shared = float(shared.sum())
    if total_shared <= 0:
        return 0.0
    if traffic_hit is None:
        return 1.0
    return min(1.0, traffic_hit * float(prompts.sum()) / total_shared)


def _tail_credit(shared: np.ndarray, held: float) -> int:
    """The cached tokens at least ``1 - _TAIL`` of the requests have (shared requests cached with weight `held`)."""
    values = np.concatenate([shared[shared > 0], np.zeros(len(shared), dtype=shared.dtype)])
    weights = np.concatenate([np.full(int((shared > 0).sum()), held), np.where(shared > 0, 1.0 - held, 1.0)])
    order = np.argsort(values, kind="stable")
    below = np.cumsum(weights[order]) / weights.sum()
    return int(values[order][int(np.searchsorted(below, _TAIL, side="right"))])


def credited_transfer(
    shape: ModelShape,
    traffic: TrafficLoad,
    *,
    engine: str,
    longest_prompt: int,
    link: Link,
    kv_cache_dtype: str = "auto",
    prefill_tp: int = 1,
    decode_tp: int = 1,
    decode_hit_rate: float | None = None,
    allow_credit: bool = True,
) -> CreditedTransfer:
    """The KV transfer of `traffic` from prefill to decode workers of `engine`, the decode side's prefix cache
    credited where the engine does (`decode_hit_rate`: the decode pool's simulated hit rate; None: it holds every
    shared prefix, the most credit, for the TTFT split before the pools are simulated; `allow_credit` False: the
    plan's fallback where the simulated decode pool held too little, the whole prompt priced)."""
    whole = kv_transfer(
        shape,
        prompt_tokens=longest_prompt,
        link=link,
        kv_cache_dtype=kv_cache_dtype,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
    )
    if not traffic.shares_prompts or not traffic.cache_prefixes:
        return CreditedTransfer(whole, whole.sent_bytes, whole.sent_bytes, 0.0, 0, "")
    drawn = make_workload(
        prompt=traffic.prompt, output=traffic.output, n_requests=SIMULATED_REQUESTS, rate=1.0, **traffic.sharing
    )
    prompts = drawn.prompt_tokens
    shared = drawn.prefix_tokens if drawn.prefix_tokens is not None else np.zeros_like(prompts)
    why = decode_prefix_credit(engine, shape) if allow_credit else ""
    held = _held(decode_hit_rate, prompts, shared) if why else 0.0
    dtype = kv_dtype_bytes(kv_cache_dtype)
    full = np.array([missing_kv_bytes(shape, int(p), 0, dtype) for p in prompts])
    lacking = np.array([missing_kv_bytes(shape, int(p), int(s), dtype) for p, s in zip(prompts, shared, strict=True)])
    mean_sent = float(np.mean(held * lacking + (1 - held) * full))
    credit = min(_tail_credit(shared, held), longest_prompt - 1) if held > 0 else 0
    leg = whole
    if credit > 0:
        leg = kv_transfer(
            shape,
            prompt_tokens=longest_prompt,
            link=link,
            cached_tokens=credit,
            kv_cache_dtype=kv_cache_dtype,
            prefill_tp=prefill_tp,
            decode_tp=decode_tp,
        )
    note = why or _whole_prompt_note(engine, shape, allow_credit)
    return CreditedTransfer(leg, mean_sent, float(full.mean()), held, credit, note)
