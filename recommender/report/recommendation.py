"""Choosing the recommendation: a pure function over the table of candidate results.

Policy: among feasible candidates (quality verdict "pass" on every check, every latency
and memory limit met), the cheapest in $/1M tokens wins; candidates within
``COST_TOLERANCE`` of that price count as ties, and a tie goes to the one with the best
quality margin (so a 0.1 % saving never buys a quality loss). Every cheaper candidate
that was rejected is listed with the limits it broke.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recommender.candidate import CandidateResult

SCHEMA_VERSION = 1
COST_TOLERANCE = 0.01


@dataclass
class Recommendation:
    """What `recommendation.json` holds (schema_version 1); see README for the field guide."""

    study: str
    model: str
    release: str
    use_case: str
    winner: dict[str, Any] | None
    current: dict[str, Any] | None
    saving: dict[str, float] | None
    rejected_cheaper: list[dict[str, Any]]
    tie_policy: str
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    sla: dict[str, float] | None = None
    launch: list[dict[str, Any]] = field(default_factory=list)
    ties: list[dict[str, Any]] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write_json(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
        return path


def _quality_margin(result: CandidateResult) -> float:
    return result.constraints.get("quality", 0.0)


def pick(results: list[CandidateResult]) -> CandidateResult | None:
    """The recommended candidate, or None when nothing is feasible."""
    feasible = [r for r in results if r.feasible and r.usd_per_1m_tokens is not None]
    if not feasible:
        return None
    cheapest = min(r.usd_per_1m_tokens for r in feasible)  # type: ignore[type-var]
    ties = [r for r in feasible if r.usd_per_1m_tokens <= cheapest * (1 + COST_TOLERANCE)]  # type: ignore[operator]
    return min(ties, key=lambda r: (_quality_margin(r), r.usd_per_1m_tokens, r.candidate.key))


def _ties(results: list[CandidateResult], winner: CandidateResult | None) -> list[CandidateResult]:
    """The other feasible candidates within the tie tolerance of the winner's price, cheapest first."""
    if winner is None or winner.usd_per_1m_tokens is None:
        return []
    cheapest = min(r.usd_per_1m_tokens for r in results if r.feasible and r.usd_per_1m_tokens is not None)
    limit = cheapest * (1 + COST_TOLERANCE)
    return sorted(
        (r for r in results if r.feasible and r is not winner and (r.usd_per_1m_tokens or math.inf) <= limit),
        key=lambda r: r.usd_per_1m_tokens,  # type: ignore[arg-type,return-value]
    )


def _summary(result: CandidateResult) -> dict[str, Any]:
    c = result.candidate
    return {
        "key": c.key,
        "precision": c.precision,
        "method": c.method,
        "hardware": c.hardware,
        "tensor_parallel": c.tensor_parallel,
        "batch_size": c.batch_size,
        "usd_per_1m_tokens": result.usd_per_1m_tokens,
        "usd_per_month": result.cost["usd_per_month"] if result.cost else None,
        "replicas": result.cost["replicas"] if result.cost else None,
        "price_source": result.cost["price_source"] if result.cost else None,
        "ttft_p99_ms": result.ttft_ms,
        "tpot_p99_ms": result.tpot_ms,
        "tokens_per_s_per_replica": result.tokens_per_s,
        "memory_gb": result.memory_gb,
        "perf_provenance": result.perf_provenance,
        "quality_verdict": result.quality_verdict,
        "quality_checks": result.quality["checks"] if result.quality else [],
        "fidelity": result.quality.get("fidelity") if result.quality else None,
        "quality_device": result.quality.get("device") if result.quality else None,
        "broken": result.broken,
    }


def build(
    results: list[CandidateResult],
    *,
    current_key: str,
    study: str,
    model: str,
    release: str,
    use_case: str,
    sla: dict[str, float] | None = None,
) -> Recommendation:
    """Assemble the recommendation from every distinct evaluated candidate."""
    winner = pick(results)
    current = next((r for r in results if r.candidate.key == current_key), None)
    saving = None
    if winner and current and current.cost and winner.cost:
        now, new = current.cost["usd_per_month"], winner.cost["usd_per_month"]
        saving = {
            "usd_per_month": now - new,
            "percent_per_month": 100.0 * (now - new) / now if now else 0.0,
            "percent_per_1m_tokens": 100.0 * (1 - winner.usd_per_1m_tokens / current.usd_per_1m_tokens),  # type: ignore[operator]
        }
    limit = winner.usd_per_1m_tokens if winner else float("inf")
    cheaper = sorted(
        (r for r in results if not r.feasible and r.usd_per_1m_tokens is not None and r.usd_per_1m_tokens < limit),
        key=lambda r: r.usd_per_1m_tokens,  # type: ignore[arg-type,return-value]
    )
    notes = [
        "quality is measured on the local device with the same method and assumed to carry over to other hardware",
        "catalog GPUs: P99 latency and capacity from a continuous-batching simulation on roofline step costs "
        "(assumed efficiencies); local device: the same simulation on step times measured here",
    ]
    notes += [f"failed, not recommendable: {r.candidate.key}: {'; '.join(r.broken)}" for r in results
              if r.status == "failed"]  # fmt: skip
    return Recommendation(
        study=study,
        model=model,
        release=release,
        use_case=use_case,
        winner=_summary(winner) if winner else None,
        current=_summary(current) if current else None,
        saving=saving,
        rejected_cheaper=[_summary(r) for r in cheaper],
        tie_policy=f"ties within {COST_TOLERANCE:.0%} of the cheapest price go to the best quality margin",
        counts={
            "candidates": len(results),
            "evaluated": sum(r.status == "evaluated" for r in results),
            "pruned": sum(r.status == "pruned" for r in results),
            "failed": sum(r.status == "failed" for r in results),
            "feasible": sum(r.feasible for r in results),
        },
        notes=notes,
        sla=sla,
        ties=[_summary(r) for r in _ties(results, winner)],
    )
