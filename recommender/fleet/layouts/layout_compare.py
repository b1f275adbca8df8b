"""Aggregated against disaggregated on one GPU at one precision: which costs less at the traffic, and why.

Both layouts run the same GPU type, so the one with fewer GPUs at the target traffic costs less per month
at any price (ties go to aggregated: one pool of one engine command, nothing moved between nodes). The
reason names what decides it:

- disaggregation wins when the decode pool's batches, never interrupted by a prefill, meet the TPOT limit
  at a batch the aggregated replica cannot hold to it (the interference an aggregated replica pays);
- it loses when its pools' work, each rounded up to whole workers, does not fall below the aggregated
  replicas', or the KV transfer and the TTFT split between two legs cost more capacity than the
  uninterrupted decode saves (short prompts: little prefill to take out of the decode batch).

Pools on two GPU types (``mixed_pools.py``) are compared by price, not GPU count: per precision, the cheapest mixed
pair of the GPUs planned (every prefill GPU with every other decode GPU, over a network link) against the
cheapest aggregated row of any GPU, its `hardware` "prefill GPU+decode GPU" and its reason naming both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, PoolOptions, pool_options, same_gpu_row
from recommender.fleet.layouts.disaggregated_row_launch import with_launch
from recommender.fleet.layouts.mixed_pools import check_mixed_link, mixed_cost, mixed_row
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.plan_scope import PlanScope
from recommender.money import usd
from recommender.perf.catalog.links import resolve_link
from recommender.quantize import get_scheme

if TYPE_CHECKING:
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.evaluation.two_pools import PoolChoice
    from recommender.fleet.layouts.pool_workers import ExpertParallelPools
    from recommender.fleet.plan_request import PlanRequest
    from recommender.perf.catalog.gpus import Accelerator, Catalog
    from recommender.perf.model.link import Link
    from recommender.perf.model.shape import ModelShape

__all__ = ["LayoutComparison", "compare_layouts", "compare_mixed", "plan_layouts"]


@dataclass(frozen=True, slots=True)
class LayoutComparison:
    """One GPU and precision's aggregated and disaggregated plans, the winner and why."""

    hardware: str
    precision: str
    aggregated: PlanRow
    disaggregated: DisaggregatedRow
    #: "aggregated", "disaggregated", or "" when neither meets the SLA.
    winner: str
    reason: str


def _aggregated_gpus(row: PlanRow) -> int | None:
    if row.replicas is None or row.tensor_parallel is None:
        return None
    return row.replicas * row.tensor_parallel


def _pools(d: DisaggregatedRow) -> str:
    assert d.prefill is not None and d.decode is not None
    p, q = d.prefill, d.decode
    per_rank = " per rank" if q.attention_dp > 1 else ""
    return (
        f"{p.estimate.workers} prefill x {p.layout} + {q.estimate.workers} decode x {q.layout} "
        f"(batch {q.batch_size}{per_rank})"
    )


def _batch(pool: PoolChoice) -> str:
    """A pool's batch cap, per attention rank where its workers run several."""
    return f"{pool.batch_size} per attention rank" if pool.attention_dp > 1 else f"{pool.batch_size}"


def _work(d: DisaggregatedRow, target_rps: float) -> float:
    """The pools' GPUs before rounding to whole workers."""
    assert d.prefill is not None and d.decode is not None
    return sum(target_rps / c.estimate.requests_per_s * c.gpus_per_worker for c in (d.prefill, d.decode))


def _why_aggregated(agg: PlanRow, d: DisaggregatedRow, target_rps: float, a: int, n: int) -> str:
    assert agg.max_rps_per_replica is not None and agg.tensor_parallel is not None
    agg_work = target_rps / agg.max_rps_per_replica * agg.tensor_parallel
    pools_work = _work(d, target_rps)
    head = f"aggregated wins: {a} GPUs ({agg.replicas} x TP{agg.tensor_parallel}) against {n} for {_pools(d)}"
    if pools_work < agg_work:
        return (
            f"{head}; the pools' work, {pools_work:.2f} GPUs against {agg_work:.2f}, rounds up to whole workers "
            "in each pool"
        )
    return (
        f"{head}; the KV transfer ({d.transfer_ms:.2f} ms over {d.link}) and the TTFT split between prefill and "
        f"decode cost more than uninterrupted decode saves (the pools need {pools_work:.2f} GPUs of work against "
        f"{agg_work:.2f})"
    )


