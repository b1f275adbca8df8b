"""The printed answer of `recommender probe --endpoint / --serve`: one row per load level, latencies in ms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.engines.engine_prediction import CapacityCheck, EngineJudgement
    from recommender.engines.load_run import MeasuredLoad

_COLUMNS = (
    "load", "done", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99",
    "running max", "waiting max", "KV max %",
)  # fmt: skip


def _engine(point: MeasuredLoad, key: str, scale: float = 1.0, digits: int = 0) -> str:
    value = point.engine.get(key)
    return "-" if value is None else f"{value * scale:.{digits}f}"


def render_load(points: Sequence[MeasuredLoad], *, title: str, console: Console) -> None:
    """One row per load level: throughput, TTFT / TPOT / ITL medians and P99s, the engine's peaks."""
    table = Table(title=title)
    for column in _COLUMNS:
        table.add_column(column, justify="left" if column == "load" else "right", no_wrap=column == "load")
    for p in points:
        lat = p.latency_ms
        table.add_row(
            p.shape.label,
            f"{p.completed}/{p.completed + p.failed}",
            f"{p.request_throughput:.2f}",
            f"{p.output_throughput:.0f}",
            *(f"{lat[m][s]:.1f}" for m in ("ttft", "tpot", "itl") for s in ("p50", "p99")),
            _engine(p, "engine_running_peak"),
            _engine(p, "engine_waiting_peak"),
            _engine(p, "engine_kv_cache_usage_peak", 100.0, 2),
        )
    console.print(table)


def render_prediction(judgement: EngineJudgement, *, console: Console) -> None:
    """The simulator beside the engine: each level's measured and predicted P50/P99, the held-out ones marked."""
    table = Table(title=f"simulator vs engine ({judgement.provenance})")
    for column in ("load", "role", "TTFT p50", "sim", "TTFT p99", "sim", "TPOT p50", "sim", "TPOT p99", "sim"):
        table.add_column(column, justify="left" if column in ("load", "role") else "right")
    rows = [(p, "fitted") for p in judgement.fitted] + [(p, "held out") for p in judgement.held_out]
    for level, role in rows:
        figures = [
            f"{source[f'{m}_{q}']:.1f}"
            for m in ("ttft", "tpot")
            for q in ("p50", "p99")
            for source in (level.measured, level.predicted)
        ]
        table.add_row(level.shape.label, role, *figures)
    console.print(table)
    steps = ", ".join(f"{c}: {s * 1e3:.2f}" for c, s in sorted(judgement.decode_s.items()))
    prefill = ", ".join(f"{n} tokens: {s * 1e3:.1f}" for n, s in judgement.prefill_s.items())
    console.print(f"step times (ms): prefill {prefill}; decode by sequences in the step {steps}")
    tail = judgement.tail_ms
    console.print(
        f"host tail added to every simulated P99 (the smallest P99 less P50 over the closed-loop levels): "
        f"TTFT +{tail['ttft']:.1f} ms, TPOT +{tail['tpot']:.2f} ms"
    )
    console.print(
        f"held out, measured / simulated at worst: TTFT P99 x{judgement.worst('ttft_p99'):.2f}, "
        f"TPOT P99 x{judgement.worst('tpot_p99'):.2f}"
    )


def render_capacity(check: CapacityCheck, *, console: Console) -> None:
    """The simulated capacity within the SLA beside the bracket the engine's Poisson levels put on its own."""
    limits = f"P99 TTFT <= {check.ttft_p99_ms:g} ms and TPOT <= {check.tpot_p99_ms:g} ms"
    missed = "not missed at any rate run" if check.missed is None else f"missed at {check.missed:g} req/s"
    console.print(
        f"capacity within {limits}: simulated {check.predicted:.2f} req/s; the engine met it at {check.met:g} req/s, "
        f"{missed}: the simulation x{check.within:.2f} from that bracket"
    )
