"""Verdicts: one Check per threshold, and the overall verdict of a method for a use case.

A task's check comes from the paired bootstrap (see statistics.py for the policy); the
fidelity check judges mean KL (nats/token) against its limit with the same policy: the
studentised interval over the windows (the sampling units, drawn at random; fidelity.py),
pass when all of it is within the limit, fail when all of it is past it, inconclusive
otherwise or on fewer than `MIN_KL_WINDOWS` windows (simulated with a tenth of the windows at
4x the KL of the rest, a mean 4 % past the limit passed 5.3 % of runs on 40 windows, 2.3 % on 64:
benchmarks/verdict_error_rates.py). Distributions equal at every
position (KL exactly 0 everywhere: the reference itself) pass. A result from before windows
were kept is judged on its point, as it was then. A check's *margin* is how far
past the threshold the result is, in the threshold's units (> 0 means broken); the search
hands the worst margin to Optuna as a constraint value. Its *normalised* margin divides by
the threshold's own size, so checks in different units (accuracy points, a relative rise of
bits per byte, KL in nats) compare: -0.5 leaves half the allowance unused whatever the unit.
Nothing measured means "unverified", never "pass".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from recommender.quality.fidelity import FidelityResult
from recommender.quality.statistics import DocPairs, PairedResult, paired_bootstrap
from recommender.quality.suite import TaskThreshold, Threshold, UseCase

Verdict = Literal["pass", "fail", "inconclusive", "unverified"]
#: Fewest fidelity windows on which the KL check decides (see the module's docstring).
MIN_KL_WINDOWS = 64


@dataclass(frozen=True, slots=True)
class Check:
    """One threshold applied to one measured quantity.

    ``threshold_scale``: the threshold's size in the margin's units (the allowed drop, the floor,
    the KL limit), by which `normalised_margin` divides. ``confidence``: the confidence of
    `delta_ci` (per look, see statistics.py); ``looks``: how many looks shared the suite's error
    rate. ``reference_docs``/``variant_docs``: the per-document (numerator, denominator) pairs
    compared, so a later release can be compared on the same documents (the release gate).
    """

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
    threshold_scale: float | None = None
    confidence: float | None = None
    looks: int = 1
    reference_docs: DocPairs = ()
    variant_docs: DocPairs = ()

    @property
    def normalised_margin(self) -> float | None:
        """`margin` / `threshold_scale` (< 0 inside the threshold); ±inf past a zero allowance; None if unknown."""
        if self.margin is None or self.threshold_scale is None:
            return None
        if self.threshold_scale > 0:
            return self.margin / self.threshold_scale
        return math.copysign(math.inf, self.margin) if self.margin else 0.0

    @property
    def interval(self) -> str:
        """`delta_ci` with its confidence, for reports: "[-0.02, +0.01] at 98.3 % (one of 3 looks)"."""
        if self.delta_ci is None:
            return "-"
        text = f"[{self.delta_ci[0]:+.4g}, {self.delta_ci[1]:+.4g}]"
        if self.confidence is not None:
            text += f" at {self.confidence:.1%}"
            text += f" (one of {self.looks} looks)" if self.looks > 1 else ""
        return text


def threshold_scale(spec: TaskThreshold) -> float:
    """The threshold's size in its margin's units: the allowed drop (relative or absolute), or |floor|."""
    th = spec.threshold
    for size in (th.max_relative_drop, th.max_absolute_drop, th.min_value):
        if size is not None:
            return abs(size)
    raise AssertionError("a Threshold has exactly one kind")


def task_check(spec: TaskThreshold, result: PairedResult | None) -> Check:
    desc = spec.threshold.describe(spec.higher_is_better)
    if result is None:
        return Check(
            spec.task,
            spec.metric,
            None,
            None,
            None,
            None,
            desc,
            "unverified",
            higher_is_better=spec.higher_is_better,
            threshold_scale=threshold_scale(spec),
        )
    return Check(
        spec.task,
        spec.metric,
        result.baseline,
        result.value,
        result.delta,
        result.margin_ci[1] if result.verdict != "fail" else result.margin,
        desc,
        result.verdict,
        result.delta_ci,
        result.n_docs,
        spec.higher_is_better,
        threshold_scale(spec),
        result.confidence,
        result.looks,
        result.reference_docs,
        result.variant_docs,
    )


def _kl_interval(use_case: UseCase, fidelity: FidelityResult, limit: float) -> PairedResult:
    """The verdict of mean KL <= limit on an interval over windows (each window: its KL sum over its positions)."""
    spec = TaskThreshold(
        task="fidelity", metric="mean_kl", higher_is_better=False, threshold=Threshold(min_value=limit)
    )
    positions = fidelity.tokens / len(fidelity.window_kl)
    variant = np.asarray([[k * positions, positions] for k in fidelity.window_kl])
    reference = np.stack([np.zeros(len(variant)), variant[:, 1]], axis=1)
    return paired_bootstrap(spec, reference, variant, policy=use_case.verdict_policy, confidence=use_case.confidence)


def fidelity_check(use_case: UseCase, fidelity: FidelityResult | None) -> Check | None:
    limit = use_case.fidelity.max_mean_kl
    if limit is None:
        return None
    desc = f"mean KL <= {limit:g} nats/token"
    if fidelity is None:
        return Check(
            "fidelity",
            "mean_kl",
            0.0,
            None,
            None,
            None,
            desc,
            "unverified",
            higher_is_better=False,
            threshold_scale=limit,
        )
    margin = fidelity.mean_kl - limit
    if not fidelity.window_kl or not any(fidelity.window_kl):  # an older result, or equal distributions
        return Check(
            "fidelity",
            "mean_kl",
            0.0,
            fidelity.mean_kl,
            fidelity.mean_kl,
            margin,
            desc,
            "pass" if margin <= 0 else "fail",
            None,
            fidelity.tokens,
            False,
            limit,
        )
    result = _kl_interval(use_case, fidelity, limit)
    few = use_case.verdict_policy == "confidence" and len(fidelity.window_kl) < MIN_KL_WINDOWS
    verdict: Verdict = "inconclusive" if few else result.verdict
    return Check(
        "fidelity",
        "mean_kl",
        0.0,
        fidelity.mean_kl,
        fidelity.mean_kl,
        result.margin_ci[1] if verdict != "fail" else margin,
        desc,
        verdict,
        result.delta_ci,
        len(fidelity.window_kl),
        False,
        limit,
        result.confidence,
    )


def overall(checks: list[Check]) -> Verdict:
    """fail if any check fails; else unverified, inconclusive, then pass, in that order."""
    verdicts = {c.verdict for c in checks}
    for verdict in ("fail", "unverified", "inconclusive"):
        if verdict in verdicts:
            return verdict
    return "pass"
