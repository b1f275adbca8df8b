"""The printed answer of `recommender plan`: one row per GPU and precision, every figure modeled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.plan import PlanRow
    from recommender.spec import LatencySLA, Traffic

_COLUMNS = (
    "GPU", "precision/method", "engine", "tp", "batch", "$/1M tok", "replicas", "$/month", "P99 TTFT ms", "P99 TPOT ms",
    "quality",
)  # fmt: skip


def _latency(value: float | None, high: float | None, digits: int) -> str:
    """A P99 and, where the model gives one, the upper end of its interval ("120 (≤190)")."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" + ("" if high is None else f" (≤{high:.{digits}f})")


def _or_dash(value: object) -> str:
    """A count, or "-" where the row has none (0 counts as none: no configuration)."""
    return str(value or "-")


def _cells(r: PlanRow) -> tuple[str, ...]:
    return (
        r.hardware,
        f"{r.precision}/{r.method}",
        r.engine or "-",
        _or_dash(r.tensor_parallel),
        _or_dash(r.batch_size),
        "-" if r.usd_per_1m_tokens is None else f"${r.usd_per_1m_tokens:.3f}",
        _or_dash(r.replicas),
        "-" if r.usd_per_month is None else f"${r.usd_per_month:,.0f}",
        _latency(r.ttft_p99_ms, r.ttft_p99_high_ms, 0),
        _latency(r.tpot_p99_ms, r.tpot_p99_high_ms, 1),
        r.note or f"{r.quality} [{r.quality_verdict}]",
    )


def render_plan(rows: Sequence[PlanRow], *, name: str, traffic: Traffic, sla: LatencySLA, console: Console) -> None:
    """The rows under a title naming the traffic and SLA they were planned for, and where the figures come from."""
    table = Table(
        title=f"{name}: {traffic.prompt_tokens}+{traffic.output_tokens} tokens at {traffic.requests_per_second:g} "
        f"req/s, P99 TTFT <= {sla.ttft_p99_ms:g} ms, TPOT <= {sla.tpot_p99_ms:g} ms (no quality measured)"
    )
    for column in _COLUMNS:
        table.add_column(column)
    for row in rows:
        table.add_row(*_cells(row))
    console.print(table)
    sets = sorted({row.price_set for row in rows if row.price_set}) or ["none priced"]
    console.print(
        "[dim]calibrated: step costs fitted per engine on measured H100 serving runs (benchmarks/gpu_fidelity.py), "
        "moved to other GPUs through their datasheets, + continuous-batching simulation; (≤x): upper end of the "
        f"P99's interval at {sla.confidence:.0%} confidence, which the SLA check uses; "
        f"prices: {', '.join(sets)} (sources and dates in recommender/perf/price_sets.yaml)[/]"
    )
