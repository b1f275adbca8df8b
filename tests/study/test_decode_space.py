"""The decode GPU as a conditional Optuna parameter: suggested only for disaggregated candidates, enumerated once per
pair by the brute-force sampler, sampled by TPE, enqueued and refined like the other parameters.

Real Optuna studies (in memory) over the spec's real space; the objective only records the candidate, so no
candidate is evaluated (what a trial's result does with the parameter is tests/fleet/layouts/test_mixed_candidate.py's).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import SearchSpec, load_spec
from recommender.study.space import (
    candidate_of,
    grid,
    grid_size,
    neighbourhood,
    space_choices,
    suggest,
    trial_params,
)
from tests.conftest import write_spec


@pytest.fixture
def spec(tmp_path: Path) -> SearchSpec:
    return load_spec(
        write_spec(
            tmp_path / "s.yaml",
            {
                "space.schemes": {"bf16": ["baseline"]},
                "space.hardware": ["h100-sxm", "h200", "l40s"],
                "space.batch_sizes": [64],
                "space.speculative": None,
                "space.layout": ["aggregated", "disaggregated"],
            },
        )
    )


def _study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(sampler=sampler)


def test_the_grid_holds_each_gpu_pair_once_and_no_aggregated_candidate_has_a_decode_gpu(spec: SearchSpec) -> None:
    candidates = grid(spec)
    keys = [c.key for c in candidates]
    assert len(keys) == len(set(keys)) == grid_size(spec) == 3 * (1 + 3)  # per GPU: aggregated + 3 decode GPUs
    assert all(not c.decode_hardware for c in candidates if c.layout == "aggregated")
    pairs = {(c.hardware, c.decode_gpu) for c in candidates if c.layout == "disaggregated"}
    assert len(pairs) == 9 and ("h100-sxm", "h200") in pairs and ("l40s", "l40s") in pairs


def test_the_brute_force_sampler_enumerates_the_conditional_space_and_stops(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    seen: list[Candidate] = []

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, choices)
        seen.append(candidate_of(params))
        assert ("decode_hardware" in params) == (params["layout"] == "disaggregated")
        return 0.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = _study(optuna.samplers.BruteForceSampler(seed=0))
    study.optimize(objective, n_trials=100)
    assert len(seen) == grid_size(spec) and {c.key for c in seen} == {c.key for c in grid(spec)}


def test_tpe_samples_the_decode_gpu_only_for_disaggregated_trials(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    study = _study(optuna.samplers.TPESampler(seed=0, n_startup_trials=8))
    study.optimize(lambda trial: float(len(candidate_of(suggest(trial, choices)).key)), n_trials=20)
    for t in study.trials:
        assert ("decode_hardware" in t.params) == (t.params["layout"] == "disaggregated"), t.params
    assert any("decode_hardware" in t.params for t in study.trials)


def test_an_enqueued_candidate_comes_back_as_itself_and_its_neighbours_stay_in_the_space(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    mixed = Candidate("bf16", "baseline", "h100-sxm", 64, layout="disaggregated", decode_hardware="l40s")
    study = _study(optuna.samplers.TPESampler(seed=0))
    for c in (mixed, spec.current):
        study.enqueue_trial(trial_params(c, choices))
    got: list[Candidate] = []
    study.optimize(lambda trial: got.append(candidate_of(suggest(trial, choices))) or 0.0, n_trials=2)
    assert got == [mixed, spec.current]
    assert "decode_hardware" not in study.trials[1].params
    near = neighbourhood(mixed, choices)
    keys = {c.key for c in near}
    assert "bf16/baseline@h100-sxmx1/bs64/disagg/decode-h200" in keys
    assert "bf16/baseline@h100-sxmx1/bs64/disagg" in keys  # decode back on the prefill GPU
    assert "bf16/baseline@h200x1/bs64/disagg/decode-l40s" in keys  # prefill moved, decode kept
    assert "bf16/baseline@h100-sxmx1/bs64" in keys  # aggregated: no decode GPU left on it
    assert all(c.layout == "disaggregated" or not c.decode_hardware for c in near)
