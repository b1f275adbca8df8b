"""Calibrating the step-time model on measured probes, for the device those probes ran on.

The roofline's efficiencies are guesses until they meet measurements. Here a step's time
is modelled as ``overhead + bytes / bandwidth + flops / compute`` — the same physics as
the roofline with the max() replaced by a sum, which makes it linear in its three
unknowns — and the unknowns (seconds per step, per byte, per FLOP) are fitted to probe
points by non-negative least squares on relative error. A fit on one model size predicts
another's step times on the same device and method (benchmarks/calibration_fidelity.py
measures how well).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.perf.probe import ProbeResult
from recommender.perf.roofline import weight_bytes
from recommender.perf.shape import ModelShape
from recommender.quantize import QuantMethod


@dataclass(frozen=True, slots=True)
class StepFeatures:
    """What a step does: bytes it moves and FLOPs it computes."""

    bytes_moved: float
    flops: float


def prefill_features(shape: ModelShape, method: QuantMethod, prompt_tokens: int) -> StepFeatures:
    params = shape.body_params + shape.lm_head_params
    return StepFeatures(
        bytes_moved=weight_bytes(shape, method),
        flops=2.0 * prompt_tokens * params + shape.attention_flops(prompt_tokens, prompt_tokens),
    )


def decode_features(shape: ModelShape, method: QuantMethod, batch_size: int, context_tokens: int) -> StepFeatures:
    params = shape.body_params + shape.lm_head_params
    kv = batch_size * context_tokens * shape.kv_bytes_per_token()
    return StepFeatures(
        bytes_moved=weight_bytes(shape, method) + kv,
        flops=2.0 * batch_size * params + shape.attention_flops(batch_size, context_tokens),
    )


@dataclass(frozen=True, slots=True)
class CalibratedStepTime:
    """Fitted seconds per step, per byte and per FLOP, and the fit's own relative error."""

    overhead_s: float
    seconds_per_byte: float
    seconds_per_flop: float
    points: int
    fit_median_error: float
    device: str

    def predict(self, features: StepFeatures) -> float:
        return self.overhead_s + self.seconds_per_byte * features.bytes_moved + self.seconds_per_flop * features.flops

    @property
    def provenance(self) -> str:
        return (
            f"modeled: calibrated on {self.points} probe points on {self.device} "
            f"(fit median |error| {self.fit_median_error:.1%})"
        )


def probe_points(shape: ModelShape, method: QuantMethod, probes: list[ProbeResult]) -> list[tuple[StepFeatures, float]]:
    """Each probe gives two points: one prompt's prefill, and one decode step of its batch."""
    points: list[tuple[StepFeatures, float]] = []
    for p in probes:
        points.append((prefill_features(shape, method, p.prompt_tokens), p.prefill_s))
        points.append((decode_features(shape, method, p.batch_size, p.prompt_tokens), p.decode_step_s))
    return points


def fit(points: list[tuple[StepFeatures, float]], *, device: str) -> CalibratedStepTime:
    """Non-negative least squares on relative error (each row divided by its measured time)."""
    from scipy.optimize import nnls

    if len(points) < 3:
        raise ValueError("calibration needs at least 3 probe points")
    x = np.asarray([[1.0, f.bytes_moved, f.flops] for f, _ in points])
    y = np.asarray([t for _, t in points])
    scale = x.max(axis=0)  # condition the columns; undone below
    coef, _ = nnls((x / scale) / y[:, None], np.ones_like(y))
    coef = coef / scale
    predicted = x @ coef
    errors = np.abs(predicted - y) / y
    return CalibratedStepTime(
        overhead_s=float(coef[0]),
        seconds_per_byte=float(coef[1]),
        seconds_per_flop=float(coef[2]),
        points=len(points),
        fit_median_error=float(np.median(errors)),
        device=device,
    )
