"""What the report's figures show, without drawing them: which points, which front, what caption.

Kept apart from the drawing (`plots.py`, which imports matplotlib) so the report can write
captions without drawing and tests can check the selection without pixels. Each caption
says where its numbers come from (measured, calibrated or modeled speed, where the KL was
measured, what was left out), because a chart without its provenance invites more trust
than the numbers deserve. Provenance is read from its typed ``kind``, never from a prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.money import usd
from recommender.perf.pricing import HOURS_PER_MONTH

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.load_curve import LoadCurve, LoadPoint
    from recommender.fleet.daily.autoscale import AutoscaleSchedule

#: The reference the KL is measured against; its loss is zero by definition.
REFERENCE_METHOD = "baseline"
#: Speed provenance kinds in the order captions list them; "unknown" when a result has no serving estimate.
SPEED_KINDS = ("measured", "calibrated", "modeled", "unknown")

PARETO = "pareto"
COST = "cost_per_month"
LOAD = "load_curve"
DAILY = "daily_replicas"
TITLES = {
    PARETO: "Cost against quality loss",
    COST: "Cost per month per scheme and GPU",
    LOAD: "Latency against load",
    DAILY: "Traffic and replicas over the day",
}


@dataclass(frozen=True, slots=True)
class FigureInfo:
    """What the report says about a figure: its file stem, title and caption."""

    name: str
    title: str
    caption: str


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated points when both coordinates are minimised, by increasing x.

    A point is dominated when another is no worse in both coordinates and better in one.
    Of several identical points only the first is kept, so the front draws as a clean step.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1], i))
    front: list[int] = []
    best_y = float("inf")
    for i in order:
        if points[i][1] < best_y:
            front.append(i)
            best_y = points[i][1]
    return front


# -- shared helpers ------------------------------------------------------------------------


def speed_kind(result: CandidateResult) -> str:
    """'measured', 'calibrated' or 'modeled' from the serving estimate's provenance; 'unknown' without one."""
    return "unknown" if result.serving is None else result.serving.provenance.kind


