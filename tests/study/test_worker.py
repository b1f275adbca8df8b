"""`worker.record_on_trial`: a result stored on its trial, read back whole, its limits Optuna's constraints."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from recommender.config.candidate import Candidate
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import CONSTRAINT_KEYS, Constraints
from recommender.perf.pricing import CostEstimate
from recommender.study.worker import load_known, record_on_trial


def _result(batch: int, constraints: Constraints) -> CandidateResult:
    cost = CostEstimate(
        usd_per_1m_tokens=0.5,
        replicas=1,
        accelerators=1,
        usd_per_month=300.0 + batch,
        price_per_hour_usd=0.4,
        price_source="test",
    )
    return CandidateResult(Candidate("bf16", "baseline", "l4", batch), "evaluated", constraints, [], cost=cost)


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_a_recorded_result_reads_back_and_its_limits_decide_feasibility(storage: str, tmp_path: Path) -> None:
    url = None if storage == "memory" else f"sqlite:///{tmp_path}/optuna.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=url, directions=["minimize", "minimize"])
    held = _result(4, Constraints(memory=-0.5, quality=-0.2, ttft=-0.1, tpot=-0.3))
    slow = _result(8, Constraints(memory=-0.5, quality=-0.2, ttft=-0.1, tpot=0.25))  # its P99 TPOT over the SLA
    unmeasured = _result(2, Constraints(memory=-0.5, ttft=-0.1, tpot=-0.3))  # the cheapest, quality still unknown
    for result in (held, slow, unmeasured):
        trial = study.ask()
        record_on_trial(trial, result)
        study.tell(trial, [result.usd_per_month or 0.0, 0.0])
    first = study.trials[0]
    assert first.constraints == {"runnable": 0.0, "memory": -0.5, "quality": -0.2, "ttft": -0.1, "tpot": -0.3}
    assert set(first.constraints) == set(CONSTRAINT_KEYS)
    # Optuna's Pareto front of a constrained study keeps the feasible trials only: the one within every limit.
    assert [t.number for t in study.best_trials] == [0]
    known = load_known(study)
    assert {key: r.constraints for key, (_, r) in known.items()} == {
        r.key: r.constraints for r in (held, slow, unmeasured)
    }
