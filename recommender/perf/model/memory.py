"""The memory model: what one device holds when a serving engine runs a configuration.

A vLLM-like engine reserves ``gpu_memory_utilization`` of the device, loads the weights,
profiles one forward pass of ``max_num_batched_tokens`` tokens to size its activation
workspace, keeps some memory for the runtime (CUDA context, CUDA graphs, NCCL buffers),
and gives everything left to the KV cache. The KV cache in tokens bounds how many
sequences run at once at a context length. All of it is per device: tensor parallelism
shards the linear layers, the KV heads and the MLP activations across ``tp`` devices.

What is exact and what is estimated:

- weights: quantized linear layers at the method's bits (scales included; every expert of a
  mixture-of-experts model), embeddings and lm_head at 16 bits, one matrix when
  ``tie_word_embeddings`` ties them — exact up to small buffers (norms, rotary tables);
- KV cache per token: layers x KV heads x head dim x 2 (K and V) x dtype bytes — exact;
  ``fp8`` halves it (vLLM ``--kv-cache-dtype fp8``);
- activation workspace: the largest live tensors of one forward of the token budget
  (gate and up projections of the MLP, a few hidden-state copies) plus fp32 logits for
  every running sequence — an estimate, labelled as such;
- sliding-window (and chunked) layers: a sequence holds at most its last ``window - 1`` tokens, the tokens being
  computed and a block in each (vLLM ``SlidingWindowManager.remove_skipped_blocks`` frees the blocks behind the window:
  ``vllm/v1/core/single_type_kv_cache_manager.py`` @ 002f3491; its startup check sizes one ``max_model_len`` request
  at ``min(window - 1 + max_num_batched_tokens, max_model_len)`` tokens + a block per window layer:
  ``SlidingWindowSpec.max_memory_usage_bytes``, ``vllm/v1/kv_cache_interface.py`` @ 001cabc1). So the KV per token
  is split in two: the full-attention layers' (``kv_bytes_per_token``, every token) and the window layers'
  (``window_kv_bytes_per_token``, at most ``window_held_tokens`` per decoding sequence). The one-request check counts
  the window layers as vLLM's startup check does; the scheduler's pool, counted in tokens, is priced at the mean KV
  per token of a sequence of ``pool_context`` tokens (the traffic's prompt: the shortest a running sequence is, so
  the window's share per token is the largest it is while running), every layer per token without one;
- recurrent state (hybrids: Gated DeltaNet, Mamba2; ``linear_attention.py``): a fixed state per sequence, whatever
  its context, reserved here for every seat (``max_num_seqs``) as vLLM V0's ``MambaCacheManager`` allocated it; vLLM
  V1 takes it from the KV pool per running request, so this over-reserves when fewer seats run;
- runtime overhead: a fixed ``RUNTIME_OVERHEAD_GB`` per device — an assumption (CUDA
  context and CUDA graphs take a few hundred MB to about a GB in vLLM's startup logs);
- load peak: an engine that quantizes while loading may first hold the linear layers at more
  bits than it serves (vLLM's online fp8 loads the 16-bit checkpoint, then quantizes:
  docs/features/quantization/fp8.md @ 405f4e1). ``load_bits_per_weight`` (from the serving
  engine's `Kernel` row in `recommender.engines`) sizes that peak, weights plus runtime, before
  any KV cache exists; a device where it does not fit is refused even if the served weights would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.model.shape import ModelShape
from recommender.perf.scheme import Scheme
from recommender.perf.step.kernels import weight_traffic_bytes_per_param

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator

#: Bytes per KV-cache element for each ``kv_cache_dtype`` (vLLM's names).
KV_DTYPE_BYTES: dict[str, float] = {"auto": 2.0, "fp8": 1.0}
#: Assumed per-device memory outside PyTorch's tensors (CUDA context, CUDA graphs, NCCL).
RUNTIME_OVERHEAD_GB = 1.0
#: vLLM's default fraction of device memory the engine may use.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def kv_dtype_bytes(kv_cache_dtype: str) -> float:
    try:
        return KV_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        raise ValueError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (known: {', '.join(KV_DTYPE_BYTES)})") from None


def weight_bytes(shape: ModelShape, method: Scheme, tokens: int = 1) -> float:
    """Bytes of weight traffic of a step of `tokens` tokens (one decode token by default).

    The linear weights the step touches (all of a dense model; the expected distinct experts of
    a MoE one) at the scheme's traffic per weight (``kernels.py``: bitsandbytes 4-bit adds a 16-bit
    write and read above one token), plus the 16-bit lm_head. Input embeddings are gathered, not
    streamed: only the rows of the step's tokens are read, which is negligible.
    """
    per_param = weight_traffic_bytes_per_param(method, tokens)
    return shape.touched_body_params(tokens) * per_param + shape.lm_head_params * 2.0


def weight_bytes_per_gpu(shape: ModelShape, method: Scheme, tensor_parallel: int, tokens: int = 1) -> float:
    """One of `tensor_parallel` GPUs' share of `weight_bytes`: the split weights' share, and the weights every GPU
    holds whole read whole (``ModelShape.tp_replicated_params``)."""
    replicated = shape.tp_replicated_params * weight_traffic_bytes_per_param(method, tokens)
    return (weight_bytes(shape, method, tokens) - replicated) / tensor_parallel + replicated


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-device memory of one configuration, in GB (1e9 bytes), and the KV cache it leaves."""

    device_gb: float
    usable_gb: float
    weights_gb: float
    activation_gb: float
    runtime_overhead_gb: float
    kv_bytes_per_token: float
    tensor_parallel: int
    kv_cache_dtype: str
    load_gb: float = 0.0
    state_gb: float = 0.0
    window_kv_bytes_per_token: float = 0.0
    window_held_tokens: int = 0
    window_startup_tokens: int = 0
    pool_context: int | None = None

    @property
    def fixed_gb(self) -> float:
        """Everything but the KV cache (a hybrid's recurrent state included)."""
        return self.weights_gb + self.activation_gb + self.runtime_overhead_gb + self.state_gb

    @property
    def kv_cache_gb(self) -> float:
        return max(0.0, self.usable_gb - self.fixed_gb)

    @property
    def kv_cache_tokens(self) -> int:
        """Tokens of the KV pool as the scheduler counts them: at the full layers' bytes per token, plus the window
        layers' at `pool_context`'s mean (module docstring)."""
        per_token = self.kv_bytes_per_token
        if self.window_kv_bytes_per_token:
            c = self.pool_context
            if c is None:
                per_token += self.window_kv_bytes_per_token
            else:
                per_token = self.sequence_kv_bytes(c, self.window_held_tokens) / c
        return int(self.kv_cache_gb * 1e9 // per_token)

    def sequence_kv_bytes(self, context_tokens: int, window_tokens: int) -> float:
        """One sequence's KV at `context_tokens`: every token in the full layers, at most `window_tokens` in the
        window layers."""
        window = min(context_tokens, window_tokens) * self.window_kv_bytes_per_token
        return context_tokens * self.kv_bytes_per_token + window

    def _batch_kv_bytes(self, batch_size: int, context_tokens: int) -> float:
        """The KV of `batch_size` sequences of `context_tokens` at vLLM's startup bound for the window layers."""
        window = batch_size * min(context_tokens, self.window_startup_tokens) * self.window_kv_bytes_per_token
        return batch_size * context_tokens * self.kv_bytes_per_token + window

    def max_concurrent_seqs(self, context_tokens: int) -> int:
        """Sequences of `context_tokens` whose KV cache fits at once."""
        return self.kv_cache_tokens // max(1, context_tokens)

    @property
    def load_peak_gb(self) -> float:
        """Per device while the engine loads the weights: the weights as loaded plus the runtime."""
        return max(self.load_gb, self.weights_gb) + self.runtime_overhead_gb

    def needed_gb(self, batch_size: int, context_tokens: int) -> float:
        """The larger of the load peak and the fixed memory plus the KV cache of `batch_size` x `context_tokens`."""
        serving = self.fixed_gb + self._batch_kv_bytes(batch_size, context_tokens) / 1e9
        return max(serving, self.load_peak_gb)

    @property
    def _state_words(self) -> str:
        return f" + recurrent state {self.state_gb:.2f}" if self.state_gb else ""

    def shortfall(self, batch_size: int, context_tokens: int) -> str | None:
        """Why `batch_size` sequences of `context_tokens` do not fit, with the numbers; None when they do."""
        if self.load_gb > self.weights_gb and self.load_peak_gb > self.usable_gb:
            return (
                f"needs {self.load_peak_gb:.2f} GB per device while loading (the engine holds the weights at "
                f"{self.load_gb:.2f} GB before quantizing them to {self.weights_gb:.2f} GB, + runtime "
                f"{self.runtime_overhead_gb:.2f}), {self.usable_gb:.1f} GB usable"
            )
        need = self.needed_gb(batch_size, context_tokens)
        if need <= self.usable_gb:
            return None
        kv = self._batch_kv_bytes(batch_size, context_tokens) / 1e9
        return (
            f"needs {need:.2f} GB per device (weights {self.weights_gb:.2f} + activations {self.activation_gb:.2f} "
            f"+ runtime {self.runtime_overhead_gb:.2f}{self._state_words} + KV {kv:.2f} "
            f"for {batch_size} x {context_tokens} tokens"
            f"{' in fp8' if self.kv_cache_dtype == 'fp8' else ''}), {self.usable_gb:.1f} GB usable"
        )


def per_device_kv(shape: ModelShape, kv_bytes: float, tensor_parallel: int, *, windowed: bool = False) -> float:
    """One device's share of `kv_bytes` (of the window layers where `windowed`: Gemma-4's have their own KV heads):
    KV heads are split across devices; with more devices than KV heads each keeps a replica of one. MLA's latent is
    one per token, so every tensor-parallel rank keeps all of it (``attention.py``)."""
    if shape.latent_kv:
        return kv_bytes
    kv_heads = shape.widths(windowed=windowed)[0]
    heads_per_device = -(-kv_heads // tensor_parallel)  # ceil
    return kv_bytes * heads_per_device / kv_heads


def kv_bytes_per_token_per_device(shape: ModelShape, kv_cache_dtype: str, tensor_parallel: int) -> float:
    """Every attention layer's KV per token on one device (``per_device_kv``, each layer kind's heads split apart)."""
    dtype = kv_dtype_bytes(kv_cache_dtype)
    if shape.per_kind_widths:
        full = per_device_kv(shape, shape.full_kv_bytes_per_token(dtype), tensor_parallel)
        return full + per_device_kv(shape, shape.window_kv_bytes_per_token(dtype), tensor_parallel, windowed=True)
    return per_device_kv(shape, shape.kv_bytes_per_token(dtype), tensor_parallel)


def window_held_tokens(shape: ModelShape, new_tokens: int, block_size: int = 16) -> int:
    """Most tokens a window layer holds for one sequence computing `new_tokens` at once: the ``window - 1`` before
    them, them, and a block (the window need not start at a block's edge; module docstring). 0 without windows."""
    return shape.window - 1 + new_tokens + block_size if shape.window else 0


def activation_bytes(shape: ModelShape, *, batched_tokens: int, running_seqs: int, tensor_parallel: int) -> float:
    """Peak activation workspace of one forward: MLP gate+up outputs and four hidden-state
    copies for the token budget (16-bit), plus fp32 logits and probabilities per running sequence."""
    per_token = (2 * shape.mlp_activation_width / tensor_parallel + 4 * shape.hidden) * 2.0
    logits = 2 * running_seqs * shape.vocab * 4.0
    return batched_tokens * per_token + logits


def plan_memory(
    shape: ModelShape,
    method: Scheme,
    *,
    device_gb: float,
    memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    tensor_parallel: int = 1,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    kv_cache_dtype: str = "auto",
    runtime_overhead_gb: float = RUNTIME_OVERHEAD_GB,
    load_bits_per_weight: float | None = None,
    pool_context: int | None = None,
) -> MemoryPlan:
    """The per-device memory plan of `method` on a device of `device_gb`, sharded `tensor_parallel` ways.

    `load_bits_per_weight`: the bits the serving engine holds each linear weight at while loading,
    when more than `method.bits_per_weight` (None: it loads what it serves). `pool_context`: the sequence length the
    window layers' share of the KV pool is counted at (module docstring; None: every layer per token).
    """
    tp = tensor_parallel
    dtype = kv_dtype_bytes(kv_cache_dtype)
    windowed = bool(shape.window)
    kv_per_token = (
        per_device_kv(shape, shape.full_kv_bytes_per_token(dtype), tp)
        if windowed
        else kv_bytes_per_token_per_device(shape, kv_cache_dtype, tp)
    )
    body_params = shape.per_gpu_params(shape.body_params, tp)
    body = body_params * method.bits_per_weight / 8.0
    lm_head = shape.lm_head_params * 2.0 / tp  # vocab-parallel in TP engines
    embeddings = shape.embedding_params * 2.0 / tp  # 0 when tied to the lm_head (one matrix)
    loaded_body = body if load_bits_per_weight is None else body_params * load_bits_per_weight / 8.0
    return MemoryPlan(
        device_gb=device_gb,
        usable_gb=device_gb * memory_utilization,
        weights_gb=(body + lm_head + embeddings) / 1e9,
        activation_gb=activation_bytes(
            shape, batched_tokens=max_num_batched_tokens, running_seqs=max_num_seqs, tensor_parallel=tp
        )
        / 1e9,
        runtime_overhead_gb=runtime_overhead_gb,
        kv_bytes_per_token=kv_per_token,
        tensor_parallel=tp,
        kv_cache_dtype=kv_cache_dtype,
        load_gb=(loaded_body + lm_head + embeddings) / 1e9,
        state_gb=max_num_seqs * shape.state_bytes_per_seq(tp) / 1e9,
        window_kv_bytes_per_token=(
            per_device_kv(shape, shape.window_kv_bytes_per_token(dtype), tp, windowed=True) if windowed else 0.0
        ),
        window_held_tokens=window_held_tokens(shape, 1),
        window_startup_tokens=window_held_tokens(shape, max_num_batched_tokens),
        pool_context=pool_context,
    )


@dataclass(frozen=True, slots=True)
class MemoryFit:
    """What a candidate needs per device against what the engine may use there, in GB.

    ``needed_gb`` counts the KV cache of what must fit at once: one request on a catalog GPU
    (the scheduler caps concurrency at the KV cache), the whole batch on the local device
    (the probe really runs it).
    """

    needed_gb: float
    available_gb: float

    @property
    def constraint(self) -> float:
        """> 0 when the candidate does not fit (the fraction it is over)."""
        return self.needed_gb / self.available_gb - 1.0


def kv_cache_tokens(
    shape: ModelShape,
    method: Scheme,
    accel: Accelerator,
    *,
    tensor_parallel: int = 1,
    memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    kv_cache_dtype: str = "auto",
    pool_context: int | None = None,
) -> int:
    """Tokens of KV cache that fit per replica of `accel` beside weights, activations and runtime: the
    ``kv_cache_tokens`` of a :class:`SchedulerConfig` on a catalog accelerator (`pool_context`: ``plan_memory``'s)."""
    return plan_memory(
        shape,
        method,
        device_gb=accel.device_memory_gb,
        memory_utilization=memory_utilization,
        tensor_parallel=tensor_parallel,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        kv_cache_dtype=kv_cache_dtype,
        pool_context=pool_context,
    ).kv_cache_tokens
