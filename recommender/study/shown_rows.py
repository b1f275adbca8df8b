"""The rows a finished search shows, their P99s at the load settled further than the trials' were.

Every trial's P99s at its replica's load settle within ``settle.MAX_REQUESTS`` simulated requests: the search
simulates every candidate it proposes, and a longer cap for all of them costs more than the search can pay (the
demo's winner runs at 99 % of its capacity, where the queue relaxes slowly and every near-capacity candidate
would pay: 105 s became 136 s). Near capacity those runs often do not settle, so what the recommendation shows
(the winner and the current deployment) is simulated again at its load until its P99s settle within
``settle.AT_LOAD_MAX_REQUESTS`` (``PerformanceEvaluator.settled``, as `plan` does for the row it shows). The
P99s at the load move; the capacity, the replicas and the price stay the trial's unless the P99s at the capacity
itself settle only at a lower rate (``serving._settled_capacity``: then the row carries the replicas that takes, and
their price); the quality is kept.

A winner whose settled P99s break the latency SLA, or that costs more once settled, is shown as it now is
(infeasible with the limit it broke, or at its new price) and the pick repeats among the rest, until a winner holds
once settled or none is left. The current deployment is settled first, so no later change can move the pick. The
trials Optuna and MLflow hold keep their own figures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from recommender.config.candidate import AGGREGATED, LOCAL_DEVICE
from recommender.decision.recommendation import result_of
from recommender.decision.rules import pick
from recommender.evaluation.speed import latency_checks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.performance import PerformanceEvaluator


@dataclass(frozen=True)
class ShownRows:
    """Every result with the shown ones settled further, the winner picked among them and the current deployment's
    (None: nothing feasible, or the current deployment not evaluated)."""

    results: list[CandidateResult]
    winner: CandidateResult | None
    current: CandidateResult | None


def resettled(result: CandidateResult, performance: PerformanceEvaluator) -> CandidateResult:
    """`result` with its P99s at the load settled within ``settle.AT_LOAD_MAX_REQUESTS``, its latency limits judged
    again on them and its price again (more replicas where its capacity was lowered; quality, memory and every other
    check kept); a result with no aggregated replicas simulated (pruned, failed, disaggregated pools, expert
    parallelism) as it is."""
    c = result.candidate
    if result.status != "evaluated" or result.serving is None or c.layout != AGGREGATED or c.expert_parallel != 1:
        return result
    settled = result.serving.p99s_settled is not False
    if settled and (result.serving.capacity_settled is not False or c.hardware == LOCAL_DEVICE):
        # Settled already, at the load and at the capacity; or a device measured here, settled at its load: its steps
        # were timed by the run that stored the figures, and timing them again (a resumed search) would show the
        # machine's load of the moment, not the stored trial.
        return result
    speed = performance.settled(c)
    if speed.status != "evaluated" or speed.serving is None:
        return result
    sla = performance.sla
    before = set(latency_checks(result.serving, sla)[2])
    ttft, tpot, latency = latency_checks(speed.serving, sla)
    return replace(
        result,
        serving=speed.serving,
        cost=speed.cost,
        constraints=replace(result.constraints, ttft=ttft, tpot=tpot),
        broken=[line for line in result.broken if line not in before] + latency,
    )


def shown_rows(results: Sequence[CandidateResult], current_key: str, performance: PerformanceEvaluator) -> ShownRows:
    """The current deployment (`current_key`) and the winner settled further (``resettled``); a winner that breaks a
    latency limit once settled is replaced by the pick among the rest, settled in turn."""
    settled: dict[str, CandidateResult] = {}

    def rows() -> list[CandidateResult]:
        return [settled.get(r.key, r) for r in results]

    current = result_of(list(results), current_key)
    if current is not None:
        settled[current.key] = current = resettled(current, performance)
    winner = pick(rows())
    while winner is not None and winner.key not in settled:
        settled[winner.key] = resettled(winner, performance)
        winner = pick(rows())
    return ShownRows(rows(), winner, current)
