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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        n_layers, intermediate = int(config.num_hidden_layers), int(config.intermediate_size)
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
        )

    @property
    def attention_params(self) -> int:
        """Q, K, V and O projections of all layers."""
        return self.n_layers * self.hidden * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)

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

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV cache per token: layers x kv heads x head dim x (K and V) x dtype bytes."""
        return self.n_layers * self.n_kv_heads * self.head_dim * 2 * kv_dtype_bytes

    def attention_flops(self, query_tokens: int, context: int) -> float:
        """QK^T and PV for `query_tokens` queries attending to `context` keys, all layers."""
        return 4.0 * query_tokens * context * self.n_layers * self.n_heads * self.head_dim
