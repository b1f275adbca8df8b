"""The report's figures drawn: cost against quality loss, cost per precision and GPU, latency against load.

Figures are drawn on `matplotlib.figure.Figure` objects with the Agg canvas, never through
pyplot, so drawing touches no global state and needs no display. What each figure shows and
its caption (where its numbers come from) are prepared in `figure_data.py`, without drawing.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from recommender.report.figure_data import (
    COST,
    DAILY,
    PARETO,
    CostData,
    FigureInfo,
    ParetoData,
    ParetoPoint,
    cost_data,
    describe_figures,
    pareto_data,
)

if TYPE_CHECKING:
    from recommender.autoscale import AutoscaleSchedule
    from recommender.candidate import CandidateResult
    from recommender.performance import LoadCurve
    from recommender.recommendation import Recommendation

#: Small figures: they sit in a report beside tables, not on a poster.
FIGSIZE = (6.0, 4.0)
DPI = 100


@dataclass(frozen=True, slots=True)
class Plot:
    info: FigureInfo
    png: bytes


def _to_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _new_figure() -> Figure:
    return Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")


# -- (a) cost against quality loss ---------------------------------------------------------


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
    for feasible, marker, color in ((True, "o", "tab:blue"), (False, "x", "0.55")):
        chosen = [p for p in data.points if p.feasible is feasible]
        if chosen:
            ax.scatter(
                [p.usd_per_1m_tokens for p in chosen],
                [p.mean_kl for p in chosen],
                s=22,
                label="feasible" if feasible else "infeasible",
                marker=marker,
                color=color,
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
    current = by_key.get(current_key) if current_key is not None and current_key != winner_key else None
    if current is not None:
        _annotate(ax, data, current, "current", "s", "tab:red", 55)
    winner = by_key.get(winner_key) if winner_key is not None else None
    if winner is not None:
        _annotate(ax, data, winner, "recommended", "*", "tab:orange", 25)
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


def load_png(curve: LoadCurve) -> bytes:
    points = sorted(curve.points, key=lambda p: p.rate_per_s)
    fig = _new_figure()
    axes = fig.subplots(1, 2)
    rates = [p.rate_per_s for p in points]
    panels = (
        (axes[0], [p.ttft_p99_ms for p in points], curve.sla.ttft_p99_ms, "P99 TTFT (ms)"),
        (axes[1], [p.tpot_p99_ms for p in points], curve.sla.tpot_p99_ms, "P99 TPOT (ms)"),
    )
    for ax, values, limit, label in panels:
        ax.plot(rates, values, marker="o", markersize=3, color="tab:blue")
        ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label=f"SLA {limit:g} ms")
        ax.legend(fontsize=7, loc="upper left")
        ax.set_xlabel("requests per second per replica")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    fig.suptitle("Latency against load (recommended configuration)", fontsize=10)
    return _to_png(fig)


# -- (d) traffic and replicas over the day --------------------------------------------------


def daily_png(schedule: AutoscaleSchedule) -> bytes:
    """Hourly request rate (line, left axis) and the replicas autoscaling runs (steps, right axis), against
    the static fleet sized for the peak (dashed)."""
    fig = _new_figure()
    ax = fig.add_subplot()
    hours = [h.hour for h in schedule.hours]
    ax.plot(hours, [h.rate_rps for h in schedule.hours], marker="o", markersize=3, color="tab:blue", label="req/s")
    ax.set_xlabel("hour of day")
    ax.set_ylabel("requests per second", color="tab:blue")
    ax.set_xticks(range(0, 24, 3))
    ax.set_ylim(0, schedule.peak_rps * 1.1)
    ax.grid(True, alpha=0.3)
    replicas = ax.twinx()
    replicas.step(hours, [h.replicas for h in schedule.hours], where="mid", color="tab:orange", label="replicas")
    replicas.axhline(schedule.static_replicas, color="tab:red", linestyle="--", linewidth=1,
                     label=f"static fleet ({schedule.static_replicas})")  # fmt: skip
    replicas.set_ylabel("replicas", color="tab:orange")
    replicas.set_ylim(0, schedule.static_replicas + 1)
    replicas.yaxis.set_major_locator(MaxNLocator(integer=True))
    replicas.legend(fontsize=7, loc="upper left")
    ax.set_title(f"{schedule.candidate_key}: autoscaled saves {schedule.saving_percent:.0f} %", fontsize=9)
    return _to_png(fig)


# -- the figures of one report -------------------------------------------------------------


def draw_figures(
    recommendation: Recommendation, results: Sequence[CandidateResult], load_curve: LoadCurve | None = None
) -> list[Plot]:
    """Every figure the data supports, as PNG bytes with its caption; a figure with nothing to show is left out."""
    winner_key = recommendation.winner.key if recommendation.winner is not None else None
    current_key = recommendation.current.key if recommendation.current is not None else None
    plots: list[Plot] = []
    for info in describe_figures(recommendation, results, load_curve):
        if info.name == PARETO:
            png = pareto_png(pareto_data(results), winner_key=winner_key, current_key=current_key)
        elif info.name == COST:
            png = cost_png(cost_data(results))
        elif info.name == DAILY and recommendation.autoscale is not None:
            png = daily_png(recommendation.autoscale)
        elif load_curve is not None:
            png = load_png(load_curve)
        else:  # describe_figures lists the load curve only when there is one
            continue
        plots.append(Plot(info, png))
    return plots
