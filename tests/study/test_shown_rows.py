"""What a finished search shows: the winner's and the current deployment's P99s settled within
``AT_LOAD_MAX_REQUESTS`` at their load and at their capacity, a capacity whose P99s settle only lower stepping down
a rung whatever the target rate, and the winner priced with the replicas that takes.

Speed and cost come from the real `PerformanceEvaluator` (Llama 3.1 8B in FP8 with an FP8 KV cache on a B200 under
vLLM, the shipped calibrated step cost, short chat turns of lognormal lengths); quality is attached as a typed
passing `QualityResult`, the evidence the search would have measured. The batch cap of 2048 carries 195 req/s within
the SLA on the trials' runs, but simulated longer its P99s there still move 132 % at 161,280 requests: shown, its
capacity is the rung below, 185 req/s (0.95x), whose P99s settle. A batch cap of 1024 carries 175 req/s, whose P99s
settle at 76,752 requests (past the trials' cap): two replicas, at half the load.
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


def test_the_shown_winner_steps_its_capacity_down_a_rung_and_keeps_the_trials_replicas_and_price() -> None:
    """At 181 req/s (93 % of the trials' 195, 98 % of the 185 shown) one replica carries the traffic either way."""
    performance = evaluator(181.0)
    results = trials(performance)
    trial = results[0]
    assert decision.pick(results) is trial and trial.serving is not None and trial.cost is not None
    assert trial.serving.p99s_settled and trial.serving.capacity_settled is False  # at the load, not at 195 req/s
    assert trial.cost.replicas == 1

    shown = shown_rows(results, TWO_REPLICAS.key, performance)

    winner = shown.winner
    assert winner is not None and winner.key == trial.key and winner.feasible
    assert winner.serving is not None and winner.serving.p99s_settled and winner.serving.capacity_settled
    assert winner.serving.requests_per_s == pytest.approx(0.95 * trial.serving.requests_per_s)
    assert "capacity lowered from 195 to 185 req/s per replica" in winner.serving.provenance.detail
    assert "at 195 req/s the P99s were 140,869 requests" in winner.serving.provenance.detail
    # The P99s at the load settled within the trials' cap: the same run; the replicas, price and quality the trial's
    # (only the price per token, at the capacity, moves).
    assert winner.serving.ttft_ms == trial.serving.ttft_ms and winner.serving.tpot_ms == trial.serving.tpot_ms
    assert winner.cost is not None and winner.quality == trial.quality
    assert (winner.cost.replicas, winner.cost.usd_per_month) == (trial.cost.replicas, trial.cost.usd_per_month)
    # The current deployment's P99s at its capacity settle past the trials' cap: its capacity and price hold.
    current = shown.current
    assert current is not None and current.serving is not None and results[1].serving is not None
    assert current.serving.capacity_settled and not results[1].serving.capacity_settled
    assert current.serving.requests_per_s == results[1].serving.requests_per_s and current.cost == results[1].cost
    assert shown.results == [winner, current]
    assert results[0] is trial and results[0].serving == trial.serving  # the trials keep their figures


@pytest.mark.slow  # about 20 s: the trials, then the capacity's runs of 161,280 requests and the two-replica load
def test_a_winner_whose_capacity_steps_down_past_the_target_is_priced_with_another_replica() -> None:
    """At 188 req/s (96 % of the trials' 195) the trial's P99s at its load end unchecked within ``MAX_REQUESTS``; shown,
    the capacity is 185 req/s (at 195 they never settle within ``AT_LOAD_MAX_REQUESTS``), so the row needs a second
    replica, at its price, whatever the P99s at 188 would have done: the pick is made again, and the two-replica
    candidate with a batch cap of 1024, at the same price and less capacity, does not displace it."""
    performance = evaluator(188.0)
    results = trials(performance)
    trial = results[0]
    assert decision.pick(results) is trial and trial.feasible and trial.cost is not None and trial.serving is not None
    assert trial.cost.replicas == 1 and not trial.serving.p99s_settled
    assert (trial.serving.requests_simulated or 0) <= MAX_REQUESTS

    shown = shown_rows(results, TWO_REPLICAS.key, performance)

    settled = next(r for r in shown.results if r.key == ONE_REPLICA.key)
    assert settled.serving is not None and settled.serving.p99s_settled and settled.cost is not None
    assert settled.cost.replicas == 2 and settled.cost.usd_per_month > trial.cost.usd_per_month
    assert settled.serving.load_per_replica_rps == 94.0
    assert settled.serving.requests_per_s == pytest.approx(0.95 * trial.serving.requests_per_s)
    assert "capacity lowered from 195 to 185 req/s per replica" in settled.serving.provenance.detail
    assert settled.quality == trial.quality
    winner = shown.winner
    assert winner is settled and winner.feasible
    assert shown.current is not None and shown.current.cost is not None
    assert shown.current.cost.usd_per_month == settled.cost.usd_per_month  # a tie the larger capacity wins
