"""Statistics that cannot pass by accident: exact flip bounds, the continuous-metric minimum, looks sharing alpha."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.quality.evaluate import MIN_CHUNK, chunk_schedule, document_order, first_look, looks_counted
from recommender.quality.exact import is_binary, lower_rate, upper_rate
from recommender.quality.resampling import resamples_for, studentised_intervals
from recommender.quality.statistics import (
    MIN_CONTINUOUS_DOCS,
    expanded_alpha,
    look_confidence,
    paired_bootstrap,
)
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import task_check

DROP_3_POINTS = TaskThreshold(
    task="t", metric="acc", higher_is_better=True, threshold=Threshold(max_absolute_drop=0.03)
)
BPB_2_PCT = TaskThreshold(
    task="p", metric="bits_per_byte", higher_is_better=False, threshold=Threshold(max_relative_drop=0.02)
)


def _acc(values: list[int]) -> np.ndarray:
    return np.asarray([[v, 1.0] for v in values], dtype=float)


def test_clopper_pearson_known_answers() -> None:
    # No event in n trials: the one-sided bound at 1 - alpha is 1 - alpha ** (1 / n) (3/n, the rule of three).
    assert upper_rate(0, 15, 0.025) == pytest.approx(1 - 0.025 ** (1 / 15))
    assert upper_rate(0, 100, 0.05) == pytest.approx(0.0295, abs=1e-4)
    # 1 of 10 at 95 % two-sided: the textbook Clopper-Pearson interval [0.0025, 0.4450].
    assert lower_rate(1, 10, 0.025) == pytest.approx(0.00253, abs=1e-5)
    assert upper_rate(1, 10, 0.025) == pytest.approx(0.44502, abs=1e-5)
    assert upper_rate(0, 0, 0.025) == 1.0 and lower_rate(0, 0, 0.025) == 0.0
    assert is_binary(_acc([1, 0, 1])) and not is_binary(np.asarray([[-3.2, 10.0]]))


def test_no_discordant_document_is_not_a_zero_width_interval() -> None:
    # Issue 13: 15 documents, candidate and reference agree on each, and the verdict was "pass" on [+0, +0].
    base = _acc([1] * 15)
    result = paired_bootstrap(DROP_3_POINTS, base, base.copy())
    bound = 1 - 0.025 ** (1 / 15)  # 95 % two-sided: 2.5 % per side; all 15 could flip to wrong
    assert result.delta == 0.0 and result.delta_ci[0] == pytest.approx(-bound) and bound > 0.2
    assert result.verdict == "inconclusive"
    check = task_check(DROP_3_POINTS, result)
    assert check.delta_ci is not None and check.delta_ci[0] < -0.2 and check.verdict == "inconclusive"

    # Flips are bounded per document among all of them, whatever the reference's accuracy (issue 34) ...
    mixed = _acc([1, 0] * 50)
    half = paired_bootstrap(DROP_3_POINTS, mixed, mixed.copy())
    assert half.delta_ci == pytest.approx((-(1 - 0.025 ** (1 / 100)), 1 - 0.025 ** (1 / 100)))
    assert half.verdict == "inconclusive"
    # ... and enough agreeing documents do clear a 3-point allowance: 1 - 0.025 ** (1 / 400) < 0.01.
    many = _acc([1] * 400)
    assert paired_bootstrap(DROP_3_POINTS, many, many.copy()).verdict == "pass"


def test_a_reference_with_no_right_answer_cannot_pass_a_degraded_model() -> None:
    # Issue 34: the loss bound was right / n x upper_rate(losses, right): zero when the reference got nothing
    # right, so every threshold passed. Losses per document are bounded over all n documents instead.
    wrong = _acc([0] * 30)
    result = paired_bootstrap(DROP_3_POINTS, wrong, wrong.copy())
    assert result.delta_ci[0] == pytest.approx(-upper_rate(0, 30, 0.025)) and result.delta_ci[0] < -0.1
    assert result.verdict == "inconclusive"
    # A 10 % reference losing one of its three right answers (a 3.3-point drop against 3) does not pass either.
    few_right = _acc([1, 1, 1] + [0] * 27)
    lost_one = _acc([0, 1, 1] + [0] * 27)
    assert paired_bootstrap(DROP_3_POINTS, few_right, lost_one).verdict != "pass"
    # A relative threshold against a zero reference score cannot pass whatever the count.
    relative = TaskThreshold(task="t", metric="acc", higher_is_better=True, threshold=Threshold(max_relative_drop=0.5))
    assert paired_bootstrap(relative, _acc([0] * 2000), _acc([0] * 2000)).verdict != "pass"


def test_few_lopsided_flips_widen_past_the_bootstrap() -> None:
    # 3 losses and no gain in 100: resampling sees at most what it was given; the exact bound sees further.
    base, worse = _acc([1] * 100), _acc([0] * 3 + [1] * 97)
    result = paired_bootstrap(DROP_3_POINTS, base, worse)
    assert result.delta_ci[0] == pytest.approx(-upper_rate(3, 100, 0.025))
    assert result.verdict == "inconclusive"
    # A floor threshold judges the variant's own accuracy at its exact bounds.
    floor = TaskThreshold(task="t", metric="acc", higher_is_better=True, threshold=Threshold(min_value=0.9))
    at_floor = paired_bootstrap(floor, base, worse)
    assert at_floor.margin_ci[1] == pytest.approx(0.9 - lower_rate(97, 100, 0.025))


def test_the_reference_against_itself_is_certain_at_any_size() -> None:
    base = _acc([1, 0, 1])
    result = paired_bootstrap(DROP_3_POINTS, base, base, same_model=True)
    assert result.delta_ci == (0.0, 0.0) and result.margin_ci == (-0.03, -0.03) and result.verdict == "pass"
    ppl = np.asarray([[-100.0, 50.0], [-80.0, 40.0]])
    assert paired_bootstrap(BPB_2_PCT, ppl, ppl, same_model=True).verdict == "pass"


def test_continuous_metric_decides_nothing_on_few_documents() -> None:
    # Every document 1 % worse: a degenerate bootstrap, every resample identical, a zero-width interval.
    base = np.asarray([[-100.0, 100.0]] * 40)
    worse = np.asarray([[-101.0, 100.0]] * 40)
    few = paired_bootstrap(BPB_2_PCT, base[: MIN_CONTINUOUS_DOCS - 1], worse[: MIN_CONTINUOUS_DOCS - 1])
    assert few.margin_ci[0] == few.margin_ci[1] < 0  # the interval claims certainty ...
    assert few.verdict == "inconclusive" and not few.decisive  # ... which is not believed
    enough = paired_bootstrap(BPB_2_PCT, base, worse)
    assert enough.decisive and enough.verdict == "pass"
    # The point policy decides on the estimate whatever the count (and says so by its name).
    assert paired_bootstrap(BPB_2_PCT, base[:3], worse[:3], policy="point").verdict == "pass"


def test_small_samples_get_expanded_intervals() -> None:
    # Hesterberg's expansion (0/1 metrics' percentile part): quantiles at Phi(-sqrt(n / (n - 1)) * t_{n-1}).
    # n = 10 at 2.5 % per side: Phi(-1.0541 * 2.2622) = Phi(-2.3846).
    assert expanded_alpha(0.025, 10) == pytest.approx(0.00855, abs=1e-5)
    assert expanded_alpha(0.025, 10_000) == pytest.approx(0.025, abs=1e-4)
    assert expanded_alpha(0.025, 1) == 0.025


def test_resamples_scale_with_the_tail_they_are_read_at() -> None:
    assert resamples_for(0.025) == 2000 and resamples_for(0.05 / 3 / 2) == 6000
    assert resamples_for(0.0025) == 20_000  # not 2,000, which put the bound near the 5th order statistic
    assert resamples_for(1e-6) == 20_000  # capped: a tiny sample's expanded quantile is its extreme resample


def test_concentrated_damage_widens_the_studentised_interval() -> None:
    # 60 documents, six of them 10.4 % worse and the rest unchanged: the mean rise is 1.04 %, past a 1 % allowance.
    rng = np.random.default_rng(0)
    size = rng.uniform(500, 3000, 60)
    base = np.stack([-0.8 * size, size], axis=1)
    damage = np.where(np.arange(60) < 6, 1.104, 1.0) * (1 + rng.normal(0, 0.001, 60))
    worse = np.stack([base[:, 0] * damage, size], axis=1)
    one_pct = TaskThreshold(
        task="p", metric="bits_per_byte", higher_is_better=False, threshold=Threshold(max_relative_drop=0.01)
    )
    result = paired_bootstrap(one_pct, base, worse)
    assert result.decisive and result.verdict == "inconclusive"
    low, high = result.margin_ci
    assert high - result.margin > result.margin - low  # skewed: longer on the damaged side
    # A jackknife error of zero (every document alike) is a zero-width interval, believed only from 40 documents.
    col = np.stack([base[:, 0], size, base[:, 0] * 1.001, size], axis=1)[:40]
    ((point, lo, hi),) = studentised_intervals(col, [lambda s: s[..., 2] / s[..., 0] - 1.0], 0.025)
    assert lo == hi == point and point == pytest.approx(0.001)


def test_looks_share_the_error_rate_and_record_it() -> None:
    assert look_confidence(0.95, 1) == 0.95
    assert look_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)
    with pytest.raises(ValueError):
        look_confidence(0.95, 0)
    base, worse = _acc([1, 0] * 100), _acc([1, 0] * 90 + [0, 0] * 10)
    once = paired_bootstrap(DROP_3_POINTS, base, worse)
    third = paired_bootstrap(DROP_3_POINTS, base, worse, looks=3)
    assert third.confidence == pytest.approx(1 - 0.05 / 3) and third.looks == 3 and once.confidence == 0.95
    assert third.delta_ci[0] < once.delta_ci[0] and third.delta_ci[1] > once.delta_ci[1]
    check = task_check(DROP_3_POINTS, third)
    assert check.confidence == third.confidence and check.looks == 3
    assert check.interval.endswith("at 98.3% (one of 3 looks)")


def test_chunk_schedule_plans_only_looks_that_can_decide() -> None:
    assert chunk_schedule(60, adaptive=True) == [15, 30, 60]
    assert chunk_schedule(200, adaptive=True, min_chunk=MIN_CONTINUOUS_DOCS) == [50, 100, 200]
    assert chunk_schedule(79, adaptive=True, min_chunk=MIN_CONTINUOUS_DOCS) == [79]
    assert first_look(_acc([1, 0])) == MIN_CHUNK
    assert first_look(np.asarray([[-3.0, 2.0]])) == MIN_CONTINUOUS_DOCS


def test_documents_come_in_a_seeded_order_and_reruns_count_their_looks() -> None:
    order = document_order(600)
    assert sorted(order) == list(range(600)) and order != list(range(600)) and order == document_order(600)
    # A larger budget's prefix is the smaller budget's documents: the per-document cache serves both.
    assert document_order(600)[:60] == order[:60]
    # Budget 60 took looks at 15 and 30; a re-run at 300 plans 75, 150, 300: five looks share the error rate.
    assert looks_counted([15, 30], chunk_schedule(300, adaptive=True)) == 5
    assert looks_counted([], [15, 30, 60]) == 3