def compare_layouts(
    aggregated: PlanRow, disaggregated: DisaggregatedRow, *, target_rps: float, tpot_limit_ms: float
) -> LayoutComparison:
    """The winner at the target traffic (fewer GPUs of the same type; ties to aggregated) and the reason."""
    a, n = _aggregated_gpus(aggregated), disaggregated.gpus
    hw, precision = aggregated.hardware, aggregated.precision
    if a is None and n is None:
        return LayoutComparison(hw, precision, aggregated, disaggregated, "", "neither layout meets the SLA")
    if n is None:
        return LayoutComparison(
            hw, precision, aggregated, disaggregated, "aggregated", f"aggregated only: {disaggregated.note}"
        )
    d = disaggregated
    assert d.decode is not None
    if a is None:
        why = (
            f"disaggregated only: decode batches of {_batch(d.decode)} without prefill interruptions meet the "
            f"{tpot_limit_ms:g} ms TPOT limit on {_pools(d)} = {n} GPUs; no aggregated replica meets the SLA "
            f"({aggregated.note or 'no configuration'})"
        )
        return LayoutComparison(hw, precision, aggregated, d, "disaggregated", why)
    if n < a:
        why = (
            f"disaggregated saves {1 - n / a:.0%}: decode batches of {_batch(d.decode)} without prefill "
            f"interruptions meet the {tpot_limit_ms:g} ms TPOT limit on {_pools(d)} = {n} GPUs; aggregated "
            f"needs {a} ({aggregated.replicas} x TP{aggregated.tensor_parallel}, "
            f"batch {aggregated.batch_size})"
        )
        return LayoutComparison(hw, precision, aggregated, d, "disaggregated", why)
    why = _why_aggregated(aggregated, d, target_rps, a, n)
    return LayoutComparison(hw, precision, aggregated, d, "aggregated", why)


def _mixed_pools(d: DisaggregatedRow) -> str:
    assert d.prefill is not None and d.decode is not None
    p, q = d.prefill, d.decode
    return (
        f"prefill {p.estimate.workers} x {p.layout} on {d.prefill_hardware} + decode "
        f"{q.estimate.workers} x {q.layout} (batch {q.batch_size}) on {d.decode_hardware}"
    )


def compare_mixed(found: list[LayoutComparison], mixed: DisaggregatedRow) -> LayoutComparison:
    """A mixed pair's row against the cheapest aggregated row at its precision (by $/month: the GPUs differ)."""
    same = [c for c in found if c.precision == mixed.precision]
    priced = [c.aggregated for c in same if c.aggregated.usd_per_month is not None]
    agg = min(priced, key=lambda r: r.usd_per_month or 0.0) if priced else same[0].aggregated
    pools = [c.disaggregated for c in same if c.disaggregated.usd_per_month is not None]
    hw = f"{mixed.prefill_hardware}+{mixed.decode_hardware}"
    m, a = mixed.usd_per_month, agg.usd_per_month
    if m is None:
        return LayoutComparison(
            hw, mixed.precision, agg, mixed, "", f"mixed pools not priced or none serve: {mixed.note}"
        )
    against = ""
    if pools:
        cheapest = min(pools, key=lambda r: r.usd_per_month or 0.0)
        against = f"; the cheapest same-GPU pools: {usd(cheapest.usd_per_month)}/month on {cheapest.hardware}"
    if a is None or m < a:
        saves = "mixed pools only" if a is None else f"mixed pools save {1 - m / a:.0%}"
        aggregated = (
            "meets no SLA"
            if a is None
            else f"costs {usd(a)}/month on {agg.hardware} ({agg.replicas} x TP{agg.tensor_parallel})"
        )
        why = (
            f"{saves}: {_mixed_pools(mixed)} = {usd(m)}/month, each pool at its own GPU's price; aggregated "
            f"{aggregated}{against}"
        )
        return LayoutComparison(hw, mixed.precision, agg, mixed, "disaggregated", why)
    why = (
        f"aggregated wins: {usd(a)}/month on {agg.hardware} ({agg.replicas} x TP{agg.tensor_parallel}) against "
        f"{usd(m)} for {_mixed_pools(mixed)}{against}"
    )
    return LayoutComparison(hw, mixed.precision, agg, mixed, "aggregated", why)


