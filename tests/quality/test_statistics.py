"""Statistics that cannot pass by accident: exact flip bounds, the continuous-metric minimum, looks sharing alpha."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.quality.evaluate import MIN_CHUNK, chunk_schedule, first_look
from recommender.quality.exact import is_binary, lower_rate, upper_rate
from recommender.quality.statistics import (
    MIN_CONTINUOUS_DOCS,
    aggregate,
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

    # Flips are bounded among the documents the reference gets right (half of them here) ...
    mixed = _acc([1, 0] * 50)
    half = paired_bootstrap(DROP_3_POINTS, mixed, mixed.copy())
    assert half.delta_ci == pytest.approx((-0.5 * (1 - 0.025 ** (1 / 50)), 0.5 * (1 - 0.025 ** (1 / 50))))
    assert half.verdict == "inconclusive"
    # ... and enough agreeing documents do clear a 3-point allowance: 1 - 0.025 ** (1 / 400) < 0.01.
    many = _acc([1] * 400)
    assert paired_bootstrap(DROP_3_POINTS, many, many.copy()).verdict == "pass"


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
    # Hesterberg's expansion: quantiles at Phi(-sqrt(n / (n - 1)) * t_{n-1}), so a percentile interval
    # is as wide as the t interval. n = 10 at 2.5 % per side: Phi(-1.0541 * 2.2622) = Phi(-2.3846).
    assert expanded_alpha(0.025, 10) == pytest.approx(0.00855, abs=1e-5)
    assert expanded_alpha(0.025, 10_000) == pytest.approx(0.025, abs=1e-4)
    assert expanded_alpha(0.025, 1) == 0.025
    # And paired_bootstrap takes its interval there: wider than the plain 2.5 % / 97.5 % quantiles.
    rng = np.random.default_rng(0)
    lengths = rng.integers(50, 150, size=24).astype(float)
    base = np.stack([-lengths, lengths], axis=1)
    variant = np.stack([-lengths * (1.0 + rng.normal(0.0, 0.02, size=24)), lengths], axis=1)
    result = paired_bootstrap(BPB_2_PCT, base, variant, seed=0)
    idx = np.random.default_rng(0).integers(0, 24, size=(2000, 24))
    deltas = aggregate("bits_per_byte", variant[idx]) - aggregate("bits_per_byte", base[idx])
    side = expanded_alpha(0.025, 24)
    assert side < 0.02
    expected = (np.quantile(deltas, side, method="lower"), np.quantile(deltas, 1 - side, method="higher"))
    assert result.delta_ci == pytest.approx(expected, abs=1e-15)
    assert result.delta_ci[0] < np.quantile(deltas, 0.025, method="lower")


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
    assert chunk_schedule(60, adaptive=True, min_chunk=MIN_CONTINUOUS_DOCS) == [20, 30, 60]
    assert chunk_schedule(39, adaptive=True, min_chunk=MIN_CONTINUOUS_DOCS) == [39]
    assert first_look(_acc([1, 0])) == MIN_CHUNK
    assert first_look(np.asarray([[-3.0, 2.0]])) == MIN_CONTINUOUS_DOCS
