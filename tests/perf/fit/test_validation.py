"""Judging the fit as the tool is used: client-protocol brackets, held-out campaigns and models, step intervals."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.serving_runs import load_runs
from recommender.perf.fit.step_fit import FitSettings
from recommender.perf.fit.validation import (
    HOLDOUTS,
    bracket_rows,
    held_out_predictions,
    holdout_table,
    interval_predictions,
)
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.upper import StepFactors, UpperStepCost
from recommender.provenance import Provenance
from recommender.quantize import get_scheme


@pytest.fixture(scope="module")
def rows() -> list:  # type: ignore[type-arg]
    """A few runs of each group and both campaigns: every steady run, every tenth sweep run (60 runs, 9 to 18 of each
    sweep group; each is simulated, so every fifth took twice as long for the same checks)."""
    runs = load_runs(schemes=get_scheme, profiles=PROFILES)
    picked = [r for i, r in enumerate(runs) if r.campaign == "steady" or i % 10 == 0]
    shapes = {m: load_architecture(m)[1] for m in {r.model for r in picked}}
    return bracket_rows(picked, shapes, load_catalog())


def test_the_bracket_spans_both_client_protocols_and_holds_the_fitted_one(rows: list) -> None:  # type: ignore[type-arg]
    predictions = held_out_predictions(rows, FitSettings(), HOLDOUTS["group"])
    assert len(predictions) == len(rows)
    for p in predictions:
        low, high = p.ttft_bracket_ms
        assert low <= p.ttft_ms * (1 + 1e-9) and p.ttft_ms <= high * (1 + 1e-9)
        assert 0 < p.lone_prefill_ms <= low * (1 + 1e-9)  # no client sees less than one prompt's prefill
        inside = low <= p.run.ttft_ms <= high
        assert (p.prefill_residual == 0.0) == inside
        assert np.sign(p.prefill_residual) == np.sign(np.log(p.run.ttft_ms / low)) or inside
    # The burst counts C prompts queued at once: at concurrency >= 8 its TTFT exceeds the steady client's somewhere.
    assert any(p.ttft_bracket_ms[1] > 1.2 * p.ttft_bracket_ms[0] for p in predictions)


def test_holding_out_a_campaign_or_a_model_predicts_it_from_the_others_only(rows: list) -> None:  # type: ignore[type-arg]
    campaigns = holdout_table(rows, FitSettings(), "campaign")
    assert set(campaigns) == {"sweep", "steady", "overall"}
    assert campaigns["overall"].runs == len(rows)
    for summary in campaigns.values():
        for share in (summary.explained_ttft, summary.coverage_ttft, summary.coverage_tpot_before):
            assert share is None or 0.0 <= share <= 1.0
    models = holdout_table(rows, FitSettings(), "model")
    # Without Qwen3-32B the training runs are one group (Llama on TensorRT-LLM): no held-out residuals, no interval.
    assert models["qwen3-32b"].coverage_ttft is None
    assert models["llama-3.1-8b"].coverage_ttft is not None
    # Leaving a whole model out is harder than leaving out one of its groups, on the same runs.
    groups = holdout_table(rows, FitSettings(), "group")
    assert models["overall"].tpot_median >= groups["overall"].tpot_median


def test_interval_pools_mix_every_holdout_that_splits_the_runs(rows: list) -> None:  # type: ignore[type-arg]
    """Each run is predicted once per kind of novelty the runs span: two campaigns here, one GPU (not split)."""
    group = held_out_predictions(rows, FitSettings(), HOLDOUTS["group"])
    mixed = interval_predictions(rows, FitSettings(), ("group", "campaign", "gpu"))
    assert len(mixed) == 2 * len(rows)
    assert sorted(p.run.group for p in mixed[: len(group)]) == sorted(p.run.group for p in group)
    campaign_out = mixed[len(group) :]
    # The seven steady runs predicted from the sweep alone, not from a fit that saw the steady campaign.
    steady = [p for p in campaign_out if p.run.campaign == "steady"]
    assert steady and all(p.ttft_ms > 0 for p in steady)
    assert interval_predictions(rows, FitSettings(), ("gpu",)) == []


def test_shipped_fit_carries_the_held_out_tables_and_step_residuals() -> None:
    fit = load_fit()
    assert set(fit.validation) == {"campaign", "model", "group"}
    assert fit.validation["campaign"]["overall"].runs == 534
    assert fit.step_residuals_engine_seen.prefill and fit.step_residuals_engine_seen.decode
    model = CalibratedModel(fit)
    known, unknown = model.step_factors("vllm", 0.9), model.step_factors("tgi", 0.9)
    assert unknown.prefill >= known.prefill >= 1.0 and unknown.decode >= known.decode >= 1.0
    assert known.decode < known.prefill  # decode steps are predicted more surely than prefill
    assert set(fit.step_residuals_by_engine) == {"vllm", "sglang", "trtllm"}


def test_an_engine_draws_its_step_interval_from_its_own_residuals_only_when_it_has_enough() -> None:
    from recommender.perf.step.calibrated import MIN_ENGINE_RESIDUALS, StepResiduals, step_pools

    seen, unseen = StepResiduals(prefill=[0.0, 0.5], decode=[0.0, 0.1]), StepResiduals(prefill=[0.9], decode=[0.3])
    many, few = [0.01] * MIN_ENGINE_RESIDUALS, [0.01] * (MIN_ENGINE_RESIDUALS - 1)
    by_engine = {"vllm": StepResiduals(prefill=many, decode=few)}
    assert step_pools(seen, unseen, by_engine, "vllm", True) == (many, None, seen.decode, None)
    assert step_pools(seen, unseen, by_engine, "sglang", True) == (seen.prefill, None, seen.decode, None)
    assert step_pools(seen, unseen, by_engine, "tgi", False) == (
        seen.prefill,
        unseen.prefill,
        seen.decode,
        unseen.decode,
    )


def _cost() -> tuple[UpperStepCost, StepFactors]:
    model = CalibratedModel(load_fit())
    shape, h100 = load_architecture("llama-3.1-8b")[1], load_catalog().get("h100-sxm")
    point = model.step_cost(shape, get_scheme("baseline"), h100, "vllm")
    factors = StepFactors(prefill=2.0, decode=1.25)
    return UpperStepCost(point, factors, Provenance("modeled", "test")), factors


def test_upper_step_cost_slows_prefill_and_decode_work_by_their_own_factors() -> None:
    upper, factors = _cost()
    point = upper.point
    assert upper.step_seconds(0, 16, 16_000) == pytest.approx(point.step_seconds(0, 16, 16_000) * factors.decode)
    ctx = np.array([1000.0, 5000.0])
    assert np.allclose(upper.decode_steps_seconds(8, ctx), point.decode_steps_seconds(8, ctx) * factors.decode)
    chunks = PrefillChunks.single(2048)
    decode_part = point.prefill_step_seconds(PrefillChunks(), 16, 16_000)
    whole = point.prefill_step_seconds(chunks, 16, 16_000)
    expected = decode_part * factors.decode + (whole - decode_part) * factors.prefill
    assert upper.prefill_step_seconds(chunks, 16, 16_000) == pytest.approx(expected)
    same = UpperStepCost(point, StepFactors(1.0, 1.0), point.provenance)
    assert same.prefill_step_seconds(chunks, 16, 16_000) == pytest.approx(whole)


def test_the_users_traffic_simulated_at_the_upper_steps_queues_more_than_a_scaled_point_p99() -> None:
    """Near capacity, slower steps lengthen the queue: the P99 at the upper steps exceeds the point P99 times the
    prefill factor, which is why the SLA check simulates the upper steps rather than scaling a point P99."""
    from recommender.perf.fit.step_fit import replay_config

    upper, factors = _cost()
    config = replay_config(upper.point.features.shape, upper.point.features, PROFILES["vllm"], concurrency=256)
    workload = make_workload(prompt=2048, output=128, n_requests=400, rate=25.0, seed=0)
    point, high = simulate(upper.point, workload, config), simulate(upper, workload, config)
    assert high.ttft_ms.p99 > factors.prefill * point.ttft_ms.p99


def test_a_decode_itl_client_sees_no_prefill_stalls() -> None:
    """The "decode ITL" metric drops the steps that carry prompts: below the mean TPOT where prompts join decode
    steps (SGLang pauses decoding for each prefill batch), the same where every request decodes alone."""
    from recommender.perf.fit.step_fit import replay_config
    from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, InterTokenStepCost, replay

    model = CalibratedModel(load_fit())
    shape, h100 = load_architecture("qwen3-32b")[1], load_catalog().get("h100-sxm")
    cost = model.step_cost(shape, get_scheme("baseline"), h100, "sglang", tensor_parallel=2)
    config = replay_config(shape, cost.features, PROFILES["sglang"], concurrency=32)
    busy = ClosedLoopBenchmark(concurrency=32, prompt_tokens=2048, output_tokens=256)
    mean, itl = replay(cost, config, busy), replay(InterTokenStepCost(cost), config, busy)
    assert itl.tpot_ms.mean < 0.9 * mean.tpot_ms.mean
    alone = ClosedLoopBenchmark(concurrency=1, prompt_tokens=2048, output_tokens=256, rounds=2)
    assert replay(InterTokenStepCost(cost), config, alone).tpot_ms.mean == pytest.approx(
        replay(cost, config, alone).tpot_ms.mean, rel=1e-6
    )
