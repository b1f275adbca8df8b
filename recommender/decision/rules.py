"""The decision, as pure functions over candidate results: who wins, who ties, what cannot matter.

Policy (`TIE_POLICY`): among feasible candidates (quality verdict "pass" on every check, every
latency and memory limit met), the one the user pays least for wins: $/month at the spec's
traffic (replicas x GPUs x hourly price), then $/1M tokens at capacity. Candidates within
``COST_TOLERANCE`` of the cheapest $/month are ties, and a tie goes to the least quantized
scheme (more bits per weight, then the 16-bit KV cache), then to the one more of the spec's
engines launch, then to the best quality margin, then to the lower $/1M tokens, then to the key.

$/month at a stated traffic moves in whole replicas, so ties are common: at low traffic a bf16
and an int8 replica on the same GPU cost the same, and bf16 wins — quantizing pays only when it
saves a replica or a GPU class, and `quantization_does_not_pay` says so when it does not.

The tie band (`perf.pricing.tie_band`) and the "least quantized" order
(`quantize.precisions.least_quantized`) sit below, where `plan` and the GPU mix use them too.

The same ordering decides where quality is worth measuring: above the tie window of the
cheapest feasible $/month a candidate cannot win (`cost_bound`), and inside it a candidate that
a feasible one beats before quality is compared (as cheap or cheaper per month, and less
quantized or launched by more engines) cannot win either (`quality_cannot_matter`). The search,
every worker and the report call these functions — the rule is written once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from recommender.evaluation.candidate import CandidateResult
from recommender.money import usd
from recommender.perf.pricing import COST_TOLERANCE, tie_band
from recommender.quantize.precisions import least_quantized, precision_bits

TIE_POLICY = (
    f"cheapest $/month at the target traffic, then $/1M tokens; within {COST_TOLERANCE:.0%} of the cheapest "
    "$/month a tie goes to the least quantized scheme (bits per weight, then KV cache), then to the one more "
    "of the spec's engines launch, then to the best quality margin, then to the lower $/1M tokens"
)


def _month(result: CandidateResult) -> float:
    return math.inf if result.usd_per_month is None else result.usd_per_month


def _per_token(result: CandidateResult) -> float:
    return math.inf if result.usd_per_1m_tokens is None else result.usd_per_1m_tokens


def _cost(result: CandidateResult) -> tuple[float, float]:
    """What the user pays: per month at the target traffic, then per token at capacity."""
    return _month(result), _per_token(result)


def _before_quality(result: CandidateResult) -> tuple[int, int, int]:
    """The tie rule's keys that come before quality, smaller first: least quantized, then most engines."""
    c = result.candidate
    return (*least_quantized(c.precision, c.kv_cache_dtype), -len(result.engines))


def _tie_rank(result: CandidateResult) -> tuple[tuple[int, int, int], float, float, str]:
    return _before_quality(result), result.quality_margin, _per_token(result), result.key


def _priced_feasible(results: Iterable[CandidateResult]) -> list[CandidateResult]:
    return [r for r in results if r.feasible and r.usd_per_month is not None]


@dataclass(frozen=True)
class CostBound:
    """What the feasible candidates known so far say about an unmeasured candidate's chances.

    Args:
        usd_per_month: above this a candidate cannot win: the cheapest feasible $/month plus the tie tolerance.
        feasible: the feasible candidates, for the ties a candidate would lose before quality is compared.
    """

    usd_per_month: float
    feasible: tuple[CandidateResult, ...]


def cost_bound(results: Iterable[CandidateResult]) -> CostBound | None:
    """The bound the feasible candidates among `results` set, or None while there are none."""
    feasible = _priced_feasible(results)
    if not feasible:
        return None
    return CostBound(min(_month(r) for r in feasible) * (1 + COST_TOLERANCE), tuple(feasible))


def tied(results: Iterable[CandidateResult]) -> list[CandidateResult]:
    """Every feasible candidate within the tie tolerance of the cheapest feasible $/month, cheapest first."""
    return sorted(tie_band(_priced_feasible(results), _month), key=_cost)


def pick(results: Iterable[CandidateResult]) -> CandidateResult | None:
    """The recommended candidate, or None when nothing is feasible."""
    return min(tied(results), key=_tie_rank, default=None)


