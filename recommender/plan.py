"""Projection for an architecture without its weights: every catalog GPU x precision, modeled.

`recommender plan` answers "what would serving this model cost?" before anything is
downloaded: the memory model says what fits at which tensor-parallel degree, the
continuous-batching simulator on calibrated step costs says how much traffic one replica
carries within the SLA, one named price set (or a contract price) prices it. Quality is *not* measured here: each
precision carries a labelled prior and the verdict "unverified" until `recommender eval`
or `recommender search` measures it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from recommender.candidate import DEFAULT_MAX_BATCHED_TOKENS, Candidate, CandidateResult
from recommender.emit.support import eligibility
from recommender.perf.catalog import Accelerator, Catalog
from recommender.perf.memory import plan_memory
from recommender.perf.shape import ModelShape
from recommender.performance import PerformanceEvaluator
from recommender.provenance import Provenance
from recommender.quantize import QuantMethod, get_method
from recommender.serialization import dumps, list_to_data
from recommender.spec import LatencySLA, Traffic

#: The serving scheme `plan` projects for each precision, and the one it falls back to where no engine
#: launches the first on the GPU (16-bit: fp16 on GPUs without bf16; fp8: none — a GPU without FP8 W8A8
#: kernels is refused, not modeled with weight-only FP8 Marlin numerics nobody measured).
PLAN_METHODS: dict[str, tuple[str, str]] = {
    "bf16": ("baseline", "fp16"),
    "fp8": ("fp8-dynamic", "fp8-dynamic"),
    "int8": ("int8-w8a8", "int8-w8a8"),
    "int4": ("w4a16-gptq-g128", "w4a16-gptq-g128"),
}

#: Labelled priors, not measurements. Summary of "Give Me BF16 or Give Me Death?" (Kurtic et al.,
#: arXiv 2411.02355) as quoted in the project's reference notes; not yet checked against the
#: paper's own tables.
QUALITY_PRIORS: dict[str, str] = {
    "bf16": "reference",
    "fp8": "prior: near-lossless (W8A8 FP8, arXiv 2411.02355)",
    "int8": "prior: 1-3 % loss when tuned (W8A8 INT8, arXiv 2411.02355)",
    "int4": "prior: task-dependent loss, competitive with INT8 W8A8 (weight-only, arXiv 2411.02355)",
}


@dataclass(frozen=True, slots=True)
class PlanRow:
    """The cheapest modeled configuration of one GPU at one precision, or why there is none."""

    hardware: str
    precision: str
    method: str
    tensor_parallel: int | None
    batch_size: int | None
    usd_per_1m_tokens: float | None
    replicas: int | None
    usd_per_month: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    max_rps_per_replica: float | None
    weights_gb_per_gpu: float | None
    quality: str
    quality_verdict: str
    note: str
    provenance: Provenance | None
    #: The named price set (or "hardware_catalog" contract price) the row's dollars come from; "" when unpriced.
    price_set: str = ""
    #: The engine the latencies are calibrated for, and the upper ends of their P99 intervals (SLA confidence).
    engine: str = ""
    ttft_p99_high_ms: float | None = None
    tpot_p99_high_ms: float | None = None


def _method_for(precision: str, accel: Accelerator) -> QuantMethod:
    native, fallback = PLAN_METHODS[precision]
    method = get_method(native)
    return method if eligibility(method, accel.device).launchable else get_method(fallback)


def _tensor_parallel_degrees(accel: Accelerator) -> list[int]:
    degrees, tp = [], 1
    while tp <= accel.max_tensor_parallel:
        degrees.append(tp)
        tp *= 2
    return degrees


def _row(
    performance: PerformanceEvaluator, accel: Accelerator, precision: str, method: QuantMethod, note: str,
    tp: int | None = None, result: CandidateResult | None = None,
) -> PlanRow:  # fmt: skip
    empty = result is None or result.serving is None or result.cost is None
    serving, cost = (None, None) if result is None else (result.serving, result.cost)
    return PlanRow(
        hardware=accel.key, precision=precision, method=method.name, tensor_parallel=tp,
        batch_size=None if empty or result is None else result.candidate.batch_size,
        usd_per_1m_tokens=cost.usd_per_1m_tokens if cost else None, replicas=cost.replicas if cost else None,
        usd_per_month=cost.usd_per_month if cost else None,
        ttft_p99_ms=serving.ttft_ms.p99 if serving and cost else None,
        tpot_p99_ms=serving.tpot_ms.p99 if serving and cost else None,
        max_rps_per_replica=serving.requests_per_s if serving and cost else None,
        weights_gb_per_gpu=None if empty or tp is None else weights_gb(performance.shape, method, tp),
        quality=QUALITY_PRIORS[precision], quality_verdict="reference" if precision == "bf16" else "unverified",
        note=note, provenance=serving.provenance if serving and cost else None,
        price_set=cost.price_set if cost else "",
        engine=serving.engine if serving and cost else "",
        ttft_p99_high_ms=serving.ttft_p99_high_ms if serving and cost else None,
        tpot_p99_high_ms=serving.tpot_p99_high_ms if serving and cost else None,
    )  # fmt: skip


def plan_one(
    shape: ModelShape, accel: Accelerator, precision: str, *, traffic: Traffic, sla: LatencySLA,
    batch_sizes: list[int], kv_cache_dtype: str = "auto", catalog: Catalog | None = None,
) -> PlanRow:  # fmt: skip
    """The cheapest (tensor-parallel degree, batch size) among the degrees that hold one request.

    Every degree that fits is priced, not only the smallest: a model that barely fits one GPU leaves it
    a sliver of KV cache, and two GPUs with room for a full batch can cost less per month (Llama-3.1-70B
    in FP8 on one 85.5 GB H100: 29 replicas; on two: 2). Ties go to the smaller degree. Every figure
    comes from the search's own `PerformanceEvaluator` (memory plan, step cost, simulation, price), so
    `plan` and `search` agree on any catalog candidate.
    """
    catalog = catalog or Catalog(accelerators={accel.key: accel}, source="plan")
    performance = PerformanceEvaluator(catalog, shape, traffic, sla)
    method = _method_for(precision, accel)
    served = eligibility(method, accel.device, performance.engines)
    if not served.launchable:
        return _row(performance, accel, precision, method, f"refused: {served.reason(accel.key)}")
    unpriced = catalog.price_refusal(accel.key) if accel.key in catalog.accelerators else None
    if unpriced is not None:
        return _row(performance, accel, precision, method, f"not priced: {unpriced}")
    refusal, smallest_fit, priced = "", None, []
    for tp in _tensor_parallel_degrees(accel):
        results = [
            performance.evaluate(Candidate(precision, method.name, accel.key, b, tp, DEFAULT_MAX_BATCHED_TOKENS,
                                           kv_cache_dtype))  # fmt: skip
            for b in batch_sizes
        ]
        fitting = [r for r in results if r.status == "evaluated"]
        if not fitting:
            refusal = "; ".join(results[0].broken).removeprefix("memory: ") if results else refusal  # the widest's
            continue
        smallest_fit = smallest_fit or tp
        priced += [(r.cost.usd_per_month, tp, r.cost.usd_per_1m_tokens, r) for r in fitting if r.cost is not None]
    if priced:
        _, tp, _, cheapest = min(priced, key=lambda t: t[:3])
        return _row(performance, accel, precision, method, "", tp, cheapest)
    if smallest_fit is not None:
        return _row(performance, accel, precision, method, "SLA not met even by a lone request", smallest_fit)
    return _row(performance, accel, precision, method, f"does not fit on {accel.max_tensor_parallel} GPUs: {refusal}")


def weights_gb(shape: ModelShape, method: QuantMethod, tensor_parallel: int) -> float:
    return plan_memory(shape, method, device_gb=0.0, tensor_parallel=tensor_parallel).weights_gb


def plan(
    shape: ModelShape, catalog: Catalog, *, hardware: list[str], precisions: list[str], traffic: Traffic,
    sla: LatencySLA, batch_sizes: list[int], kv_cache_dtype: str = "auto",
    on_row: Callable[[str], None] | None = None,
) -> list[PlanRow]:  # fmt: skip
    """Every (GPU, precision) pair, cheapest per month at the traffic first (then per token, as the search
    ranks); rows without a price last. `on_row` hears each pair's "gpu/precision" once it is planned (a
    progress bar: each pair is up to four tensor-parallel degrees x the batch sizes of simulations)."""
    rows = []
    for hw in hardware:
        accel = catalog.get(hw, field="--hardware")
        for p in precisions:
            rows.append(plan_one(shape, accel, p, traffic=traffic, sla=sla, batch_sizes=batch_sizes,
                                 kv_cache_dtype=kv_cache_dtype, catalog=catalog))  # fmt: skip
            if on_row is not None:
                on_row(f"{hw}/{p}")
    return sorted(rows, key=lambda r: (r.usd_per_month is None, r.usd_per_month or 0.0, r.usd_per_1m_tokens or 0.0))


def rows_to_json(rows: list[PlanRow]) -> str:
    return dumps(list_to_data(rows))
