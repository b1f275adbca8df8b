"""The release gate: did a new release of a model regress in cost or quality against an old one?

Pure functions over two `ReleaseStudy` records, so the CLI is a thin shell and the rules
are testable on their own. Quality is compared with intervals over documents, not point
values (a point drop of 1.1 % on six documents says nothing), where it is comparable:

- the bf16 model's own task scores: every check records the per-document scores it compared,
  the bf16 reference's among them, so the two releases' bf16 models are compared *paired*,
  document by document (`paired_bootstrap`: exact flip bounds for 0/1 metrics, the minimum
  document count for others), as the interval of the relative drop at ``confidence``. A
  fine-tune that lost quality shows here;
- what the recommended precision loses against its own bf16 (the relative paired loss,
  positive = worse), and how much that loss grew since the replaced release: both releases
  score the same documents in the same order, so the growth is paired per document across the
  two releases (growth.py), at ``confidence``. A release whose weights quantize worse shows here.

How many documents an allowance needs: a 0/1 task whose answers did not change at all bounds
the change by about 3.69 / n of accuracy (the exact zero-flip bound at 97.5 %), so an allowance
of L (relative) at accuracy a needs n >= 3.69 / (L * a) documents: 820 at 45 % for 1 %, 410 for
2 %. Where a fraction f of answers churn both ways without a net change, the interval is about
+-1.96 * sqrt(f / n) / a wide and needs roughly (3.3 * sqrt(f) / (L * a)) ** 2 documents to
pass nine times in ten.

Each comparison against the allowance L (``max_quality_drop_pct``): the whole interval above
L is a regression; an interval reaching above L, or too few documents to decide, "cannot rule
out" a regression — also a broken line, since a gate must not pass for want of evidence; the
whole interval within L passes. A study recorded before checks kept per-document scores
cannot be compared, and the gate says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from recommender.errors import BadInputError
from recommender.money import usd
from recommender.quality.result import QualityResult
from recommender.quality.statistics import MIN_CONTINUOUS_DOCS, DocPairs, paired_bootstrap
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import Check
from recommender.releases.growth import Loss, loss_growth
from recommender.releases.history import ReleaseStudy

REFERENCE = "bf16/baseline"


@dataclass(frozen=True)
class GateLimits:
    """What a release may lose against the one it replaces, and the confidence its quality intervals are taken at."""

    max_cost_increase_pct: float = 5.0
    max_quality_drop_pct: float = 1.0
    require_pass: list[str] = field(default_factory=list)
    confidence: float = 0.95


def relative_loss(check: Check, reference: DocPairs, variant: DocPairs, *, confidence: float) -> Loss | None:
    """How much worse `variant` scores than `reference` on their common documents, as a fraction; None without any."""
    n = min(len(reference), len(variant))
    if n == 0:
        return None
    spec = TaskThreshold(
        task=check.name,
        metric=check.metric,
        higher_is_better=check.higher_is_better,
        threshold=Threshold(max_relative_drop=0.0),  # the margin is then the relative loss itself
    )
    result = paired_bootstrap(spec, np.asarray(reference[:n]), np.asarray(variant[:n]), confidence=confidence)
    return Loss(result.margin, result.margin_ci[0], result.margin_ci[1], n, result.decisive)


def judge(label: str, loss: Loss, limits: GateLimits, *, confidence: float, what: str) -> str | None:
    """One broken line when `loss` is, or may be, above the allowance; None when its whole interval is within it."""
    limit = limits.max_quality_drop_pct / 100.0
    allowance = f"{limits.max_quality_drop_pct:g} %"
    interval = f"{confidence:.0%} interval [{loss.low:+.2%}, {loss.high:+.2%}] on {loss.n_docs} documents"
    if loss.decisive and loss.low > limit:
        return f"{label}: {what} {loss.point:+.2%} ({interval}) > {allowance}"
    if not loss.decisive:
        need = f"fewer than {MIN_CONTINUOUS_DOCS} documents decide nothing for this metric"
        return f"{label}: cannot rule out {what} > {allowance} ({loss.point:+.2%}, {interval}: {need})"
    if loss.high > limit:
        return f"{label}: cannot rule out {what} > {allowance} ({loss.point:+.2%}, {interval}; more documents needed)"
    return None


def _checks(quality: QualityResult | None) -> dict[str, Check]:
    return {f"{c.name}/{c.metric}": c for c in (quality.checks if quality else []) if c.name != "fidelity"}


def _reference_checks(quality: dict[str, QualityResult]) -> dict[str, Check]:
    """Per task/metric, the measured check holding the most per-document scores of the release's bf16 model."""
    found: dict[str, Check] = {}
    for result in quality.values():
        for name, check in _checks(result).items():
            if check.value is not None and len(check.reference_docs) >= len(found.get(name, check).reference_docs):
                found[name] = check
    return found


