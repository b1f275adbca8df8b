"""Projection for an architecture without its weights: every catalog GPU x precision, modeled.

`recommender plan` answers "what would serving this model cost?" before anything is
downloaded: the memory model says what fits at which tensor-parallel degree, the
continuous-batching simulator on calibrated step costs says how much traffic one replica
carries within the SLA, one named price set (or a contract price) prices it. Quality is *not* measured here: each
precision carries a labelled prior and the verdict "unverified" until `recommender eval`
or `recommender search` measures it.

A GPU the price set does not price is still planned: its fit, latency and capacity do not depend on
a price, and they are what a user weighing a contract price needs. Only its dollar figures are
empty, with the reason (`PlanRow.unpriced`). Which configuration of one GPU is cheapest does not
depend on its price either (every figure scales with the same hourly rate), so an unpriced row
shows the configuration a price would pick. The search still never recommends such a GPU
(`PerformanceEvaluator.require_price`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS, Candidate, KVCacheDtype
from recommender.config.spec import LatencySLA, Traffic
from recommender.device import DeviceInfo
from recommender.engines import DEFAULT_ENGINES
from recommender.engines.eligibility import eligibility
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.launch import launch_commands
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_row import EmptyReason, PlanRow
from recommender.fleet.plan_scope import PlanScope, caps_evaluated
from recommender.fleet.row_processes import map_rows
from recommender.perf.catalog.gpus import Accelerator, Catalog
from recommender.perf.model.memory import plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.sim.capacity import replicas_needed
from recommender.perf.step.calibrated import CalibratedModel
from recommender.quantize import QuantScheme, get_scheme
from recommender.quantize.precisions import PRECISIONS
from recommender.serialization import dumps, list_to_data

if TYPE_CHECKING:
    from recommender.engines import EngineLaunch
    from recommender.perf.sim.routing import RoutingPolicy

#: The serving schemes `plan` projects for each precision family, in order (``quantize/precisions.py``).
PLAN_METHODS: dict[str, tuple[str, ...]] = {p.name: p.plan_schemes for p in PRECISIONS if p.plan_schemes}
#: Labelled priors, not measurements (``quantize/precisions.py``).
QUALITY_PRIORS: dict[str, str] = {p.name: p.prior for p in PRECISIONS if p.plan_schemes}


#: What an FP8 KV cache adds to a row's quality prior: unmeasured until its `+kv-fp8` scheme is evaluated.
FP8_KV_PRIOR = (
    "; FP8 KV cache: a prior (E4M3, per-tensor scale 1.0), unmeasured — `recommender eval` its "
    "{method}+kv-fp8 scheme to measure it"
)


def method_for(precision: str, device: DeviceInfo, engines: tuple[str, ...]) -> QuantScheme:
    """The first of `precision`'s plan schemes one of `engines` launches on `device`; the first one (refused, with
    its reason) where none does."""
    methods = [get_scheme(name) for name in PLAN_METHODS[precision]]
    return next((m for m in methods if eligibility(m, device, engines).launchable), methods[0])


def _row(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    precision: str,
    method: QuantScheme,
    note: str,
    result: CandidateResult | None = None,
    unpriced: str = "",
    empty: EmptyReason = "",
) -> PlanRow:
    """One row; `result` is the configuration shown (its capacity 0 when not even a lone request meets the SLA)."""
    kv = "auto" if result is None else result.candidate.kv_cache_dtype
    serving = None if result is None else result.serving
    return PlanRow(
        hardware=accel.key,
        precision=precision,
        method=method.name,
        result=result,
        target_rps=performance.traffic.requests_per_second,
        weights_gb_per_gpu=None
        if result is None
        else weights_gb(performance.shape, method, result.candidate.tensor_parallel),
        quality=QUALITY_PRIORS[precision] + (FP8_KV_PRIOR.format(method=method.name) if kv == "fp8" else ""),
        quality_verdict="reference" if precision == "bf16" and kv == "auto" else "unverified",
        note=note,
        unpriced=unpriced,
        physics_alarm=serving.physics_alarm_reason(performance.sla) if serving else "",
        empty=empty,
    )


def _gpu_rank(result: CandidateResult, target_rps: float) -> tuple[int, int, float]:
    """$/month, then the smaller degree, then $/1M tokens — counted in GPUs, so that it needs no price.

    On one GPU type both dollar figures are its hourly price times a price-free quantity (GPUs at
    the target traffic; GPUs per token/s at capacity), so ranking by those quantities picks what
    ranking by dollars would, for any price — and for a GPU the price set does not price.
    """
    assert result.serving is not None and result.serving.requests_per_s > 0
    tp = result.candidate.tensor_parallel
    gpus = replicas_needed(target_rps, result.serving.requests_per_s) * tp
    return gpus, tp, tp / result.serving.tokens_per_s


def _sla_overshoot(result: CandidateResult, sla: LatencySLA) -> float:
    """How far a lone request's checked P99s are over the SLA (the worse of the two, as a ratio)."""
    assert result.serving is not None
    s = result.serving
    return max(s.ttft_p99_checked_ms / sla.ttft_p99_ms, s.tpot_p99_checked_ms / sla.tpot_p99_ms)


