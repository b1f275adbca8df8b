"""`Constraints`: one typed value for a candidate's limits, stored as the string-keyed mapping it replaced."""

from __future__ import annotations

import json
from dataclasses import fields

import optuna
import pytest

from recommender.config.candidate import Candidate
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import CONSTRAINT_KEYS, Constraints
from recommender.evaluation.refusal import Refused
from recommender.serialization import from_data, list_from_data, to_data

#: A pruned candidate as results.json and the trials' user attributes held it before `Constraints` (written by
#: main at 6316c19, `to_data(pruned(...))`, now `Refused(...).result`): the constraints a plain mapping.
OLD_PRUNED = (
    '{"candidate": {"precision": "bf16", "method": "baseline", "hardware": "t4", "batch_size": 8, '
    '"tensor_parallel": 1, "max_num_batched_tokens": 8192, "kv_cache_dtype": "auto", "speculative": "none"}, '
    '"status": "pruned", "constraints": {"runnable": 1.0, "memory": 0.0, "quality": 0.0, "ttft": 0.0, "tpot": 0.0}, '
    '"broken": ["runnable: no engine launches it"], "quality": null, "serving": null, "cost": null, "memory": null, '
    '"probe": null, "engines": []}'
)


def test_a_result_stored_with_a_constraints_mapping_reads_back_as_constraints() -> None:
    (result,) = list_from_data(CandidateResult, [json.loads(OLD_PRUNED)])
    assert result.constraints == Constraints(runnable=1.0, memory=0.0, quality=0.0, ttft=0.0, tpot=0.0)
    assert result.constraints.broken == ("runnable",)
    # Written again, it is the same JSON plus the fields added since at their defaults (an aggregated candidate, no
    # pools): a study or results.json written before and after reads alike.
    again = json.loads(json.dumps(to_data(result)))
    assert again.pop("pools") is None and again["candidate"].pop("layout") == "aggregated"
    assert again.pop("attention_dp") is None  # kept for expert-parallel candidates only
    assert again["candidate"].pop("expert_parallel") == 1
    assert again["candidate"].pop("decode_hardware") == ""  # the decode pool on the candidate's own GPU
    assert again == json.loads(OLD_PRUNED)
    assert list(to_data(result)["constraints"]) == list(CONSTRAINT_KEYS)


def test_a_mapping_missing_a_limit_takes_its_default_quality_unmeasured_counts_as_broken() -> None:
    data = json.loads(OLD_PRUNED) | {"status": "evaluated", "constraints": {"ttft": 0.5}}
    constraints = from_data(CandidateResult, data).constraints
    assert constraints == Constraints(runnable=0.0, memory=0.0, quality=1.0, ttft=0.5, tpot=0.0)
    assert constraints.broken == ("quality", "ttft") and constraints.latency_broken


def test_a_mapping_that_is_not_numbers_is_refused_naming_the_type() -> None:
    data = json.loads(OLD_PRUNED) | {"constraints": {"ttft": "slow"}}
    with pytest.raises(ValueError, match="not a CandidateResult"):
        from_data(CandidateResult, data)


def test_a_refusal_breaks_its_one_limit_and_leaves_quality_at_zero_as_before() -> None:
    refused = Refused("memory", "does not fit").result(Candidate("bf16", "baseline", "t4", 8)).constraints
    assert refused.items() == (("runnable", 0.0), ("memory", 1.0), ("quality", 0.0), ("ttft", 0.0), ("tpot", 0.0))
    assert Constraints.refused("quality").broken == ("quality",)
    assert not refused.latency_broken


def test_the_fields_are_the_constraint_keys_in_their_order() -> None:
    assert tuple(f.name for f in fields(Constraints)) == CONSTRAINT_KEYS


def test_every_limit_is_set_on_the_trial_by_name_in_the_keys_order() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"])
    for constraints in (Constraints(quality=-0.2, ttft=-0.1, tpot=-0.3, memory=-0.5), Constraints(tpot=0.25)):
        trial = study.ask()
        for key, value in constraints.items():  # as the worker stores them
            trial.set_constraint(key, value)
        study.tell(trial, [1.0, 0.0])
    held, broken = study.trials
    assert list(held.constraints) == list(CONSTRAINT_KEYS)
    assert list(held.constraints.values()) == [0.0, -0.5, -0.2, -0.1, -0.3]
    assert all(v <= 0 for v in held.constraints.values())
    assert broken.constraints == {"runnable": 0.0, "memory": 0.0, "quality": 1.0, "ttft": 0.0, "tpot": 0.25}
