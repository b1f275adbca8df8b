"""Interval coverage of held-out predictions: the residual pools each validation fold draws its intervals from, and
the tables of error and coverage by held-out value (``validation.py`` makes the predictions).

Each fold's pools come from its own training runs only (nested): the same holdouts the shipped intervals are drawn
from (``validation.USE_HOLDOUTS``), rerun inside the fold, plus the judged campaign's runs the fold does not leave out,
predicted by the fold's fit, for a serving client on a GPU the fold's fit has no serving runs on
(``validation.new_gpu_pool``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recommender.perf.fit.serving_runs import MeasuredRun
from recommender.perf.fit.step_fit import FitSettings, error_summary
from recommender.perf.fit.validation import (
    HOLDOUTS,
    BracketRows,
    HeldOutPrediction,
    held_out_predictions,
    interval_predictions,
    judged_predictions,
    new_gpu_pool,
    new_gpu_residuals,
    step_residuals,
    step_residuals_by_engine,
)
from recommender.perf.step.calibrated import (
    HoldoutSummary,
    Residuals,
    StepCostFit,
    StepResiduals,
    interval_factors,
    step_pools,
)

__all__ = ["holdout_table", "shipped_table"]


@dataclass(frozen=True, slots=True)
class _Pools:
    """A training fold's held-out residuals: step residuals and benchmark-mean residuals, engine seen / unseen."""

    step: tuple[StepResiduals, StepResiduals]
    mean_ttft: tuple[list[float], list[float]]
    mean_tpot: tuple[list[float], list[float]]
    step_by_engine: dict[str, StepResiduals]
    #: A serving client's on a GPU the fit has no serving runs on (``validation.new_gpu_pool``; None: none).
    new_gpu: StepResiduals | None = None
    new_gpu_mean: Residuals | None = None

    @classmethod
    def of_fit(cls, fit: StepCostFit) -> _Pools:
        seen, unseen = fit.residuals_engine_seen, fit.residuals_engine_unseen
        return cls(
            (fit.step_residuals_engine_seen, fit.step_residuals_engine_unseen),
            (seen.ttft, unseen.ttft),
            (seen.tpot, unseen.tpot),
            fit.step_residuals_by_engine,
            fit.step_residuals_new_gpu,
            fit.residuals_new_gpu,
        )

    @classmethod
    def of(cls, inner: Sequence[HeldOutPrediction], new: Sequence[HeldOutPrediction] = ()) -> _Pools:
        """`inner`'s pools, and the new-GPU ones of `new` (``validation.new_gpu_pool``)."""
        seen = [p for p in inner if p.engine_fit]
        unseen = [p for p in inner if not p.engine_fit]

        def logs(ps: list[HeldOutPrediction], metric: str) -> list[float]:
            return [math.log(getattr(p.run, metric) / getattr(p, metric)) for p in ps]

        return cls(
            (step_residuals(seen), step_residuals(unseen)),
            (logs(seen, "ttft_ms"), logs(unseen, "ttft_ms")),
            (logs(seen, "tpot_ms"), logs(unseen, "tpot_ms")),
            step_residuals_by_engine(inner),
            new_gpu_pool(new),
            new_gpu_residuals(new),
        )


def _covered(p: HeldOutPrediction, pools: _Pools, confidence: float) -> tuple[bool, bool, bool, bool]:
    """Whether `p`'s measured TTFT and TPOT lie in the step-and-bracket interval, and in the earlier mean one."""
    new_gpu = None if p.run.static_batch or p.gpu_serving_seen else pools.new_gpu
    mean = pools.new_gpu_mean if new_gpu is not None and pools.new_gpu_mean is not None else None
    pre, pre_extra, dec, dec_extra = step_pools(
        *pools.step, pools.step_by_engine, p.run.engine, p.engine_fit, new_gpu=new_gpu
    )
    p_lo, p_hi = interval_factors(pre, pre_extra, confidence)
    d_lo, d_hi = interval_factors(dec, dec_extra, confidence)
    # The earlier benchmark-mean intervals: an engine the fold did not fit adds the wider pool.
    ttft_extra, tpot_extra = (None, None) if p.engine_fit else (pools.mean_ttft[1], pools.mean_tpot[1])
    t_lo, t_hi = interval_factors(mean.ttft if mean else pools.mean_ttft[0], ttft_extra, confidence)
    o_lo, o_hi = interval_factors(mean.tpot if mean else pools.mean_tpot[0], tpot_extra, confidence)
    r = p.run
    return (
        p.ttft_bracket_ms[0] * p_lo <= r.ttft_ms <= p.ttft_bracket_ms[1] * p_hi,
        p.tpot_bracket_ms[0] * d_lo <= r.tpot_ms <= p.tpot_bracket_ms[1] * d_hi,
        p.ttft_ms * t_lo <= r.ttft_ms <= p.ttft_ms * t_hi,
        p.tpot_ms * o_lo <= r.tpot_ms <= p.tpot_ms * o_hi,
    )


