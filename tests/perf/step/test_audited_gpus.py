"""GPUs calibrated on audited MLPerf capacities (``perf/step/audited_gpus.py``): what the shipped scales multiply,
what they leave alone, and what the provenance says."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.step.audited_gpus import (
    BANDWIDTH_TERMS,
    COMPUTE_TERMS,
    AuditedGpu,
    AuditedGpus,
    load_audited_gpus,
)
from recommender.perf.step.calibrated import CalibratedModel, load_fit, load_kernel_calibration
from recommender.perf.step.features import FEATURES
from recommender.quantize import get_scheme

NONE = AuditedGpus(source="", command="", gpus={})


def _models(tmp_path_factory: pytest.TempPathFactory) -> tuple[CalibratedModel, CalibratedModel]:
    fit, kernels = load_fit(), load_kernel_calibration(cache_dir=tmp_path_factory.mktemp("tables"))
    return CalibratedModel(fit, kernels), CalibratedModel(fit, kernels, audited=NONE)


def test_the_shipped_scales_name_their_rows_and_hold_out_each_one() -> None:
    """MI300X and MI325X are fitted on their own audited rows, each row judged by the scales fitted without it
    (within x1.25 as the issue asks); MI355X, with no row, is derived from both and widened."""
    shipped = load_audited_gpus()
    assert "cases.csv" in shipped.source and shipped.command.startswith("benchmarks/fit_audited_gpus.py")
    for gpu, rows in (("mi300x", 5), ("mi325x", 2)):
        fitted = shipped.of(gpu)
        assert fitted is not None and len(fitted.rows) == rows and set(fitted.held_out_row) == set(fitted.rows)
        assert all(1 / 1.25 <= r <= 1.25 for r in fitted.held_out_row.values()), fitted.held_out_row
    derived = shipped.of("mi355x")
    assert derived is not None and derived.derived_from == ("mi300x", "mi325x") and derived.widen > 1.0
    assert shipped.of("h100-sxm") is None and shipped.of("b200") is None


def test_scales_multiply_the_bandwidth_and_compute_terms_only() -> None:
    scaled = AuditedGpu(bandwidth_scale=1.5, compute_scale=2.0).scales()
    for i, name in enumerate(FEATURES):
        expected = 1.5 if name in BANDWIDTH_TERMS else 2.0 if name in COMPUTE_TERMS else 1.0
        assert scaled[i] == expected, name


def test_an_amd_step_is_the_datasheet_step_scaled_and_says_so(tmp_path_factory: pytest.TempPathFactory) -> None:
    """On MI300X the step's coefficients are the datasheet path's times the shipped scales, a decode step slower by
    about the bandwidth scale and a long prefill by about the compute scale; the provenance names the audited rows."""
    audited, plain = _models(tmp_path_factory)
    shape, fp8, mi300x = load_architecture("llama-2-70b")[1], get_scheme("fp8-dynamic"), load_catalog().get("mi300x")
    with_scales = audited.step_cost(shape, fp8, mi300x, "vllm")
    without = plain.step_cost(shape, fp8, mi300x, "vllm")
    fitted = load_audited_gpus().of("mi300x")
    assert fitted is not None
    n = len(without.coefficients)
    np.testing.assert_allclose(with_scales.coefficients, without.coefficients * fitted.scales()[:n])
    assert "calibrated: audited MLPerf rows c07" in with_scales.provenance.detail
    assert "uncalibrated" not in with_scales.provenance.detail and "uncalibrated" in without.provenance.detail


def test_nvidia_steps_are_untouched(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A GPU without audited scales (every NVIDIA one: kernel tables or the measured runs calibrate them) prices
    the same step with or without the audited file, to the bit."""
    audited, plain = _models(tmp_path_factory)
    shape, fp8 = load_architecture("llama-3.1-8b")[1], get_scheme("fp8-dynamic")
    for gpu in ("h100-sxm", "l4", "a10g"):
        accel = load_catalog().get(gpu)
        a, b = audited.step_cost(shape, fp8, accel, "vllm"), plain.step_cost(shape, fp8, accel, "vllm")
        assert np.array_equal(a.coefficients, b.coefficients) and a.provenance == b.provenance
        assert audited.step_factors("vllm", 0.9, a) == plain.step_factors("vllm", 0.9, b)


def test_a_derived_gpu_has_wider_step_intervals(tmp_path_factory: pytest.TempPathFactory) -> None:
    audited, plain = _models(tmp_path_factory)
    shape, fp8, mi355x = load_architecture("llama-2-70b")[1], get_scheme("fp8-dynamic"), load_catalog().get("mi355x")
    a, b = audited.step_cost(shape, fp8, mi355x, "vllm"), plain.step_cost(shape, fp8, mi355x, "vllm")
    widen = load_audited_gpus().gpus["mi355x"].widen
    assert audited.step_factors("vllm", 0.9, a).decode == pytest.approx(
        plain.step_factors("vllm", 0.9, b).decode * widen
    )
    assert "mi355x has no audited row" in a.provenance.detail
