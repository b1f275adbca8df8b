"""The decision, as pure functions over candidate results: who wins, who ties, what cannot matter.

Policy: among feasible candidates (quality verdict "pass" on every check, every latency and
memory limit met), the cheapest in $/1M tokens wins; candidates within ``COST_TOLERANCE`` of
that price count as ties, and a tie goes to the one with the best quality margin (so a 0.1 %
saving never buys a quality loss). The same tolerance bounds the price above which a
candidate's quality need not be measured. The search, every worker and the report call these
functions — the rule is written once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from recommender.candidate import CandidateResult

#: Prices within this fraction of the cheapest feasible one are ties.
COST_TOLERANCE = 0.01
TIE_POLICY = f"ties within {COST_TOLERANCE:.0%} of the cheapest price go to the best quality margin"


def _priced_feasible(results: Iterable[CandidateResult]) -> list[CandidateResult]:
    return [r for r in results if r.feasible and r.usd_per_1m_tokens is not None]


def _price(result: CandidateResult) -> float:
    return math.inf if result.usd_per_1m_tokens is None else result.usd_per_1m_tokens


def cost_bound(results: Iterable[CandidateResult]) -> float | None:
    """Above this price a candidate cannot be recommended: the cheapest feasible one's, plus the tie tolerance."""
    prices = [_price(r) for r in _priced_feasible(results)]
    return min(prices) * (1 + COST_TOLERANCE) if prices else None


def tied(results: Iterable[CandidateResult]) -> list[CandidateResult]:
    """Every feasible candidate within the tie tolerance of the cheapest feasible price, cheapest first."""
    feasible = _priced_feasible(results)
    bound = cost_bound(feasible)
    if bound is None:
        return []
    return sorted((r for r in feasible if _price(r) <= bound), key=_price)


def pick(results: Iterable[CandidateResult]) -> CandidateResult | None:
    """The recommended candidate, or None when nothing is feasible."""
    return min(tied(results), key=lambda r: (r.quality_margin, _price(r), r.key), default=None)


def ties(results: Iterable[CandidateResult], winner: CandidateResult | None) -> list[CandidateResult]:
    """The other feasible candidates within the tie tolerance of the cheapest price, cheapest first."""
    return [r for r in tied(results) if r is not winner] if winner is not None else []


def rejected_cheaper(results: Iterable[CandidateResult], winner: CandidateResult | None) -> list[CandidateResult]:
    """Infeasible candidates priced below the winner (below everything when none wins), cheapest first."""
    limit = math.inf if winner is None else _price(winner)
    return sorted((r for r in results if not r.feasible and _price(r) < limit), key=_price)


def quality_cannot_matter(result: CandidateResult, bound: float | None) -> str | None:
    """Why a candidate cannot be recommended whatever its quality, or None when its quality decides.

    `result` is the candidate's speed-and-cost evaluation; `bound` the `cost_bound` of what is known.
    """
    if result.cost is None:
        return "not evaluated: no arrival rate meets the latency SLA"
    if result.constraints.get("ttft", 0.0) > 0 or result.constraints.get("tpot", 0.0) > 0:
        return "not evaluated: the latency SLA is already broken"
    if bound is not None and result.cost.usd_per_1m_tokens > bound:
        return (
            f"not evaluated: ${result.cost.usd_per_1m_tokens:.4g}/1M tokens is above ${bound:.4g}, "
            "a feasible candidate's price (tie tolerance included)"
        )
    return None
