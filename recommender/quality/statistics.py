"""Paired statistics: the quantized model against the baseline on the same documents.

Per document, lm-eval reports either a value (acc: 0 or 1) or a (numerator, denominator)
pair (perplexities: log-likelihood and word or byte count). A task's score is an
aggregate of those pairs, so the paired bootstrap resamples *documents* — the same
indices for baseline and variant — and recomputes both aggregates each time. That is
the paired test lm-eval's own comparison script lacks (it uses an unpaired z-test).

Verdict policy (``confidence``, the default): with the two-sided interval of the margin
(degradation minus allowance, > 0 means broken) at the given confidence,

- pass:          the whole interval is <= 0 (the threshold holds even at the worst plausible value);
- fail:          the whole interval is > 0;
- inconclusive:  the interval straddles 0 — more documents are needed.

Rules that keep a verdict from passing (or failing) by accident:

- The interval is the bootstrap's *expanded* percentile interval (Hesterberg 2015): percentile
  intervals are too narrow on small samples by about ``sqrt(n / (n - 1)) * t / z``, so the
  quantiles are taken at the level that widens them by that factor.
- 0/1 metrics (acc, acc_norm): the interval is widened to contain the exact Clopper–Pearson
  bounds of the flips (see exact.py): the losses at their exact upper bound with the gains at
  their observed rate, and the reverse; for a floor threshold (``min_value``), the variant's own
  accuracy at its exact bounds. Agreement on every document is not a zero-width interval: of
  n documents the reference gets right, a fraction ``1 - alpha ** (1 / n)`` may still flip
  (alpha = (1 - confidence) / 2 per side: 0.218 of 15 documents at 95 %).
- Other metrics (bits_per_byte, perplexities) have no exact bound, and quantization damage is
  often concentrated in a few documents (skewed differences): their interval is the studentised
  bootstrap (resampling.py), and they decide nothing on fewer than ``MIN_CONTINUOUS_DOCS``
  documents. The minimum is what simulation of concentrated damage requires
  (benchmarks/verdict_error_rates.py): with 10 % of documents damaged, a sample of n misses all
  of them with probability 0.9 ** n (3.4 % at 32, 1.5 % at 40), and a sample that saw none cannot
  tell the model from an undamaged one. The minimum also stops a degenerate bootstrap (every
  document's difference identical) from certifying a pass on a few documents. From that many
  documents up, identical differences of continuous scores mean identical numerics, and a
  zero-width interval is then the truth.
- The reference checked against itself (``same_model``) differs by zero by construction, not
  by measurement: its delta interval is [0, 0] at any document count.
- Repeated looks (adaptive evaluation) share the error rate: with ``looks`` planned looks,
  each interval is taken at ``look_confidence`` = 1 - (1 - confidence) / looks (Bonferroni),
  so the chance that *any* look's interval misses — the only way a look can give a wrong
  verdict — stays within 1 - confidence. The interval's own confidence is recorded.

Policy ``point`` decides on the point estimate alone (pass or fail, never inconclusive).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from recommender.quality.exact import FlipBounds, flip_bounds, is_binary
from recommender.quality.resampling import resamples_for, studentised_intervals
from recommender.quality.suite import TaskThreshold

Policy = Literal["confidence", "point"]
StatVerdict = Literal["pass", "fail", "inconclusive"]
FloatArray = npt.NDArray[np.float64]
DocPairs = tuple[tuple[float, float], ...]

#: Fewest documents on which a metric without an exact bound (not 0/1) may pass or fail (see the module's docstring).
MIN_CONTINUOUS_DOCS = 40

#: Resamples drawn together by the percentile bootstrap.
_CHUNK = 1000

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
    return from_sums(metric, num, den)


def from_sums(metric: str, num: FloatArray, den: FloatArray) -> FloatArray:
    """The task score from the sums over documents of the numerators and denominators; vectorised."""
    if metric in _RATIO_METRICS:
        return _RATIO_METRICS[metric](num, den)
    return num / den


def margin_of(spec: TaskThreshold, baseline: FloatArray, value: FloatArray) -> FloatArray:
    """How far past the threshold `value` is (> 0 broken), in the threshold's units; vectorised.

    A relative threshold against a zero baseline (a resample of documents the reference got
    all wrong) counts any degradation as infinitely far past it, and none as none.
    """
    th = spec.threshold
    if th.min_value is not None:
        return th.min_value - value if spec.higher_is_better else value - th.min_value
    worse = baseline - value if spec.higher_is_better else value - baseline
    if th.max_relative_drop is not None:
        scale = np.abs(baseline)
        limit = np.where(worse > 0, np.inf, np.where(worse < 0, -np.inf, 0.0))
        relative = np.divide(worse, scale, out=np.asarray(limit, dtype=np.float64), where=scale != 0)
        return relative - th.max_relative_drop
    assert th.max_absolute_drop is not None
    return worse - th.max_absolute_drop


def look_confidence(confidence: float, looks: int) -> float:
    """The confidence of each of `looks` intervals so that all of them hold together at `confidence` (Bonferroni)."""
    if looks < 1:
        raise ValueError(f"need at least one look, got {looks}")
    return 1.0 - (1.0 - confidence) / looks


def expanded_alpha(alpha: float, n: int) -> float:
    """The per-side quantile level that widens a percentile interval for a sample of n (Hesterberg's expansion).

    Percentile intervals behave like ``mean ± z * s / sqrt(n)`` with the biased variance; the
    t interval is ``mean ± t * s / sqrt(n)`` with the unbiased one. Taking the quantiles at
    ``Phi(-sqrt(n / (n - 1)) * t_{1 - alpha, n - 1})`` makes the first as wide as the second.
    """
    if n < 2:
        return alpha
    from scipy.stats import norm, t

    return float(norm.cdf(-math.sqrt(n / (n - 1)) * t.ppf(1.0 - alpha, n - 1)))


def _interval(samples: FloatArray, alpha: float) -> tuple[float, float]:
    """The outer quantiles at `alpha` per side, without interpolating (so infinite samples stay infinite)."""
    low = float(np.quantile(samples, alpha, method="lower"))
    high = float(np.quantile(samples, 1.0 - alpha, method="higher"))
    return low, high


def _hull(a: tuple[float, float], *points: float) -> tuple[float, float]:
    return min(a[0], *points), max(a[1], *points)


@dataclass(frozen=True, slots=True)
class PairedResult:
    """A task's baseline and variant scores on the same documents, the delta, its interval, the verdict.

    ``confidence`` is the intervals' own (per look); ``looks`` how many looks shared the suite's
    error rate. ``decisive``: whether the documents were enough to decide at all.
    ``reference_docs``/``variant_docs``: the per-document pairs compared, for the release gate.
    """

    baseline: float
    value: float
    delta: float
    delta_ci: tuple[float, float]
    margin: float
    margin_ci: tuple[float, float]
    n_docs: int
    verdict: StatVerdict
    confidence: float = 0.95
    looks: int = 1
    decisive: bool = True
    reference_docs: DocPairs = ()
    variant_docs: DocPairs = ()


def _verdict(policy: Policy, margin: float, margin_ci: tuple[float, float], decisive: bool) -> StatVerdict:
    if policy == "point":
        return "pass" if margin <= 0 else "fail"
    if not decisive:
        return "inconclusive"
    if margin_ci[1] <= 0:
        return "pass"
    if margin_ci[0] > 0:
        return "fail"
    return "inconclusive"


def _as_docs(pairs: FloatArray) -> DocPairs:
    return tuple((float(a), float(b)) for a, b in pairs)


def _widen_exact(
    spec: TaskThreshold,
    base: float,
    delta_ci: tuple[float, float],
    margin_ci: tuple[float, float],
    exact: FlipBounds,
    *,
    same_model: bool,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The intervals widened to contain the exact bounds of a 0/1 metric (the margin's at the baseline's score).

    A floor threshold judges the variant's own accuracy; a drop threshold the paired difference,
    which for the reference against itself is zero by construction and is left alone.
    """
    if not same_model:
        delta_ci = _hull(delta_ci, exact.delta_low, exact.delta_high)
    if spec.threshold.min_value is not None:
        ends = np.asarray([exact.value_low, exact.value_high])
    elif not same_model:
        ends = base + np.asarray(delta_ci)
    else:
        return delta_ci, margin_ci
    with np.errstate(divide="ignore", invalid="ignore"):
        bounds = margin_of(spec, np.asarray(base), ends)
    return delta_ci, _hull(margin_ci, *(float(b) for b in bounds))


def _percentile_intervals(
    spec: TaskThreshold, baseline_pairs: FloatArray, variant_pairs: FloatArray, alpha: float, seed: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The expanded percentile intervals of the delta and the margin (0/1 metrics, joined with the exact bounds)."""
    n = baseline_pairs.shape[0]
    side = expanded_alpha(alpha, n)
    rng, total = np.random.default_rng(seed), resamples_for(side)
    base_parts, value_parts = [], []
    for start in range(0, total, _CHUNK):  # bounds the (chunk, n, 2) temporaries
        idx = rng.integers(0, n, size=(min(_CHUNK, total - start), n))
        base_parts.append(aggregate(spec.metric, baseline_pairs[idx]))
        value_parts.append(aggregate(spec.metric, variant_pairs[idx]))
    base_bs, value_bs = np.concatenate(base_parts), np.concatenate(value_parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin_bs = margin_of(spec, base_bs, value_bs)
    return _interval(value_bs - base_bs, side), _interval(margin_bs, side)


def _studentised(
    spec: TaskThreshold, baseline_pairs: FloatArray, variant_pairs: FloatArray, alpha: float, seed: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The studentised bootstrap intervals of the delta and the margin (metrics without exact bounds)."""
    columns = np.concatenate([baseline_pairs, variant_pairs], axis=1)  # base num, den, variant num, den

    def scores(sums: FloatArray) -> tuple[FloatArray, FloatArray]:
        metric = spec.metric
        return from_sums(metric, sums[..., 0], sums[..., 1]), from_sums(metric, sums[..., 2], sums[..., 3])

    def delta(sums: FloatArray) -> FloatArray:
        base, value = scores(sums)
        return value - base

    def margin(sums: FloatArray) -> FloatArray:
        return margin_of(spec, *scores(sums))

    (_, d_low, d_high), (_, m_low, m_high) = studentised_intervals(columns, [delta, margin], alpha, seed=seed)
    return (d_low, d_high), (m_low, m_high)


def paired_bootstrap(
    spec: TaskThreshold,
    baseline_pairs: FloatArray,
    variant_pairs: FloatArray,
    *,
    policy: Policy = "confidence",
    confidence: float = 0.95,
    looks: int = 1,
    same_model: bool = False,
    seed: int = 0,
) -> PairedResult:
    """Paired bootstrap over documents of the delta and of the threshold margin, widened by the rules above.

    Args:
        confidence: what all `looks` intervals hold at together; each is at `look_confidence`.
        same_model: the variant *is* the reference (the bf16 model checked against itself).
    """
    if baseline_pairs.shape != variant_pairs.shape or baseline_pairs.ndim != 2 or baseline_pairs.shape[1] != 2:
        raise ValueError("baseline and variant need the same documents as (n_docs, 2) pairs")
    n = baseline_pairs.shape[0]
    if n == 0:
        raise ValueError("no documents to compare")
    level = look_confidence(confidence, looks)
    alpha = (1.0 - level) / 2.0
    base = float(aggregate(spec.metric, baseline_pairs))
    value = float(aggregate(spec.metric, variant_pairs))
    margin = float(margin_of(spec, np.asarray(base), np.asarray(value)))
    floor = spec.threshold.min_value is not None
    binary = is_binary(baseline_pairs, variant_pairs)
    if binary:
        delta_ci, margin_ci = _percentile_intervals(spec, baseline_pairs, variant_pairs, alpha, seed)
        delta_ci, margin_ci = _widen_exact(
            spec, base, delta_ci, margin_ci, flip_bounds(baseline_pairs, variant_pairs, alpha), same_model=same_model
        )
    elif same_model and not floor:
        delta_ci, margin_ci = (0.0, 0.0), (margin, margin)
    else:
        delta_ci, margin_ci = _studentised(spec, baseline_pairs, variant_pairs, alpha, seed)
    decisive = binary or n >= MIN_CONTINUOUS_DOCS or (same_model and not floor)
    return PairedResult(
        base,
        value,
        value - base,
        delta_ci,
        margin,
        margin_ci,
        n,
        _verdict(policy, margin, margin_ci, decisive),
        level,
        looks,
        decisive,
        _as_docs(baseline_pairs),
        _as_docs(variant_pairs),
    )
