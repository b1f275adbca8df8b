"""The release gate: did a new release of a model regress in cost or quality against an old one?

Pure functions over two `ReleaseStudy` records, so the CLI is a thin shell and the rules
are testable on their own. Quality is compared where it is comparable:

- the bf16 model's own task scores (the reference is always scored on the suite's whole
  document budget, so both releases answer the same documents): a fine-tune that lost
  quality shows here;
- what the recommended precision loses against its own bf16 (the paired delta, in the
  metric's "worse" direction, as a fraction of the bf16 score): a release whose weights
  quantize worse shows here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.releases import ReleaseStudy

REFERENCE = "bf16/baseline"


@dataclass(frozen=True)
class GateLimits:
    """What a release may lose against the one it replaces."""

    max_cost_increase_pct: float = 5.0
    max_quality_drop_pct: float = 1.0
    require_pass: list[str] = field(default_factory=list)


def _loss_fraction(check: Check | None) -> float | None:
    """How much worse than bf16, as a fraction of the bf16 value (positive = worse)."""
    if check is None or check.delta is None or not check.baseline:
        return None
    worse = -check.delta if check.higher_is_better else check.delta
    return worse / abs(check.baseline)


def _checks(quality: QualityResult | None) -> dict[str, Check]:
    return {f"{c.name}/{c.metric}": c for c in (quality.checks if quality else []) if c.name != "fidelity"}


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
                f"cost: ${new_price:.4g}/1M tokens ({new.key}) vs ${old_price:.4g} "
                f"({old.key}): {increase:+.1f} % > +{limits.max_cost_increase_pct:g} %"
            )
    return broken


def _reference_regressions(new_ref: dict[str, Check], old_ref: dict[str, Check], limits: GateLimits) -> list[str]:
    broken: list[str] = []
    for name, old_check in old_ref.items():
        new_check = new_ref.get(name)
        if new_check is None or old_check.value is None or new_check.value is None:
            continue
        change = (new_check.value - old_check.value) / abs(old_check.value or 1.0)
        drop = -change if old_check.higher_is_better else change
        if drop > limits.max_quality_drop_pct / 100.0:
            broken.append(
                f"bf16 {name}: {new_check.value:.4g} vs {old_check.value:.4g} "
                f"({drop:.1%} worse > {limits.max_quality_drop_pct:g} %)"
            )
    return broken


def gate(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    """The regressions of `candidate` against `against`, one line each; empty when the gate passes."""
    broken = _cost_regressions(candidate, against, limits)
    new_quality, old_quality = candidate.quality_by_method(), against.quality_by_method()
    limit = limits.max_quality_drop_pct / 100.0
    broken += _reference_regressions(_checks(new_quality.get(REFERENCE)), _checks(old_quality.get(REFERENCE)), limits)
    new = candidate.winner
    if new is not None:
        method = f"{new.candidate.precision}/{new.candidate.method}"
        old_loss = _checks(old_quality.get(method))
        for name, new_check in _checks(new_quality.get(method)).items():
            before, after = _loss_fraction(old_loss.get(name)), _loss_fraction(new_check)
            if before is None or after is None:
                continue
            if after - before > limit:
                broken.append(
                    f"{method} {name}: loses {after:.2%} against its bf16 vs {before:.2%} in release "
                    f"{against.release} (+{after - before:.2%} > {limits.max_quality_drop_pct:g} %)"
                )
    for method in limits.require_pass:
        found = new_quality.get(method)
        verdict = "unverified" if found is None else found.verdict
        if verdict != "pass":
            broken.append(f"{method}: quality {verdict} (required: pass)")
    return broken