def _speed_sources(results: Sequence[CandidateResult]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        kind = speed_kind(r)
        counts[kind] = counts.get(kind, 0) + 1
    parts = [f"{kind} for {counts[kind]}" for kind in SPEED_KINDS if counts.get(kind)]
    return "speed behind the prices " + (", ".join(parts) if parts else "not recorded")


def mean_kl(result: CandidateResult) -> float | None:
    """The measured mean KL against bf16; zero for the reference itself; None when not measured."""
    if result.quality is not None and result.quality.fidelity is not None:
        return result.quality.fidelity.mean_kl
    if result.candidate.method == REFERENCE_METHOD:
        return 0.0
    return None


# -- (a) cost against quality loss ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    key: str
    usd_per_1m_tokens: float
    mean_kl: float
    feasible: bool


@dataclass(frozen=True, slots=True)
class ParetoData:
    points: list[ParetoPoint]
    front: list[int]
    front_over: str
    without_kl: int
    without_price: int
    caption: str


def pareto_data(results: Sequence[CandidateResult]) -> ParetoData:
    """Priced candidates with a KL, and the front over the feasible ones (over all when none is feasible)."""
    points: list[ParetoPoint] = []
    without_kl = without_price = 0
    plotted: list[CandidateResult] = []
    devices: set[str] = set()
    for r in results:
        price = r.usd_per_1m_tokens
        if price is None or price <= 0:
            without_price += 1
            continue
        kl = mean_kl(r)
        if kl is None:
            without_kl += 1
            continue
        points.append(ParetoPoint(r.key, price, kl, r.feasible))
        plotted.append(r)
        if r.quality is not None and r.quality.device:
            devices.add(r.quality.device)
    feasible = [i for i, p in enumerate(points) if p.feasible]
    pool, front_over = (feasible, "feasible candidates") if feasible else (list(range(len(points))), "all candidates")
    front = [pool[j] for j in pareto_front([(points[i].usd_per_1m_tokens, points[i].mean_kl) for i in pool])]
    where = f"measured on {', '.join(sorted(devices))}" if devices else "as recorded"
    caption = (
        f"{len(points)} priced candidates: $/1M tokens with {_speed_sources(plotted)}; quality loss = mean KL "
        f"against bf16 {where} (bf16 itself is 0); front over {front_over}"
        + (" (none is feasible)" if not feasible and points else "")
        + f"; not shown: {without_kl} without a KL measurement, {without_price} without a price (pruned or no "
        "rate meets the SLA)."
    )
    return ParetoData(points, front, front_over, without_kl, without_price, caption)


# -- (b) cost per month per scheme and GPU ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostBar:
    """The cheapest candidate of one scheme on one GPU: what it costs per month at the target traffic."""

    scheme: str
    hardware: str
    usd_per_month: float
    accelerators: int
    feasible: bool
    key: str


@dataclass(frozen=True, slots=True)
class CostData:
    #: Cheapest first.
    bars: list[CostBar]
    caption: str


def cost_data(results: Sequence[CandidateResult]) -> CostData:
    """Per (scheme, GPU): the cheapest feasible $/month at the target traffic, else the cheapest infeasible one
    (pools on two GPU types are their own "prefill+decode" GPU)."""
    groups: dict[tuple[str, str], list[tuple[float, CandidateResult]]] = {}
    for r in results:
        if r.status == "evaluated" and r.cost is not None:
            c = r.candidate
            gpu = f"{c.hardware}+{c.decode_hardware}" if c.decode_hardware else c.hardware  # `plan`'s prefill+decode
            groups.setdefault((f"{c.precision}/{c.method}", gpu), []).append((r.cost.usd_per_month, r))
    bars: list[CostBar] = []
    used: list[CandidateResult] = []
    for (scheme, gpu), members in groups.items():
        feasible = [m for m in members if m[1].feasible]
        price, best = min(feasible or members, key=lambda m: (m[0], m[1].key))
        accelerators = best.cost.accelerators if best.cost is not None else 0
        bars.append(CostBar(scheme, gpu, price, accelerators, bool(feasible), best.key))
        used.append(best)
    bars.sort(key=lambda b: (b.usd_per_month, not b.feasible, b.scheme, b.hardware))
    caption = (
        f"$/month at the target traffic (replicas x GPUs x hourly price x {HOURS_PER_MONTH:g} h) of the cheapest "
        f"candidate per scheme and GPU, among {sum(map(len, groups.values()))} evaluated, priced candidates: the "
        f"cheapest feasible one; hatched = none feasible, the bar shows the cheapest infeasible one; "
        f"{_speed_sources(used)}."
    )
    return CostData(bars, caption)


# -- (c) latency against load --------------------------------------------------------------


def load_caption(curve: LoadCurve, winner: CandidateResult | None) -> str:
    key = winner.key if winner is not None else "the recommended configuration"
    sla = curve.sla
    load = winner.serving.load_per_replica_rps if winner is not None and winner.serving is not None else None
    target = f"dotted green: the load each replica carries at the target traffic ({load:,.4g} req/s); " if load else ""
    upper = any(point_interval(p) is not None for p in curve.points)
    band = "shaded: up to the P99 with every step at its upper bound; " if upper else ""
    return (
        f"P99 latency of one replica of {key} against request rate, {curve.provenance.kind} "
        f"({curve.provenance}). Dashed red: SLA P99 TTFT {sla.ttft_p99_ms:g} ms and P99 TPOT {sla.tpot_p99_ms:g} ms; "
        f"{target}{band}solid grey: the capacity used for sizing ({curve.capacity_rate_per_s:,.4g} req/s), the "
        "highest rate at which both P99s met the SLA in a bisection over simulations of the same requests. The "
        f"curve is {len(curve.points)} separate simulations joined by straight lines, so where it seems to cross "
        "a limit is approximate, and the panel that reaches its limit first sets the capacity. The capacity is "
        "also capped at the decode-only throughput of a full batch, above which no rate is sustainable (a finite "
        "simulation of an overloaded queue can still look fast)" + _cap_note(curve) + "."
    )


def _cap_note(curve: LoadCurve) -> str:
    beyond = [p for p in curve.points if p.rate_per_s > curve.capacity_rate_per_s * 1.001]
    sla = curve.sla
    if beyond and all(p.ttft_p99_ms <= sla.ttft_p99_ms and p.tpot_p99_ms <= sla.tpot_p99_ms for p in beyond):
        return ": here that cap decided, not the SLA, which the curve still meets beyond it"
    return ""


def point_interval(point: LoadPoint) -> tuple[float, float] | None:
    """A load point's upper P99 TTFT and TPOT at the SLA's confidence; None for a point estimate (local device)."""
    if point.ttft_p99_high_ms is None or point.tpot_p99_high_ms is None:
        return None
    return point.ttft_p99_high_ms, point.tpot_p99_high_ms


def daily_caption(a: AutoscaleSchedule) -> str:
    return (
        f"Requests/s of the spec's daily profile and replicas of {a.candidate_key} each hour (capacity "
        f"{a.capacity_rps:.2f} req/s per replica, headroom {a.headroom:g}, {a.provenance.kind}): "
        f"{usd(a.usd_per_month_autoscaled)}/month autoscaled against {usd(a.usd_per_month_static)}/month for "
        f"{a.static_replicas} replicas all day ({a.saving_percent:.1f} % saved)."
    )


# -- the figures of one report -------------------------------------------------------------


def describe_figures(
    recommendation: Recommendation, results: Sequence[CandidateResult], load_curve: LoadCurve | None = None
) -> list[FigureInfo]:
    """The figures the report will have, with captions, without drawing anything."""
    infos: list[FigureInfo] = []
    pareto = pareto_data(results)
    if pareto.points:
        infos.append(FigureInfo(PARETO, TITLES[PARETO], pareto.caption))
    cost = cost_data(results)
    if cost.bars:
        infos.append(FigureInfo(COST, TITLES[COST], cost.caption))
    if load_curve is not None and load_curve.points:
        infos.append(FigureInfo(LOAD, TITLES[LOAD], load_caption(load_curve, recommendation.winner)))
    if recommendation.autoscale is not None:
        infos.append(FigureInfo(DAILY, TITLES[DAILY], daily_caption(recommendation.autoscale)))
    return infos
