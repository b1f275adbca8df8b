"""Host time per engine release line: which line's coefficients a kernel-table step cost carries, and its words."""

from __future__ import annotations

import numpy as np

from recommender.perf.step.calibrated import (
    KERNEL_FIT_PATH,
    CalibratedModel,
    StepCostFit,
    host_time_note,
    load_fit,
    release_line,
)


def _fit_with_lines() -> StepCostFit:
    fit = load_fit(KERNEL_FIT_PATH)
    vllm = fit.engines["vllm"]
    lines = {"vllm 0.12": [c * 1.1 for c in vllm], "vllm 0.9": vllm, "vllm unrecorded": [c * 2 for c in vllm]}
    return fit.model_copy(update={"releases": lines, "release_runs": {"vllm 0.12": 93, "vllm 0.9": 20}})


def test_the_default_is_the_newest_recorded_line_never_an_unrecorded_one() -> None:
    fit = _fit_with_lines()
    assert release_line(fit, "vllm") == "vllm 0.12"
    assert release_line(fit, "vllm", "0.9.2") == "vllm 0.9"
    assert release_line(fit, "vllm", "vllm 0.12") == "vllm 0.12"
    assert release_line(fit, "vllm", "0.11") is None
    assert release_line(fit, "sglang") is None


def test_a_release_the_fit_did_not_calibrate_takes_the_engines_set_and_says_so() -> None:
    fit = _fit_with_lines()
    model = CalibratedModel(load_fit(), None)
    assert np.allclose(model.coefficients("vllm", fit, "0.11"), fit.engines["vllm"])
    assert np.allclose(model.coefficients("vllm", fit), fit.releases["vllm 0.12"])
    assert "not calibrated" in host_time_note(fit, "vllm", "0.11")
    note = host_time_note(fit, "vllm", None)
    assert "vllm 0.12 (93 measured runs; the newest release line calibrated (default))" in note


def test_a_fit_without_release_lines_prices_as_before() -> None:
    fit = load_fit(KERNEL_FIT_PATH)
    model = CalibratedModel(load_fit(), None)
    assert np.allclose(model.coefficients("trtllm", fit, "1.0.0rc3"), fit.engines["trtllm"])