@dataclass(frozen=True, slots=True)
class _MixedContext:
    """What planning a decode GPU's pools needs when it was not planned on its own (a --decode-hardware GPU)."""

    catalog: Catalog
    shape: ModelShape
    traffic: Traffic
    sla: LatencySLA
    engines: tuple[str, ...]
    scope: PlanScope
    links: dict[str, Link]
    accels: dict[str, Accelerator]
    expert_parallel: ExpertParallelPools | None = None


def _cheapest_mixed(
    pairs: list[tuple[str, str]], precision: str, options: dict[tuple[str, str], PoolOptions], ctx: _MixedContext
) -> DisaggregatedRow | None:
    """The cheapest serving pair's row at `precision` (None: no pair, or none serves)."""
    best: DisaggregatedRow | None = None
    for p, d in pairs:
        prefill = options.get((p, precision))
        if prefill is None:
            continue
        decode = options.get((d, precision))
        if decode is None:  # a decode GPU not planned on its own: its pools at the prefill GPU's scheme
            performance = PerformanceEvaluator(
                ctx.catalog, ctx.shape, ctx.traffic, ctx.sla, engines=ctx.engines, require_price=False
            )
            decode = pool_options(
                performance,
                ctx.accels[d],
                precision,
                prefill.method,
                link=ctx.links[d],
                scope=ctx.scope,
                decode_always=True,
                expert_parallel=None if ctx.expert_parallel is None else ctx.expert_parallel.on(ctx.links[d]),
            )
            options[(d, precision)] = decode
        row = mixed_row(prefill, decode)
        if row.prefill is not None and (best is None or mixed_cost(row) < mixed_cost(best)):
            best = row
    return best


def _pairs(accels: list[Accelerator], decoders: list[Accelerator] | None, link: str) -> list[tuple[str, str]]:
    """The (prefill GPU, decode GPU) pairs of two types the link allows: every pair over a network link; none over
    a node link (NVLink, PCIe), and bad input naming --link where --decode-hardware asked for one."""
    pairs = [(p.key, d.key) for p in accels for d in (decoders or accels) if p.key != d.key]
    if pairs:
        first = resolve_link(link, accels[0], field="--link")
        if first.scope != "cluster":
            if decoders is not None:
                check_mixed_link(first, *pairs[0])
            return []
    return pairs


def plan_layouts(
    request: PlanRequest,
    *,
    decode_hardware: list[str] | None = None,
    expert_parallel: ExpertParallelPools | None = None,
) -> list[LayoutComparison]:
    """Every (GPU, precision) of the request: the aggregated plan row, the disaggregated pools over the request's
    link, the winner and why; then per precision the cheapest pools on two GPU types (``compare_mixed``), prefill on
    a request GPU and decode on another of `decode_hardware` (default: of the request's), where the link allows
    such a pair.

    With the request's `model`, each disaggregated row carries its pools' commands serving it (``with_launch``).
    With `expert_parallel` (a MoE model), each pool may be expert-parallel with data-parallel attention instead
    (``pool_workers.py``), the cheaper chosen per pool.
    The link is resolved on every GPU first: a name the catalog does not know, NVLink on a PCIe card, or a node
    link between two GPU types asked for is bad input naming ``--link`` before anything is simulated."""
    shape, catalog, traffic, sla, scope = request.shape, request.catalog, request.traffic, request.sla, request.scope
    if expert_parallel is not None:
        expert_parallel.check(shape, scope)
    accels = [catalog.get(hw, field="--hardware") for hw in request.hardware]
    decoders = (
        None if decode_hardware is None else [catalog.get(hw, field="--decode-hardware") for hw in decode_hardware]
    )
    pairs = _pairs(accels, decoders, request.link)
    links = {a.key: resolve_link(request.link, a, field="--link") for a in [*accels, *(decoders or [])]}
    by_key = {a.key: a for a in [*accels, *(decoders or [])]}
    context = _MixedContext(catalog, shape, traffic, sla, request.engines, scope, links, by_key, expert_parallel)
    found: list[LayoutComparison] = []
    options: dict[tuple[str, str], PoolOptions] = {}
    for accel in accels:
        performance = PerformanceEvaluator(catalog, shape, traffic, sla, engines=request.engines, require_price=False)
        for precision in request.precisions:
            found.append(
                _same_gpu(context, performance, accel, precision, options, pairs=bool(pairs), model=request.model)
            )
            request.heard(accel.key, precision)
    if expert_parallel is not None and all(c.disaggregated.gpus is None for c in found):
        _check_some_worker_fits(options, scope, traffic.max_model_len)
    return [*found, *_mixed_comparisons(found, pairs, request.precisions, options, context, request.model)]


