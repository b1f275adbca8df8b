"""The serving levers on the winner: prefix caching and speculative decoding, with and without each; and its
layout, aggregated against disaggregated pools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.money import usd
from recommender.report.blocks import Block, Heading, Table, num, para

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.levers import LeverEffect

__all__ = ["layouts", "lever_lines", "levers"]


def lever_lines(effect: LeverEffect) -> tuple[str, str]:
    """The lever's verdict and what it rests on, as two plain lines (the console prints them)."""
    tpot = (
        f"P99 TPOT {effect.with_tpot_p99_ms:.2f} ms with it, {effect.without_tpot_p99_ms:.2f} ms without"
        if effect.with_tpot_p99_ms is not None and effect.without_tpot_p99_ms is not None
        else ""
    )
    return f"{effect.lever}: {effect.verdict}", "; ".join(part for part in (effect.measured, tpot) if part)


def levers(rec: Recommendation) -> list[Block]:
    """A table of each lever on the winner, then what each was measured or simulated from."""
    if not rec.levers:
        return []
    rows = tuple(
        (
            e.lever,
            num(e.with_tpot_p99_ms, ".2f"),
            num(e.without_tpot_p99_ms, ".2f"),
            usd(e.with_usd_per_month),
            usd(e.without_usd_per_month),
            e.verdict,
        )
        for e in rec.levers
    )
    header = ("lever", "P99 TPOT with (ms)", "without (ms)", "$/month with", "without", "verdict")
    return [
        Heading("Serving levers on the recommended configuration"),
        Table(header, rows),
        *(para(f"{e.lever}: {e.measured}") for e in rec.levers),
    ]


def layouts(rec: Recommendation) -> list[Block]:
    """The winner's scheme and GPU aggregated against disaggregated, side by side, then why the winner wins."""
    v = rec.layouts
    if v is None:
        return []
    rows = (
        ("aggregated", v.aggregated, num(v.aggregated_gpus, "d"), usd(v.aggregated_usd_per_month)),
        ("disaggregated", v.disaggregated, num(v.disaggregated_gpus, "d"), usd(v.disaggregated_usd_per_month)),
    )
    return [
        Heading("Aggregated against disaggregated"),
        Table(("layout", "config", "GPUs", "$/month"), rows),
        para(v.reason),
    ]
