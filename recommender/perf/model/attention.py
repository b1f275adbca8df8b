"""Attention variants beyond grouped-query attention: multi-head latent attention and sliding-window layers.

Both change what the KV cache holds per token, which is what decides how many sequences a GPU
serves and how many bytes a disaggregated deployment moves from prefill to decode:

- Multi-head latent attention (MLA: DeepSeek-V2/V3/R1, Kimi-K2) caches one compressed latent of
  ``kv_lora_rank`` plus one decoupled rotary key of ``qk_rope_head_dim`` per token and layer, shared
  by every head: ``(kv_lora_rank + qk_rope_head_dim) x layers`` elements, with no factor 2 for K and V
  (DeepSeek-V2, arXiv 2405.04434, section 2.1 and Table 1: "(d_c + d_h^R) l"). Its weights are
  ``q_a`` (hidden x q_lora_rank), ``q_b`` (q_lora_rank x heads x (nope + rope)), ``kv_a``
  (hidden x (kv_lora_rank + rope)), ``kv_b`` (kv_lora_rank x heads x (nope + v)) and ``o``
  (heads x v x hidden): the projections of deepseek-ai/DeepSeek-V3 ``inference/model.py`` (class MLA,
  commit 1ea5a1a7), where ``wkv_a`` is a plain (replicated) Linear: every tensor-parallel rank computes
  and caches the whole latent, so tensor parallelism does not split an MLA cache (attention data
  parallelism does, by splitting the sequences).
- Sliding-window layers (gpt-oss: ``layer_types`` alternating ``sliding_attention`` / ``full_attention``,
  ``sliding_window`` 128; transformers ``GptOssConfig``) attend to, and keep, only the last ``window``
  tokens, so their cache is bounded per sequence; the full-attention layers grow with the context.

Read from config.json by the field names transformers and the models' own configs use. Two more designs sit
beside these, each in its own module: DeepSeek sparse attention over an MLA cache (``sparse_attention.py``, held
here as ``AttentionLayout.sparse``) and the recurrent layers of linear-attention and Mamba hybrids
(``linear_attention.py``, their pattern ``layer_pattern.py``). Qwen3-Next/Qwen3.5's gated attention
(``attn_output_gate``) widens the query projection by one gate per query element. Llama-4's chunked layers are priced
as windows of the chunk's width (``chunked_attention.py``). A layer type no module knows is refused by name, never
priced as full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.errors import BadInputError
from recommender.perf.model.chunked_attention import chunked_layer_types
from recommender.perf.model.sparse_attention import SparseAttention, parse_sparse

#: The layer types of ``layer_types`` modelled (``linear_attention``: ``linear_attention.py``'s).
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
#: Layer types whose cache is bounded: by ``sliding_window``, or by ``attention_chunk_size`` (``chunked_attention.py``).
_BOUNDED = {"sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}
#: The fields that together define multi-head latent attention.
MLA_FIELDS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


@dataclass(frozen=True, slots=True)
class LatentAttention:
    """Multi-head latent attention's widths (config names of DeepSeek-V2/V3)."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0  # 0: queries projected directly from the hidden state (DeepSeek-V2-Lite)

    @property
    def cached_width(self) -> int:
        """Elements cached per token and layer: the latent plus the shared rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query and key once the latent is expanded (the prefill attention's head size)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def replicated_params_per_layer(self, hidden: int) -> int:
        """The down-projections every tensor-parallel GPU holds whole: q_a (where there is a q bottleneck) and kv_a,
        one fused GEMM from the hidden state to the latents that no head owns. vLLM
        (``vllm/model_executor/models/deepseek_v2.py`` @ 002d6073, ``DeepSeekV2FusedQkvAProjLinear``, the whole
        2,112 x 7,168 weight on each GPU), SGLang (``python/sglang/srt/models/deepseek_v2.py`` @ 3e4a39ee,
        ``ReplicatedLinear``) and TensorRT-LLM (``tensorrt_llm/_torch/modules/attention.py`` @ 00547a25, MLA's
        ``kv_a_proj_with_mqa = Linear(hidden_size, q_lora_rank + kv_lora_rank + qk_rope_head_dim, ...)`` with no
        tensor-parallel mode) keep it replicated."""
        return hidden * (self.q_lora_rank + self.cached_width)

    def params_per_layer(self, hidden: int, heads: int) -> int:
        """Linear weights of one MLA layer: q (through its low-rank bottleneck where there is one), kv_a, kv_b, o."""
        q_out = heads * self.qk_head_dim
        q = hidden * self.q_lora_rank + self.q_lora_rank * q_out if self.q_lora_rank else hidden * q_out
        kv_a = hidden * self.cached_width
        kv_b = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv_a + kv_b + heads * self.v_head_dim * hidden


@dataclass(frozen=True, slots=True)
class AttentionLayout:
    """What differs from plain grouped-query attention in every layer: an MLA cache, and/or window layers.

    Args:
        latent: MLA's widths, or None for grouped-query attention.
        window: tokens a sliding-window layer attends to and keeps (0: no window layers).
        n_window_layers: layers that use the window; the others attend to the whole context.
        sparse: DeepSeek sparse attention's indexer and top-k (``sparse_attention.py``), or None.
        output_gate: each attention layer gates its output with a second query-sized projection (Qwen3-Next).
        chunked: the window layers are chunked (Llama-4), not sliding: a query sees the keys of its own chunk only.
        window_head_dim: the window layers' head width where it is not the model's ``head_dim`` (Gemma-4: 256 beside
            the full layers' 512, ``full_layer_widths``); 0: the same.
        window_kv_heads: the window layers' KV heads where they are not ``n_kv_heads``; 0: the same.
    """

    latent: LatentAttention | None = None
    window: int = 0
    n_window_layers: int = 0
    sparse: SparseAttention | None = None
    output_gate: bool = False
    chunked: bool = False
    window_head_dim: int = 0
    window_kv_heads: int = 0

    def kept_tokens(self, context: int, *, windowed: bool) -> int:
        """Tokens of a `context`-token sequence a layer keeps: all, or the last `window` in a window layer."""
        return min(context, self.window) if windowed and self.window else context


def _int(config: Any, name: str, default: int | None = None) -> int:
    value = getattr(config, name, None)
    if value is None:
        if default is None:
            raise BadInputError(
                name,
                "missing from a multi-head latent attention config",
                f"add {name} to config.json (all of {', '.join(MLA_FIELDS)} define MLA)",
            )
        return default
    return int(value)


def parse_latent(config: Any) -> LatentAttention | None:
    """MLA's widths when `config` has ``kv_lora_rank``, else None."""
    if not getattr(config, "kv_lora_rank", None):
        return None
    return LatentAttention(
        kv_lora_rank=_int(config, "kv_lora_rank"),
        qk_rope_head_dim=_int(config, "qk_rope_head_dim"),
        qk_nope_head_dim=_int(config, "qk_nope_head_dim"),
        v_head_dim=_int(config, "v_head_dim"),
        q_lora_rank=_int(config, "q_lora_rank", 0),
    )


def _window_layers(config: Any, n_layers: int) -> tuple[int, int]:
    """(window, window layers) from ``layer_types``; a config without it is taken as full attention everywhere
    (the larger cache: Qwen2's ``sliding_window`` comes with ``use_sliding_window: false``)."""
    types = getattr(config, "layer_types", None) or chunked_layer_types(config, n_layers)
    if types is None:
        return 0, 0
    if len(types) != n_layers:
        raise BadInputError(
            "layer_types",
            f"{len(types)} entries for {n_layers} layers",
            "give one layer type per layer (num_hidden_layers of them)",
        )
    unknown = sorted({t for t in types if t not in LAYER_TYPES})
    if unknown:
        raise BadInputError(
            "layer_types",
            f"layer type {unknown[0]!r} is not modeled",
            f"project a model whose layers are {' or '.join(LAYER_TYPES)}",
        )
    bounded = {t for t in types if t in _BOUNDED}
    if len(bounded) > 1:
        raise BadInputError("layer_types", "sliding and chunked layers in one model", "plan a model with one of them")
    if not bounded:
        return 0, 0
    kind = bounded.pop()
    window = getattr(config, _BOUNDED[kind], None)
    if not window:
        return 0, 0  # bounded layers without a width attend to everything
    return int(window), sum(1 for t in types if t == kind)


def full_layer_widths(config: Any) -> tuple[int, int] | None:
    """(head width, KV heads) of the full-attention layers where they differ from ``head_dim`` /
    ``num_key_value_heads``, the sliding layers' (Gemma-4); None where every attention layer has the same.

    vLLM ``model_executor/models/gemma4.py`` @ 001cabc1, ``Gemma4DecoderLayer``: a full-attention layer's head width is
    ``global_head_dim``; its KV heads are ``num_global_key_value_heads`` only with ``attention_k_eq_v`` (K reused as V:
    the K weights are loaded into both slots of ``QKVParallelLinear``, so the cache still holds K and V), else
    ``num_key_value_heads``."""
    head_dim, kv_heads = getattr(config, "head_dim", None), getattr(config, "num_key_value_heads", None)
    full_dim = getattr(config, "global_head_dim", None) or head_dim
    k_eq_v = getattr(config, "attention_k_eq_v", None) is True
    full_kv = (getattr(config, "num_global_key_value_heads", None) if k_eq_v else None) or kv_heads
    if (full_dim, full_kv) == (head_dim, kv_heads):
        return None
    if head_dim is None or kv_heads is None:
        missing = "head_dim" if head_dim is None else "num_key_value_heads"
        raise BadInputError(
            missing,
            "missing beside global_head_dim / num_global_key_value_heads",
            f"give {missing}: the sliding layers' width beside the full layers' (as Gemma-4's config.json does)",
        )
    return int(full_dim or head_dim), int(full_kv or kv_heads)


def _refuse_kv_sharing(config: Any) -> None:
    """Gemma-4's small variants (E2B, E4B) share KV caches across layers and add per-layer embeddings (vLLM
    ``gemma4.py`` @ 001cabc1: ``num_kv_shared_layers``, ``hidden_size_per_layer_input``); neither is priced here, so
    such a config is refused by name rather than priced as if every layer kept its own cache."""
    for name, what in (
        ("num_kv_shared_layers", "layers reading another layer's KV cache are"),
        ("hidden_size_per_layer_input", "per-layer input embeddings are"),
    ):
        value = getattr(config, name, None)
        if value:
            raise BadInputError(name, f"{value!r}: {what} not modeled", "plan a model without them (Gemma-4 26B, 31B)")


def parse_attention(config: Any, *, n_layers: int) -> AttentionLayout | None:
    """The attention layout of `config`, or None for grouped-query attention over the whole context everywhere."""
    _refuse_kv_sharing(config)
    latent = parse_latent(config)
    window, windowed = _window_layers(config, n_layers)
    sparse = parse_sparse(config, latent=latent is not None)
    gate = getattr(config, "attn_output_gate", None) is True
    per_kind = full_layer_widths(config) is not None
    if latent is None and not windowed and not gate and not per_kind:
        return None
    types = getattr(config, "layer_types", None) or chunked_layer_types(config, n_layers) or ()
    chunked = bool(windowed) and "chunked_attention" in types
    return AttentionLayout(
        latent=latent,
        window=window,
        n_window_layers=windowed,
        sparse=sparse,
        output_gate=gate,
        chunked=chunked,
        window_head_dim=int(config.head_dim) if per_kind else 0,
        window_kv_heads=int(config.num_key_value_heads) if per_kind else 0,
    )