def _no_docs(label: str, *releases: tuple[ReleaseStudy, Check]) -> str:
    missing = ", ".join(study.release for study, check in releases if not check.reference_docs)
    why = "recorded no per-document scores (studied before they were kept): re-run its search"
    return f"{label}: release {missing} {why}"


def _cost_regressions(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    broken: list[str] = []
    new, old = candidate.winner, against.winner
    if new is None:
        had = f" (release {against.release} had {old.key})" if old else ""
        broken.append(f"no configuration of release {candidate.release} meets every threshold{had}")
    elif new.quality_verdict != "pass":
        broken.append(f"recommended {new.key}: quality {new.quality_verdict}")
    if new is not None and old is not None and new.cost is not None and old.cost is not None:
        new_price, old_price = new.cost.usd_per_1m_tokens, old.cost.usd_per_1m_tokens
        increase = 100.0 * (new_price / old_price - 1.0)
        if increase > limits.max_cost_increase_pct:
            broken.append(
                f"cost: {usd(new_price, significant=3)}/1M tokens ({new.key}) vs {usd(old_price, significant=3)} "
                f"({old.key}): {increase:+.1f} % > +{limits.max_cost_increase_pct:g} %"
            )
    return broken


def _reference_regressions(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    """The candidate's bf16 against the replaced release's bf16, paired on the documents both scored."""
    broken: list[str] = []
    new_ref = _reference_checks(candidate.quality_by_method())
    for name, old_check in _reference_checks(against.quality_by_method()).items():
        new_check = new_ref.get(name)
        if new_check is None:
            continue
        label = f"bf16 {name}"
        loss = relative_loss(
            old_check, old_check.reference_docs, new_check.reference_docs, confidence=limits.confidence
        )
        if loss is None:
            broken.append(_no_docs(label, (candidate, new_check), (against, old_check)))
            continue
        line = judge(label, loss, limits, confidence=limits.confidence, what=f"drop against release {against.release}")
        broken += [line] if line else []
    return broken


def _method_regressions(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    """Whether the recommended precision loses more against its own bf16 than it did in the replaced release."""
    new = candidate.winner
    method = "" if new is None else f"{new.candidate.precision}/{new.candidate.method}"
    if new is None or method == REFERENCE:  # bf16 loses nothing against itself; its own drop is judged above
        return []
    old_checks = _checks(against.quality_by_method().get(method))
    broken: list[str] = []
    for name, new_check in _checks(candidate.quality_by_method().get(method)).items():
        old_check = old_checks.get(name)
        if old_check is None or old_check.value is None or new_check.value is None:
            continue
        growth = loss_growth(
            new_check.metric,
            new_check.higher_is_better,
            (np.asarray(old_check.reference_docs), np.asarray(old_check.variant_docs)),
            (np.asarray(new_check.reference_docs), np.asarray(new_check.variant_docs)),
            confidence=limits.confidence,
        )
        label = f"{method} {name}"
        if growth is None:
            broken.append(_no_docs(label, (candidate, new_check), (against, old_check)))
            continue
        what = f"loss against its bf16 grown since release {against.release} by"
        line = judge(label, growth, limits, confidence=limits.confidence, what=what)
        broken += [line] if line else []
    return broken


def check_required_methods(values: list[str]) -> None:
    """Each `--require-pass` value names a known precision/method: a typo would otherwise read as a regression."""
    from recommender.quantize import get_scheme

    for value in values:
        precision, slash, name = value.partition("/")
        if not slash:
            raise BadInputError("--require-pass", f"{value!r} is not precision/method", "e.g. int8/bnb-llm-int8")
        method = get_scheme(name, field="--require-pass")
        if method.precision != precision:
            raise BadInputError(
                "--require-pass",
                f"method {name!r} is {method.precision}, not {precision!r}",
                f"use {method.precision}/{name}",
            )


def gate(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    """The regressions of `candidate` against `against`, one line each; empty when the gate passes."""
    broken = _cost_regressions(candidate, against, limits)
    broken += _reference_regressions(candidate, against, limits)
    broken += _method_regressions(candidate, against, limits)
    new_quality = candidate.quality_by_method()
    for method in limits.require_pass:
        found = new_quality.get(method)
        verdict = "unverified" if found is None else found.verdict
        if verdict != "pass":
            broken.append(f"{method}: quality {verdict} (required: pass)")
    return broken
