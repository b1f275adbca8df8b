"""The report's figures: cost against quality loss, cost per precision and GPU, latency against load.

Figures are drawn on `matplotlib.figure.Figure` objects with the Agg canvas, never through
pyplot, so drawing touches no global state and needs no display. Each figure comes with a
one-line caption that says where its numbers come from (measured or modeled speed, where
the KL was measured, what was left out), because a chart without its provenance invites
more trust than the numbers deserve.

Data preparation (which points, which front, what caption) is separate from drawing, so the
report can write captions without drawing and tests can check the selection without pixels.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

#: Small figures: they sit in a report beside tables, not on a poster.
FIGSIZE = (6.0, 4.0)
DPI = 100
#: The reference the KL is measured against; its loss is zero by definition.
REFERENCE_METHOD = "baseline"
#: Left to right on the cost plot: from the widest number format to the narrowest.
PRECISION_ORDER = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4")


class LoadPoint(TypedDict):
    rate_per_s: float
    ttft_p99_ms: float
    tpot_p99_ms: float


class LoadCurve(TypedDict, total=False):
    """The winner's P99 latencies per replica at increasing request rates, and the SLA they must meet.

    ``provenance`` is optional; without it the winner's ``perf_provenance`` is quoted.
    """

    points: list[LoadPoint]
    sla: dict[str, float]
    provenance: str


@dataclass(frozen=True, slots=True)
class FigureInfo:
    """What the report says about a figure: its file stem, title and caption."""

    name: str
    title: str
    caption: str


@dataclass(frozen=True, slots=True)
class Plot:
    info: FigureInfo
    png: bytes


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


def provenance_kind(provenance: str | None) -> str:
    """'measured', 'modeled' or 'unknown', from the label every performance figure carries."""
    text = (provenance or "").strip().lower()
    if text.startswith("measured"):
        return "measured"
    if text.startswith("modeled"):
        return "modeled"
    return "unknown"


def _speed_sources(results: Sequence[Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        kind = provenance_kind(r.get("perf_provenance"))
        counts[kind] = counts.get(kind, 0) + 1
    parts = [f"{kind} for {counts[kind]}" for kind in ("measured", "modeled", "unknown") if counts.get(kind)]
    return "speed behind the prices " + (", ".join(parts) if parts else "not recorded")


def _price(result: Mapping[str, Any]) -> float | None:
    cost = result.get("cost")
    return None if not cost or cost.get("usd_per_1m_tokens") is None else float(cost["usd_per_1m_tokens"])


def _mean_kl(result: Mapping[str, Any]) -> float | None:
    """The measured mean KL against bf16; zero for the reference itself; None when not measured."""
    fidelity = (result.get("quality") or {}).get("fidelity")
    if fidelity and fidelity.get("mean_kl") is not None:
        return float(fidelity["mean_kl"])
    if result["candidate"]["method"] == REFERENCE_METHOD:
        return 0.0
    return None


def _to_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _new_figure() -> Figure:
    return Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")


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


def pareto_data(results: Sequence[Mapping[str, Any]]) -> ParetoData:
    """Priced candidates with a KL, and the front over the feasible ones (over all when none is feasible)."""
    points: list[ParetoPoint] = []
    without_kl = without_price = 0
    plotted: list[Mapping[str, Any]] = []
    devices: set[str] = set()
    for r in results:
        price = _price(r)
        if price is None or price <= 0:
            without_price += 1
            continue
        kl = _mean_kl(r)
        if kl is None:
            without_kl += 1
            continue
        points.append(ParetoPoint(r["key"], price, kl, bool(r.get("feasible"))))
        plotted.append(r)
        device = (r.get("quality") or {}).get("device")
        if device:
            devices.add(str(device))
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


def _log_fraction(value: float, low: float, high: float) -> float:
    return 0.5 if high <= low else (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))


def _annotate(ax: Any, data: ParetoData, point: ParetoPoint, label: str, marker: str, color: str, lift: int) -> None:
    """Circle a point and label it, the label pointing into the plot so it is not clipped at an edge."""
    ax.scatter(
        [point.usd_per_1m_tokens],
        [point.mean_kl],
        s=140,
        marker=marker,
        facecolors="none",
        edgecolors=color,
        linewidths=2,
        zorder=5,
    )
    xs = [p.usd_per_1m_tokens for p in data.points]
    ys = [p.mean_kl for p in data.points]
    right = _log_fraction(point.usd_per_1m_tokens, min(xs), max(xs)) > 0.5
    high = max(ys) > min(ys) and (point.mean_kl - min(ys)) / (max(ys) - min(ys)) > 0.5
    ax.annotate(
        f"{label}\n{point.key}",
        (point.usd_per_1m_tokens, point.mean_kl),
        xytext=(-12 if right else 12, -lift if high else lift),
        textcoords="offset points",
        ha="right" if right else "left",
        va="top" if high else "bottom",
        fontsize=7,
        color=color,
        arrowprops={"arrowstyle": "-", "color": color},
    )


def _plain_log_ticks(axis: Any, values: Sequence[float]) -> None:
    """Plain numbers on a log axis; minor ticks labelled only when the data span less than a decade."""
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain if values and max(values) < 10 * min(values) else NullFormatter())


def pareto_png(data: ParetoData, *, winner_key: str | None, current_key: str | None) -> bytes:
    fig = _new_figure()
    ax = fig.add_subplot()
    for feasible, style in ((True, {"marker": "o", "color": "tab:blue"}), (False, {"marker": "x", "color": "0.55"})):
        chosen = [p for p in data.points if p.feasible is feasible]
        if chosen:
            ax.scatter(
                [p.usd_per_1m_tokens for p in chosen],
                [p.mean_kl for p in chosen],
                s=22,
                label="feasible" if feasible else "infeasible",
                **style,
            )
    if data.front:
        front = [data.points[i] for i in data.front]
        ax.step(
            [p.usd_per_1m_tokens for p in front],
            [p.mean_kl for p in front],
            where="post",
            color="tab:green",
            linewidth=1.2,
            label=f"Pareto front ({data.front_over})",
        )
    by_key = {p.key: p for p in data.points}
    if current_key in by_key and current_key != winner_key:
        _annotate(ax, data, by_key[current_key], "current", "s", "tab:red", 55)  # type: ignore[index]
    if winner_key in by_key:
        _annotate(ax, data, by_key[winner_key], "recommended", "*", "tab:orange", 25)  # type: ignore[index]
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis, [p.usd_per_1m_tokens for p in data.points])
    positive = [p.mean_kl for p in data.points if p.mean_kl > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("symlog", linthresh=min(positive))
        ax.set_ylim(bottom=-min(positive) / 2, top=max(positive) * 3)  # KL is never negative
    ax.set_xlabel("\\$ per 1M tokens (log scale)")
    ax.set_ylabel("quality loss: mean KL vs bf16")
    ax.set_title("Cost against quality loss", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if data.points:
        ax.legend(fontsize=7, loc="best")
    return _to_png(fig)


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


def cost_data(results: Sequence[Mapping[str, Any]]) -> CostData:
    """Per (precision, GPU): the cheapest feasible price, or the cheapest infeasible one when none is feasible."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        if r.get("status") == "evaluated" and _price(r) is not None:
            c = r["candidate"]
            groups.setdefault((c["precision"], c["hardware"]), []).append(r)
    bars: list[CostBar] = []
    used: list[Mapping[str, Any]] = []
    for (precision, hardware), members in groups.items():
        feasible = [m for m in members if m.get("feasible")]
        best = min(feasible or members, key=lambda m: _price(m))  # type: ignore[arg-type,return-value]
        bars.append(CostBar(precision, hardware, _price(best), bool(feasible), best["key"]))  # type: ignore[arg-type]
        used.append(best)
    precisions = sorted({b.precision for b in bars}, key=_precision_rank)
    hardware = sorted({b.hardware for b in bars})
    caption = (
        f"Cheapest $/1M tokens per precision and GPU among {sum(map(len, groups.values()))} evaluated, priced "
        f"candidates: the cheapest feasible one; hatched = none feasible, the bar shows the cheapest infeasible one; "
        f"{_speed_sources(used)}."
    )
    return CostData(bars, precisions, hardware, caption)


