"""A MoE model's step cost is what the MoE validation judged, and its uncertainty is at least what that validation
measured on the left-out models (``moe_calibration.py``): tensor-parallel MoE replicas as well as EP ranks."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import FEATURES, N_FEATURES, StepFeatures
from recommender.perf.step.moe_calibration import load_moe_fit
from recommender.quantize import get_scheme

MODEL = CalibratedModel(load_fit())
H200 = load_catalog().get("h200")
FP8 = get_scheme("fp8-dynamic")
MOE = load_architecture("qwen3-235b-a22b")[1]
DENSE = load_architecture("llama-3.1-70b")[1]


def test_a_tensor_parallel_moe_step_is_the_validated_one_scaled_with_its_per_layer_time() -> None:
    moe = load_moe_fit()
    cost = MODEL.step_cost(MOE, FP8, H200, "vllm", tensor_parallel=4)
    features = StepFeatures(MOE, FP8, H200, 4)
    row = features.of_step(PrefillChunks.single(2048), 32, 32 * 3000)
    dense = MODEL.coefficients("vllm")[:N_FEATURES]
    expected = float(row @ dense) * moe.parameter("scale") + row[FEATURES.index("layers")] * moe.parameter("layers")
    expected += cost.floor_s
    assert cost.prefill_step_seconds(PrefillChunks.single(2048), 32, 32 * 3000) == pytest.approx(expected, rel=1e-9)
    assert moe.provenance in cost.provenance.detail
    # A dense model's step is the dense fit's alone.
    dense_cost = MODEL.step_cost(DENSE, FP8, H200, "vllm", tensor_parallel=4)
    assert moe.provenance not in dense_cost.provenance.detail
    assert dense_cost.coefficients == pytest.approx(dense)


def test_the_sla_checks_upper_steps_of_a_moe_model_are_at_least_its_left_out_models_error() -> None:
    moe = load_moe_fit()
    prefill_q, decode_q = moe.step_factors(0.9)
    # The stored residuals are the left-out runs' (every run's TPOT, the aggregated runs' TTFT).
    assert len(moe.tpot_log_residuals) == moe.leave_one_model_out["overall"].runs
    assert len(moe.ttft_log_residuals) == moe.leave_one_model_out["all/agg"].runs
    # The prefill factor: the lightly loaded aggregated runs' TTFT (the queue amplifies a step's error; the SLA check's
    # simulation queues the slower steps itself).
    assert 0 < len(moe.prefill_log_residuals) < len(moe.ttft_log_residuals)
    assert prefill_q == pytest.approx(np.exp(np.quantile(moe.prefill_log_residuals, 0.9)))
    assert decode_q == pytest.approx(np.exp(np.quantile(moe.tpot_log_residuals, 0.9)))
    dense_factors = MODEL.step_factors("vllm", 0.9, MODEL.step_cost(DENSE, FP8, H200, "vllm", tensor_parallel=4))
    moe_point = MODEL.step_cost(MOE, FP8, H200, "vllm", tensor_parallel=4)
    moe_factors = MODEL.step_factors("vllm", 0.9, moe_point)
    assert moe_factors.decode == pytest.approx(max(dense_factors.decode, decode_q))
    assert moe_factors.prefill == pytest.approx(max(dense_factors.prefill, prefill_q))
    # What the validation showed is wider than the dense fit's decode residuals: the MoE bound is the one used.
    assert decode_q > dense_factors.decode
    upper = MODEL.upper_step_cost(moe_point, "vllm", 0.9)
    assert upper.decode_steps_seconds(32, np.array([96_000]))[0] == pytest.approx(
        moe_point.decode_steps_seconds(32, np.array([96_000]))[0] * moe_factors.decode, rel=1e-9
    )


def test_estimates_interval_for_a_moe_model_covers_its_left_out_models_spread() -> None:
    moe = load_moe_fit()
    point = MODEL.step_cost(MOE, FP8, H200, "vllm", tensor_parallel=4)
    dense_point = MODEL.step_cost(DENSE, FP8, H200, "vllm", tensor_parallel=4)
    lo, hi = moe.interval("tpot", 0.9)
    got = MODEL.interval(10.0, "tpot", "vllm", 0.9, point)
    dense = MODEL.interval(10.0, "tpot", "vllm", 0.9, dense_point)
    assert got.high == pytest.approx(10.0 * max(hi, dense.high / 10.0))
    assert got.low == pytest.approx(10.0 * min(lo, dense.low / 10.0))
    assert got.high > dense.high
