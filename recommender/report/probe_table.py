"""The printed answer of `recommender probe`: measured step times with their spread, and memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.perf.probe import ProbeResult
    from recommender.quantize import QuantScheme

_COLUMNS = ("prompt", "batch", "prefill ms", "decode step ms", "tok/s (decode)", "weights MB", "KV MB", "peak +MB")


def _ms(median_s: float, spread_s: tuple[float, float], digits: int) -> str:
    """A median in ms with its min-max spread: ``12.3 (11.9-13.0)``."""
    low, high = spread_s
    return f"{median_s * 1e3:.{digits}f} ({low * 1e3:.{digits}f}-{high * 1e3:.{digits}f})"


def render_probe(results: Sequence[ProbeResult], *, model: str, method: QuantScheme, console: Console) -> None:
    """One row per (prompt length, batch size), titled with the model, the method and where it was measured."""
    table = Table(title=f"{model} {method.precision}/{method.name}: {results[0].provenance}")
    for column in _COLUMNS:
        table.add_column(column)
    for r in results:
        table.add_row(
            str(r.prompt_tokens),
            str(r.batch_size),
            _ms(r.prefill_s, r.prefill_spread_s, 1),
            _ms(r.decode_step_s, r.decode_spread_s, 2),
            f"{r.batch_size / r.decode_step_s:,.0f}",
            f"{r.weights_mb:.1f}",
            f"{r.kv_cache_mb:.1f}",
            "-" if r.peak_rss_delta_mb is None else f"{r.peak_rss_delta_mb:.0f}",
        )
    console.print(table)
