"""Verdicts: a quantized variant's task scores against the baseline's, under the suite's thresholds.

Policy (for now): the point estimate decides — a task passes when its degradation is
within the threshold. Each check also yields a *margin* (how far past the threshold, in
the threshold's own units; > 0 means broken), which the search hands to Optuna as a
constraint value. A task with no score is "unverified", never "pass".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from recommender.quality.fidelity import FidelityResult
from recommender.quality.lm_eval_runner import TaskScore
from recommender.quality.suite import TaskThreshold, UseCase

Verdict = Literal["pass", "fail", "unverified"]


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def degradation(baseline: float, value: float, higher_is_better: bool) -> float:
    """How much worse `value` is than `baseline` (positive = worse), in the metric's units."""
    return baseline - value if higher_is_better else value - baseline


def check_task(spec: TaskThreshold, baseline: TaskScore | None, score: TaskScore | None) -> Check:
    th = spec.threshold
    desc = th.describe(spec.higher_is_better)
    if score is None or (baseline is None and th.min_value is None):
        return Check(spec.task, spec.metric, baseline.value if baseline else None, None, None, None, desc, "unverified")
    delta = score.value - baseline.value if baseline else None
    if th.min_value is not None:
        margin = th.min_value - score.value if spec.higher_is_better else score.value - th.min_value
    else:
        assert baseline is not None
        worse = degradation(baseline.value, score.value, spec.higher_is_better)
        if th.max_relative_drop is not None:
            margin = worse / abs(baseline.value) - th.max_relative_drop if baseline.value else worse
        else:
            assert th.max_absolute_drop is not None
            margin = worse - th.max_absolute_drop
    return Check(
        spec.task,
        spec.metric,
        baseline.value if baseline else None,
        score.value,
        delta,
        margin,
        desc,
        "pass" if margin <= 0 else "fail",
    )


def check_fidelity(use_case: UseCase, fidelity: FidelityResult | None) -> Check | None:
    limit = use_case.fidelity.max_mean_kl
    if limit is None:
        return None
    desc = f"mean KL <= {limit:g}"
    if fidelity is None:
        return Check("fidelity", "mean_kl", 0.0, None, None, None, desc, "unverified")
    margin = fidelity.mean_kl - limit
    return Check(
        "fidelity", "mean_kl", 0.0, fidelity.mean_kl, fidelity.mean_kl, margin, desc, "pass" if margin <= 0 else "fail"
    )


def all_checks(
    use_case: UseCase,
    baseline: dict[str, TaskScore],
    scores: dict[str, TaskScore],
    fidelity: FidelityResult | None,
) -> list[Check]:
    checks = [check_task(spec, baseline.get(spec.task), scores.get(spec.task)) for spec in use_case.tasks]
    kl = check_fidelity(use_case, fidelity)
    return checks + ([kl] if kl else [])


def overall(checks: list[Check]) -> Verdict:
    """fail if any check fails; unverified if any is unverified; else pass."""
    verdicts = {c.verdict for c in checks}
    if "fail" in verdicts:
        return "fail"
    if "unverified" in verdicts:
        return "unverified"
    return "pass"
