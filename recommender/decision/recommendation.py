"""The recommendation: the winner, what runs today, the saving, the rejected cheaper options, the ties,
and whether quantizing paid at all at this traffic.

Assembled from the table of candidate results by the pure functions of `decision/rules.py`; it
holds the candidates' own typed results (not summaries of them), so the report, MLflow and
the release gate read the same figures the search computed. recommendation.json is its
serialisation (`serialization.to_data`), schema_version 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recommender.config.spec import LatencySLA
from recommender.decision import rules as decision
from recommender.decision.assumptions import Assumptions
from recommender.engines import EngineLaunch
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.levers import LeverEffect
from recommender.evaluation.two_pools import LayoutVerdict
from recommender.fleet.daily.autoscale import AutoscaleSchedule
from recommender.fleet.daily.mix_plan import GpuMix

SCHEMA_VERSION = 2


@dataclass(frozen=True, slots=True)
class Saving:
    """The winner against what runs today: per month at the target traffic, and per 1M tokens at capacity."""

    usd_per_month: float
    percent_per_month: float
    percent_per_1m_tokens: float


@dataclass(frozen=True, slots=True)
class Counts:
    candidates: int
    evaluated: int
    pruned: int
    failed: int
    feasible: int


@dataclass(frozen=True)
class Recommendation:
    """What `recommendation.json` holds; docs/recommendation-json.md is the field guide (its tables generated
    from this type)."""

    study: str
    model: str
    release: str
    use_case: str
    winner: CandidateResult | None
    current: CandidateResult | None
    saving: Saving | None
    rejected_cheaper: list[CandidateResult]
    tie_policy: str
    counts: Counts
    notes: list[str] = field(default_factory=list)
    sla: LatencySLA | None = None
    launch: list[EngineLaunch] = field(default_factory=list)
    ties: list[CandidateResult] = field(default_factory=list)
    #: One line when a 16-bit winner costs no more per month than quantizing on the same hardware.
    quantization_note: str | None = None
    #: With a daily traffic profile: the winner's replicas hour by hour, and the GPU mix
    #: (recommender/fleet/daily/winner.py).
    autoscale: AutoscaleSchedule | None = None
    gpu_mix: GpuMix | None = None
    schema_version: int = SCHEMA_VERSION
    #: Traffic, SLA, each GPU's price and source, the fleets' utilisation (recommender/decision/assumptions.py); None in
    #: recommendations written before it and where `build` is called without the spec.
    assumptions: Assumptions | None = None
    #: Prefix caching and speculative decoding on the winner: what was measured, TPOT and $/month with and without.
    levers: list[LeverEffect] = field(default_factory=list)
    #: Aggregated against disaggregated for the winner's scheme and GPU, where the search priced both layouts.
    layouts: LayoutVerdict | None = None


def saving_of(winner: CandidateResult | None, current: CandidateResult | None) -> Saving | None:
    if winner is None or current is None or winner.cost is None or current.cost is None:
        return None
    now, new = current.cost.usd_per_month, winner.cost.usd_per_month
    return Saving(
        usd_per_month=now - new,
        percent_per_month=100.0 * (now - new) / now if now else 0.0,
        percent_per_1m_tokens=100.0 * (1 - winner.cost.usd_per_1m_tokens / current.cost.usd_per_1m_tokens),
    )


def result_of(results: list[CandidateResult], key: str) -> CandidateResult | None:
    """The result of the candidate `key` names (the current deployment's), or None when it was not evaluated."""
    return next((r for r in results if r.key == key), None)


def counts_of(results: list[CandidateResult]) -> Counts:
    return Counts(
        candidates=len(results),
        evaluated=sum(r.status == "evaluated" for r in results),
        pruned=sum(r.status == "pruned" for r in results),
        failed=sum(r.status == "failed" for r in results),
        feasible=sum(r.feasible for r in results),
    )


def build(
    results: list[CandidateResult],
    *,
    winner: CandidateResult | None,
    current: CandidateResult | None,
    study: str,
    model: str,
    release: str,
    use_case: str,
    sla: LatencySLA | None = None,
    assumptions: Assumptions | None = None,
    launch: list[EngineLaunch] | None = None,
    autoscale: AutoscaleSchedule | None = None,
    gpu_mix: GpuMix | None = None,
    levers: list[LeverEffect] | None = None,
    layouts: LayoutVerdict | None = None,
) -> Recommendation:
    """Assemble the recommendation, whole, from every distinct evaluated candidate and what was worked out for
    its winner: the assumptions, the launch commands, and with a daily profile the autoscaling schedule and the
    GPU mix. Nothing is added after: `Recommendation` is frozen.

    `winner` is `decision.pick(results)` and `current` the current deployment's result (`result_of`), picked
    once by the caller, which worked out the winner's answers from the same pick.
    """
    notes = [
        "quality is measured on the local device with the same method and assumed to carry over to other hardware",
        "catalog GPUs: P99 latency and capacity from a continuous-batching simulation on step costs calibrated per "
        "engine on measured H100 serving runs (moved to other GPUs through their datasheets), SLAs checked on the "
        "P99s of the traffic simulated with every step at the upper bound of its held-out error; local device: the "
        "same simulation on step times measured here",
    ]
    notes += [f"failed, not recommendable: {r.key}: {'; '.join(r.broken)}" for r in results if r.status == "failed"]
    notes += [
        f"physics alarm, {role} {r.key}: {r.serving.physics_alarm_reason(sla)}"
        for role, r in (("recommended", winner), ("current", current))
        if r and r.serving and sla and r.serving.physics_alarm
    ]
    return Recommendation(
        study=study,
        model=model,
        release=release,
        use_case=use_case,
        winner=winner,
        current=current,
        saving=saving_of(winner, current),
        rejected_cheaper=decision.rejected_cheaper(results, winner),
        tie_policy=decision.TIE_POLICY,
        counts=counts_of(results),
        notes=notes,
        sla=sla,
        ties=decision.ties(results, winner),
        quantization_note=decision.quantization_does_not_pay(results, winner),
        launch=launch or [],
        autoscale=autoscale,
        gpu_mix=gpu_mix,
        assumptions=assumptions,
        levers=levers or [],
        layouts=layouts,
    )
