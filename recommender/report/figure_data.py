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

if TYPE_CHECKING:
    from recommender.autoscale import AutoscaleSchedule
    from recommender.candidate import CandidateResult
    from recommender.performance import LoadCurve
    from recommender.recommendation import Recommendation

#: The reference the KL is measured against; its loss is zero by definition.
REFERENCE_METHOD = "baseline"
#: Left to right on the cost plot: from the widest number format to the narrowest.
PRECISION_ORDER = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4")
#: Speed provenance kinds in the order captions list them; "unknown" when a result has no serving estimate.
SPEED_KINDS = ("measured", "calibrated", "modeled", "unknown")

PARETO = "pareto"
COST = "cost_by_precision"
LOAD = "load_curve"
DAILY = "daily_replicas"
TITLES = {
    PARETO: "Cost against quality loss",
    COST: "Cost per precision and GPU",
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


# -- (b) cost per precision and GPU --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostBar:
    precision: str
    hardware: str
    usd_per_1m_tokens: float
    feasible: bool
    key: str


@dataclass(frozen=True, slots=True)
class CostData:
    bars: list[CostBar]
    precisions: list[str]
    hardware: list[str]
    caption: str


def _precision_rank(precision: str) -> tuple[int, str]:
    return (PRECISION_ORDER.index(precision), "") if precision in PRECISION_ORDER else (len(PRECISION_ORDER), precision)


def cost_data(results: Sequence[CandidateResult]) -> CostData:
    """Per (precision, GPU): the cheapest feasible price, or the cheapest infeasible one when none is feasible."""
    groups: dict[tuple[str, str], list[tuple[float, CandidateResult]]] = {}
    for r in results:
        if r.status == "evaluated" and r.usd_per_1m_tokens is not None:
            c = r.candidate
            groups.setdefault((c.precision, c.hardware), []).append((r.usd_per_1m_tokens, r))
    bars: list[CostBar] = []
    used: list[CandidateResult] = []
    for (precision, gpu), members in groups.items():
        feasible = [m for m in members if m[1].feasible]
        price, best = min(feasible or members, key=lambda m: m[0])
        bars.append(CostBar(precision, gpu, price, bool(feasible), best.key))
        used.append(best)
    precisions = sorted({b.precision for b in bars}, key=_precision_rank)
    hardware = sorted({b.hardware for b in bars})
    caption = (
        f"Cheapest $/1M tokens per precision and GPU among {sum(map(len, groups.values()))} evaluated, priced "
        f"candidates: the cheapest feasible one; hatched = none feasible, the bar shows the cheapest infeasible one; "
        f"{_speed_sources(used)}."
    )
    return CostData(bars, precisions, hardware, caption)


# -- (c) latency against load --------------------------------------------------------------


def load_caption(curve: LoadCurve, winner: CandidateResult | None) -> str:
    key = winner.key if winner is not None else "the recommended configuration"
    sla = curve.sla
    sla_text = f"dashed lines: SLA P99 TTFT {sla.ttft_p99_ms:g} ms, P99 TPOT {sla.tpot_p99_ms:g} ms"
    return (
        f"P99 latency of one replica of {key} against request rate, {curve.provenance.kind} "
        f"({curve.provenance}); {sla_text}."
    )


def daily_caption(a: AutoscaleSchedule) -> str:
    return (
        f"Requests/s of the spec's daily profile and replicas of {a.candidate_key} each hour (capacity "
        f"{a.capacity_rps:.2f} req/s per replica, headroom {a.headroom:g}, {a.provenance.kind}): "
        f"${a.usd_per_month_autoscaled:,.0f}/month autoscaled against ${a.usd_per_month_static:,.0f}/month for "
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
