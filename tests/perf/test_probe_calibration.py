"""The calibration's two fits recover known rates, and a calibration on one size predicts another exactly
when the times really follow the model (the real-timing fidelity lives in benchmarks/calibration_fidelity.py)."""

from __future__ import annotations

import pytest

from recommender.perf.model.shape import ModelShape
from recommender.quantize import get_scheme
from tests.benchmark_scripts import load_benchmark

#: The probe calibration behind benchmarks/calibration_fidelity.py (not on the search path: it lives there).
_calibration = load_benchmark("probe_calibration")
CalibratedStepTime, decode_work, fit, fit_kernel_rates, prefill_work = (
    _calibration.CalibratedStepTime,
    _calibration.decode_work,
    _calibration.fit,
    _calibration.fit_kernel_rates,
    _calibration.prefill_work,
)

SMALL = ModelShape(n_layers=4, hidden=256, intermediate=768, n_heads=4, n_kv_heads=2, head_dim=64, vocab=2048)
LARGE = ModelShape(n_layers=8, hidden=512, intermediate=1536, n_heads=8, n_kv_heads=2, head_dim=64, vocab=2048)


def test_kernel_rates_recover_known_call_byte_and_flop_costs() -> None:
    call, per_byte, per_flop = 20e-6, 1 / 15e9, 1 / 40e9
    points = [(3, b, f, 3 * call + b * per_byte + f * per_flop) for b in (1e6, 8e6) for f in (1e6, 1e8, 1e9)]
    rates = fit_kernel_rates("m", points)
    assert rates.seconds_per_call == pytest.approx(call, rel=1e-3)
    assert rates.seconds_per_byte == pytest.approx(per_byte, rel=1e-3)
    assert rates.seconds_per_flop == pytest.approx(per_flop, rel=1e-3)
    with pytest.raises(ValueError):
        fit_kernel_rates("m", points[:2])


def test_step_fit_on_one_size_predicts_another_when_times_follow_the_model() -> None:
    method = get_scheme("torchao-int8-wo")
    kernels = fit_kernel_rates("k", [(3, b, f, 3e-5 + b / 10e9 + f / 30e9) for b in (1e6, 9e6) for f in (1e6, 1e9)])
    truth = CalibratedStepTime(kernels, kernels, 4e-4, 1 / 5e9, 2e-6, 1 / 8e9, 0, 0.0, "test")

    def points(shape: ModelShape) -> list:
        works = [prefill_work(shape, method, p) for p in (32, 128, 256)]
        works += [decode_work(shape, method, b, c) for b in (1, 4, 16) for c in (32, 256)]
        return [(w, truth.predict(w)) for w in works]

    calibration = fit(points(SMALL), kernels=kernels, lm_head_kernels=kernels, device="test")
    assert calibration.seconds_per_layer == pytest.approx(4e-4, rel=1e-3)
    assert calibration.fit_median_error < 1e-6
    for work, seconds in points(LARGE):
        assert calibration.predict(work) == pytest.approx(seconds, rel=1e-3)
    assert calibration.provenance.kind == "calibrated"
    assert calibration.provenance.detail.startswith("calibrated on 9 probe points and k kernel probes on test")
    # Decode time grows with batch and context; the prefill of a longer prompt takes longer.
    assert truth.predict(decode_work(LARGE, method, 16, 256)) > truth.predict(decode_work(LARGE, method, 1, 256))
    assert truth.predict(prefill_work(LARGE, method, 256)) > truth.predict(prefill_work(LARGE, method, 32))
    with pytest.raises(ValueError):
        fit(points(SMALL)[:2], kernels=kernels, lm_head_kernels=kernels, device="test")