def _fold_pools(
    rows: Sequence[BracketRows],
    held: set[str],
    key: Callable[[MeasuredRun], str],
    settings: FitSettings,
    holdouts: Sequence[str],
    judged: Sequence[BracketRows] = (),
) -> _Pools | None:
    """Residual pools from the `holdouts` inside the fold's training runs, and the new-GPU pool from those and the
    `judged` runs the fold does not leave out, predicted by its fit (nested; None: a single group)."""
    train = [r for r in rows if key(r.fitted.run) not in held]
    if len({r.fitted.run.group for r in train}) < 2:
        return None
    inner = interval_predictions(train, settings, holdouts)
    kept = [j for j in judged if key(j.fitted.run) not in held]  # a left-out GPU's judged runs inform nothing
    return _Pools.of(inner, [*inner, *judged_predictions(train, settings, kept)])


def _summary(
    predictions: Sequence[HeldOutPrediction], covered: Sequence[tuple[bool, ...]], confidence: float
) -> HoldoutSummary:
    bracket = np.abs(np.expm1([-p.prefill_residual for p in predictions]))
    cover = [float(np.mean(c)) for c in zip(*covered, strict=True)] if covered else [None] * 4
    return HoldoutSummary(
        **error_summary(predictions).model_dump(),
        bracket_ttft_median=float(np.median(bracket)),
        bracket_ttft_p90=float(np.percentile(bracket, 90)),
        explained_ttft=float(np.mean([p.prefill_residual == 0 for p in predictions])),
        explained_tpot=float(np.mean([p.decode_residual == 0 for p in predictions])),
        confidence=confidence,
        coverage_ttft=cover[0],
        coverage_tpot=cover[1],
        coverage_ttft_before=cover[2],
        coverage_tpot_before=cover[3],
    )


#: Held-out predictions by the value left out, each with whether it lay in its intervals (None: no interval).
_ByValue = dict[str, list[tuple[HeldOutPrediction, "tuple[bool, ...] | None"]]]


def holdout_table(
    rows: Sequence[BracketRows],
    settings: FitSettings,
    holdout: str,
    *,
    confidence: float = 0.9,
    interval_holdouts: Sequence[str] = ("group",),
    judged: Sequence[BracketRows] = (),
) -> dict[str, HoldoutSummary]:
    """Leave each value of `holdout` (a ``HOLDOUTS`` key) out: errors, bracket and interval coverage, per held-out
    value and "overall"; each fold's intervals from its own training runs' held-out residuals (and the `judged`
    runs' predictions by its fit), drawn as the shipped intervals are (`interval_holdouts`,
    :func:`interval_predictions`, :func:`new_gpu_pool`)."""
    key = HOLDOUTS[holdout]
    predictions = held_out_predictions(rows, settings, key)
    by_value: _ByValue = {}
    for value in sorted({key(p.run) for p in predictions}):
        pools = _fold_pools(rows, {value}, key, settings, interval_holdouts, judged)
        held = [p for p in predictions if key(p.run) == value]
        by_value[value] = [(p, None if pools is None else _covered(p, pools, confidence)) for p in held]
    return _table(by_value, confidence)


def shipped_table(
    predictions: Sequence[HeldOutPrediction],
    fit: StepCostFit,
    key: Callable[[MeasuredRun], str],
    *,
    confidence: float = 0.9,
) -> dict[str, HoldoutSummary]:
    """The shipped fit on runs it never saw, by `key` and "overall", its intervals from its own residuals."""
    pools = _Pools.of_fit(fit)
    by_value: _ByValue = {}
    for p in predictions:
        by_value.setdefault(key(p.run), []).append((p, _covered(p, pools, confidence)))
    return _table(dict(sorted(by_value.items())), confidence)


def _table(by_value: _ByValue, confidence: float) -> dict[str, HoldoutSummary]:
    table = {}
    for value, pairs in [*by_value.items(), ("overall", [x for v in by_value.values() for x in v])]:
        covered = [c for _, c in pairs if c is not None]
        table[value] = _summary([p for p, _ in pairs], covered, confidence)
    return table
