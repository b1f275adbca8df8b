"""Attention data parallelism with expert parallelism: the layout DeepSeek-class MoE models are served in.

One replica spans ``ep`` GPUs. The routed experts are spread over all of them (``(E + redundant) / ep``
experts per GPU); attention runs as ``attention_dp`` independent ranks of ``ep / attention_dp`` GPUs each,
each rank with its own sequences and KV cache (SGLang's ``--enable-dp-attention`` with ``--dp-size``,
TensorRT-LLM's ``enable_attention_dp``, vLLM's ``--data-parallel-size`` with ``--enable-expert-parallel``).
The dense weights (attention, shared experts, dense MLPs, embeddings and lm_head) are held by every
attention rank, split by tensor parallelism inside it: here they are taken as sharded ``ep / attention_dp``
ways, the attention rank's width. What it buys for MLA: tensor parallelism cannot split MLA's one latent per
token (every TP rank caches all of it, ``attention.py``), data parallelism splits the sequences instead.

Memory per GPU (GB = 1e9 bytes): its expert shard and its share of the dense weights at the scheme's bits
(embeddings and lm_head at 16 bits), the engine's activation workspace and runtime (``memory.py``), and
the KV cache its rank's sequences leave room for.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.errors import BadInputError
from recommender.perf.model.expert_load import check_expert_split
from recommender.perf.model.memory import (
    RUNTIME_OVERHEAD_GB,
    activation_bytes,
    kv_dtype_bytes,
    per_device_kv,
    window_held_tokens,
)
from recommender.perf.model.shape import ModelShape


@dataclass(frozen=True, slots=True)
class ExpertParallelLayout:
    """One replica: `ep` GPUs holding the experts, `attention_dp` attention ranks over them.

    Args:
        ep: GPUs of the replica and the expert-parallel degree.
        attention_dp: attention data-parallel ranks (each of ``ep / attention_dp`` GPUs).
        redundant_experts: extra expert replicas per MoE layer (EPLB), spread with the others.
    """

    ep: int
    attention_dp: int = 1
    redundant_experts: int = 0

    def __post_init__(self) -> None:
        if self.attention_dp < 1 or self.ep % self.attention_dp:
            raise BadInputError(
                "attention_dp",
                f"{self.attention_dp} attention ranks over {self.ep} GPUs",
                f"give a divisor of the expert-parallel degree {self.ep}",
            )
        if self.redundant_experts < 0:
            raise BadInputError("redundant_experts", f"{self.redundant_experts}", "give 0 or more")

    @property
    def attention_tp(self) -> int:
        """GPUs of one attention rank (the tensor-parallel width of the dense weights and of the attention)."""
        return self.ep // self.attention_dp

    def check(self, shape: ModelShape, *, field: str = "expert_parallel") -> None:
        """Refuse a dense model, a design whose per-query or per-sequence costs the expert-parallel step does not
        price (DSA, recurrent hybrids), or a degree that does not split the experts, naming `field`."""
        if shape.sparse is not None or shape.recurrent is not None:
            raise BadInputError(
                field,
                "expert parallelism is not modelled for DeepSeek sparse attention or recurrent (linear-attention, "
                "Mamba) layers",
                "plan it with tensor parallelism",
            )
        if shape.moe is None:
            raise BadInputError(
                field,
                "expert parallelism needs a mixture-of-experts model",
                "serve a dense model with tensor parallelism",
            )
        check_expert_split(shape.moe.n_experts, self.ep, self.redundant_experts, field=field)


@dataclass(frozen=True, slots=True)
class ExpertParallelMemory:
    """Per-GPU memory of an expert-parallel replica and the KV cache it leaves, GB."""

    usable_gb: float
    expert_gb: float
    dense_gb: float
    activation_gb: float
    runtime_overhead_gb: float
    kv_bytes_per_token: float
    attention_dp: int
    window_kv_bytes_per_token: float = 0.0
    window_held_tokens: int = 0
    pool_context: int | None = None

    @property
    def weights_gb(self) -> float:
        return self.expert_gb + self.dense_gb

    @property
    def kv_cache_gb(self) -> float:
        return max(0.0, self.usable_gb - self.weights_gb - self.activation_gb - self.runtime_overhead_gb)

    @property
    def kv_tokens_per_rank(self) -> int:
        """Tokens of KV cache one attention rank holds (its GPUs hold its sequences' cache): at the full layers' bytes
        per token, plus the window layers' at `pool_context`'s mean, each decoding sequence holding at most
        ``window_held_tokens`` of them (``memory.MemoryPlan.kv_cache_tokens``' rule, vLLM's SlidingWindowManager)."""
        per_token = self.kv_bytes_per_token
        c = self.pool_context
        if self.window_kv_bytes_per_token and c is not None:
            per_token += min(c, self.window_held_tokens) * self.window_kv_bytes_per_token / c
        return int(self.kv_cache_gb * 1e9 // per_token)

    @property
    def kv_tokens(self) -> int:
        """Tokens of KV cache the replica holds, over all its attention ranks."""
        return self.kv_tokens_per_rank * self.attention_dp


def ep_kv_bytes_per_token_per_gpu(shape: ModelShape, kv_cache_dtype: str, layout: ExpertParallelLayout) -> float:
    """KV a step reads per context token on each GPU of the token's attention rank: MLA's latent whole, GQA heads
    split by the rank. Sliding-window layers are read per sequence (their ``window`` keys, in the rank's
    ``StepRates.window_kv_bytes_per_seq``), so only the full-attention layers are per context token here."""
    dtype = kv_dtype_bytes(kv_cache_dtype)
    if shape.sliding_window and not shape.latent_kv:
        return per_device_kv(shape, shape.full_kv_bytes_per_token(dtype), layout.attention_tp)
    full = shape.kv_bytes_per_token(dtype)
    if shape.latent_kv:
        return full
    return full * -(-shape.n_kv_heads // layout.attention_tp) / shape.n_kv_heads


def ep_memory(
    shape: ModelShape,
    layout: ExpertParallelLayout,
    *,
    bits_per_weight: float,
    device_gb: float,
    memory_utilization: float = 0.9,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    kv_cache_dtype: str = "auto",
    runtime_overhead_gb: float = RUNTIME_OVERHEAD_GB,
    pool_context: int | None = None,
) -> ExpertParallelMemory:
    """Per-GPU memory of `shape` laid out as `layout` with linear weights at `bits_per_weight`. `pool_context`: the
    sequence length the window layers' share of the KV pool is counted at, as ``memory.plan_memory``'s (None: every
    layer per token)."""
    layout.check(shape)
    assert shape.moe is not None  # checked above
    moe = shape.moe
    experts_per_gpu = (moe.n_experts + layout.redundant_experts) / layout.ep
    expert_bytes = moe.n_moe_layers * experts_per_gpu * shape.expert_params * bits_per_weight / 8
    tp = layout.attention_tp
    dense_bytes = shape.per_gpu_params(shape.dense_body_params, tp) * bits_per_weight / 8
    dense_bytes += (shape.lm_head_params + shape.embedding_params) * 2 / tp
    kv, window, held, context = _ep_kv_pool(shape, kv_cache_dtype, layout, pool_context)
    return ExpertParallelMemory(
        usable_gb=device_gb * memory_utilization,
        expert_gb=expert_bytes / 1e9,
        dense_gb=dense_bytes / 1e9,
        activation_gb=activation_bytes(
            shape, batched_tokens=max_num_batched_tokens, running_seqs=max_num_seqs, tensor_parallel=layout.attention_tp
        )
        / 1e9,
        runtime_overhead_gb=runtime_overhead_gb,
        kv_bytes_per_token=kv,
        attention_dp=layout.attention_dp,
        window_kv_bytes_per_token=window,
        window_held_tokens=held,
        pool_context=context,
    )


def _ep_kv_pool(
    shape: ModelShape, kv_cache_dtype: str, layout: ExpertParallelLayout, pool_context: int | None
) -> tuple[float, float, int, int | None]:
    """(full layers' KV per token, window layers' KV per token, window tokens a sequence holds, pool context) on a GPU
    of an attention rank: every layer per token without window layers or a `pool_context`, else the two apart."""
    dtype, tp = kv_dtype_bytes(kv_cache_dtype), layout.attention_tp
    if not shape.window or pool_context is None:
        all_layers = shape.kv_bytes_per_token(dtype)
        kv = all_layers if shape.latent_kv else all_layers * -(-shape.n_kv_heads // tp) / shape.n_kv_heads
        return kv, 0.0, 0, None
    full = per_device_kv(shape, shape.full_kv_bytes_per_token(dtype), tp)
    window = per_device_kv(shape, shape.window_kv_bytes_per_token(dtype), tp, windowed=True)
    return full, window, window_held_tokens(shape, 1), pool_context
