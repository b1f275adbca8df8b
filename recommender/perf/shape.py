"""A decoder-only transformer's shape: the numbers the memory and step-time models need.

Read from a Hugging Face config (Llama, Mistral, Qwen, ... all use these field names),
so a projection needs only config.json, never the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Layer counts and widths of a decoder-only transformer with gated MLPs."""

    n_layers: int
    hidden: int
    intermediate: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(
            n_layers=int(config.num_hidden_layers),
            hidden=int(config.hidden_size),
            intermediate=int(config.intermediate_size),
            n_heads=heads,
            n_kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(head_dim),
            vocab=int(config.vocab_size),
        )

    @property
    def body_params(self) -> int:
        """Parameters of the quantizable linear layers (attention and MLP projections)."""
        attn = self.hidden * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        return self.n_layers * (attn + mlp)

    @property
    def lm_head_params(self) -> int:
        """The output projection, kept at 16 bits by every method here."""
        return self.vocab * self.hidden

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV cache per token: layers x kv heads x head dim x (K and V) x dtype bytes."""
        return self.n_layers * self.n_kv_heads * self.head_dim * 2 * kv_dtype_bytes

    def attention_flops(self, query_tokens: int, context: int) -> float:
        """QK^T and PV for `query_tokens` queries attending to `context` keys, all layers."""
        return 4.0 * query_tokens * context * self.n_layers * self.n_heads * self.head_dim
