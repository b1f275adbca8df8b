"""A first roofline projection of step times on catalog accelerators.

Decode streams every weight once per step, so its time is bytes moved over memory
bandwidth unless the batch is large enough to be compute-bound; prefill is FLOPs over
peak compute. Each bound is divided by an efficiency (the fraction of the datasheet
peak real kernels reach) and a fixed per-step overhead is added (scheduling, kernel
launches). These efficiencies are *assumed* defaults here, not fitted: every figure
from this module is labelled ``modeled`` with the catalog entry and these assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.perf.catalog import Accelerator
from recommender.perf.memory import kv_bytes_per_token_per_device, weight_bytes
from recommender.perf.shape import ModelShape
from recommender.provenance import Provenance
from recommender.quantize import QuantMethod


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


def compute_dtype(method: QuantMethod, accel: Accelerator) -> str:
    """The precision whose tensor-core peak bounds `method`'s compute on `accel`.

    W8A8 methods use their precision's tensor cores where native; weight-only ones compute in 16-bit.
    """
    if not method.weight_only and method.precision in accel.native_precisions:
        return method.precision
    return "bf16" if "bf16" in accel.peak_tflops else "fp16"


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
    method: QuantMethod,
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
    weights = weight_bytes(shape, method) / tp
    linear_params = (shape.body_params + shape.lm_head_params) / tp

    prefill_flops = 2.0 * prompt_tokens * linear_params + shape.attention_flops(prompt_tokens, prompt_tokens) / tp
    prefill_s = max(prefill_flops / compute, weights / bandwidth) + eff.step_overhead_s
    prefill_s += allreduce_seconds(shape, accel, prompt_tokens, tp, eff)

    kv = batch_size * context_tokens * kv_bytes_per_token_per_device(shape, kv_cache_dtype, tp)
    decode_flops = 2.0 * batch_size * linear_params + shape.attention_flops(batch_size, context_tokens) / tp
    decode_s = max(decode_flops / compute, (weights + kv) / bandwidth) + eff.step_overhead_s
    decode_s += allreduce_seconds(shape, accel, batch_size, tp, eff)

    return StepTimes(prefill_s=prefill_s, decode_step_s=decode_s, provenance=roofline_provenance(accel, eff))


def roofline_provenance(accel: Accelerator, efficiency: Efficiency) -> Provenance:
    """Roofline figures are modeled: the catalog entry and the assumed efficiencies say how."""
    return Provenance("modeled", f"roofline on catalog entry {accel.key}, {efficiency.label()}")