def cost_png(data: CostData) -> bytes:
    fig = _new_figure()
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(data.hardware))
    colors = {hw: f"C{i % 10}" for i, hw in enumerate(data.hardware)}
    for bar in data.bars:
        slot = data.hardware.index(bar.hardware) - (len(data.hardware) - 1) / 2
        x = data.precisions.index(bar.precision) + slot * width
        ax.bar(
            x,
            bar.usd_per_1m_tokens,
            width=width * 0.95,
            color=colors[bar.hardware],
            alpha=1.0 if bar.feasible else 0.35,
            hatch=None if bar.feasible else "///",
            edgecolor=colors[bar.hardware] if bar.feasible else "0.3",
        )
    ax.set_xticks(range(len(data.precisions)), data.precisions)
    if data.bars:
        prices = [b.usd_per_1m_tokens for b in data.bars]
        ax.set_yscale("log")
        ax.set_ylim(bottom=min(prices) / 2, top=max(prices) * 1.5)
        _plain_log_ticks(ax.yaxis, prices)
    ax.set_xlabel("precision")
    ax.set_ylabel("cheapest \\$ per 1M tokens (log scale)")
    ax.set_title("Cost per precision and GPU", fontsize=10)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    handles = [Patch(color=colors[hw], label=hw) for hw in data.hardware]
    if any(not b.feasible for b in data.bars):
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="no feasible config"))
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="best")
    return _to_png(fig)


