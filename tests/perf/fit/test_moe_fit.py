"""The MoE / disaggregated validation: the shipped runs load with every skipped row counted, the prefill queue of a
closed loop, and the shipped artifact against a replay (fast: a few runs; slow: every run, leave-one-model-out)."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.moe_fit import MoeFit, leave_one_model_out, predict, prior_coefficients, summarize
from recommender.perf.fit.moe_rows import moe_row, queue_factor
from recommender.perf.fit.moe_runs import MOE_RUNS, read_moe_runs
from recommender.perf.fit.serving_runs import runs_digest
from recommender.perf.step.calibrated import load_fit
from recommender.quantize import get_scheme
from tests.benchmark_scripts import load_benchmark


def _artifact() -> MoeFit:
    moe = load_benchmark("moe_fidelity")
    return MoeFit.model_validate_json(moe.MOE_FIT_PATH.read_text(encoding="utf-8"))


def _priors() -> dict[str, np.ndarray]:
    return {e: prior_coefficients(c) for e, c in load_fit().engines.items()}


def test_runs_load_and_every_skipped_row_is_counted_by_reason() -> None:
    runs, skipped = read_moe_runs(MOE_RUNS, schemes=get_scheme, profiles=PROFILES)
    assert len(runs) + sum(skipped.values()) == 1179
    assert skipped["system 'gb300' is not in the GPU catalog"] == 59
    assert any("without worker counts" in why and n == 50 for why, n in skipped.items())
    disagg = [r for r in runs if r.prefill is not None]
    assert disagg and all(r.model == "deepseek-v3" for r in disagg)
    first = next(r for r in disagg if r.run_id.startswith("dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048"))
    assert first.concurrency == 2048 and first.decode.ranks == 32 and first.decode.batch == 64


def test_queue_factor_of_a_closed_loop() -> None:
    # One client never queues; a burst of 4 on one rank waits 1, 2, 3, 4 prompts, then (away long) never again.
    assert queue_factor(1, 1, 10.0, 5.0) == pytest.approx(1.0)
    assert queue_factor(4, 1, 10.0, 1e9, rounds=1) == pytest.approx(2.5)
    assert queue_factor(4, 4, 10.0, 1e9, rounds=1) == pytest.approx(1.0)
    # Saturated: clients back at once, each waits for the other three's prompts every round.
    assert queue_factor(4, 1, 10.0, 0.0, rounds=50) == pytest.approx(4.0, rel=0.03)


def test_shipped_artifact_matches_a_replay_of_its_check_runs() -> None:
    fit = _artifact()
    assert fit.data_sha256 == runs_digest(MOE_RUNS)
    overall = fit.leave_one_model_out["overall"]
    assert f"TTFT {overall.ttft_median:.0%}, TPOT {overall.tpot_median:.0%}" in fit.provenance
    runs, _ = read_moe_runs(MOE_RUNS, schemes=get_scheme, profiles=PROFILES)
    chosen = [r for r in runs if r.run_id in fit.check_runs]
    assert len(chosen) == len(fit.check_runs) >= 5
    assert {r.layout for r in chosen} == {"agg", "disagg"}
    priors = _priors()
    shapes = {m: load_architecture(m)[1] for m in {r.model for r in chosen}}
    rows = [moe_row(r, shapes, load_catalog(), priors[r.engine]) for r in chosen]
    for p in predict(rows, priors.__getitem__, np.array(fit.theta)):
        assert (p.ttft_ms, p.tpot_ms) == pytest.approx(fit.check_runs[p.row.run.run_id], rel=1e-6)


@pytest.mark.slow
def test_full_replay_reproduces_the_shipped_leave_one_model_out_table() -> None:
    moe = load_benchmark("moe_fidelity")
    runs, skipped = read_moe_runs(MOE_RUNS, schemes=get_scheme, profiles=PROFILES)
    rows = moe.design(runs, skipped)
    table = summarize(leave_one_model_out(rows, _priors().__getitem__))
    fit = _artifact()
    assert skipped == fit.skipped
    for name, summary in fit.leave_one_model_out.items():
        got = table[name]
        assert got.runs == summary.runs
        assert got.ttft_median == pytest.approx(summary.ttft_median, rel=1e-6)
        assert got.tpot_median == pytest.approx(summary.tpot_median, rel=1e-6)
        assert got.coverage_ttft == pytest.approx(summary.coverage_ttft)


def test_breakdown_groups_each_left_out_runs_tpot_ratio_by_model_and_group() -> None:
    """``gpu_fidelity.py --moe --breakdown``: every left-out run lands in its model's "all" group and in one group per
    engine, GPU, scheme, layout and attention / MoE split, with its measured / predicted TPOT."""
    moe = load_benchmark("moe_fidelity")
    runs, _ = read_moe_runs(MOE_RUNS, schemes=get_scheme, profiles=PROFILES)
    chosen = [r for r in runs if r.run_id in _artifact().check_runs]
    priors = _priors()
    shapes = {m: load_architecture(m)[1] for m in {r.model for r in chosen}}
    rows = [moe_row(r, shapes, load_catalog(), priors[r.engine]) for r in chosen]
    folds = leave_one_model_out(rows, priors.__getitem__)
    groups = moe.breakdown(folds)
    predictions = [p for fold in folds for p in fold.predictions]
    for model in {r.model for r in chosen}:
        mine = [p for p in predictions if p.row.run.model == model]
        expected = sorted(p.row.run.tpot_ms / p.tpot_ms for p in mine)
        assert sorted(groups[(model, "all")]) == pytest.approx(expected)
        keys = [k for m, k in groups if m == model]
        assert sum(len(groups[(model, k)]) for k in keys) == 6 * len(mine)  # all + five groupings, each run once
    split = next(p for p in predictions if p.row.run.layout == "disagg").row.run
    assert (split.model, "disagg") in groups
