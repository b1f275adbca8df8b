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
from typing import Any

from recommender.releases import ReleaseStudy

REFERENCE = "bf16/baseline"


@dataclass(frozen=True)
class GateLimits:
    """What a release may lose against the one it replaces."""

    max_cost_increase_pct: float = 5.0
    max_quality_drop_pct: float = 1.0
    require_pass: list[str] = field(default_factory=list)


def _loss_fraction(check: dict[str, Any]) -> float | None:
    """How much worse than bf16, as a fraction of the bf16 value (positive = worse)."""
    if check.get("delta") is None or not check.get("baseline"):
        return None
    worse = -check["delta"] if check.get("higher_is_better", True) else check["delta"]
    return float(worse) / abs(float(check["baseline"]))


def _checks(quality: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {f"{c['name']}/{c['metric']}": c for c in (quality or {}).get("checks", []) if c["name"] != "fidelity"}


def gate(candidate: ReleaseStudy, against: ReleaseStudy, limits: GateLimits) -> list[str]:
    """The regressions of `candidate` against `against`, one line each; empty when the gate passes."""
    broken: list[str] = []
    new, old = candidate.winner, against.winner
    if new is None:
        had = f" (release {against.release} had {old['key']})" if old else ""
        broken.append(f"no configuration of release {candidate.release} meets every threshold{had}")
    elif new.get("quality_verdict") != "pass":
        broken.append(f"recommended {new['key']}: quality {new.get('quality_verdict')}")
    if new is not None and old is not None:
        increase = 100.0 * (new["usd_per_1m_tokens"] / old["usd_per_1m_tokens"] - 1.0)
        if increase > limits.max_cost_increase_pct:
            broken.append(
                f"cost: ${new['usd_per_1m_tokens']:.4g}/1M tokens ({new['key']}) vs ${old['usd_per_1m_tokens']:.4g} "
                f"({old['key']}): {increase:+.1f} % > +{limits.max_cost_increase_pct:g} %"
            )

    new_quality, old_quality = candidate.quality_by_method(), against.quality_by_method()
    limit = limits.max_quality_drop_pct / 100.0
    old_ref, new_ref = _checks(old_quality.get(REFERENCE)), _checks(new_quality.get(REFERENCE))
    for name, old_check in old_ref.items():
        new_check = new_ref.get(name)
        if new_check is None or old_check.get("value") is None or new_check.get("value") is None:
            continue
        change = (new_check["value"] - old_check["value"]) / abs(old_check["value"] or 1.0)
        drop = -change if old_check.get("higher_is_better", True) else change
        if drop > limit:
            broken.append(
                f"bf16 {name}: {new_check['value']:.4g} vs {old_check['value']:.4g} "
                f"({drop:.1%} worse > {limits.max_quality_drop_pct:g} %)"
            )
    if new is not None:
        method = f"{new['precision']}/{new['method']}"
        old_loss = _checks(old_quality.get(method))
        for name, new_check in _checks(new_quality.get(method)).items():
            before, after = _loss_fraction(old_loss.get(name, {})), _loss_fraction(new_check)
            if before is None or after is None:
                continue
            if after - before > limit:
                broken.append(
                    f"{method} {name}: loses {after:.2%} against its bf16 vs {before:.2%} in release "
                    f"{against.release} (+{after - before:.2%} > {limits.max_quality_drop_pct:g} %)"
                )
    for method in limits.require_pass:
        verdict = new_quality.get(method, {}).get("verdict", "unverified")
        if verdict != "pass":
            broken.append(f"{method}: quality {verdict} (required: pass)")
    return broken
