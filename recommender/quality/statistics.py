"""Paired statistics: the quantized model against the baseline on the same documents.

Per document, lm-eval reports either a value (acc: 0 or 1) or a (numerator, denominator)
pair (perplexities: log-likelihood and word or byte count). A task's score is an
aggregate of those pairs, so the paired bootstrap resamples *documents* — the same
indices for baseline and variant — and recomputes both aggregates each time. That is
the paired test lm-eval's own comparison script lacks (it uses an unpaired z-test).

Verdict policy (``confidence``, the default): with the bootstrap's two-sided interval
of the margin (degradation minus allowance, > 0 means broken) at the given confidence,

- pass:          the whole interval is <= 0 (the threshold holds even at the worst plausible value);
- fail:          the whole interval is > 0;
- inconclusive:  the interval straddles 0 — more documents are needed.

Policy ``point`` decides on the point estimate alone (pass or fail, never inconclusive).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from recommender.quality.suite import TaskThreshold

Policy = Literal["confidence", "point"]
StatVerdict = Literal["pass", "fail", "inconclusive"]
FloatArray = npt.NDArray[np.float64]

#: Metrics lm-eval aggregates from (log-likelihood, count) pairs, and how.
_LN2 = math.log(2.0)
_RATIO_METRICS: dict[str, Callable[[FloatArray, FloatArray], FloatArray]] = {
    "word_perplexity": lambda ll, n: np.exp(-ll / n),
    "byte_perplexity": lambda ll, n: np.exp(-ll / n),
    "bits_per_byte": lambda ll, n: -ll / n / _LN2,
}


def aggregate(metric: str, pairs: FloatArray) -> FloatArray:
    """The task score from per-document (numerator, denominator) pairs.

    `pairs` has shape (..., n_docs, 2); the result has shape (...). Mean metrics use
    denominators of 1, so this is the plain mean for them.
    """
    # A 0-d result (numpy scalar) when `pairs` is (n_docs, 2); numpy's stubs type the reduction as Any.
    num: FloatArray = pairs[..., 0].sum(axis=-1)
    den: FloatArray = pairs[..., 1].sum(axis=-1)
    if metric in _RATIO_METRICS:
        return _RATIO_METRICS[metric](num, den)
    return num / den


def margin_of(spec: TaskThreshold, baseline: FloatArray, value: FloatArray) -> FloatArray:
    """How far past the threshold `value` is (> 0 broken), in the threshold's units; vectorised."""
    th = spec.threshold
    if th.min_value is not None:
        return th.min_value - value if spec.higher_is_better else value - th.min_value
    worse = baseline - value if spec.higher_is_better else value - baseline
    if th.max_relative_drop is not None:
        return worse / np.abs(baseline) - th.max_relative_drop
    assert th.max_absolute_drop is not None
    return worse - th.max_absolute_drop


@dataclass(frozen=True, slots=True)
class PairedResult:
    """A task's baseline and variant scores on the same documents, the delta, its interval, the verdict."""

    baseline: float
    value: float
    delta: float
    delta_ci: tuple[float, float]
    margin: float
    margin_ci: tuple[float, float]
    n_docs: int
    verdict: StatVerdict


def paired_bootstrap(
    spec: TaskThreshold,
    baseline_pairs: FloatArray,
    variant_pairs: FloatArray,
    *,
    policy: Policy = "confidence",
    confidence: float = 0.95,
    iterations: int = 2000,
    seed: int = 0,
) -> PairedResult:
    """Paired bootstrap over documents of the delta and of the threshold margin."""
    if baseline_pairs.shape != variant_pairs.shape or baseline_pairs.ndim != 2 or baseline_pairs.shape[1] != 2:
        raise ValueError("baseline and variant need the same documents as (n_docs, 2) pairs")
    n = baseline_pairs.shape[0]
    base = float(aggregate(spec.metric, baseline_pairs))
    value = float(aggregate(spec.metric, variant_pairs))
    margin = float(margin_of(spec, np.asarray(base), np.asarray(value)))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(iterations, n))
    base_bs = aggregate(spec.metric, baseline_pairs[idx])
    value_bs = aggregate(spec.metric, variant_pairs[idx])
    alpha = (1.0 - confidence) / 2.0
    delta_bs = value_bs - base_bs
    margin_bs = margin_of(spec, base_bs, value_bs)
    delta_ci = (float(np.quantile(delta_bs, alpha)), float(np.quantile(delta_bs, 1 - alpha)))
    margin_ci = (float(np.quantile(margin_bs, alpha)), float(np.quantile(margin_bs, 1 - alpha)))
    if policy == "point":
        verdict: StatVerdict = "pass" if margin <= 0 else "fail"
    elif margin_ci[1] <= 0:
        verdict = "pass"
    elif margin_ci[0] > 0:
        verdict = "fail"
    else:
        verdict = "inconclusive"
    return PairedResult(base, value, value - base, delta_ci, margin, margin_ci, n, verdict)
