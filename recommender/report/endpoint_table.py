"""The printed answer of `recommender probe --endpoint / --serve`: one row per load level, latencies in ms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

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
        table.add_column(column, justify="left" if column == "load" else "right")
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
