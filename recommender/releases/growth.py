"""How much more a precision loses against its bf16 in one release than in another, paired per document.

Both releases score the same documents (the same task, in the same seeded order), so the growth
of the loss is a statistic of four per-document columns — old bf16, old variant, new bf16, new
variant — resampled together. The earlier gate bounded each release's loss on its own and took
the far ends (Bonferroni over two unpaired intervals): an unchanged INT8 method with no flips in
either release still spanned +-1.45 % at 1,000 documents of 60 % accuracy, so the gate failed
every unchanged release at its default 1 % allowance. Paired, an unchanged release differs by
nothing on every document and the interval is as narrow as the documents allow.

0/1 metrics add an exact bound, as the task verdicts do (exact.py): per document the change of
damage c = (new bf16 - new variant) - (old bf16 - old variant) is an integer in [-2, 2]; the
documents where it is positive are a binomial count among all n, bounded by Clopper-Pearson and
weighted by the mean size of the positive changes seen (at least 1). That is exact when no
document changes by 2 (which needs the bf16 answer to change *and* both variants to flip it back
opposite ways); benchmarks/verdict_error_rates.py checks the rates. With no change anywhere the
bound is about 3.69 / n of accuracy, so a relative allowance L at accuracy a needs
n >= 3.69 / (L * a) documents: 820 at 45 % accuracy for 1 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from recommender.quality.exact import is_binary, upper_rate
from recommender.quality.resampling import studentised_intervals
from recommender.quality.statistics import MIN_CONTINUOUS_DOCS, from_sums

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Loss:
    """A relative loss (a fraction; positive = worse) with its interval, on `n_docs` documents."""

    point: float
    low: float
    high: float
    n_docs: int
    decisive: bool


def _relative_loss(metric: str, higher_is_better: bool, sums: FloatArray, at: int) -> FloatArray:
    """(bf16 - variant) / |bf16| from the sums of columns at..at+3 (bf16 num, den, variant num, den)."""
    base = from_sums(metric, sums[..., at], sums[..., at + 1])
    value = from_sums(metric, sums[..., at + 2], sums[..., at + 3])
    worse = base - value if higher_is_better else value - base
    return worse / np.abs(base)


def _exact_growth(columns: FloatArray, higher_is_better: bool, alpha: float) -> tuple[float, float]:
    """Exact (low, high) of the growth of a 0/1 loss, relative to the lower of the two bf16 accuracies."""
    scores = columns[:, 0::2]  # old bf16, old variant, new bf16, new variant
    sign = 1.0 if higher_is_better else -1.0
    change = sign * ((scores[:, 2] - scores[:, 3]) - (scores[:, 0] - scores[:, 1]))
    n = len(change)
    up, down = change[change > 0], -change[change < 0]
    high = upper_rate(len(up), n, alpha) * max(1.0, float(up.mean()) if len(up) else 1.0) - float(down.sum()) / n
    low = float(up.sum()) / n - upper_rate(len(down), n, alpha) * max(1.0, float(down.mean()) if len(down) else 1.0)
    accuracy = min(float(scores[:, 0].mean()), float(scores[:, 2].mean()))
    if accuracy <= 0.0:
        return -math.inf, math.inf
    return low / accuracy, high / accuracy


def loss_growth(
    metric: str,
    higher_is_better: bool,
    old: tuple[FloatArray, FloatArray],
    new: tuple[FloatArray, FloatArray],
    *,
    confidence: float,
) -> Loss | None:
    """The growth of the relative loss from the `old` (bf16, variant) pairs to the `new` ones, paired per document.

    Documents are paired by position (both releases score a task's documents in the same order);
    only the documents all four scored are compared. None without any.
    """
    n = min(len(old[0]), len(old[1]), len(new[0]), len(new[1]))
    if n == 0:
        return None
    columns = np.concatenate([old[0][:n], old[1][:n], new[0][:n], new[1][:n]], axis=1)
    alpha = (1.0 - confidence) / 2.0

    def growth(sums: FloatArray) -> FloatArray:
        return _relative_loss(metric, higher_is_better, sums, 4) - _relative_loss(metric, higher_is_better, sums, 0)

    point, low, high = studentised_intervals(columns, [growth], alpha)[0]
    if not math.isfinite(point):  # a bf16 scoring zero: no relative loss is defined, nothing can be ruled out
        low, high = -math.inf, math.inf
    binary = is_binary(*(columns[:, i : i + 2] for i in range(0, 8, 2)))
    if binary:
        exact_low, exact_high = _exact_growth(columns, higher_is_better, alpha)
        low, high = min(low, exact_low), max(high, exact_high)
    return Loss(point, low, high, n, binary or n >= MIN_CONTINUOUS_DOCS)
