"""Paired verdicts with known answers: the bootstrap on flipped documents, lm-eval's ratio metrics, a floor,
the order of the overall verdict, the adaptive chunks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.quality.evaluate import chunk_schedule
from recommender.quality.statistics import aggregate, paired_bootstrap
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import Check, overall


def _task(th: Threshold, hib: bool = True, metric: str = "acc") -> TaskThreshold:
    return TaskThreshold(task="t", metric=metric, higher_is_better=hib, threshold=th)


def _acc_pairs(values: list[int]) -> np.ndarray:
    return np.asarray([[v, 1.0] for v in values], dtype=float)


def test_paired_bootstrap_identical_scores_are_not_certainty() -> None:
    base = _acc_pairs([1, 0] * 50)
    # Agreement on 100 documents still leaves room for a drop past 3 points (exact flip bounds) ...
    result = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, base.copy())
    assert result.delta == 0 and result.delta_ci[0] < -0.03 < 0.03 < result.delta_ci[1]
    assert result.verdict == "inconclusive" and result.margin == pytest.approx(-0.03)
    # ... while the reference against itself differs by zero by construction.
    same = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, base, same_model=True)
    assert same.delta_ci == (0.0, 0.0) and same.verdict == "pass"


def test_paired_bootstrap_clear_loss_fails_and_small_sample_is_inconclusive() -> None:
    base = _acc_pairs([1] * 100)
    # 20 of 100 answers flip to wrong: a 0.20 drop against an allowance of 0.03.
    worse = _acc_pairs([0] * 20 + [1] * 80)
    failed = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, worse)
    assert failed.delta == pytest.approx(-0.20) and failed.verdict == "fail"
    assert failed.delta_ci[0] < -0.20 < failed.delta_ci[1] < -0.1
    # 1 flip in 10 documents: the interval [-0.3, 0] straddles the allowance.
    small = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base[:10], _acc_pairs([0] + [1] * 9))
    assert small.verdict == "inconclusive"
    assert (
        paired_bootstrap(
            _task(Threshold(max_absolute_drop=0.03)), base[:10], _acc_pairs([0] + [1] * 9), policy="point"
        ).verdict
        == "fail"
    )


def test_ratio_metrics_aggregate_like_lm_eval() -> None:
    # bits_per_byte = -sum(loglik) / sum(bytes) / ln 2 over documents, not a mean of ratios.
    pairs = np.asarray([[-100.0, 50.0], [-10.0, 50.0]])
    assert float(aggregate("bits_per_byte", pairs)) == pytest.approx(110 / 100 / math.log(2))
    assert float(aggregate("acc", _acc_pairs([1, 0, 1, 1]))) == 0.75
    base = np.asarray([[-100.0, 100.0]] * 40)  # MIN_CONTINUOUS_DOCS: fewer decide nothing
    worse = np.asarray([[-105.0, 100.0]] * 40)  # 5 % more bits per byte
    th = _task(Threshold(max_relative_drop=0.02), hib=False, metric="bits_per_byte")
    assert paired_bootstrap(th, base, worse).verdict == "fail"
    assert (
        paired_bootstrap(
            _task(Threshold(max_relative_drop=0.06), hib=False, metric="bits_per_byte"), base, worse
        ).verdict
        == "pass"
    )


def test_floor_threshold_and_overall_order() -> None:
    base = _acc_pairs([1] * 40)
    assert paired_bootstrap(_task(Threshold(min_value=0.5)), base, _acc_pairs([1] * 30 + [0] * 10)).verdict == "pass"
    with pytest.raises(ValueError):
        Threshold(max_absolute_drop=0.1, min_value=0.2)
    pass_ = Check("a", "acc", 1, 1, 0, -1, "", "pass")
    assert overall([pass_, Check("b", "acc", 1, None, None, None, "", "unverified")]) == "unverified"
    assert overall([pass_, Check("b", "acc", 1, 1, 0, 1, "", "inconclusive")]) == "inconclusive"
    assert overall([Check("b", "acc", 1, 0, -1, 1, "", "fail"), pass_]) == "fail"


def test_chunk_schedule() -> None:
    assert chunk_schedule(60, adaptive=True) == [15, 30, 60]
    assert chunk_schedule(16, adaptive=True) == [8, 16]
    assert chunk_schedule(15, adaptive=True) == [15]
    assert chunk_schedule(60, adaptive=False) == [60]
