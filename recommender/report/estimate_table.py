"""The printed answer of `recommender estimate`: each latency with its interval, and where it came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.perf.sim.estimate import BenchmarkEstimate, FigureWithInterval


def _cell(f: FigureWithInterval, digits: int) -> str:
    return f"{f.value:,.{digits}f} ({f.interval.low:,.{digits}f}–{f.interval.high:,.{digits}f})"


def render_estimate(e: BenchmarkEstimate, console: Console) -> None:
    """A table of mean/P50/P90/P99 TTFT and TPOT with intervals, throughput, KV capacity, provenance."""
    confidence = e.output_tokens_per_s.interval.confidence
    table = Table(
        title=f"{e.model} · {e.scheme} · {e.engine} · {e.hardware} x{e.tensor_parallel} · concurrency {e.concurrency} "
        f"· {e.prompt_tokens} in / {e.output_tokens} out",
        caption=f"value (interval at {confidence:.0%} confidence)",
    )
    for column in ("", "mean", "P50", "P90", "P99"):
        table.add_column(column, justify="right")
    for label, figures, digits in (("TTFT ms", e.ttft_ms, 0), ("TPOT ms", e.tpot_ms, 2)):
        table.add_row(label, *(_cell(figures[k], digits) for k in ("mean", "p50", "p90", "p99")))
    console.print(table)
    kv = f"{e.kv_cache_tokens:,} {'fp8 ' if e.kv_cache_dtype == 'fp8' else ''}tokens per replica"
    console.print(
        f"output tokens/s: {_cell(e.output_tokens_per_s, 0)}   KV cache: {kv}   "
        f"requests simulated: {e.requests_simulated}"
    )
    console.print(f"[dim]{e.provenance}[/]", highlight=False)
