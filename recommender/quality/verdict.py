"""Verdicts: one Check per threshold, and the overall verdict of a method for a use case.

A task's check comes from the paired bootstrap (see statistics.py for the policy); the
fidelity check compares mean KL with its limit. A check's *margin* is how far past the
threshold the result is, in the threshold's units (> 0 means broken); the search hands
the worst margin to Optuna as a constraint value. Nothing measured means "unverified",
never "pass".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from recommender.quality.fidelity import FidelityResult
from recommender.quality.statistics import PairedResult
from recommender.quality.suite import TaskThreshold, UseCase

Verdict = Literal["pass", "fail", "inconclusive", "unverified"]


@dataclass(frozen=True, slots=True)
class Check:
    """One threshold applied to one measured quantity."""

    name: str
    metric: str
    baseline: float | None
    value: float | None
    delta: float | None
    margin: float | None
    threshold: str
    verdict: Verdict
    delta_ci: tuple[float, float] | None = None
    n_docs: int | None = None
    higher_is_better: bool = True


def task_check(spec: TaskThreshold, result: PairedResult | None) -> Check:
    desc = spec.threshold.describe(spec.higher_is_better)
    if result is None:
        return Check(spec.task, spec.metric, None, None, None, None, desc, "unverified",
                     higher_is_better=spec.higher_is_better)  # fmt: skip
    return Check(
        spec.task, spec.metric, result.baseline, result.value, result.delta,
        result.margin_ci[1] if result.verdict != "fail" else result.margin,
        desc, result.verdict, result.delta_ci, result.n_docs, spec.higher_is_better,
    )  # fmt: skip


def fidelity_check(use_case: UseCase, fidelity: FidelityResult | None) -> Check | None:
    limit = use_case.fidelity.max_mean_kl
    if limit is None:
        return None
    desc = f"mean KL <= {limit:g}"
    if fidelity is None:
        return Check("fidelity", "mean_kl", 0.0, None, None, None, desc, "unverified", higher_is_better=False)
    margin = fidelity.mean_kl - limit
    return Check(
        "fidelity", "mean_kl", 0.0, fidelity.mean_kl, fidelity.mean_kl, margin, desc,
        "pass" if margin <= 0 else "fail", None, fidelity.tokens, False,
    )  # fmt: skip


def overall(checks: list[Check]) -> Verdict:
    """fail if any check fails; else unverified, inconclusive, then pass, in that order."""
    verdicts = {c.verdict for c in checks}
    for verdict in ("fail", "unverified", "inconclusive"):
        if verdict in verdicts:
            return verdict
    return "pass"