def _fitting(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    precision: str,
    method: QuantScheme,
    scope: PlanScope,
) -> tuple[list[CandidateResult], str, dict[tuple[int, KVCacheDtype], str]]:
    """Every evaluated (degree, KV dtype, batch cap) that holds one request, why the widest degree that does not
    fit, and which batch caps the KV cache pruned at each (degree, KV dtype)."""
    fitting: list[CandidateResult] = []
    refusal, pruned = "", dict[tuple[int, KVCacheDtype], str]()
    for tp in scope.degrees(accel.max_tensor_parallel):
        for kv in scope.kv_cache_dtypes:

            def make(b: int, tp: int = tp, kv: KVCacheDtype = kv) -> Candidate:
                return Candidate(precision, method.name, accel.key, b, tp, DEFAULT_MAX_BATCHED_TOKENS, kv)

            results, caps_pruned = caps_evaluated(performance, scope, make)
            fits = [r for r in results if r.status == "evaluated"]
            if not fits and results and kv == scope.kv_cache_dtypes[0]:
                refusal = "; ".join(results[0].broken).removeprefix("memory: ")
            fitting += fits
            pruned[tp, kv] = caps_pruned
    return fitting, refusal, pruned


def plan_one(
    shape: ModelShape,
    accel: Accelerator,
    precision: str,
    *,
    traffic: Traffic,
    sla: LatencySLA,
    scope: PlanScope | None = None,
    catalog: Catalog | None = None,
    engines: tuple[str, ...] = DEFAULT_ENGINES,
    calibrated: CalibratedModel | None = None,
) -> PlanRow:
    """The cheapest (tensor-parallel degree, KV cache dtype, batch cap) among those that hold one request.

    Every degree that fits is ranked, not only the smallest: a model that barely fits one GPU leaves it
    a sliver of KV cache, and two GPUs with room for a full batch can cost less per month (Llama-3.1-70B
    in FP8 on one 85.5 GB H100: 29 replicas; on two: 2). Ties go to the smaller degree. Every figure
    comes from the search's own `PerformanceEvaluator` (memory plan, step cost, simulation, price), so
    `plan` and `search` agree on any catalog candidate; a GPU without a price gets every figure but the
    dollars. Where not even a lone request meets the SLA, the row shows the configuration closest to it
    with a lone request's P99s (how far off it is) and capacity 0. `scope` narrows what is tried (``plan_scope``);
    `calibrated` replaces the shipped step-cost model (a fit that asks `plan` what a candidate calibration predicts).
    """
    scope = scope or PlanScope()
    catalog = catalog or Catalog(accelerators={accel.key: accel}, source="plan")
    performance = _row_evaluator(shape, catalog, traffic, sla, engines, scope, calibrated)
    method = (
        get_scheme(scope.schemes[precision])
        if precision in scope.schemes
        else (method_for(precision, accel.device, performance.engines))
    )
    served = eligibility(method, accel.device, performance.engines, shape.head_dim, shape.architectures)
    if not served.launchable:
        return _row(performance, accel, precision, method, f"refused: {served.reason(accel.key)}", empty="engine")
    unpriced = (catalog.price_refusal(accel.key) if accel.key in catalog.accelerators else None) or ""
    fitting, refusal, pruned = _fitting(performance, accel, precision, method, scope)
    within_sla = [r for r in fitting if r.serving is not None and r.serving.requests_per_s > 0]
    if within_sla:
        ranked = min(within_sla, key=lambda r: _gpu_rank(r, traffic.requests_per_second))
        best = performance.settled(ranked.candidate)
        shown = pruned.get((best.candidate.tensor_parallel, best.candidate.kv_cache_dtype), "")
        return replace(_row(performance, accel, precision, method, "", best, unpriced), batch_caps_pruned=shown)
    if fitting:
        closest = min(fitting, key=lambda r: _sla_overshoot(r, sla))
        note = "SLA not met even by a lone request (its P99s shown)"
        return _row(performance, accel, precision, method, note, closest, unpriced, empty="sla")
    if not scope.degrees(accel.max_tensor_parallel):
        return _row(
            performance,
            accel,
            precision,
            method,
            f"no degree of {list(scope.tensor_parallel)} fits a node of {accel.max_tensor_parallel} {accel.key}",
            empty="degree",
        )
    degrees = scope.degrees(accel.max_tensor_parallel)
    note = f"does not fit on {degrees[-1]} GPUs: {refusal}"
    return _row(performance, accel, precision, method, note, empty="memory")


