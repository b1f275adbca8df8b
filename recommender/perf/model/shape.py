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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recommender.perf.model.attention import AttentionLayout, parse_attention
from recommender.perf.model.moe import MoeLayout, parse_moe


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
    #: config.json's ``architectures``: the class names the engines look up in their model registries. Not a number
    #: the models here read (carried so engine eligibility needs no second read of the config), so two shapes with
    #: the same numbers are equal whatever class names them.
    architectures: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        n_layers, intermediate = int(config.num_hidden_layers), int(config.intermediate_size)
        attention = parse_attention(config, n_layers=n_layers)
        if attention is not None and attention.latent is not None:
            head_dim = attention.latent.qk_head_dim
        return cls(
            n_layers=n_layers,
            hidden=int(config.hidden_size),
            intermediate=intermediate,
            n_heads=heads,
            n_kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(head_dim),
            vocab=int(config.vocab_size),
            tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            moe=parse_moe(config, n_layers=n_layers, intermediate=intermediate),
            attention=attention,
            architectures=_architectures(config),
        )

    @property
    def attention_params(self) -> int:
        """Q, K, V and O projections of all layers (MLA: its low-rank projections, ``attention.py``)."""
        if self.attention is not None and self.attention.latent is not None:
            return self.n_layers * self.attention.latent.params_per_layer(self.hidden, self.n_heads)
        return self.n_layers * self.hidden * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)

    @property
    def tp_replicated_params(self) -> int:
        """Linear weights of `attention_params` every tensor-parallel GPU holds and reads whole (MLA's fused
        down-projection, ``attention.LatentAttention.replicated_params_per_layer``); 0 for grouped-query attention."""
        if self.attention is not None and self.attention.latent is not None:
            return self.n_layers * self.attention.latent.replicated_params_per_layer(self.hidden)
        return 0

    def per_gpu_params(self, params: float, tensor_parallel: int) -> float:
        """`params` (which include the replicated ones) as one of `tensor_parallel` GPUs holds them: its share of the
        split weights, and the replicated ones whole."""
        replicated = self.tp_replicated_params
        return (params - replicated) / tensor_parallel + replicated

    @property
    def expert_params(self) -> int:
        """One routed expert of one layer (gate, up, down); 0 for a dense model."""
        return 0 if self.moe is None else 3 * self.hidden * self.moe.expert_intermediate

    @property
    def dense_body_params(self) -> int:
        """Linear weights every token uses: attention, dense MLPs, shared experts, routers."""
        moe = self.moe
        if moe is None:
            return self.attention_params + self.n_layers * 3 * self.hidden * self.intermediate
        dense_mlp = (self.n_layers - moe.n_moe_layers) * 3 * self.hidden * self.intermediate
        per_moe_layer = 3 * self.hidden * moe.shared_intermediate + self.hidden * (moe.n_experts + moe.shared_gate)
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

    def _kv_layer_token_bytes(self, kv_dtype_bytes: float) -> float:
        """Bytes one layer caches per token: MLA's latent + rotary key, or K and V of every KV head."""
        if self.attention is not None and self.attention.latent is not None:
            return self.attention.latent.cached_width * kv_dtype_bytes
        return self.n_kv_heads * self.head_dim * 2 * kv_dtype_bytes

    def _window_layers(self) -> int:
        return 0 if self.attention is None or not self.attention.window else self.attention.n_window_layers

    def kv_bytes_for_context(self, context: int, kv_dtype_bytes: float = 2.0) -> float:
        """KV cache of one sequence of `context` tokens: full-attention layers keep every token, window layers
        the last ``window``."""
        window_layers = self._window_layers()
        kept = min(context, self.attention.window) if self.attention is not None and window_layers else context
        full = (self.n_layers - window_layers) * context + window_layers * kept
        return full * self._kv_layer_token_bytes(kv_dtype_bytes)

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0, context: int | None = None) -> float:
        """KV cache per token. Grouped-query: layers x kv heads x head dim x (K and V) x dtype bytes; MLA: layers x
        (kv_lora_rank + qk_rope_head_dim) x dtype bytes. With window layers, the mean over a `context`-token
        sequence; without `context`, every layer's (exact up to the window, an over-reservation past it: the
        memory and step models that call it without a context never count a window's saving they cannot see)."""
        if context is not None:
            return self.kv_bytes_for_context(context, kv_dtype_bytes) / max(1, context)
        return self.n_layers * self._kv_layer_token_bytes(kv_dtype_bytes)

    def attention_flops(self, query_tokens: int, context: int) -> float:
        """QK^T and PV for `query_tokens` queries attending to `context` keys, all layers (a window layer's queries
        see at most ``window`` keys). Per query-key pair and head: 2 x (qk width + v width) FLOPs, i.e. 4 x head_dim
        for grouped-query attention; MLA counts its expanded heads (prefill's form: qk_nope + qk_rope, v_head_dim)."""
        if self.attention is not None and self.attention.latent is not None:
            per_pair = 2.0 * (self.attention.latent.qk_head_dim + self.attention.latent.v_head_dim)
        else:
            per_pair = 4.0 * self.head_dim
        window_layers = self._window_layers()
        keys = (self.n_layers - window_layers) * context
        if window_layers and self.attention is not None:
            keys += window_layers * min(context, self.attention.window)
        return per_pair * query_tokens * keys * self.n_heads

    def decode_attention_flops(self, query_tokens: int, context: int) -> float:
        """As :meth:`attention_flops` for decode steps. MLA decodes absorbed (the up-projections folded into the
        query and output, attention run over the cached latent as one shared KV head): per query-key pair and head
        2 x (kv_lora_rank + qk_rope_head_dim) for QK^T and 2 x kv_lora_rank for PV (DeepSeek-V2, arXiv
        2405.04434, section 2.1.2, "absorb"; deepseek-ai/DeepSeek-V3 inference/model.py attn_impl "absorb");
        every other attention decodes as it prefills."""
        if self.attention is None or self.attention.latent is None:
            return self.attention_flops(query_tokens, context)
        latent = self.attention.latent
        per_pair = 2.0 * (latent.cached_width + latent.kv_lora_rank)
        return per_pair * query_tokens * context * self.n_layers * self.n_heads


def _architectures(config: Any) -> tuple[str, ...]:
    """The config's ``architectures`` names (a list of strings); () when it has none or another shape."""
    names = getattr(config, "architectures", None)
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return ()
    return tuple(names)
