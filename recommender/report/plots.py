"""The report's figures drawn: cost against quality loss, cost per precision and GPU, latency against load.

Figures are drawn on `matplotlib.figure.Figure` objects with the Agg canvas, never through
pyplot, so drawing touches no global state and needs no display. What each figure shows and
its caption (where its numbers come from) are prepared in `figure_data.py`, without drawing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from recommender.money import usd
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
    point_interval,
)

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.load_curve import LoadCurve
    from recommender.fleet.daily.autoscale import AutoscaleSchedule

#: 1200 x 800 pixels: readable at a report's full width (about 1150 CSS pixels), legends included.
FIGSIZE = (8.0, 16 / 3)
DPI = 150
#: Font sizes in points at that size: about 20 pixels for labels, 18 for legends and annotations.
_RC: Any = {
    "font.size": 10.0,
    "axes.titlesize": 12.0,
    "axes.labelsize": 10.5,
    "legend.fontsize": 9.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
}


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


def _annotate(ax: Any, point: ParetoPoint, label: str, marker: str, color: str, slot: int) -> None:
    """Ring a point and label it in the plot's top-right corner (one slot per label), with a leader line.

    Expensive and lossy at once, that corner is where dominated candidates would be, so it is the emptiest:
    the labels cover neither the points near the front nor each other, whatever the data.
    """
    ax.scatter(
        [point.usd_per_1m_tokens],
        [point.mean_kl],
        s=260,
        marker=marker,
        facecolors="none",
        edgecolors=color,
        linewidths=2.2,
        zorder=6,
    )
    ax.annotate(
        f"{label}: {point.key}",
        (point.usd_per_1m_tokens, point.mean_kl),
        xytext=(0.98, 0.95 - 0.12 * slot),
        textcoords="axes fraction",
        ha="right",
        va="top",
        color=color,
        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": color, "alpha": 0.95},
        arrowprops={"arrowstyle": "-", "color": color, "linewidth": 1.2, "shrinkB": 8},
        zorder=7,
    )


def _front_line(ax: Any, data: ParetoData) -> None:
    """The front as a staircase over the feasible candidates, carried on to the dearest point plotted.

    Nothing to the right of the last front point beats it, so the step runs flat to the plot's right edge:
    the line stays visible even when the front is one or two points under the winner's marker.
    """
    if not data.front:
        return
    front = [data.points[i] for i in data.front]
    xs = [p.usd_per_1m_tokens for p in front]
    ys = [p.mean_kl for p in front]
    right = max(p.usd_per_1m_tokens for p in data.points) * 1.15
    ax.step(
        [*xs, right],
        [*ys, ys[-1]],
        where="post",
        color="tab:green",
        linewidth=2.0,
        zorder=4,
        label=f"Pareto front over {data.front_over} ({len(front)})",
    )
    ax.scatter(xs, ys, s=40, color="tab:green", zorder=4)


def _plain_log_ticks(axis: Any, values: Sequence[float]) -> None:
    """Plain numbers on a log axis; minor ticks labelled only when the data span less than a decade."""
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain if values and max(values) < 3 * min(values) else NullFormatter())


def pareto_png(data: ParetoData, *, winner_key: str | None, current_key: str | None) -> bytes:
    fig = _new_figure()
    ax = fig.add_subplot()
    for feasible, marker, color in ((True, "o", "tab:blue"), (False, "x", "0.55")):
        chosen = [p for p in data.points if p.feasible is feasible]
        if chosen:
            label = f"{'feasible' if feasible else 'infeasible'} ({len(chosen)})"
            ax.scatter(
                [p.usd_per_1m_tokens for p in chosen],
                [p.mean_kl for p in chosen],
                s=30,
                marker=marker,
                color=color,
                label=label,
                zorder=3,
            )
    _front_line(ax, data)
    by_key = {p.key: p for p in data.points}
    current = by_key.get(current_key) if current_key is not None and current_key != winner_key else None
    if current is not None:
        _annotate(ax, current, "current", "s", "tab:red", 1)
    winner = by_key.get(winner_key) if winner_key is not None else None
    if winner is not None:
        _annotate(ax, winner, "recommended", "*", "tab:orange", 0)
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis, [p.usd_per_1m_tokens for p in data.points])
    positive = [p.mean_kl for p in data.points if p.mean_kl > 0]
    if not positive:  # every plotted point lost nothing: keep zero near the bottom, KL is never negative
        ax.set_ylim(bottom=-0.0005, top=0.01)
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("symlog", linthresh=min(positive))
        ax.set_ylim(bottom=-min(positive) / 2, top=max(positive) * 3)  # KL is never negative
    ax.set_xlabel("\\$ per 1M tokens at capacity (log scale)")
    ax.set_ylabel("quality loss: mean KL vs bf16 (nats/token)")
    ax.set_title("Cost against quality loss")
    ax.grid(True, which="both", alpha=0.3)
    if data.points:
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return _to_png(fig)


# -- (b) cost per month per scheme and GPU ---------------------------------------------------


def cost_png(data: CostData, *, winner_key: str | None, current_key: str | None) -> bytes:
    """Horizontal bars, cheapest at the top: one per scheme and GPU, labelled with $/month and GPUs."""
    fig = _new_figure()
    ax = fig.add_subplot()
    hardware = sorted({b.hardware for b in data.bars})
    colors = {hw: f"C{i % 10}" for i, hw in enumerate(hardware)}
    for y, bar in enumerate(data.bars):
        color = colors[bar.hardware]
        ax.barh(
            y,
            bar.usd_per_month,
            color=color,
            alpha=1.0 if bar.feasible else 0.35,
            hatch=None if bar.feasible else "///",
            edgecolor=color if bar.feasible else "0.3",
        )
        mark = " (recommended)" if bar.key == winner_key else " (current)" if bar.key == current_key else ""
        gpus = f"{bar.accelerators} GPU{'s' if bar.accelerators != 1 else ''}"
        ax.annotate(f" {usd(bar.usd_per_month)}, {gpus}{mark}", (bar.usd_per_month, y), va="center", fontsize=8.5)
    ax.set_yticks(range(len(data.bars)), [f"{b.scheme} @ {b.hardware}" for b in data.bars], fontsize=8.5)
    ax.invert_yaxis()
    months = [b.usd_per_month for b in data.bars]
    log = bool(months) and max(months) > 20 * min(months)  # a log axis only where a linear one would hide bars
    if log:
        ax.set_xscale("log")
        ax.set_xlim(left=min(months) / 2, right=max(months) * 6)  # room for the labels
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    elif months:
        ax.set_xlim(left=0, right=max(months) * 1.5)
    ax.set_xlabel("\\$ per month at the target traffic" + (" (log scale)" if log else ""))
    ax.set_title("Cost per month: cheapest candidate per scheme and GPU")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    handles = [Patch(color=colors[hw], label=hw) for hw in hardware]
    if any(not b.feasible for b in data.bars):
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="none feasible"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6))
    return _to_png(fig)


# -- (c) latency against load --------------------------------------------------------------


def load_png(curve: LoadCurve, *, load_per_replica: float | None = None) -> bytes:
    """P99 TTFT and TPOT against the rate per replica, with the SLA, the capacity used and the target load.

    A prediction interval, when the points carry one (`figure_data.point_interval`), is shaded above the line.
    """
    points = sorted(curve.points, key=lambda p: p.rate_per_s)
    fig = _new_figure()
    axes = fig.subplots(1, 2)
    rates = [p.rate_per_s for p in points]
    bounds = [point_interval(p) for p in points]
    panels = (
        (axes[0], [p.ttft_p99_ms for p in points], curve.sla.ttft_p99_ms, "P99 TTFT (ms)", 0),
        (axes[1], [p.tpot_p99_ms for p in points], curve.sla.tpot_p99_ms, "P99 TPOT (ms)", 1),
    )
    for ax, values, limit, label, which in panels:
        ax.plot(rates, values, marker="o", markersize=4, color="tab:blue", label="simulated P99")
        if all(b is not None for b in bounds) and bounds:
            upper = [b[which] for b in bounds if b is not None]
            ax.fill_between(rates, values, upper, color="tab:blue", alpha=0.2, label="steps at upper bound")
        ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1.5, label="SLA limit (P99)")
        ax.axvline(
            curve.capacity_rate_per_s,
            color="0.35",
            linewidth=1.5,
            label=f"capacity used {curve.capacity_rate_per_s:,.4g} req/s",
        )
        if load_per_replica is not None and load_per_replica > 0:
            ax.axvline(
                load_per_replica,
                color="tab:green",
                linestyle=":",
                linewidth=2,
                label=f"target load {load_per_replica:,.4g} req/s",
            )
        ax.set_ylim(bottom=0, top=max([*values, limit]) * 1.15)
        ax.set_xlabel("requests per second per replica")
        ax.set_ylabel(f"{label}, SLA {limit:g} ms")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5))
    fig.suptitle("Latency against load (one replica of the recommended configuration)", fontsize=12)
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
    replicas.axhline(
        schedule.static_replicas,
        color="tab:red",
        linestyle="--",
        linewidth=1,
        label=f"static fleet ({schedule.static_replicas})",
    )
    replicas.set_ylabel("replicas", color="tab:orange")
    replicas.set_ylim(0, schedule.static_replicas + 1)
    replicas.yaxis.set_major_locator(MaxNLocator(integer=True))
    replicas.legend(loc="upper left")
    ax.set_title(f"{schedule.candidate_key}: autoscaled saves {schedule.saving_percent:.0f} %")
    return _to_png(fig)


# -- the figures of one report -------------------------------------------------------------


def draw_figures(
    recommendation: Recommendation, results: Sequence[CandidateResult], load_curve: LoadCurve | None = None
) -> list[Plot]:
    """Every figure the data supports, as PNG bytes with its caption; a figure with nothing to show is left out."""
    winner, current = recommendation.winner, recommendation.current
    winner_key = winner.key if winner is not None else None
    current_key = current.key if current is not None else None
    load = winner.serving.load_per_replica_rps if winner is not None and winner.serving is not None else None
    plots: list[Plot] = []
    with rc_context(_RC):
        for info in describe_figures(recommendation, results, load_curve):
            if info.name == PARETO:
                png = pareto_png(pareto_data(results), winner_key=winner_key, current_key=current_key)
            elif info.name == COST:
                png = cost_png(cost_data(results), winner_key=winner_key, current_key=current_key)
            elif info.name == DAILY and recommendation.autoscale is not None:
                png = daily_png(recommendation.autoscale)
            elif load_curve is not None:
                png = load_png(load_curve, load_per_replica=load)
            else:  # describe_figures lists the load curve only when there is one
                continue
            plots.append(Plot(info, png))
    return plots
