"""A first roofline projection of step times on catalog accelerators.

Decode streams every weight once per step, so its time is bytes moved over memory
bandwidth unless the batch is large enough to be compute-bound; prefill is FLOPs over
peak compute. The linear layers' FLOPs count the parameters a token multiplies (a MoE model's
active experts), their bytes the weights the step touches at the scheme's real traffic
(``kernels.py``), and the lm_head runs once per sequence (the token it samples from), not once
per prompt token. Each bound is divided by an efficiency (the fraction of the datasheet
peak real kernels reach) and a fixed per-step overhead is added (scheduling, kernel
launches). These efficiencies are *assumed* defaults here, not fitted: every figure
from this module is labelled ``modeled`` with the catalog entry and these assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.perf.catalog.gpus import Accelerator
from recommender.perf.model.memory import kv_bytes_per_token_per_device, weight_bytes_per_gpu
from recommender.perf.model.shape import ModelShape
from recommender.perf.scheme import Scheme
from recommender.perf.step.kernels import compute_dtype, kernel_note, linear_time_factor
from recommender.perf.step.rates import StepRates
from recommender.provenance import Provenance

__all__ = [
    "Efficiency",
    "StepTimes",
    "allreduce_seconds",
    "compute_dtype",
    "linear_flops",
    "project_step_times",
    "roofline_provenance",
]


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fractions of datasheet peaks reached in practice, and the per-step overhead.

    Defaults are round assumptions (decode GEMVs commonly reach 60-80 % of HBM
    bandwidth; large GEMMs 50-70 % of tensor-core peak); the calibration of issue 4
    replaces them with fitted values.
    """

    bandwidth: float = 0.7
    compute: float = 0.5
    step_overhead_s: float = 1.0e-3
    allreduce_latency_s: float = 10e-6

    def label(self) -> str:
        return (
            f"assumed efficiencies: bandwidth {self.bandwidth:.0%}, compute {self.compute:.0%}, "
            f"overhead {self.step_overhead_s * 1e3:.1f} ms/step"
        )


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Prefill time of one prompt and decode time of one step at a batch size, in seconds."""

    prefill_s: float
    decode_step_s: float
    provenance: Provenance


def allreduce_seconds(shape: ModelShape, accel: Accelerator, tokens: int, tp: int, eff: Efficiency) -> float:
    """Two ring all-reduces per layer of the tokens' hidden states (bf16); 0 without tensor parallelism.

    Affine in `tokens`, which lets a step-cost model precompute its intercept and slope.
    """
    if tp == 1:
        return 0.0
    message = tokens * shape.hidden * 2.0
    per = message * 2 * (tp - 1) / tp / (accel.interconnect.bandwidth_gbps * 1e9) + eff.allreduce_latency_s
    return 2 * shape.n_layers * per


def project_step_times(
    shape: ModelShape,
    method: Scheme,
    accel: Accelerator,
    *,
    prompt_tokens: int,
    batch_size: int,
    context_tokens: int,
    tensor_parallel: int = 1,
    kv_cache_dtype: str = "auto",
    efficiency: Efficiency | None = None,
) -> StepTimes:
    """Roofline prefill (one prompt) and decode (one step of `batch_size` sequences)."""
    eff = efficiency or Efficiency()
    tp = tensor_parallel
    bandwidth = accel.memory_bandwidth_gbps * 1e9 * eff.bandwidth
    compute = accel.peak_flops(compute_dtype(method, accel)) * eff.compute
    slower = linear_time_factor(method)

    prefill_flops = (linear_flops(shape, prompt_tokens, 1) + shape.attention_flops(prompt_tokens, prompt_tokens)) / tp
    prefill_bytes = weight_bytes_per_gpu(shape, method, tp, prompt_tokens)
    prefill_s = slower * max(prefill_flops / compute, prefill_bytes / bandwidth) + eff.step_overhead_s
    prefill_s += allreduce_seconds(shape, accel, prompt_tokens, tp, eff)

    kv = batch_size * context_tokens * kv_bytes_per_token_per_device(shape, kv_cache_dtype, tp)
    if shape.sparse is not None or shape.recurrent is not None or shape.sliding_window:  # DSA's indexer keys + top-k;
        r = StepRates(shape, method, accel, tp, kv_cache_dtype)  # hybrids' state; the window layers' window
        kv = batch_size * (context_tokens * r.kv_bytes_per_token + r.query_kv_bytes + 2.0 * r.state_bytes_per_seq)
        kv += batch_size * r.window_kv_bytes_per_seq
    b = batch_size
    decode_flops = (linear_flops(shape, b, b) + shape.attention_flops(b, context_tokens)) / tp
    decode_bytes = weight_bytes_per_gpu(shape, method, tp, batch_size) + kv
    decode_s = slower * max(decode_flops / compute, decode_bytes / bandwidth) + eff.step_overhead_s
    decode_s += allreduce_seconds(shape, accel, batch_size, tp, eff)

    return StepTimes(prefill_s=prefill_s, decode_step_s=decode_s, provenance=roofline_provenance(accel, eff, method))


def linear_flops(shape: ModelShape, tokens: int, sampled: int) -> float:
    """FLOPs of the linear layers for `tokens` tokens of which `sampled` run the lm_head (whole model, no TP)."""
    return 2.0 * (tokens * shape.active_body_params + sampled * shape.lm_head_params)


def roofline_provenance(accel: Accelerator, efficiency: Efficiency, method: Scheme | None = None) -> Provenance:
    """Roofline figures are modeled: the catalog entry, the assumed efficiencies and any kernel assumption say how."""
    note = "" if method is None else kernel_note(method)
    return Provenance(
        "modeled", f"roofline on catalog entry {accel.key}, {efficiency.label()}" + (f"; {note}" if note else "")
    )
