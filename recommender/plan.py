"""Projection for an architecture without its weights: every catalog GPU x precision, modeled.

`recommender plan` answers "what would serving this model cost?" before anything is
downloaded: the memory model says what fits at which tensor-parallel degree, the
continuous-batching simulator on roofline step costs says how much traffic one replica
carries within the SLA, the catalog prices it. Quality is *not* measured here: each
precision carries a labelled prior and the verdict "unverified" until `recommender eval`
or `recommender search` measures it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

from recommender.cost import estimate_cost
from recommender.errors import BadInputError
from recommender.perf.catalog import Accelerator, Catalog
from recommender.perf.memory import MemoryPlan, plan_memory
from recommender.perf.serving import DEFAULT_MAX_BATCHED_TOKENS, simulate_serving
from recommender.perf.shape import ModelShape
from recommender.perf.simulator import RooflineStepCost, SchedulerConfig
from recommender.quantize import QuantMethod, get_method
from recommender.spec import LatencySLA, Traffic

ARCHITECTURES = Path(__file__).parent / "perf" / "architectures"
GPU_MEMORY_UTILIZATION = 0.9

#: The method `plan` projects for each precision: W8A8 where the GPU computes it, else weight-only.
PLAN_METHODS: dict[str, tuple[str, str]] = {
    "bf16": ("baseline", "baseline"),
    "fp8": ("torchao-float8-dynamic", "torchao-float8-wo"),
    "int8": ("torchao-int8-dynamic", "torchao-int8-wo"),
    "int4": ("torchao-int4-wo-g128", "torchao-int4-wo-g128"),
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


def known_architectures() -> list[str]:
    return sorted(p.stem for p in ARCHITECTURES.glob("*.json"))


def load_architecture(model: str) -> tuple[str, ModelShape]:
    """A shipped architecture name, a config.json path, or a model directory -> (name, shape)."""
    shipped = ARCHITECTURES / f"{model}.json"
    path = Path(model)
    if shipped.is_file():
        path = shipped
    elif path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise BadInputError(
            "--model", f"no architecture {model!r}",
            f"pass a config.json, a model directory, or one of {', '.join(known_architectures())}",
        )  # fmt: skip
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        return config.get("_name", path.parent.name), ModelShape.from_config(SimpleNamespace(**config))
    except (json.JSONDecodeError, AttributeError, TypeError) as exc:
        raise BadInputError("--model", f"{path} is not a decoder config: {exc}") from None


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
    provenance: str


def _method_for(precision: str, accel: Accelerator) -> QuantMethod:
    native, fallback = PLAN_METHODS[precision]
    method = get_method(native)
    return method if method.unavailable_reason(accel.device) is None else get_method(fallback)


def plan_one(
    shape: ModelShape, accel: Accelerator, precision: str, *, traffic: Traffic, sla: LatencySLA,
    batch_sizes: list[int],
) -> PlanRow:  # fmt: skip
    method = _method_for(precision, accel)
    base = dict(hardware=accel.key, precision=precision, method=method.name, quality=QUALITY_PRIORS[precision],
                quality_verdict="reference" if precision == "bf16" else "unverified")  # fmt: skip
    empty = dict(tensor_parallel=None, batch_size=None, usd_per_1m_tokens=None, replicas=None, usd_per_month=None,
                 ttft_p99_ms=None, tpot_p99_ms=None, max_rps_per_replica=None, weights_gb_per_gpu=None)  # fmt: skip
    reason = method.unavailable_reason(accel.device)
    if reason:
        return PlanRow(**base, **empty, note=f"refused: {reason}", provenance="")
    one_request = traffic.prompt_tokens + traffic.output_tokens

    def memory(tp: int, batch: int) -> MemoryPlan:
        return plan_memory(shape, method, device_gb=accel.memory_gb, memory_utilization=GPU_MEMORY_UTILIZATION,
                           tensor_parallel=tp, max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, batch),
                           max_num_seqs=batch)  # fmt: skip

    tp = 1
    while tp <= accel.max_tensor_parallel and memory(tp, 1).kv_cache_tokens < one_request:
        tp *= 2
    if tp > accel.max_tensor_parallel:
        why = memory(accel.max_tensor_parallel, 1).shortfall(1, one_request)
        return PlanRow(**base, **empty, note=f"does not fit on {accel.max_tensor_parallel} GPUs: {why}",
                       provenance="")  # fmt: skip
    best: PlanRow | None = None
    for batch in batch_sizes:
        plan_tp = memory(tp, batch)
        if plan_tp.kv_cache_tokens < one_request:
            continue
        config = SchedulerConfig(
            kv_cache_tokens=plan_tp.kv_cache_tokens,
            max_num_seqs=batch, max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, batch),
        )  # fmt: skip
        serving = simulate_serving(RooflineStepCost(shape, method, accel, tensor_parallel=tp), config,
                                   traffic=traffic, sla=sla)  # fmt: skip
        if serving.requests_per_s <= 0:
            continue
        cost = estimate_cost(
            price_per_hour_usd=accel.price_per_hour_usd, price_source=accel.price_source, tensor_parallel=tp,
            replica_tokens_per_s=serving.tokens_per_s, replica_requests_per_s=serving.requests_per_s,
            target_requests_per_s=traffic.requests_per_second,
        )  # fmt: skip
        row = PlanRow(
            **base, tensor_parallel=tp, batch_size=batch, usd_per_1m_tokens=cost.usd_per_1m_tokens,
            replicas=cost.replicas, usd_per_month=cost.usd_per_month, ttft_p99_ms=serving.ttft_ms,
            tpot_p99_ms=serving.tpot_ms, max_rps_per_replica=serving.requests_per_s,
            weights_gb_per_gpu=plan_tp.weights_gb,
            note="", provenance=serving.provenance,
        )  # fmt: skip
        if best is None or row.usd_per_1m_tokens < best.usd_per_1m_tokens:  # type: ignore[operator]
            best = row
    if best is None:
        return PlanRow(
            **base, **{**empty, "tensor_parallel": tp}, note="SLA not met even by a lone request", provenance=""
        )
    return best


def plan(
    shape: ModelShape, catalog: Catalog, *, hardware: list[str], precisions: list[str], traffic: Traffic,
    sla: LatencySLA, batch_sizes: list[int],
) -> list[PlanRow]:  # fmt: skip
    """Every (GPU, precision) pair, cheapest first; rows without a price last."""
    rows = [
        plan_one(shape, catalog.get(hw, field="--hardware"), p, traffic=traffic, sla=sla, batch_sizes=batch_sizes)
        for hw in hardware
        for p in precisions
    ]
    return sorted(rows, key=lambda r: (r.usd_per_1m_tokens is None, r.usd_per_1m_tokens or 0.0))


def rows_to_json(rows: list[PlanRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2)