# -- (c) latency against load --------------------------------------------------------------


def load_caption(curve: LoadCurve, winner: Mapping[str, Any] | None) -> str:
    provenance = curve.get("provenance") or (winner or {}).get("perf_provenance") or "provenance not recorded"
    key = (winner or {}).get("key", "the recommended configuration")
    sla = curve.get("sla") or {}
    sla_text = (
        f"dashed lines: SLA P99 TTFT {sla['ttft_p99_ms']:g} ms, P99 TPOT {sla['tpot_p99_ms']:g} ms"
        if "ttft_p99_ms" in sla and "tpot_p99_ms" in sla
        else "no SLA recorded"
    )
    return (
        f"P99 latency of one replica of {key} against request rate, {provenance_kind(provenance)} "
        f"({provenance}); {sla_text}."
    )


def load_png(curve: LoadCurve) -> bytes:
    points = sorted(curve.get("points", []), key=lambda p: p["rate_per_s"])
    sla = curve.get("sla") or {}
    fig = _new_figure()
    axes = fig.subplots(1, 2)
    rates = [p["rate_per_s"] for p in points]
    for ax, field, label in ((axes[0], "ttft_p99_ms", "P99 TTFT (ms)"), (axes[1], "tpot_p99_ms", "P99 TPOT (ms)")):
        ax.plot(rates, [p[field] for p in points], marker="o", markersize=3, color="tab:blue")  # type: ignore[literal-required]
        if field in sla:
            ax.axhline(sla[field], color="tab:red", linestyle="--", linewidth=1, label=f"SLA {sla[field]:g} ms")
            ax.legend(fontsize=7, loc="upper left")
        ax.set_xlabel("requests per second per replica")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    fig.suptitle("Latency against load (recommended configuration)", fontsize=10)
    return _to_png(fig)


# -- the figures of one report -------------------------------------------------------------

PARETO = "pareto"
COST = "cost_by_precision"
LOAD = "load_curve"
_TITLES = {PARETO: "Cost against quality loss", COST: "Cost per precision and GPU", LOAD: "Latency against load"}


def describe_figures(
    recommendation: Mapping[str, Any], results: Sequence[Mapping[str, Any]], load_curve: LoadCurve | None = None
) -> list[FigureInfo]:
    """The figures the report will have, with captions, without drawing anything."""
    infos: list[FigureInfo] = []
    pareto = pareto_data(results)
    if pareto.points:
        infos.append(FigureInfo(PARETO, _TITLES[PARETO], pareto.caption))
    cost = cost_data(results)
    if cost.bars:
        infos.append(FigureInfo(COST, _TITLES[COST], cost.caption))
    if load_curve and load_curve.get("points"):
        infos.append(FigureInfo(LOAD, _TITLES[LOAD], load_caption(load_curve, recommendation.get("winner"))))
    return infos


def draw_figures(
    recommendation: Mapping[str, Any], results: Sequence[Mapping[str, Any]], load_curve: LoadCurve | None = None
) -> list[Plot]:
    """Every figure the data supports, as PNG bytes with its caption; a figure with nothing to show is left out."""
    winner_key = (recommendation.get("winner") or {}).get("key")
    current_key = (recommendation.get("current") or {}).get("key")
    plots: list[Plot] = []
    for info in describe_figures(recommendation, results, load_curve):
        if info.name == PARETO:
            png = pareto_png(pareto_data(results), winner_key=winner_key, current_key=current_key)
        elif info.name == COST:
            png = cost_png(cost_data(results))
        else:
            png = load_png(load_curve)  # type: ignore[arg-type]
        plots.append(Plot(info, png))
    return plots
