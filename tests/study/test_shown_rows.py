"""What a finished search shows: the winner's and the current deployment's P99s settled within
``AT_LOAD_MAX_REQUESTS``, and a winner whose P99s settle only with another replica giving way to the next pick.

Speed and cost come from the real `PerformanceEvaluator` (Llama 3.1 8B in FP8 with an FP8 KV cache on a B200 under
vLLM, the shipped calibrated step cost, short chat turns of lognormal lengths); quality is attached as a typed
passing `QualityResult`, the evidence the search would have measured. The batch cap of 2048 carries 195 req/s within
the SLA, so one replica runs near its capacity (96-98 %): there the trial's run, capped at ``MAX_REQUESTS``, ends
before its P99s are checked by doubling. A batch cap of 1024 carries 175 req/s: two replicas, at half the load.
"""

from __future__ import annotations

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.config.traffic import TrafficProfile
from recommender.decision import rules as decision
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.evaluator import with_quality
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.settle import MAX_REQUESTS
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.study.shown_rows import shown_rows

SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=150)
ONE_REPLICA = Candidate("fp8", "fp8-dynamic", "b200", 2048, kv_cache_dtype="fp8")
TWO_REPLICAS = Candidate("fp8", "fp8-dynamic", "b200", 1024, kv_cache_dtype="fp8")


def evaluator(rps: float) -> PerformanceEvaluator:
    _, shape = load_architecture("llama-3.1-8b")
    lengths = TrafficProfile(hourly_rps=[rps] * 24, prompt_cv=0.5, output_cv=0.5)
    traffic = Traffic(prompt_tokens=128, output_tokens=256, requests_per_second=rps, profile=lengths)
    return PerformanceEvaluator(load_catalog(), shape, traffic, SLA, engines=("vllm",))


def passed(result: CandidateResult) -> CandidateResult:
    """`result` with a passing quality verdict (its worst check 0.01 inside its threshold)."""
    c = result.candidate
    check = Check("task", "acc", 0.5, 0.51, 0.01, 0.01, "max_absolute_drop 0.03", "pass")
    return with_quality(result, QualityResult(c.method, c.precision, "pass", [check], None, "cpu", 0.0))


def trials(performance: PerformanceEvaluator) -> list[CandidateResult]:
    """The two candidates as the search's trials hold them: P99s settled within ``MAX_REQUESTS``, quality passed."""
    return [passed(performance.evaluate(c)) for c in (ONE_REPLICA, TWO_REPLICAS)]


def test_the_shown_winner_runs_near_capacity_on_p99s_settled_past_the_trials_cap() -> None:
    performance = evaluator(188.0)
    results = trials(performance)
    trial = results[0]
    assert decision.pick(results) is trial and trial.serving is not None and trial.cost is not None
    assert trial.serving.load_per_replica_rps / trial.serving.requests_per_s > 0.95  # one replica, near capacity
    assert (trial.serving.requests_simulated or 0) <= MAX_REQUESTS and not trial.serving.p99s_settled

    shown = shown_rows(results, TWO_REPLICAS.key, performance)

    winner = shown.winner
    assert winner is not None and winner.key == trial.key and winner.feasible
    assert winner.serving is not None and winner.serving.p99s_settled
    assert (winner.serving.requests_simulated or 0) > MAX_REQUESTS
    # Only the P99s at the load moved: the capacity, the replicas, the price and the quality are the trial's.
    assert winner.serving.requests_per_s == trial.serving.requests_per_s
    assert winner.cost == trial.cost and winner.quality == trial.quality
    # The current deployment at half the load settled within the trial's cap already: shown as the trial was.
    assert shown.current is not None and shown.current.serving == results[1].serving
    assert shown.results == [winner, shown.current]
    assert results[0] is trial and results[0].serving == trial.serving  # the trials keep their figures


@pytest.mark.slow  # about 17 s: runs of 188,816 requests, then the two-replica load
def test_a_winner_whose_p99s_do_not_settle_at_its_load_takes_another_replica_and_gives_way() -> None:
    """At 192 req/s (98 % of the one replica's capacity) the trial's run ends unchecked within the SLA; run longer,
    its P99s keep climbing (the queue near the knee never settles within ``AT_LOAD_MAX_REQUESTS``), so the row shown
    needs a second replica, at its price, and the two-replica candidate that was no dearer wins instead."""
    performance = evaluator(192.0)
    results = trials(performance)
    trial = results[0]
    assert decision.pick(results) is trial and trial.feasible and trial.cost is not None  # what the trials say
    assert trial.cost.replicas == 1

    shown = shown_rows(results, TWO_REPLICAS.key, performance)

    settled = next(r for r in shown.results if r.key == ONE_REPLICA.key)
    assert settled.serving is not None and settled.serving.p99s_settled and settled.cost is not None
    assert settled.cost.replicas == 2 and settled.cost.usd_per_month > trial.cost.usd_per_month
    assert settled.serving.requests_per_s == settled.serving.load_per_replica_rps == 96.0
    assert "capacity lowered from 195 to 96 req/s per replica: at 192 req/s" in settled.serving.provenance.detail
    assert settled.quality == trial.quality
    winner = shown.winner
    assert winner is not None and winner.key == TWO_REPLICAS.key and winner.feasible
    assert winner.cost is not None and winner.cost.usd_per_month <= settled.cost.usd_per_month
    assert shown.current is winner  # the current deployment, settled once
