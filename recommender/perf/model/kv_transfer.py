"""Moving a request's KV cache from a prefill pool to a decode pool (disaggregated serving).

After prefill, the decode worker needs the prompt's KV cache before its first decode step. It receives
only what its own cache lacks: with a prefix cache holding the first ``cached_tokens`` of the prompt
(a shared system prompt, an earlier turn), those are not sent. Bytes, per the architecture:

- grouped-query layers: ``missing tokens x layers x KV heads x head_dim x 2 x dtype bytes``;
- MLA: ``missing tokens x layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes`` (the compressed
  latent is what both sides cache, ``attention.py``);
- sliding-window layers: only the window's tokens exist on the prefill side and are needed on the
  decode side: the last ``min(prompt, window)`` positions, less those the prefix cache already holds.

The transfer runs rank to rank in parallel (NIXL, Mooncake and the engines' connectors move each
rank's blocks over its own NIC or NVLink): grouped-query heads are split over the narrower side's
tensor-parallel ranks, so each link carries that share (a head is replicated when ranks outnumber KV
heads); MLA's latent is whole on every rank, so each decode rank receives all of it over its own link.
Time = the link's latency + bytes per link / the link's bandwidth (``link.py``; the link catalog
says where each figure came from). The decode side reserves the whole prompt's KV before the
transfer starts (``reserved_bytes``): the memory a request holds on the decode pool from its arrival.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.errors import BadInputError
from recommender.perf.model.link import Link
from recommender.perf.model.memory import kv_dtype_bytes
from recommender.perf.model.shape import ModelShape


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """One request's KV transfer from a prefill worker to a decode worker."""

    sent_bytes: float
    bytes_per_link: float
    reserved_bytes: float
    seconds: float
    link: str


def missing_kv_bytes(shape: ModelShape, prompt_tokens: int, cached_tokens: int, dtype_bytes: float) -> float:
    """KV bytes of a `prompt_tokens` prompt that a decode side whose prefix cache holds `cached_tokens` lacks."""
    cached = min(max(0, cached_tokens), prompt_tokens)
    full_tokens = prompt_tokens - cached
    layout = shape.attention
    window_layers = layout.n_window_layers if layout is not None and layout.window else 0
    per_layer_token = shape.kv_bytes_for_context(1, dtype_bytes) / shape.n_layers
    if not window_layers or layout is None:
        return shape.n_layers * full_tokens * per_layer_token
    kept = min(prompt_tokens, layout.window)  # the window's positions: prompt - kept .. prompt - 1
    window_tokens = kept - max(0, cached - (prompt_tokens - kept))
    if shape.per_kind_widths:  # Gemma-4: each kind's bytes per token
        full = full_tokens * shape.full_kv_bytes_per_token(dtype_bytes)
        return full + window_tokens * shape.window_kv_bytes_per_token(dtype_bytes)
    return ((shape.n_layers - window_layers) * full_tokens + window_layers * window_tokens) * per_layer_token


def _link_share(shape: ModelShape, prefill_tp: int, decode_tp: int) -> float:
    """Fraction of the sent bytes one link carries: MLA's latent whole, GQA heads split over the narrower side."""
    if shape.latent_kv:
        return 1.0
    ranks = min(prefill_tp, decode_tp)
    return -(-shape.n_kv_heads // ranks) / shape.n_kv_heads


def kv_transfer(
    shape: ModelShape,
    *,
    prompt_tokens: int,
    link: Link,
    cached_tokens: int = 0,
    kv_cache_dtype: str = "auto",
    prefill_tp: int = 1,
    decode_tp: int = 1,
) -> KvTransfer:
    """The KV transfer of one request of `prompt_tokens` over `link` between pools of the given TP degrees."""
    if prompt_tokens < 1:
        raise BadInputError("prompt_tokens", f"{prompt_tokens}", "give a prompt of at least one token")
    if min(prefill_tp, decode_tp) < 1:
        raise BadInputError("tensor_parallel", f"prefill {prefill_tp}, decode {decode_tp}", "give positive degrees")
    dtype = kv_dtype_bytes(kv_cache_dtype)
    # A hybrid's recurrent state after the prompt moves whole (no prefix of it is cached on the decode side).
    sent = missing_kv_bytes(shape, prompt_tokens, cached_tokens, dtype) + shape.state_bytes_per_seq()
    per_link = sent * _link_share(shape, prefill_tp, decode_tp)
    return KvTransfer(
        sent_bytes=sent,
        bytes_per_link=per_link,
        reserved_bytes=shape.kv_bytes_for_context(prompt_tokens, dtype),
        seconds=link.seconds(per_link),
        link=link.name,
    )
