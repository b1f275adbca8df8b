"""The printed recommendation: the winner, the current deployment, and the cheaper rejects."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from recommender.report.recommendation import Recommendation

_MAX_REJECTED_ROWS = 12


def _money(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _check_cell(check: dict[str, Any]) -> str:
    """One check in a few characters: relative thresholds as %, others in the metric's units."""
    mark = {"pass": "ok", "fail": "FAIL"}.get(check["verdict"], check["verdict"])
    if check["value"] is None:
        return f"{check['name']}: {mark}"
    if check["name"] == "fidelity":
        return f"KL {check['value']:.2g} {mark}"
    if "relative" in check["threshold"] and check["baseline"]:
        return f"{check['metric']} {100 * check['delta'] / abs(check['baseline']):+.1f}% {mark}"
    return f"{check['metric']} {check['delta']:+.3f} {mark}"


def _quality_cell(summary: dict[str, Any]) -> str:
    return ", ".join(_check_cell(c) for c in summary["quality_checks"]) or summary["quality_verdict"]


def _config_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("", "config", "$/1M tok", "replicas", "$/month", "TTFT ms", "TPOT ms", "speed"):
        table.add_column(column, overflow="fold")
    for label, s in rows:
        table.add_row(
            label,
            s["key"],
            _money(s["usd_per_1m_tokens"]),
            str(s["replicas"] or "-"),
            _money(s["usd_per_month"], 0),
            _ms(s["ttft_p99_ms"]),
            _ms(s["tpot_p99_ms"]),
            "measured" if s["perf_provenance"].startswith("measured") else "modeled",
        )
    return table


def render(rec: Recommendation, console: Console) -> None:
    rows = []
    if rec.winner:
        rows.append(("recommended", rec.winner))
    if rec.current:
        rows.append(("current", rec.current))
    console.print(_config_table(f"Recommendation for {rec.model} ({rec.release}), use case {rec.use_case}", rows))
    for label, summary in rows:
        console.print(
            f"  quality of {label} vs bf16 (measured on {summary['quality_device']}): {_quality_cell(summary)}"
        )
    if rec.winner is None:
        console.print("[bold red]No candidate met every threshold.[/] Loosen a threshold or widen the space.")
    if rec.saving:
        console.print(
            f"Saving against the current deployment: {rec.saving['percent_per_1m_tokens']:.1f} % per token, "
            f"{_money(rec.saving['usd_per_month'], 0)}/month at the target traffic "
            f"({rec.saving['percent_per_month']:.1f} %)."
        )
    if rec.rejected_cheaper:
        table = Table(title="Cheaper candidates that were rejected", title_justify="left")
        for column in ("config", "$/1M tok", "threshold broken"):
            table.add_column(column, overflow="fold")
        for s in rec.rejected_cheaper[:_MAX_REJECTED_ROWS]:
            table.add_row(s["key"], _money(s["usd_per_1m_tokens"]), "; ".join(s["broken"]))
        console.print(table)
        hidden = len(rec.rejected_cheaper) - _MAX_REJECTED_ROWS
        if hidden > 0:
            console.print(f"... and {hidden} more in recommendation.json")
    if rec.ties:
        table = Table(title="Ties: as cheap as the winner, smaller quality margin", title_justify="left")
        for column in ("config", "$/1M tok", "mean KL"):
            table.add_column(column, overflow="fold")
        for s in rec.ties[:_MAX_REJECTED_ROWS]:
            kl = (s.get("fidelity") or {}).get("mean_kl")
            table.add_row(s["key"], _money(s["usd_per_1m_tokens"]), "-" if kl is None else f"{kl:.2g}")
        console.print(table)
    counts = rec.counts
    console.print(
        f"{counts['candidates']} distinct candidates: {counts['evaluated']} evaluated, {counts['pruned']} pruned "
        f"before loading a model, {counts.get('failed', 0)} failed, {counts['feasible']} feasible."
    )
    for note in rec.notes:
        console.print(f"[dim]note: {note}[/]")