def _check_some_worker_fits(options: dict[tuple[str, str], PoolOptions], scope: PlanScope, length: int) -> None:
    """Bad input naming ``--tensor-parallel`` where no pool worker (TP or EP) of the degrees planned holds one
    request on any GPU and precision at the smallest batch cap: pools that cannot fit, not an SLA missed."""
    cap = min(scope.batch_sizes, default=1)
    for opts in options.values():
        degrees = scope.degrees(opts.accel.max_tensor_parallel)
        for pools, _, _ in opts.choices.values():
            if any(w.setup(pools.context, cap) is not None for w in pools.workers(degrees)):
                return
    if not any(opts.choices for opts in options.values()):
        return  # nothing was tried (the TTFT leaves no prefill budget): not a question of fit
    gpus = sorted({opts.accel.key for opts in options.values()})
    raise BadInputError(
        "--tensor-parallel",
        f"no prefill or decode worker of {list(scope.tensor_parallel) or 'any degree'} (tensor- or expert-parallel) "
        f"holds one {length}-token request on {', '.join(gpus)}",
        "give larger --tensor-parallel degrees, GPUs with more memory, or a smaller scheme",
    )


def _same_gpu(
    ctx: _MixedContext,
    performance: PerformanceEvaluator,
    accel: Accelerator,
    precision: str,
    options: dict[tuple[str, str], PoolOptions],
    *,
    pairs: bool,
    model: str,
) -> LayoutComparison:
    """One GPU and precision's aggregated row against its pools (their options kept in `options` for the mixed
    pairs; the decode pools planned even without a prefill pool here where `pairs`)."""
    traffic, sla, link = ctx.traffic, ctx.sla, ctx.links[accel.key]
    agg = plan_one(
        ctx.shape, accel, precision, traffic=traffic, sla=sla, scope=ctx.scope, catalog=ctx.catalog, engines=ctx.engines
    )
    if agg.note.startswith("refused"):
        dis = DisaggregatedRow(accel.key, precision, agg.method, link.name, note=agg.note)
    else:
        opts = pool_options(
            performance,
            accel,
            precision,
            get_scheme(agg.method),
            link=link,
            scope=ctx.scope,
            decode_always=pairs,
            expert_parallel=None if ctx.expert_parallel is None else ctx.expert_parallel.on(link),
        )
        options[(accel.key, precision)] = opts
        dis = same_gpu_row(opts)
        if model:
            dis = with_launch(dis, model=model, accel=accel, max_model_len=traffic.max_model_len)
    return compare_layouts(agg, dis, target_rps=traffic.requests_per_second, tpot_limit_ms=sla.tpot_p99_ms)


def _mixed_comparisons(
    found: list[LayoutComparison],
    pairs: list[tuple[str, str]],
    precisions: tuple[str, ...],
    options: dict[tuple[str, str], PoolOptions],
    ctx: _MixedContext,
    model: str,
) -> list[LayoutComparison]:
    """Per precision, the cheapest mixed pair against the same-GPU rows `found` (with its launch given `model`)."""
    mixed_found = []
    for precision in precisions:
        mixed = _cheapest_mixed(pairs, precision, options, ctx)
        if mixed is None:
            continue
        if model:
            mixed = with_launch(
                mixed,
                model=model,
                accel=ctx.accels[mixed.prefill_hardware],
                max_model_len=ctx.traffic.max_model_len,
                decode_accel=ctx.accels[mixed.decode_hardware],
            )
        mixed_found.append(compare_mixed(found, mixed))
    return mixed_found