def ties(results: Iterable[CandidateResult], winner: CandidateResult | None) -> list[CandidateResult]:
    """The other feasible candidates within the tie tolerance of the cheapest $/month, cheapest first."""
    return [r for r in tied(results) if r is not winner] if winner is not None else []


def rejected_cheaper(results: Iterable[CandidateResult], winner: CandidateResult | None) -> list[CandidateResult]:
    """Infeasible candidates that would have saved money per month (anything priced when none wins), cheapest first.

    "Cheaper" means below the winner's tie window: one that costs the same per month to within the
    tolerance would have lost the tie anyway, so it saves nothing and is not a rejected saving.
    """
    if winner is None or winner.usd_per_month is None:
        return sorted((r for r in results if not r.feasible and r.cost is not None), key=_cost)
    limit = winner.usd_per_month / (1 + COST_TOLERANCE)
    return sorted(
        (r for r in results if not r.feasible and r.usd_per_month is not None and r.usd_per_month < limit), key=_cost
    )


def quality_cannot_matter(result: CandidateResult, bound: CostBound | None) -> str | None:
    """Why a candidate cannot be recommended whatever its quality, or None when its quality decides.

    `result` is the candidate's speed-and-cost evaluation; `bound` the `cost_bound` of what is known.
    A feasible candidate that is no dearer per month and wins the tie before quality is compared
    stays in the tie window whatever cheaper candidate turns up later, so the skip is final.
    """
    if result.cost is None:
        return "not evaluated: no arrival rate meets the latency SLA"
    if result.constraints.latency_broken:
        return "not evaluated: the latency SLA is already broken"
    if bound is None:
        return None
    month = result.cost.usd_per_month
    if month > bound.usd_per_month:
        return (
            f"not evaluated: {usd(month, cents=True)}/month at the target traffic is above "
            f"{usd(bound.usd_per_month, cents=True)}/month, a feasible candidate's (tie tolerance included)"
        )
    winner = next(
        (
            r
            for r in sorted(bound.feasible, key=_tie_rank)
            if r.key != result.key and _month(r) <= month and _before_quality(r) < _before_quality(result)
        ),
        None,
    )
    if winner is not None:
        return (
            f"not evaluated: {winner.key} is feasible at {usd(_month(winner), cents=True)}/month, no more than this, "
            "and wins the tie before quality is compared (less quantized, or launched by more of the spec's engines)"
        )
    return None


def quality_skip(result: CandidateResult, known: Iterable[CandidateResult]) -> str | None:
    """The search's quality policy (`evaluation.evaluator.QualityPolicy`, injected there by the study):
    `quality_cannot_matter` against the `cost_bound` of the results known so far."""
    return quality_cannot_matter(result, cost_bound(known))


def quantization_does_not_pay(results: Iterable[CandidateResult], winner: CandidateResult | None) -> str | None:
    """One line when a 16-bit winner costs no more per month than a quantized scheme on the same hardware.

    The quantized candidates counted are those whose speed and cost were evaluated and meet the
    latency SLA, whatever their quality: quantizing would not have saved money even had it passed.
    """
    if winner is None or winner.cost is None or precision_bits(winner.candidate.precision) != 16:
        return None
    w = winner.candidate
    quantized = [
        r
        for r in results
        if r.status == "evaluated"
        and r.cost is not None
        and not r.constraints.latency_broken
        and (r.candidate.hardware, r.candidate.tensor_parallel) == (w.hardware, w.tensor_parallel)
        and precision_bits(r.candidate.precision) < 16
        and _month(r) <= _month(winner) * (1 + COST_TOLERANCE)
    ]
    if not quantized:
        return None
    cheapest = min(quantized, key=_cost)
    month, theirs = _month(winner), _month(cheapest)
    head = f"quantization does not pay at this traffic: {w.precision} on {w.hardware} costs"
    if theirs == month:
        return f"{head} the same {usd(month)}/month as {cheapest.key}"
    return f"{head} {usd(month)}/month, within {COST_TOLERANCE:.0%} of {cheapest.key}'s {usd(theirs)}/month"
