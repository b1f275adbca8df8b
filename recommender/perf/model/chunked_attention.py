"""Chunked local attention (Llama-4): most layers attend within fixed chunks of the sequence, a few to all of it.

Llama-4's text config (transformers 5.17 ``Llama4TextConfig``) marks each layer in ``no_rope_layers``: 1 for a layer
with rotary embeddings, which attends only to the tokens of its own ``attention_chunk_size`` chunk (8,192), 0 for a
NoPE layer with global attention; without the list, every ``no_rope_layer_interval``-th layer (4) is global. Newer
configs write the same as ``layer_types`` (``chunked_attention`` / ``full_attention``). vLLM keeps a chunked layer's
KV blocks only for the current chunk (``vllm/v1/kv_cache_interface.py`` ``ChunkedLocalAttentionSpec``; its manager
frees the blocks of earlier chunks), so a chunked layer's cache per sequence is at most one chunk.

Priced as a sliding window of the chunk's width (``attention.AttentionLayout.window``): the cache bound is the same,
and attention over at most ``chunk`` tokens is charged as over the last ``chunk`` (an upper bound: a token early in
its chunk attends to fewer; the mean over a long context is about half a chunk).
"""

from __future__ import annotations

from typing import Any

from recommender.errors import BadInputError

__all__ = ["chunked_layer_types"]

#: transformers' ``Llama4TextConfig.no_rope_layer_interval`` default.
DEFAULT_NO_ROPE_INTERVAL = 4


def chunked_layer_types(config: Any, n_layers: int) -> list[str] | None:
    """Each layer's type (``chunked_attention`` / ``full_attention``) for a config with ``attention_chunk_size`` and
    no ``layer_types``; None for any other config."""
    chunk = getattr(config, "attention_chunk_size", None)
    if chunk is None or getattr(config, "layer_types", None) is not None:
        return None
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise BadInputError("attention_chunk_size", f"{chunk!r}", "give the chunk width in tokens (Llama-4: 8192)")
    no_rope = getattr(config, "no_rope_layers", None)
    if not no_rope:
        interval = getattr(config, "no_rope_layer_interval", None) or DEFAULT_NO_ROPE_INTERVAL
        no_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if len(no_rope) != n_layers or any(v not in (0, 1) for v in no_rope):
        raise BadInputError("no_rope_layers", f"{len(no_rope)} entries", f"give one 0 or 1 per layer ({n_layers})")
    return ["chunked_attention" if v else "full_attention" for v in no_rope]
