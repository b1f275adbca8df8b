"""The calibration fit recovers known coefficients, and predicts with them."""

from __future__ import annotations

import pytest

from recommender.perf.calibration import StepFeatures, fit


def test_fit_recovers_known_overhead_bandwidth_and_compute() -> None:
    overhead, per_byte, per_flop = 2e-3, 1 / 20e9, 1 / 200e9
    points = [
        (StepFeatures(bytes_moved=b, flops=f), overhead + b * per_byte + f * per_flop)
        for b in (1e7, 5e7, 2e8)
        for f in (1e8, 1e10, 1e12)
    ]
    calibration = fit(points, device="test")
    assert calibration.overhead_s == pytest.approx(overhead, rel=1e-3)
    assert calibration.seconds_per_byte == pytest.approx(per_byte, rel=1e-3)
    assert calibration.seconds_per_flop == pytest.approx(per_flop, rel=1e-3)
    assert calibration.fit_median_error < 1e-6
    assert calibration.predict(StepFeatures(1e9, 1e9)) == pytest.approx(overhead + 1e9 * per_byte + 1e9 * per_flop)
    assert calibration.provenance.startswith("modeled: calibrated on 9 probe points on test")
    with pytest.raises(ValueError):
        fit(points[:2], device="test")
