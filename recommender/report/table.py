"""The printed recommendation: the winner, the current deployment, and the cheaper rejects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from recommender.money import usd
from recommender.report.figure_data import speed_kind
from recommender.report.levers_block import lever_lines

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult
    from recommender.quality.verdict import Check

_MAX_REJECTED_ROWS = 12


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _check_cell(check: Check) -> str:
    """One check in a few characters: relative thresholds as %, others in the metric's units."""
    mark = {"pass": "ok", "fail": "FAIL"}.get(check.verdict, check.verdict)
    if check.value is None or check.delta is None:
        return f"{check.name}: {mark}"
    if check.name == "fidelity":
        return f"KL {check.value:.2g} {mark}"
    if "relative" in check.threshold and check.baseline:
        return f"{check.metric} {100 * check.delta / abs(check.baseline):+.1f}% {mark}"
    return f"{check.metric} {check.delta:+.3f} {mark}"


def _quality_cell(result: CandidateResult) -> str:
    checks = result.quality.checks if result.quality is not None else []
    return ", ".join(_check_cell(c) for c in checks) or result.quality_verdict


def _config_table(title: str, rows: list[tuple[str, CandidateResult]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("", "config", "engine", "$/1M tok", "replicas", "$/month", "P99 TTFT ms", "P99 TPOT ms", "speed"):
        table.add_column(column, overflow="fold")
    for label, r in rows:
        serving = r.serving
        ttft, ttft_high, tpot, tpot_high = (
            (None, None, None, None)
            if serving is None
            else (serving.ttft_ms.p99, serving.ttft_p99_high_ms, serving.tpot_ms.p99, serving.tpot_p99_high_ms)
        )
        table.add_row(
            label,
            r.key,
            (serving.engine if serving is not None else "") or "-",
            usd(r.usd_per_1m_tokens),
            "-" if r.cost is None else str(r.cost.replicas),
            usd(r.usd_per_month),
            _p99(ttft, ttft_high),
            _p99(tpot, tpot_high),
            speed_kind(r),
        )
    levels = {r.serving.confidence for _, r in rows if r.serving is not None and r.serving.confidence is not None}
    if levels:
        table.caption = (
            f"(≤x): the P99 with every step at its one-sided {max(levels):.0%} upper bound, which the SLA check uses"
        )
    return table


def _p99(value: float | None, high: float | None) -> str:
    """A P99 and, on a calibrated GPU, the upper end of its interval the SLA was checked at ("59.8 (≤211)")."""
    return _ms(value) + ("" if value is None or high is None else f" (≤{high:.3g})")


def _mean_kl(result: CandidateResult) -> str:
    quality = result.quality
    return "-" if quality is None or quality.fidelity is None else f"{quality.fidelity.mean_kl:.2g}"


def _rejected_and_ties(rec: Recommendation, console: Console) -> None:
    if rec.rejected_cheaper:
        table = Table(title="Cheaper candidates that were rejected", title_justify="left")
        for column in ("config", "$/1M tok", "threshold broken"):
            table.add_column(column, overflow="fold")
        for r in rec.rejected_cheaper[:_MAX_REJECTED_ROWS]:
            table.add_row(r.key, usd(r.usd_per_1m_tokens), "; ".join(r.broken))
        console.print(table)
        hidden = len(rec.rejected_cheaper) - _MAX_REJECTED_ROWS
        if hidden > 0:
            console.print(f"... and {hidden} more in recommendation.json")
    if rec.ties:
        title = "Ties: within the tolerance of the winner's $/month, lost on the tie rule"
        table = Table(title=title, title_justify="left")
        for column in ("config", "$/month", "$/1M tok", "mean KL"):
            table.add_column(column, overflow="fold")
        for r in rec.ties[:_MAX_REJECTED_ROWS]:
            table.add_row(r.key, usd(r.usd_per_month), usd(r.usd_per_1m_tokens), _mean_kl(r))
        console.print(table)


def render(rec: Recommendation, console: Console) -> None:
    rows: list[tuple[str, CandidateResult]] = []
    if rec.winner is not None:
        rows.append(("recommended", rec.winner))
    if rec.current is not None:
        rows.append(("current", rec.current))
    console.print(_config_table(f"Recommendation for {rec.model} ({rec.release}), use case {rec.use_case}", rows))
    for label, r in rows:
        device = r.quality.device if r.quality is not None else "nothing (not measured)"
        console.print(f"  quality of {label} vs bf16 (measured on {device}): {_quality_cell(r)}")
    if rec.winner is None:
        console.print("[bold red]No candidate met every threshold.[/] Loosen a threshold or widen the space.")
    if rec.quantization_note:
        console.print(rec.quantization_note, markup=False)
    for effect in rec.levers:
        verdict, evidence = lever_lines(effect)
        console.print(verdict, markup=False)
        console.print(f"  {evidence}", markup=False)
    if rec.saving is not None:
        console.print(
            f"Saving against the current deployment: {rec.saving.percent_per_1m_tokens:.1f} % per token, "
            f"{usd(rec.saving.usd_per_month)}/month at the target traffic "
            f"({rec.saving.percent_per_month:.1f} %)."
        )
    _rejected_and_ties(rec, console)
    n = rec.counts
    console.print(
        f"{n.candidates} distinct candidates: {n.evaluated} evaluated, {n.pruned} pruned "
        f"before loading a model, {n.failed} failed, {n.feasible} feasible."
    )
    for note in rec.notes:
        console.print(f"[dim]note: {note}[/]")
