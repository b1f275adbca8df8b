"""The tie-break margin: each check's headroom as a fraction of its own threshold, the tightest one counting."""

from __future__ import annotations

import math

import pytest

from recommender.config.candidate import Candidate
from recommender.decision.rules import pick
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.evaluator import with_quality
from recommender.perf.pricing import CostEstimate
from recommender.quality.fidelity import FidelityResult
from recommender.quality.result import QualityResult
from recommender.quality.statistics import PairedResult
from recommender.quality.suite import Fidelity, TaskThreshold, Threshold, UseCase
from recommender.quality.verdict import Check, fidelity_check, overall, task_check

ACC = TaskThreshold(task="next_line", metric="acc", higher_is_better=True, threshold=Threshold(max_absolute_drop=0.02))
USE_CASE = UseCase(name="u", tasks=[ACC], fidelity=Fidelity(max_mean_kl=0.002))


def _checks(acc_margin: float, mean_kl: float) -> list[Check]:
    """An accuracy check (points) whose worst plausible margin is `acc_margin`, and a KL check (nats/token)."""
    paired = PairedResult(0.6, 0.6, 0.0, (-0.01, 0.01), acc_margin, (acc_margin - 0.01, acc_margin), 500, "pass")
    kl = fidelity_check(USE_CASE, FidelityResult(mean_kl, 2 * mean_kl, 0.99, 1.0, 4096))
    assert kl is not None
    return [task_check(ACC, paired), kl]


def _result(method: str, checks: list[Check]) -> CandidateResult:
    cost = CostEstimate(
        usd_per_1m_tokens=0.5, replicas=1, accelerators=1, usd_per_month=500.0, price_per_hour_usd=1.0, price_source="t"
    )
    bare = CandidateResult(Candidate("int8", method, "l4", 8), "evaluated", Constraints(quality=1.0), [], cost=cost)
    return with_quality(bare, QualityResult(method, "int8", overall(checks), checks, None, "cpu", 0.0))


def test_tie_goes_to_the_most_headroom_relative_to_each_threshold() -> None:
    # a: 0.1 point of a 2-point accuracy allowance left (5 %), KL far inside its limit (95 % left).
    a = _result("a", _checks(acc_margin=-0.001, mean_kl=0.0001))
    # b: 1.5 points of accuracy left (75 %), KL 0.0012 of 0.002 (40 % left).
    b = _result("b", _checks(acc_margin=-0.015, mean_kl=0.0012))
    assert a.quality_margin == pytest.approx(-0.05) and b.quality_margin == pytest.approx(-0.4)
    # One margin: the search's quality constraint is the same normalised figure (in raw units the KL's small
    # numbers would decide: a's worst -0.001 "beats" b's -0.0008, the wrong winner).
    assert (a.constraints.quality, b.constraints.quality) == (a.quality_margin, b.quality_margin)
    assert pick([a, b]) is b and pick([b, a]) is b


def test_margin_of_an_unmeasured_or_unscaled_result() -> None:
    unverified = [task_check(ACC, None)]
    assert _result("u", unverified).quality_margin == 1.0
    # A zero allowance: any headroom is infinite relative to it, any excess infinitely past it.
    zero = Check("t", "acc", 0.6, 0.61, 0.01, -0.01, "absolute drop <= 0", "pass", threshold_scale=0.0)
    assert zero.normalised_margin == -math.inf
    # Results logged before checks carried their threshold's size fall back to the raw constraint.
    old = Check("t", "acc", 0.6, 0.6, 0.0, -0.01, "absolute drop <= 0.02", "pass")
    assert _result("o", [old]).quality_margin == pytest.approx(-0.01)
