"""The datasheet rates of one serving configuration, worked out once for every step-cost model that reads them.

A step's time, in either step-cost model, comes from the same few figures of its configuration (model shape,
scheme, GPU, tensor-parallel degree, KV-cache dtype): the GPU's memory bandwidth and tensor-core peaks, and
what one GPU streams and multiplies per token, per sequence and per KV token. The roofline
(``cost.RooflineStepCost``) divides them by its assumed efficiencies; the calibrated features
(``features.StepFeatures``) turn them into datasheet seconds for the fitted coefficients. Both read them from
one :class:`StepRates`, so the two models cannot disagree on what a configuration is, and a rate changes in
one place.

The simulator prices millions of steps per search, so the rates are plain float attributes computed at
construction: a step reads them without calling anything. Only a step whose touched weights depend on its
tokens (a MoE model's experts, bitsandbytes 4-bit dequantizing above one token) calls
:meth:`StepRates.weight_bytes_at`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.perf.model.memory import (
    kv_bytes_per_token_per_device,
    kv_dtype_bytes,
    per_device_kv,
    weight_bytes_per_gpu,
)
from recommender.perf.step.kernels import compute_dtype, dequantizes_to_16bit

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme

__all__ = ["MLA_DECODE_TILE_ROWS", "StepRates", "mla_decode_row_padding"]

#: Query rows one tensor-core tile of MLA's absorbed decode kernel computes: the heads (x query tokens) sharing the
#: latent are the MMA's M dimension, tiled by 64 (deepseek-ai/FlashMLA ``csrc/kernels/traits.h`` @ 00b3c0e8:
#: ``BLOCK_SIZE_M = 64``, the QK^T MMA ``BLOCK_SIZE_M x PAGE_BLOCK_SIZE x HEAD_DIM_K``; Hopper's warpgroup MMA has
#: M = 64, PTX ISA ``wgmma.mma_async`` shapes ``.m64nNk16``). Fewer heads on a GPU leave rows of the tile empty,
#: computed all the same.
MLA_DECODE_TILE_ROWS = 64


def mla_decode_row_padding(shape: ModelShape, tensor_parallel: int) -> float:
    """How many times its own heads' FLOPs a GPU's MLA decode computes: a 64-row tile holds ``heads / tp`` of them
    (DeepSeek-V3 at TP 8: 16 heads, 4x; at TP 2 or attention data parallelism: 1). 1 for any other attention."""
    if not shape.latent_kv:
        return 1.0
    return max(1.0, MLA_DECODE_TILE_ROWS / (shape.n_heads / tensor_parallel))


@dataclass(frozen=True, slots=True)
class StepRates:
    """One configuration's rates at the GPU's datasheet figures, every per-GPU figure divided by `tensor_parallel`.

    Args:
        shape: the model.
        scheme: the quantization scheme (its weight bytes and the dtype it computes in).
        accel: the catalog GPU.
        tensor_parallel: GPUs a layer is split over.
        kv_cache_dtype: the KV width a step reads (the cache's, or 16-bit where an engine release's decode
            attention reads it so: ``features.StepFeatures.kv_read_at_cache_width``).

    Attributes (computed):
        bandwidth: memory bandwidth, bytes/s.
        peak: tensor-core peak of the dtype the scheme computes in on this GPU (``kernels.compute_dtype``), FLOP/s.
        peak16: the 16-bit tensor-core peak (bf16 where the GPU has it, else fp16), FLOP/s.
        weight_bytes: the weights one GPU streams in a step, bytes (all of them; see ``weights_vary``).
        weights_vary: whether the weights a step touches depend on its tokens (``weight_bytes_at``).
        body_flops_per_token: linear-layer FLOPs per token (a MoE model's active experts), lm_head excluded.
        head_flops_per_seq: lm_head FLOPs per sequence in the step (it samples one token each).
        attention_flops: prefill attention FLOPs per (query token x key token).
        decode_attention_flops: decode attention FLOPs per KV token read (MLA decodes absorbed).
        kv_bytes_per_token: KV-cache bytes per context token one GPU reads at ``kv_cache_dtype`` (DSA: its indexer's
            keys, replicated like the indexer's FLOPs, which are not split by `tensor_parallel`).
        query_attention_flops: attention FLOPs per query token whatever the context (DSA's top-k; the window layers'
            ``window`` keys; else 0).
        query_kv_bytes: KV bytes one query token gathers (DSA's top-k latents; else 0).
        recurrent_flops_per_token: a hybrid's recurrent layers' state FLOPs per token (else 0).
        state_bytes_per_seq: a hybrid's recurrent state of one sequence on one GPU (else 0).
        window_kv_bytes_per_seq: the window layers' ``window`` cached tokens one sequence reads in a step on one GPU
            (else 0); with window layers, ``kv_bytes_per_token``, ``attention_flops`` and
            ``decode_attention_flops`` count the full-attention layers only.
    """

    shape: ModelShape = field(repr=False)
    scheme: Scheme = field(repr=False)
    accel: Accelerator = field(repr=False)
    tensor_parallel: int = 1
    kv_cache_dtype: str = "auto"
    bandwidth: float = field(init=False)
    peak: float = field(init=False)
    peak16: float = field(init=False)
    weight_bytes: float = field(init=False)
    weights_vary: bool = field(init=False)
    body_flops_per_token: float = field(init=False)
    head_flops_per_seq: float = field(init=False)
    attention_flops: float = field(init=False)
    decode_attention_flops: float = field(init=False)
    kv_bytes_per_token: float = field(init=False)
    query_attention_flops: float = field(init=False)
    query_kv_bytes: float = field(init=False)
    recurrent_flops_per_token: float = field(init=False)
    state_bytes_per_seq: float = field(init=False)
    window_kv_bytes_per_seq: float = field(init=False)

    def __post_init__(self) -> None:
        tp, shape, scheme, accel = self.tensor_parallel, self.shape, self.scheme, self.accel
        if tp < 1:
            raise ValueError(f"tensor_parallel must be >= 1, got {tp}")
        values = {
            "bandwidth": accel.memory_bandwidth_gbps * 1e9,
            "peak": accel.peak_flops(compute_dtype(scheme, accel)),
            "peak16": accel.peak_flops("bf16" if "bf16" in accel.peak_tflops else "fp16"),
            "weight_bytes": weight_bytes_per_gpu(shape, scheme, tp),
            # MoE experts touched and bnb 4-bit dequantization depend on the step's tokens.
            "weights_vary": shape.moe is not None or dequantizes_to_16bit(scheme, 2),
            "body_flops_per_token": 2.0 * shape.per_gpu_params(shape.active_body_params, tp),
            "head_flops_per_seq": 2.0 * shape.lm_head_params / tp,
            "attention_flops": shape.attention_flops(1, 1) / tp,
            "decode_attention_flops": shape.decode_attention_flops(1, 1) / tp * mla_decode_row_padding(shape, tp),
            "kv_bytes_per_token": kv_bytes_per_token_per_device(shape, self.kv_cache_dtype, tp),
            "query_attention_flops": 0.0,
            "query_kv_bytes": 0.0,
            "recurrent_flops_per_token": shape.recurrent_flops_per_token / tp,
            "state_bytes_per_seq": shape.state_bytes_per_seq(tp),
            "window_kv_bytes_per_seq": 0.0,
        }
        if (
            shape.sliding_window and not shape.latent_kv
        ):  # window layers: their keys per query and per sequence, not per pair
            dtype = kv_dtype_bytes(self.kv_cache_dtype)
            values["attention_flops"] = values["decode_attention_flops"] = shape.full_pair_attention_flops(1, 1) / tp
            values["kv_bytes_per_token"] = per_device_kv(shape, shape.full_kv_bytes_per_token(dtype), tp)
            values["query_attention_flops"] = shape.window_query_attention_flops(1) / tp
            values["window_kv_bytes_per_seq"] = shape.sliding_window * per_device_kv(
                shape, shape.window_kv_bytes_per_token(dtype), tp, windowed=True
            )
        if shape.sparse is not None:  # DSA: the indexer whole on every GPU, the top-k MLA split by heads
            dtype = kv_dtype_bytes(self.kv_cache_dtype)
            values["attention_flops"] = values["decode_attention_flops"] = shape.pair_attention_flops(1, 1)
            values["kv_bytes_per_token"] = shape.kv_read_bytes_per_token(dtype)
            values["query_attention_flops"] = shape.query_attention_flops(1) / tp * mla_decode_row_padding(shape, tp)
            values["query_kv_bytes"] = shape.query_kv_bytes(dtype)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def weight_bytes_at(self, tokens: int) -> float:
        """The weights one GPU streams in a step of `tokens` tokens, bytes."""
        if not self.weights_vary:
            return self.weight_bytes
        return weight_bytes_per_gpu(self.shape, self.scheme, self.tensor_parallel, tokens)
