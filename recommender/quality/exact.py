"""Exact binomial bounds for 0/1 metrics: what resampling the observed documents cannot see.

Why: a paired bootstrap resamples the documents it has. When the candidate and the reference
agree on every one of 15 documents, every resample agrees too and the interval of the
difference is [+0, +0] — certainty from 15 documents. A flip (a document the reference gets
right and the candidate wrong, or the reverse) is a binomial event, and the Clopper–Pearson
bound on a binomial rate is exact: with k flips among m documents the rate is at most the upper
end of scipy's ``binomtest(k, m).proportion_ci(method="exact")`` at two-sided confidence
1 - 2 alpha (``beta.ppf(1 - alpha, k + 1, m - k)``) with probability at least 1 - alpha. With
k = 0 that is ``1 - alpha ** (1 / m)`` (3/m, the "rule of three", approximates it at alpha = 0.05).

Flips are counted *among all n documents*, not among those the reference got right: a document is
a loss with probability p_loss whatever the reference's answers, so ``upper_rate(losses, n)`` bounds
p_loss unconditionally. The earlier bound, ``right / n * upper_rate(losses, right)``, conditioned
on the sample's own reference accuracy: where the reference got few documents right it collapsed
(and with none right it was zero, so any threshold passed), and a model losing half its right
answers at a 10 % reference accuracy passed 19 % of single looks at n = 15. With no loss both are
about 3.69 / n at alpha = 0.025, so the unconditional bound costs nothing where it matters most.
scipy is imported on first use, not with the module, so the CLI starts without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def upper_rate(k: int, m: int, alpha: float) -> float:
    """One-sided exact upper bound (confidence 1 - alpha) of a rate observed k times in m trials; 1 when m == 0."""
    if not 0 <= k <= m:
        raise ValueError(f"need 0 <= k <= m, got k={k}, m={m}")
    if k == m:
        return 1.0
    from scipy.stats import binomtest

    # Clopper-Pearson's two-sided interval at 1 - 2 alpha puts alpha in each tail: its upper end is the one-sided bound.
    return float(binomtest(k, m).proportion_ci(confidence_level=1.0 - 2.0 * alpha, method="exact").high)


def lower_rate(k: int, m: int, alpha: float) -> float:
    """One-sided exact lower bound (confidence 1 - alpha) of a rate observed k times in m trials; 0 when m == 0."""
    return 1.0 - upper_rate(m - k, m, alpha)


def is_binary(*pairs: FloatArray) -> bool:
    """Whether every per-document (numerator, denominator) pair is a 0/1 score (acc, acc_norm, exact_match)."""
    return all(bool(np.all(p[:, 1] == 1.0) and np.all((p[:, 0] == 0.0) | (p[:, 0] == 1.0))) for p in pairs)


@dataclass(frozen=True, slots=True)
class FlipBounds:
    """Exact bounds, each at one-sided confidence 1 - alpha, of a 0/1 metric's paired difference (variant - reference).

    ``delta_low``: the losses per document (losses / n) at their exact upper bound, the gains at their
    observed rate; ``delta_high``: the reverse. (The bootstrap interval they are joined with covers
    the gains' own spread where there are many of both.) ``value_low``/``value_high``: the variant's own accuracy.
    """

    delta_low: float
    delta_high: float
    value_low: float
    value_high: float


def flip_bounds(reference: FloatArray, variant: FloatArray, alpha: float) -> FlipBounds:
    """Exact bounds of the paired difference and of the variant's accuracy from 0/1 per-document scores."""
    ref = reference[:, 0] == 1.0
    var = variant[:, 0] == 1.0
    n = len(ref)
    losses, gains = int((ref & ~var).sum()), int((~ref & var).sum())
    correct = int(var.sum())
    return FlipBounds(
        delta_low=gains / n - upper_rate(losses, n, alpha),
        delta_high=upper_rate(gains, n, alpha) - losses / n,
        value_low=lower_rate(correct, n, alpha),
        value_high=upper_rate(correct, n, alpha),
    )
