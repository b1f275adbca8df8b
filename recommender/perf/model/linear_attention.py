"""Token mixers that keep a fixed state per sequence: Gated DeltaNet (linear attention) and Mamba2 (an SSM).

A hybrid model (Qwen3-Next and Qwen3.5: three Gated DeltaNet layers to one full-attention layer; Nemotron-H: Mamba2
layers with a few attention layers) caches keys and values only in its attention layers. Its recurrent layers keep,
per sequence, one state that does not grow with the context, so a long context costs them nothing more in memory or
in reads; what they cost is that state (held for every running sequence, read and written once per step) and the
projections around it (counted in the parameters like any linear layer).

- Gated DeltaNet (Qwen3-Next/Qwen3.5 ``linear_*`` fields; transformers ``Qwen3NextGatedDeltaNet``): projections
  ``in_proj_qkvz`` (hidden -> 2 x key dim + 2 x value dim), ``in_proj_ba`` (hidden -> 2 x value heads) and
  ``out_proj`` (value dim -> hidden), a depthwise causal conv over q, k and v (``2 x key dim + value dim`` channels,
  ``linear_conv_kernel_dim`` taps). State per layer and sequence: one ``key_head_dim x value_head_dim`` matrix per
  value head, and the conv's last ``kernel - 1`` inputs (vLLM ``MambaStateShapeCalculator.gated_delta_net_state_shape``:
  ``(conv_dim / tp, kernel - 1)`` and ``(value_heads / tp, key_head_dim, value_head_dim)``).
- Mamba2 (Nemotron-H ``mamba_*``, ``ssm_state_size``, ``n_groups``, ``conv_kernel``; transformers
  ``NemotronHMamba2Mixer``): ``in_proj`` (hidden -> 2 x inner + 2 x groups x state + heads, inner = heads x head dim)
  and ``out_proj`` (inner -> hidden); a conv over ``inner + 2 x groups x state`` channels. State: ``head_dim x
  state_size`` per head, and the conv's (vLLM ``mamba2_state_shape``).

State dtypes (vLLM ``vllm/model_executor/layers/mamba/mamba_utils.py``,
``MambaStateDtypeCalculator._mamba_state_dtype``): the conv state in the model dtype (16-bit), the recurrent
("temporal") state in ``mamba_ssm_cache_dtype`` when set, else the model dtype. Qwen3.5
(``mamba_ssm_dtype: float32``) and Nemotron-3 (``mamba_ssm_cache_dtype: float32``) ask for fp32; a config that says
nothing gets 16 bits.

FLOPs per token and layer (the recurrent form a decode step runs): Gated DeltaNet reads ``S k``, decays ``S``, adds
the rank-one update and reads out ``S q``: about 7 x state elements (2 + 1 + 2 + 2); Mamba2 decays ``h``, adds
``dt x B^T`` and reads out ``h C``: about 5 x state elements; both plus the conv (2 x channels x taps). The chunked
prefill kernels do the same per-token work plus an intra-chunk attention of the chunk (64 or 128 tokens), which is
not counted: it is a few percent of the projections' FLOPs at these widths.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes of a 16-bit conv state element (the model dtype of every hybrid here).
CONV_STATE_BYTES = 2.0


@dataclass(frozen=True, slots=True)
class GatedDeltaNet:
    """One Gated DeltaNet layer's widths (config names of Qwen3-Next / Qwen3.5 without the ``linear_`` prefix)."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    name = "Gated DeltaNet"

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim

    @property
    def state_elements(self) -> int:
        return self.value_heads * self.key_head_dim * self.value_head_dim

    @property
    def split_heads(self) -> tuple[int, ...]:
        """Head counts tensor parallelism splits (vLLM divides both by the degree)."""
        return (self.key_heads, self.value_heads)

    def params(self, hidden: int) -> int:
        """Linear weights of one layer: in_proj_qkvz, in_proj_ba and out_proj (the conv and gates' vectors are
        biases-sized and not counted, like norms)."""
        key_dim, value_dim = self.key_heads * self.key_head_dim, self.value_heads * self.value_head_dim
        return hidden * (2 * key_dim + 2 * value_dim + 2 * self.value_heads) + value_dim * hidden

    @property
    def flops_per_token(self) -> float:
        return 7.0 * self.state_elements + 2.0 * self.conv_channels * self.conv_kernel


@dataclass(frozen=True, slots=True)
class Mamba2:
    """One Mamba2 layer's widths (Nemotron-H config names)."""

    heads: int
    head_dim: int
    state_size: int
    groups: int
    conv_kernel: int

    name = "Mamba2"

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        return self.inner + 2 * self.groups * self.state_size

    @property
    def state_elements(self) -> int:
        return self.heads * self.head_dim * self.state_size

    @property
    def split_heads(self) -> tuple[int, ...]:
        return (self.heads, self.groups)

    def params(self, hidden: int) -> int:
        """Linear weights of one layer: in_proj and out_proj."""
        return hidden * (2 * self.inner + 2 * self.groups * self.state_size + self.heads) + self.inner * hidden

    @property
    def flops_per_token(self) -> float:
        return 5.0 * self.state_elements + 2.0 * self.conv_channels * self.conv_kernel


Mixer = GatedDeltaNet | Mamba2


@dataclass(frozen=True, slots=True)
class RecurrentLayers:
    """The recurrent layers of a hybrid and how its layers split between token mixers and MLPs.

    Args:
        mixer: the recurrent layer's widths (one kind per model).
        n_recurrent: layers whose token mixer is `mixer`.
        n_attention: layers with softmax attention (the only ones with a KV cache).
        n_mlp: layers with an MLP (all of them in Qwen3.5; Nemotron-H's ``-`` and ``E`` layers only).
        ssm_state_bytes: bytes per recurrent-state element (module docstring: 2, or 4 for an fp32 state).
    """

    mixer: Mixer
    n_recurrent: int
    n_attention: int
    n_mlp: int
    ssm_state_bytes: float = 2.0

    def params(self, hidden: int) -> int:
        """Linear weights of every recurrent layer."""
        return self.n_recurrent * self.mixer.params(hidden)

    def state_bytes_per_seq(self, tensor_parallel: int = 1) -> float:
        """Bytes one sequence's state takes on one of `tensor_parallel` GPUs (heads and channels split by it)."""
        per_layer = (
            self.mixer.state_elements * self.ssm_state_bytes
            + self.mixer.conv_channels * (self.mixer.conv_kernel - 1) * CONV_STATE_BYTES
        )
        return self.n_recurrent * per_layer / tensor_parallel

    @property
    def flops_per_token(self) -> float:
        """State update, readout and conv FLOPs of one token through every recurrent layer (module docstring)."""
        return self.n_recurrent * self.mixer.flops_per_token
