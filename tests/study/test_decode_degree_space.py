"""The decode degree as a conditional Optuna parameter: suggested only for disaggregated candidates, enumerated once
per pair of degrees by the brute-force sampler, sampled by TPE, enqueued and refined like the other parameters.

Real Optuna studies (in memory) over the spec's real space; the objective only records the candidate, so no candidate
is evaluated (what a trial's result does with the parameter is tests/fleet/layouts/test_decode_degree.py's).
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
                "space.hardware": ["h100-sxm", "h200"],
                "space.tensor_parallel": [1, 2],
                "space.batch_sizes": [64],
                "space.speculative": None,
                "space.layout": ["aggregated", "disaggregated"],
                "space.link": "nvlink",  # no decode GPU searched: the decode degree alone
            },
        )
    )


def _study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(sampler=sampler)


def test_the_grid_holds_each_pair_of_degrees_once(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    assert "decode_hardware" not in choices and choices["decode_tensor_parallel"] == [1, 2]
    candidates = grid(spec)
    keys = [c.key for c in candidates]
    assert len(keys) == len(set(keys)) == grid_size(spec) == 2 * 2 * (1 + 2)  # GPU x TP x (aggregated + 2 decode TPs)
    assert all(not c.decode_tensor_parallel for c in candidates if c.layout == "aggregated")
    pairs = {(c.tensor_parallel, c.decode_tp) for c in candidates if c.layout == "disaggregated"}
    assert pairs == {(1, 1), (1, 2), (2, 1), (2, 2)}


def test_the_grid_multiplies_decode_gpus_and_degrees_on_the_disaggregated_branch(tmp_path: Path) -> None:
    both = load_spec(
        write_spec(
            tmp_path / "b.yaml",
            {
                "space.schemes": {"bf16": ["baseline"]},
                "space.hardware": ["h100-sxm", "h200"],
                "space.tensor_parallel": [1, 2],
                "space.batch_sizes": [64],
                "space.speculative": None,
                "space.layout": ["aggregated", "disaggregated"],
            },
        )
    )
    keys = {c.key for c in grid(both)}
    assert len(keys) == grid_size(both) == 2 * 2 * (1 + 2 * 2)
    assert "bf16/baseline@h100-sxmx1/bs64/disagg/decode-h200/decode-tp2" in keys


def test_the_brute_force_sampler_enumerates_the_conditional_space_and_stops(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    seen: list[Candidate] = []

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, choices)
        seen.append(candidate_of(params))
        assert ("decode_tensor_parallel" in params) == (params["layout"] == "disaggregated")
        return 0.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = _study(optuna.samplers.BruteForceSampler(seed=0))
    study.optimize(objective, n_trials=100)
    assert len(seen) == grid_size(spec) and {c.key for c in seen} == {c.key for c in grid(spec)}


def test_tpe_samples_the_decode_degree_only_for_disaggregated_trials(spec: SearchSpec) -> None:
    choices = space_choices(spec)
    study = _study(optuna.samplers.TPESampler(seed=0, n_startup_trials=8))
    study.optimize(lambda trial: float(len(candidate_of(suggest(trial, choices)).key)), n_trials=20)
    for t in study.trials:
        assert ("decode_tensor_parallel" in t.params) == (t.params["layout"] == "disaggregated"), t.params
    assert any("decode_tensor_parallel" in t.params for t in study.trials)


def test_an_enqueued_candidate_comes_back_as_itself_and_its_neighbours_move_the_decode_degree(
    spec: SearchSpec,
) -> None:
    choices = space_choices(spec)
    wider = Candidate("bf16", "baseline", "h100-sxm", 64, 1, layout="disaggregated", decode_tensor_parallel=2)
    study = _study(optuna.samplers.TPESampler(seed=0))
    for c in (wider, spec.current):
        study.enqueue_trial(trial_params(c, choices))
    got: list[Candidate] = []
    study.optimize(lambda trial: got.append(candidate_of(suggest(trial, choices))) or 0.0, n_trials=2)
    assert got == [wider, spec.current]
    assert "decode_tensor_parallel" not in study.trials[1].params
    keys = {c.key for c in neighbourhood(wider, choices)}
    assert "bf16/baseline@h100-sxmx1/bs64/disagg" in keys  # decode back at the prefill degree
    assert "bf16/baseline@h200x1/bs64/disagg/decode-tp2" in keys  # GPU moved, decode degree kept
    assert "bf16/baseline@h100-sxmx1/bs64" in keys  # aggregated: no decode degree left on it
