"""The studentised bootstrap over documents: intervals that hold when the damage sits in a few documents.

Why not the percentile bootstrap: when a quantization hurts one document in ten badly and the
rest not at all, the per-document differences are strongly skewed, and a percentile interval
of their mean is too short on exactly the side a pass is decided on. Simulated through
`paired_bootstrap` (benchmarks/verdict_error_rates.py), 10 % of documents 8.5 % worse, a true
rise just past a 1 % allowance, passed 30 % of single looks at n = 20 and 9 % at n = 200
against a nominal 2.5 %. The studentised (bootstrap-t) interval divides each resample's
deviation by that resample's own standard error, so a resample that happens to miss the
damaged documents — small deviation *and* small error — counts as the far-out case it is; it
is second-order accurate under skew where the percentile interval is first-order only.

Every statistic here is a smooth function of column sums over documents (an aggregate of
(numerator, denominator) pairs, a margin, a difference of two margins), so the standard error
of one resample is its jackknife: leave each document out by subtracting it from the sums,
which is vectorised and needs no formula per metric.

Resamples scale with the tail probability: a quantile at alpha estimated from B resamples
rests on about alpha * B of them, so B is at least `MIN_TAIL` / alpha (2,000 at alpha = 0.025,
6,000 at the 0.0083 of three looks) — not a fixed 2,000 that puts a 0.0025 quantile at the
5th order statistic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
#: A statistic of column sums: (..., k) sums over documents -> (...) values, vectorised.
SumStatistic = Callable[[FloatArray], FloatArray]

#: Resamples expected beyond the quantile an interval end is read at.
MIN_TAIL = 50
#: Fewest resamples whatever alpha is.
MIN_RESAMPLES = 2000
#: Most resamples: a tail past 1 / 20,000 is read at its extreme resample (tiny samples' expanded quantiles).
MAX_RESAMPLES = 20_000
#: A jackknife error this small relative to the point (or to 1) is rounding: the documents agree exactly.
_ROUNDING = 1e-10
#: Resamples processed together: bounds the (chunk, n, k) temporaries.
_CHUNK = 250


def resamples_for(alpha: float) -> int:
    """Bootstrap resamples for an interval end at tail probability `alpha` (per side)."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"need 0 < alpha < 0.5, got {alpha}")
    return min(MAX_RESAMPLES, max(MIN_RESAMPLES, math.ceil(MIN_TAIL / alpha)))


def jackknife_se(columns: FloatArray, sums: FloatArray, statistic: SumStatistic) -> FloatArray:
    """The jackknife standard error of `statistic` for samples of documents.

    Args:
        columns: (..., n, k) per-document values of each sample.
        sums: (..., k) their sums over the n documents.
    """
    n = columns.shape[-2]
    with np.errstate(divide="ignore", invalid="ignore"):
        left_out = statistic(sums[..., None, :] - columns)  # (..., n)
    spread = left_out - left_out.mean(axis=-1, keepdims=True)
    se: FloatArray = np.sqrt((n - 1) / n * (spread**2).sum(axis=-1))
    return se


def no_spread(se: float, point: float) -> bool:
    """Whether a jackknife error is zero but for rounding (every document's contribution alike)."""
    return not se > _ROUNDING * max(1.0, abs(point))


def _t_values(theta: FloatArray, point: float, se: FloatArray) -> FloatArray:
    """(theta - point) / se, where a zero error means t = 0 at the point and an infinite t away from it."""
    se = np.where(se > _ROUNDING * max(1.0, abs(point)), se, 0.0)
    deviation = np.where(np.abs(theta - point) > _ROUNDING * max(1.0, abs(point)), theta - point, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, deviation / np.where(se > 0, se, 1.0), np.sign(deviation) * np.inf)
    return np.where(deviation == 0, 0.0, t)


def studentised_intervals(
    columns: FloatArray,
    statistics: Sequence[SumStatistic],
    alpha: float,
    *,
    iterations: int | None = None,
    seed: int = 0,
) -> list[tuple[float, float, float]]:
    """(point, low, high) of each statistic: the bootstrap-t interval at `alpha` per side over documents.

    All statistics share the same resamples (paired: every column of one document moves together).
    A statistic with no spread at all (every jackknife value equal) gets the zero-width interval of
    its point; deciding whether that is believable (too few documents, 0/1 scores) is the caller's.
    """
    n = columns.shape[0]
    total = columns.sum(axis=0)
    points = [float(stat(total)) for stat in statistics]
    errors = [float(jackknife_se(columns, total, stat)) for stat in statistics]
    rng = np.random.default_rng(seed)
    b = iterations or resamples_for(alpha)
    t_all: list[list[FloatArray]] = [[] for _ in statistics]
    for start in range(0, b, _CHUNK):
        sample = columns[rng.integers(0, n, size=(min(_CHUNK, b - start), n))]  # (chunk, n, k)
        sums = sample.sum(axis=1)
        for i, stat in enumerate(statistics):
            with np.errstate(divide="ignore", invalid="ignore"):
                theta = stat(sums)
            t_all[i].append(_t_values(theta, points[i], jackknife_se(sample, sums, stat)))
    out: list[tuple[float, float, float]] = []
    for point, se, parts in zip(points, errors, t_all, strict=True):
        if not math.isfinite(point) or not math.isfinite(se) or no_spread(se, point):
            out.append((point, point, point))
            continue
        t = np.concatenate(parts)
        t_low = float(np.quantile(t, alpha, method="lower"))
        t_high = float(np.quantile(t, 1.0 - alpha, method="higher"))
        out.append((point, point - t_high * se, point - t_low * se))
    return out