def _row_evaluator(
    shape: ModelShape,
    catalog: Catalog,
    traffic: Traffic,
    sla: LatencySLA,
    engines: tuple[str, ...],
    scope: PlanScope,
    calibrated: CalibratedModel | None,
) -> PerformanceEvaluator:
    """The search's own evaluator for a row, ranked by capacity alone: only the row shown has its P99s at the load
    settled (``settled``, within ``AT_LOAD_MAX_REQUESTS``, as the search's winner is)."""
    performance = PerformanceEvaluator(
        catalog,
        shape,
        traffic,
        sla,
        engines=engines,
        require_price=False,
        settle_within=0,
        engine_releases=scope.engine_releases,
    )
    return performance if calibrated is None else replace(performance, calibrated=calibrated)


def weights_gb(shape: ModelShape, method: QuantScheme, tensor_parallel: int) -> float:
    return plan_memory(shape, method, device_gb=0.0, tensor_parallel=tensor_parallel).weights_gb


def plan(request: PlanRequest) -> list[PlanRow]:
    """Every (GPU, precision) pair, cheapest per month at the traffic first (then per token, as the search
    ranks); rows without a price (none fits, none meets the SLA, or the price set does not price the GPU) last.
    The request's `on_row` hears each pair's "gpu/precision" once it is planned (a progress bar: each pair is up to
    four tensor-parallel degrees x KV dtypes x batch caps of simulations); with its `model`, each row carries the
    engine command serving it."""
    shape, catalog, traffic = request.shape, request.catalog, request.traffic
    pairs = [(catalog.get(hw, field="--hardware"), p) for hw in request.hardware for p in request.precisions]
    work = partial(
        _planned_pair,
        shape,
        traffic=traffic,
        sla=request.sla,
        scope=request.scope,
        catalog=catalog,
        engines=request.engines,
    )
    done = None if request.on_row is None else (lambda pair: request.heard(pair[0].key, pair[1]))
    rows = map_rows(work, pairs, done)  # in processes side by side (``row_processes``): the rows are independent
    if request.model:
        rows = [replace(r, launch=launch_of(r, request.model, catalog, traffic)) for r in rows]
    return sorted(rows, key=lambda r: (r.usd_per_month is None, r.usd_per_month or 0.0, r.usd_per_1m_tokens or 0.0))


def _planned_pair(
    shape: ModelShape,
    pair: tuple[Accelerator, str],
    *,
    traffic: Traffic,
    sla: LatencySLA,
    scope: PlanScope | None,
    catalog: Catalog,
    engines: tuple[str, ...],
) -> PlanRow:
    """`plan_one` for one (GPU, precision) pair: a module-level function, so a row process can be handed it."""
    return plan_one(shape, pair[0], pair[1], traffic=traffic, sla=sla, scope=scope, catalog=catalog, engines=engines)


def launch_of(row: PlanRow, model: str, catalog: Catalog, traffic: Traffic) -> str:
    """The row's engine command for its configuration serving `model` ("" where the row serves nothing)."""
    commands = row_launches(row, model, catalog, traffic)
    return commands[0].command or "" if commands and commands[0].engine == row.engine else ""


def row_launches(
    row: PlanRow, model: str, catalog: Catalog, traffic: Traffic, routing: RoutingPolicy | None = None
) -> list[EngineLaunch]:
    """Each engine's launch of the row's configuration serving `model`, the row's engine first (empty where the row
    serves nothing); `routing`: the router the fleet was sized behind (``launch_commands``)."""
    if not row.engine or row.batch_size is None or row.result is None:
        return []
    checkpoint = f"{model.rstrip('/').rsplit('/', 1)[-1]}-{row.method}"  # where `recommender quantize --out` puts it
    return launch_commands(
        row.result.candidate,
        model=model,
        max_model_len=traffic.max_model_len,
        checkpoint=checkpoint,
        device=catalog.get(row.hardware).device,
        engine=row.engine,
        routing=routing,
    )


def rows_to_json(rows: list[PlanRow]) -> str:
    """`plan --json`: each row as its flat `PlanRowJson` (``plan_row.plan_row_json`` writes every plan row)."""
    return dumps(list_to_data(rows))
