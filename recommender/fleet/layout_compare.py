"""Aggregated against disaggregated on one GPU at one precision: which costs less at the traffic, and why.

Both layouts run the same GPU type, so the one with fewer GPUs at the target traffic costs less per month
at any price (ties go to aggregated: one pool of one engine command, nothing moved between nodes). The
reason names what decides it:

- disaggregation wins when the decode pool's batches, never interrupted by a prefill, meet the TPOT limit
  at a batch the aggregated replica cannot hold to it (the interference an aggregated replica pays);
- it loses when its pools' work, each rounded up to whole workers, does not fall below the aggregated
  replicas', or the KV transfer and the TTFT split between two legs cost more capacity than the
  uninterrupted decode saves (short prompts: little prefill to take out of the decode batch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.engines import DEFAULT_ENGINES
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.disaggregated_plan import DisaggregatedRow, plan_disaggregated, with_launch
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_row import PlanRow
from recommender.perf.catalog.links import resolve_link
from recommender.quantize import get_scheme

if TYPE_CHECKING:
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.plan_scope import PlanScope
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape

__all__ = ["LayoutComparison", "compare_layouts", "plan_layouts"]


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
    return (
        f"{p.estimate.workers} prefill x TP{p.tensor_parallel} + {q.estimate.workers} decode x "
        f"TP{q.tensor_parallel} (batch {q.batch_size})"
    )


def _work(d: DisaggregatedRow, target_rps: float) -> float:
    """The pools' GPUs before rounding to whole workers."""
    assert d.prefill is not None and d.decode is not None
    return sum(target_rps / c.estimate.requests_per_s * c.tensor_parallel for c in (d.prefill, d.decode))


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
            f"disaggregated only: decode batches of {d.decode.batch_size} without prefill interruptions meet the "
            f"{tpot_limit_ms:g} ms TPOT limit on {_pools(d)} = {n} GPUs; no aggregated replica meets the SLA "
            f"({aggregated.note or 'no configuration'})"
        )
        return LayoutComparison(hw, precision, aggregated, d, "disaggregated", why)
    if n < a:
        why = (
            f"disaggregated saves {1 - n / a:.0%}: decode batches of {d.decode.batch_size} without prefill "
            f"interruptions meet the {tpot_limit_ms:g} ms TPOT limit on {_pools(d)} = {n} GPUs; aggregated "
            f"needs {a} ({aggregated.replicas} x TP{aggregated.tensor_parallel}, "
            f"batch {aggregated.batch_size})"
        )
        return LayoutComparison(hw, precision, aggregated, d, "disaggregated", why)
    why = _why_aggregated(aggregated, d, target_rps, a, n)
    return LayoutComparison(hw, precision, aggregated, d, "aggregated", why)


def plan_layouts(
    shape: ModelShape,
    catalog: Catalog,
    *,
    hardware: list[str],
    precisions: list[str],
    traffic: Traffic,
    sla: LatencySLA,
    link: str,
    scope: PlanScope | None = None,
    engines: tuple[str, ...] = DEFAULT_ENGINES,
    on_row: Callable[[str], None] | None = None,
    model: str = "",
) -> list[LayoutComparison]:
    """Every (GPU, precision): the aggregated plan row, the disaggregated pools over `link`, the winner and why.

    With `model`, each disaggregated row carries its pools' commands serving it (``with_launch``).
    The link is resolved on every GPU first: a name the catalog does not know, or NVLink on a PCIe card, is bad
    input naming ``--link`` before anything is simulated."""
    accels = [catalog.get(hw, field="--hardware") for hw in hardware]
    links = {a.key: resolve_link(link, a, field="--link") for a in accels}
    found = []
    for accel in accels:
        performance = PerformanceEvaluator(catalog, shape, traffic, sla, engines=engines, require_price=False)
        for precision in precisions:
            agg = plan_one(
                shape, accel, precision, traffic=traffic, sla=sla, scope=scope, catalog=catalog, engines=engines
            )
            if agg.note.startswith("refused"):
                dis = DisaggregatedRow(accel.key, precision, agg.method, link, note=agg.note)
            else:
                dis = plan_disaggregated(
                    performance, accel, precision, get_scheme(agg.method), link=links[accel.key], scope=scope
                )
                if model:
                    dis = with_launch(dis, model=model, accel=accel, max_model_len=traffic.max_model_len)
            found.append(
                compare_layouts(agg, dis, target_rps=traffic.requests_per_second, tpot_limit_ms=sla.tpot_p99_ms)
            )
            if on_row is not None:
                on_row(f"{accel.key}/{precision}")
    return found
