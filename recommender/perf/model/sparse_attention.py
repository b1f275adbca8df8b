"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5): MLA whose queries each attend to ``index_topk`` tokens.

A lightning indexer scores every cached token for every query with ``index_n_heads`` small heads of
``index_head_dim`` (FP8 in the reference implementation), and the MLA attention then runs over the ``index_topk``
best tokens only (the DeepSeek-V3.2 technical report's DSA section; deepseek-ai/DeepSeek-V3.2-Exp
``inference/model.py``, class ``Indexer``: ``wq_b`` q_lora_rank -> heads x head_dim, ``wk`` hidden -> head_dim,
``weights_proj`` hidden -> heads, and an FP8 ``k_cache`` of ``head_dim`` per token with one fp32 scale per 128
elements, the entry aiconfigurator-core 0.12 ``sdk/common.py`` ``indexer_cache_entry_bytes`` prices too). So, per
layer:

- memory per token: MLA's latent (``attention.py``) plus the indexer's key, ``index_head_dim`` bytes + 4 bytes of
  scale: the cache still grows with the context (every token may be selected later);
- per query token: the sparse MLA kernel over ``index_topk`` keys, run in MLA's absorbed form (576-wide keys,
  512-wide values, one shared latent head: vLLM ``flashmla_sparse`` and FlashInfer's ``sparse_mla_top_k``). The
  kernels take a fixed-width index tensor of ``index_topk`` slots per query, padded with -1 below it, so a query
  pays ``index_topk`` keys at any context: an over-count, for contexts shorter than ``index_topk``, of the work;
- per (query, context token) pair: the indexer's ``2 x index_n_heads x index_head_dim`` FLOPs (its ReLU and head
  weighting are negligible), and a decode step reads the whole indexer key cache, not the latent one.

Sharing one top-k over several layers (GLM-5.2's ``index_topk_freq`` / ``index_topk_pattern``) is not modelled and
is refused by name. The indexer's weights are replicated on every tensor-parallel GPU (every rank needs the same
top-k), and so is its key cache (one head, like MLA's latent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.errors import BadInputError

#: The fields that together define DSA's indexer.
DSA_FIELDS = ("index_topk", "index_n_heads", "index_head_dim")
#: Bytes per indexer key element (FP8) and elements per fp32 scale (the reference ``fp8_index`` block).
INDEX_KEY_BYTES, INDEX_SCALE_BLOCK = 1.0, 128


@dataclass(frozen=True, slots=True)
class SparseAttention:
    """DSA's indexer widths and top-k (config names of DeepSeek-V3.2)."""

    top_k: int
    index_heads: int
    index_head_dim: int

    @property
    def index_cache_bytes(self) -> float:
        """Bytes the indexer caches per token and layer: the FP8 key and its fp32 scales."""
        scales = -(-self.index_head_dim // INDEX_SCALE_BLOCK)
        return self.index_head_dim * INDEX_KEY_BYTES + 4.0 * scales

    @property
    def indexer_flops_per_pair(self) -> float:
        """FLOPs of one layer's indexer for one (query, cached token) pair: its heads' dot products."""
        return 2.0 * self.index_heads * self.index_head_dim

    def indexer_params(self, hidden: int, q_lora_rank: int) -> int:
        """One layer's indexer weights: wq_b (from the query latent, or the hidden state without one), wk and
        weights_proj."""
        query_in = q_lora_rank or hidden
        keys_and_weights = hidden * self.index_head_dim + hidden * self.index_heads
        return query_in * self.index_heads * self.index_head_dim + keys_and_weights


def parse_sparse(config: Any, *, latent: bool) -> SparseAttention | None:
    """DSA's indexer when `config` has ``index_topk``, else None; it needs MLA (`latent`) and all of `DSA_FIELDS`."""
    if getattr(config, "index_topk", None) is None:
        return None
    if not latent:
        raise BadInputError(
            "index_topk",
            "DeepSeek sparse attention is given without multi-head latent attention (no kv_lora_rank)",
            "give the model's MLA fields (kv_lora_rank, ...) or drop the index_* fields",
        )
    for name in ("index_topk_freq", "index_topk_pattern", "index_skip_topk_offset"):
        if getattr(config, name, None) not in (None, 1):
            raise BadInputError(
                name,
                "a top-k shared across layers (the indexer skipped in some) is not modelled",
                "plan a DSA model whose every layer runs its indexer (DeepSeek-V3.2, GLM-5)",
            )
    values = []
    for name in DSA_FIELDS:
        value = getattr(config, name, None)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise BadInputError(
                name,
                f"{value!r} in a DeepSeek sparse attention config",
                f"give a positive whole number (all of {', '.join(DSA_FIELDS)} define the indexer)",
            )
        values.append(value)
    return SparseAttention(top_k=values[0], index_heads=values[1], index_head_dim=values[2])
