"""The printed answer of `recommender gate`: one line for a pass, or one line per broken limit.

Plain lines (no colour, no table) because a CI log is where they are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.money import usd

if TYPE_CHECKING:
    from recommender.releases.history import ReleaseStudy


def gate_lines(*, model: str, candidate: str, against: str, new: ReleaseStudy, broken: list[str]) -> list[str]:
    """The verdict line naming the candidate's recommendation, then each regression (`broken`) indented."""
    if not broken:
        winner = new.winner.key if new.winner else "nothing feasible"
        price = new.winner.usd_per_1m_tokens if new.winner else None
        cost = "-" if price is None else f"{usd(price, significant=3)}/1M tokens"
        return [f"gate passed: {model} {candidate} vs {against}: {winner} at {cost}"]
    return [f"gate FAILED: {model} {candidate} vs {against}: {len(broken)} regression(s)"] + [
        f"  - {line}" for line in broken
    ]
