"""A decoder-only transformer's shape: the numbers the memory and step-time models need.

Read from a Hugging Face config (Llama, Mistral, Qwen, Mixtral, ... all use these field
names), so a projection needs only config.json, never the weights.

Three parameter counts differ for a mixture-of-experts model (``moe.py``) and coincide for a
dense one: ``body_params`` (every linear weight: what memory holds), ``active_body_params``
(the weights one token multiplies: what FLOPs count) and ``touched_body_params(T)`` (the
weights a step of ``T`` tokens reads: what bandwidth pays for).

``tie_word_embeddings``: the input embedding and the lm_head are one matrix, stored once. A
config without the field is taken as untied (the default of LlamaConfig, MistralConfig,
Qwen2Config and MixtralConfig, though not of transformers' base PretrainedConfig).

``attention`` (``attention.py``) holds what differs from grouped-query attention: multi-head latent
attention (its own projections, a cache of one latent per token and layer) and sliding-window layers
(a cache bounded by the window). ``head_dim`` is then the query/key head size the attention kernels see
(MLA: ``qk_nope_head_dim + qk_rope_head_dim``, as in its prefill).

``recurrent`` (``linear_attention.py``, read by ``layer_pattern.py``) holds a hybrid's recurrent layers: only its
attention layers (``n_kv_layers``) cache keys and values; its Gated DeltaNet or Mamba2 layers keep a fixed state per
sequence (``state_bytes_per_seq``) and add their projections to the parameters and their state updates to the FLOPs
(``recurrent_flops_per_token``). DeepSeek sparse attention (``attention.sparse``, ``sparse_attention.py``) splits
attention's work into a part per (query, key) pair (the indexer: ``pair_attention_flops``, ``kv_read_bytes_per_token``)
and a part per query (top-k keys: ``query_attention_flops``, ``query_kv_bytes``); every other design has no part per
query. ``mlp_matrices`` is 3 for gated MLPs and 2 for Nemotron-H's squared-ReLU ones (``mlp_hidden_act: relu2``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recommender.perf.model.attention import AttentionLayout, full_layer_widths, parse_attention
from recommender.perf.model.layer_pattern import parse_pattern, parse_recurrent, placed_moe_layers
from recommender.perf.model.linear_attention import RecurrentLayers
from recommender.perf.model.moe import MoeLayout, parse_moe
from recommender.perf.model.sparse_attention import SparseAttention


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Layer counts and widths of a decoder-only transformer with gated MLPs (dense, or routed experts)."""

    n_layers: int
    hidden: int
    intermediate: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    tie_word_embeddings: bool = False
    moe: MoeLayout | None = None
    attention: AttentionLayout | None = None
    recurrent: RecurrentLayers | None = None
    mlp_matrices: int = 3
    #: config.json's ``architectures``: the class names the engines look up in their model registries. Not a number
    #: the models here read (carried so engine eligibility needs no second read of the config), so two shapes with
    #: the same numbers are equal whatever class names them.
    architectures: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or getattr(config, "attention_head_dim", None)  # Nemotron-H
        head_dim = head_dim or config.hidden_size // heads
        n_layers = int(config.num_hidden_layers)
        # A model whose every MLP is routed (Qwen3.5 MoE) writes no dense width: the experts' stands in for it.
        intermediate = int(getattr(config, "intermediate_size", None) or config.moe_intermediate_size)
        # Llama-4 writes its experts' width as intermediate_size and its dense layers' as intermediate_size_mlp.
        dense_width = int(getattr(config, "intermediate_size_mlp", None) or intermediate)
        pattern = parse_pattern(config, n_layers=n_layers)
        recurrent = parse_recurrent(config, pattern)
        attention = parse_attention(config, n_layers=n_layers)
        if attention is not None and attention.latent is not None:
            head_dim = attention.latent.qk_head_dim
        n_kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        widths = full_layer_widths(config)  # Gemma-4: the full layers' own width and KV heads (the window's: layout)
        if widths is not None:
            head_dim, n_kv_heads = widths
        return cls(
            n_layers=n_layers,
            hidden=int(config.hidden_size),
            intermediate=dense_width,
            n_heads=heads,
            n_kv_heads=n_kv_heads,
            head_dim=int(head_dim),
            vocab=int(config.vocab_size),
            tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            moe=parse_moe(
                config,
                n_layers=n_layers,
                intermediate=intermediate,
                placed=placed_moe_layers(pattern),
                placed_by="" if pattern is None else pattern.field,
            ),
            attention=attention,
            recurrent=recurrent,
            mlp_matrices=2 if getattr(config, "mlp_hidden_act", None) == "relu2" else 3,
            architectures=_architectures(config),
        )

    @property
    def n_kv_layers(self) -> int:
        """Layers with softmax attention and a KV cache: all of them, or a hybrid's attention layers."""
        return self.n_layers if self.recurrent is None else self.recurrent.n_attention

    @property
    def n_mlp_layers(self) -> int:
        """Layers with an MLP (dense or routed): all of them, or Nemotron-H's MLP blocks."""
        return self.n_layers if self.recurrent is None else self.recurrent.n_mlp

    @property
    def sparse(self) -> SparseAttention | None:
        """DeepSeek sparse attention's indexer and top-k, or None."""
        return None if self.attention is None else self.attention.sparse

    @property
    def attention_params(self) -> int:
        """Q, K, V and O projections of all attention layers (MLA: its low-rank projections, ``attention.py``; DSA: its
        indexer; gated attention: the gate), and a hybrid's recurrent layers' projections."""
        return self._softmax_attention_params + (0 if self.recurrent is None else self.recurrent.params(self.hidden))

    @property
    def _softmax_attention_params(self) -> int:
        layout, layers = self.attention, self.n_kv_layers
        if layout is not None and layout.latent is not None:
            params = layers * layout.latent.params_per_layer(self.hidden, self.n_heads)
            return params + self._indexer_params
        own = self._window_layers() if self.per_kind_widths else 0  # Gemma-4's sliding layers: their own widths
        params = 0
        for n, (kv_heads, head_dim) in ((layers - own, self.widths()), (own, self.widths(windowed=True))):
            params += n * self.hidden * head_dim * (2 * self.n_heads + 2 * kv_heads)
            if layout is not None and layout.output_gate:
                params += n * self.hidden * head_dim * self.n_heads
        return params

    def widths(self, *, windowed: bool = False) -> tuple[int, int]:
        """(KV heads, head width) of a window layer or a full-attention one: the model's, but Gemma-4's sliding layers'
        (``attention.full_layer_widths``): what each kind caches and how tensor parallelism splits it."""
        layout = self.attention
        if windowed and layout is not None and layout.window_head_dim:
            return layout.window_kv_heads, layout.window_head_dim
        return self.n_kv_heads, self.head_dim

    @property
    def per_kind_widths(self) -> bool:
        """True when the window layers have their own head width or KV heads (Gemma-4's sliding layers)."""
        return bool(self._window_layers() and self.attention is not None and self.attention.window_head_dim)

    @property
    def _indexer_params(self) -> int:
        """DSA's indexer weights in every attention layer (0 without DSA): replicated across tensor parallelism."""
        sparse, layout = self.sparse, self.attention
        if sparse is None or layout is None or layout.latent is None:
            return 0
        return self.n_kv_layers * sparse.indexer_params(self.hidden, layout.latent.q_lora_rank)

    @property
    def tp_replicated_params(self) -> int:
        """Linear weights every tensor-parallel GPU holds and reads whole: MLA's fused down-projection
        (``attention.LatentAttention.replicated_params_per_layer``) and DSA's indexer, a latent MoE's two latent
        projections (``moe.py``); 0 for grouped-query attention with an MLP over the hidden size."""
        latent_moe = 0 if self.moe is None else self.moe.n_moe_layers * 2 * self.hidden * self.moe.latent
        if self.attention is not None and self.attention.latent is not None:
            mla = self.n_layers * self.attention.latent.replicated_params_per_layer(self.hidden)
            return mla + self._indexer_params + latent_moe
        return latent_moe

    def per_gpu_params(self, params: float, tensor_parallel: int) -> float:
        """`params` (which include the replicated ones) as one of `tensor_parallel` GPUs holds them: its share of the
        split weights, and the replicated ones whole."""
        replicated = self.tp_replicated_params
        return (params - replicated) / tensor_parallel + replicated

    @property
    def expert_params(self) -> int:
        """One routed expert of one layer (gate, up, down; up and down for squared-ReLU), over the hidden size or a
        latent MoE's width; 0 for a dense model."""
        if self.moe is None:
            return 0
        return self.mlp_matrices * (self.moe.latent or self.hidden) * self.moe.expert_intermediate

    @property
    def dense_body_params(self) -> int:
        """Linear weights every token uses: attention, dense MLPs, shared experts, routers."""
        moe, matrices = self.moe, self.mlp_matrices
        if moe is None:
            return self.attention_params + self.n_mlp_layers * matrices * self.hidden * self.intermediate
        dense_mlp = (self.n_mlp_layers - moe.n_moe_layers) * matrices * self.hidden * self.intermediate
        shared = matrices * self.hidden * moe.shared_intermediate
        per_moe_layer = shared + self.hidden * (moe.n_experts + moe.shared_gate) + 2 * self.hidden * moe.latent
        return self.attention_params + dense_mlp + moe.n_moe_layers * per_moe_layer

    def _routed_params(self, experts_per_layer: float) -> float:
        return 0.0 if self.moe is None else self.moe.n_moe_layers * experts_per_layer * self.expert_params

    @property
    def body_params(self) -> int:
        """Parameters of the quantizable linear layers (attention, MLPs, every expert): what memory holds."""
        return self.dense_body_params + int(self._routed_params(self.moe.n_experts if self.moe else 0))

    @property
    def active_body_params(self) -> int:
        """Linear parameters one token multiplies (its k routed experts only): what FLOPs count."""
        return self.dense_body_params + int(self._routed_params(self.moe.experts_per_token if self.moe else 0))

    def touched_body_params(self, tokens: int) -> float:
        """Linear parameters a step of `tokens` tokens reads: the dense part plus the expected distinct experts."""
        if self.moe is None:
            return float(self.body_params)
        return self.dense_body_params + self._routed_params(self.moe.expected_distinct_experts(max(1, tokens)))

    @property
    def lm_head_params(self) -> int:
        """The output projection, kept at 16 bits by every method here."""
        return self.vocab * self.hidden

    @property
    def embedding_params(self) -> int:
        """Input embeddings stored besides the lm_head: none when the two are tied (one matrix)."""
        return 0 if self.tie_word_embeddings else self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        """Every stored parameter but norms and biases (memory)."""
        return self.body_params + self.lm_head_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses, embeddings included (the "active parameters" model cards quote)."""
        return self.active_body_params + self.lm_head_params + self.embedding_params

    @property
    def mlp_activation_width(self) -> int:
        """Widest gate+up output per token of any layer (the activation workspace): dense MLP, or k experts + shared."""
        dense = self.intermediate if self.moe is None or self.moe.n_moe_layers < self.n_layers else 0
        routed = 0 if self.moe is None else self.moe.experts_per_token * self.moe.expert_intermediate
        return max(dense, routed + (self.moe.shared_intermediate if self.moe else 0))

    @property
    def latent_kv(self) -> bool:
        """True when the KV cache is MLA's latent: one per token and layer, whole on every tensor-parallel rank."""
        return self.attention is not None and self.attention.latent is not None

    def _kv_layer_token_bytes(self, kv_dtype_bytes: float, windowed: bool = False) -> float:
        """Bytes one attention layer (a window layer where `windowed`) caches per token: MLA's latent + rotary key
        (+ DSA's FP8 indexer key, whatever the KV dtype), or K and V of every KV head."""
        if self.attention is not None and self.attention.latent is not None:
            latent = self.attention.latent.cached_width * kv_dtype_bytes
            return latent if self.attention.sparse is None else latent + self.attention.sparse.index_cache_bytes
        kv_heads, head_dim = self.widths(windowed=windowed)
        return kv_heads * head_dim * 2 * kv_dtype_bytes

    def _window_layers(self) -> int:
        return 0 if self.attention is None or not self.attention.window else self.attention.n_window_layers

    @property
    def window(self) -> int:
        """Tokens a sliding-window (or chunked) layer attends to and keeps; 0 without such layers."""
        return self.attention.window if self._window_layers() and self.attention is not None else 0

    @property
    def sliding_window(self) -> int:
        """``window`` for sliding-window layers, 0 for chunked ones: the step cost bounds a sliding layer's keys per
        sequence at its window (below nearly every served context: gpt-oss 128), and keeps charging a chunked layer
        per context token (exact below one chunk, Llama-4's 8,192, where most requests sit; a query of a long
        sequence sees half a chunk on average)."""
        return 0 if self.attention is None or self.attention.chunked else self.window

    def full_kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes per token of the layers whose cache grows with the context: every attention layer but the window
        layers (whose part, ``window_kv_bytes_per_token``, a sequence holds for at most ``window`` tokens)."""
        return (self.n_kv_layers - self._window_layers()) * self._kv_layer_token_bytes(kv_dtype_bytes)

    def window_kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes per token of the window layers together (0 without them)."""
        return self._window_layers() * self._kv_layer_token_bytes(kv_dtype_bytes, windowed=True)

    def kv_bytes_for_context(self, context: int, kv_dtype_bytes: float = 2.0) -> float:
        """KV cache of one sequence of `context` tokens: full-attention layers keep every token, window layers
        the last ``window`` (recurrent layers keep none: their state is `state_bytes_per_seq`)."""
        window_layers = self._window_layers()
        kept = min(context, self.attention.window) if self.attention is not None and window_layers else context
        if self.per_kind_widths:
            full_part = (self.n_kv_layers - window_layers) * context * self._kv_layer_token_bytes(kv_dtype_bytes)
            return full_part + window_layers * kept * self._kv_layer_token_bytes(kv_dtype_bytes, windowed=True)
        full = (self.n_kv_layers - window_layers) * context + window_layers * kept
        return full * self._kv_layer_token_bytes(kv_dtype_bytes)

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0, context: int | None = None) -> float:
        """KV cache per token. Grouped-query: layers x kv heads x head dim x (K and V) x dtype bytes; MLA: layers x
        (kv_lora_rank + qk_rope_head_dim) x dtype bytes. With window layers, the mean over a `context`-token
        sequence; without `context`, every layer's (exact up to the window, an over-reservation past it: what the
        expert-parallel plans still charge; the memory plan and the step split it into ``full_kv_bytes_per_token``
        and ``window_kv_bytes_per_token``)."""
        if context is not None:
            return self.kv_bytes_for_context(context, kv_dtype_bytes) / max(1, context)
        if self.per_kind_widths:
            return self.full_kv_bytes_per_token(kv_dtype_bytes) + self.window_kv_bytes_per_token(kv_dtype_bytes)
        return self.n_kv_layers * self._kv_layer_token_bytes(kv_dtype_bytes)

    def kv_read_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes a decode step reads per cached token: the whole cache, or only DSA's indexer keys (its latent is
        read per query, `query_kv_bytes`)."""
        sparse = self.sparse
        if sparse is None:
            return self.kv_bytes_per_token(kv_dtype_bytes)
        return self.n_kv_layers * sparse.index_cache_bytes

    def query_kv_bytes(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes one query token gathers beside `kv_read_bytes_per_token`: DSA's top-k latents; 0 otherwise."""
        sparse, layout = self.sparse, self.attention
        if sparse is None or layout is None or layout.latent is None:
            return 0.0
        return self.n_kv_layers * sparse.top_k * layout.latent.cached_width * kv_dtype_bytes

    def state_bytes_per_seq(self, tensor_parallel: int = 1) -> float:
        """Recurrent state one sequence holds on one of `tensor_parallel` GPUs, whatever its context; 0 without."""
        return 0.0 if self.recurrent is None else self.recurrent.state_bytes_per_seq(tensor_parallel)

    @property
    def recurrent_flops_per_token(self) -> float:
        """State update, readout and conv FLOPs of one token through the recurrent layers (0 without)."""
        return 0.0 if self.recurrent is None else self.recurrent.flops_per_token

    def _per_pair_flops(self, windowed: bool = False) -> tuple[float, int]:
        """(FLOPs per query-key pair and head, heads) of one attention layer's pairs (a window layer's: `windowed`)."""
        if self.sparse is not None:
            return self.sparse.indexer_flops_per_pair, 1
        if self.attention is not None and self.attention.latent is not None:
            return 2.0 * (self.attention.latent.qk_head_dim + self.attention.latent.v_head_dim), self.n_heads
        return 4.0 * self.widths(windowed=windowed)[1], self.n_heads

    def full_pair_attention_flops(self, query_tokens: int, context: int) -> float:
        """``pair_attention_flops`` of the layers attending to the whole context only (the window layers' part is
        ``window_query_attention_flops``)."""
        per_pair, heads = self._per_pair_flops()
        return per_pair * query_tokens * (self.n_kv_layers - self._window_layers()) * context * heads

    def window_query_attention_flops(self, query_tokens: int) -> float:
        """The window layers' attention FLOPs for `query_tokens` queries at a context of at least ``window``: each
        query attends to ``window`` keys in each of them (0 without window layers)."""
        per_pair, heads = self._per_pair_flops(windowed=True)
        return per_pair * query_tokens * self._window_layers() * self.window * heads

    def pair_attention_flops(self, query_tokens: int, context: int) -> float:
        """The part of `attention_flops` per (query, key) pair: every design's, but DSA's, whose pairs run only its
        indexer (``sparse_attention.py``)."""
        if self.per_kind_widths:
            window_keys = min(context, self.window)
            per_window_pair, heads = self._per_pair_flops(windowed=True)
            window_part = per_window_pair * query_tokens * self._window_layers() * window_keys * heads
            return self.full_pair_attention_flops(query_tokens, context) + window_part
        per_pair, heads = self._per_pair_flops()
        window_layers = self._window_layers()
        keys = (self.n_kv_layers - window_layers) * context
        if window_layers and self.attention is not None:
            keys += window_layers * min(context, self.attention.window)
        return per_pair * query_tokens * keys * heads

    def query_attention_flops(self, query_tokens: int) -> float:
        """The part of attention's FLOPs per query token whatever the context: DSA's sparse MLA over its top-k keys,
        in the absorbed form (QK^T over the latent + rotary key, PV over the latent); 0 for every other design."""
        sparse, layout = self.sparse, self.attention
        if sparse is None or layout is None or layout.latent is None:
            return 0.0
        per_key = 2.0 * (layout.latent.cached_width + layout.latent.kv_lora_rank)
        return per_key * sparse.top_k * query_tokens * self.n_kv_layers * self.n_heads

    def attention_flops(self, query_tokens: int, context: int) -> float:
        """QK^T and PV for `query_tokens` queries attending to `context` keys, all attention layers (a window layer's
        queries see at most ``window`` keys). Per query-key pair and head: 2 x (qk width + v width) FLOPs, i.e. 4 x
        head_dim for grouped-query attention; MLA counts its expanded heads (prefill's form: qk_nope + qk_rope,
        v_head_dim); DSA its indexer per pair plus its top-k per query."""
        return self.pair_attention_flops(query_tokens, context) + self.query_attention_flops(query_tokens)

    def decode_attention_flops(self, query_tokens: int, context: int) -> float:
        """As :meth:`attention_flops` for decode steps. MLA decodes absorbed (the up-projections folded into the
        query and output, attention run over the cached latent as one shared KV head): per query-key pair and head
        2 x (kv_lora_rank + qk_rope_head_dim) for QK^T and 2 x kv_lora_rank for PV (DeepSeek-V2, arXiv
        2405.04434, section 2.1.2, "absorb"; deepseek-ai/DeepSeek-V3 inference/model.py attn_impl "absorb");
        DSA decodes as it prefills (its sparse MLA is absorbed in both); every other attention decodes as it
        prefills."""
        if self.attention is None or self.attention.latent is None or self.attention.sparse is not None:
            return self.attention_flops(query_tokens, context)
        latent = self.attention.latent
        per_pair = 2.0 * (latent.cached_width + latent.kv_lora_rank)
        return per_pair * query_tokens * context * self.n_kv_layers * self.n_heads


def _architectures(config: Any) -> tuple[str, ...]:
    """The config's ``architectures`` names (a list of strings); () when it has none or another shape."""
    names = getattr(config, "architectures", None)
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return ()
    return tuple(names)
