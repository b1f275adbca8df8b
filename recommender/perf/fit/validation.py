"""Judging the step-cost fit the way the tool is used: on campaigns, models and groups it never saw.

A user asks about a model, a GPU or an engine release the fit has no runs of, so leaving out single
rows (or even (model, engine, precision) groups of one campaign) flatters the fit: it has learned the
campaign. Here whole campaigns and whole models are left out as well (``HOLDOUTS``); every run in the
shipped file is on H100 SXM, so leaving out a GPU needs another GPU's runs (``gpu_fidelity.py
--predict``).

Client protocol apart from step cost: each run is predicted under every plausible client protocol
(``design_rows.CLIENT_PROTOCOLS``: the opening burst counted, or dropped as warm-up) with the same
coefficients, and a run whose measured TTFT (TPOT) lies between the two is explained by the step
costs whatever its client did. What lies outside the bracket is the step costs' error: those
residuals, from held-out fits only, give the prefill (TTFT) and decode (TPOT) intervals that the SLA
check propagates through the simulation of the user's traffic (``perf/step/upper.py``). Each fold's
intervals come from a leave-one-group-out inside its own training runs (nested), so the coverage
reported for a left-out campaign or model is what a user would see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recommender.perf.catalog.gpus import Catalog
from recommender.perf.fit.design_rows import (
    CAMPAIGN_PROTOCOLS,
    CLIENT_PROTOCOLS,
    N_COEFFICIENTS,
    DesignRow,
    design_rows,
    step_features,
)
from recommender.perf.fit.serving_runs import MeasuredRun
from recommender.perf.fit.step_fit import FitSettings, coefficient_key, error_summary, held_out_coefficients
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.calibrated import (
    CalibratedModel,
    HoldoutSummary,
    StepCostFit,
    StepResiduals,
    interval_factors,
    step_pools,
)
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import N_FEATURES
from recommender.perf.step.kernel_tables import KernelTables

__all__ = [
    "HOLDOUTS",
    "PREFILL_DOMINATED",
    "USE_HOLDOUTS",
    "BracketRows",
    "ByValue",
    "HeldOutPrediction",
    "bracket_rows",
    "held_out_predictions",
    "holdout_pairs",
    "holdout_table",
    "interval_predictions",
    "shipped_predictions",
    "shipped_table",
    "step_residuals",
    "summary_table",
    "step_residuals_by_engine",
]

#: What is left out whole: a (model, engine, precision) group, a collection campaign, a model.
HOLDOUTS: dict[str, Callable[[MeasuredRun], str]] = {
    "group": lambda run: run.group,
    "campaign": lambda run: run.campaign,
    "model": lambda run: run.model,
    "gpu": lambda run: run.hardware,
}


#: A run's TTFT measures a prefill step, not a queue, when even its lower protocol's predicted TTFT is within this
#: factor of the lone prompt's prefill step: only such runs give prefill-step residuals. Where the queue dominates
#: (a waiting seat, a KV cache that admits a few requests), the residual is the queue model's, which the user's
#: traffic is simulated with anyway, not the step's.
PREFILL_DOMINATED = 3.0


@dataclass(frozen=True)
class BracketRows:
    """A run's design rows under each client protocol, the one the fit uses (its campaign's), and its lone
    prompt's TTFT (one prefill step and the request overhead) as a linear function of the coefficients."""

    by_protocol: dict[str, DesignRow]
    lone_prefill: np.ndarray

    @property
    def fitted(self) -> DesignRow:
        any_row = next(iter(self.by_protocol.values()))
        return self.by_protocol[CAMPAIGN_PROTOCOLS.get(any_row.run.campaign, "burst")]


def bracket_rows(
    runs: Sequence[MeasuredRun], shapes: dict[str, ModelShape], catalog: Catalog, *, kernels: KernelTables | None = None
) -> list[BracketRows]:
    """Every run's design rows under every client protocol (one set of closed-loop replays per protocol; a TPOT
    metric's rows share the TTFT of the client with the same requests and warm-up); with `kernels`, on the runs'
    measured kernels (every run must have them: ``KernelTablesUnavailable`` otherwise)."""
    per_protocol: dict[str, list[DesignRow]] = {}
    for name, protocol in CLIENT_PROTOCOLS.items():
        client = (protocol.rounds, protocol.warmup_rounds)
        same = next(
            (
                per_protocol[n]
                for n in per_protocol
                if (CLIENT_PROTOCOLS[n].rounds, CLIENT_PROTOCOLS[n].warmup_rounds) == client
            ),
            None,
        )
        per_protocol[name] = design_rows(
            runs, shapes, catalog, protocol, as_run=False, same_client=same, kernels=kernels
        )
    return [
        BracketRows(
            {name: rows[i] for name, rows in per_protocol.items()}, _lone_prefill(run, shapes, catalog, kernels)
        )
        for i, run in enumerate(runs)
    ]


def _lone_prefill(
    run: MeasuredRun, shapes: dict[str, ModelShape], catalog: Catalog, kernels: KernelTables | None
) -> np.ndarray:
    features = step_features(run, shapes[run.model], catalog, kernels=kernels)
    row = np.zeros(N_COEFFICIENTS)
    row[:N_FEATURES] = features.of_step(PrefillChunks.single(run.prompt_tokens), 0, 0) * 1e3  # s -> ms
    row[N_FEATURES] = 1e3  # the request overhead, s -> ms
    return row


def _outside(measured: float, low: float, high: float) -> float:
    """log(measured / the nearest end of [low, high]); 0 inside."""
    return math.log(measured / low) if measured < low else math.log(measured / high) if measured > high else 0.0


@dataclass(frozen=True, slots=True)
class HeldOutPrediction:
    """A run predicted by a fit that never saw it: with its campaign's client, and under every client protocol."""

    run: MeasuredRun
    ttft_ms: float
    tpot_ms: float
    ttft_bracket_ms: tuple[float, float]
    tpot_bracket_ms: tuple[float, float]
    engine_fit: bool
    lone_prefill_ms: float

    @property
    def prefill_dominated(self) -> bool:
        """Whether the run's TTFT measures a prefill step rather than a queue (``PREFILL_DOMINATED``); a static
        batch's always does (its TTFT is one context step of the whole batch, nothing queues)."""
        return self.run.static_batch or self.ttft_bracket_ms[0] <= PREFILL_DOMINATED * self.lone_prefill_ms

    @property
    def prefill_residual(self) -> float:
        """The step costs' TTFT error beyond what a client protocol explains (log; 0 inside the bracket)."""
        return _outside(self.run.ttft_ms, *self.ttft_bracket_ms)

    @property
    def decode_residual(self) -> float:
        return _outside(self.run.tpot_ms, *self.tpot_bracket_ms)


def held_out_predictions(
    rows: Sequence[BracketRows], settings: FitSettings, key: Callable[[MeasuredRun], str]
) -> list[HeldOutPrediction]:
    """Leave each value of `key` out, fit on the rest (each campaign with its own client), predict it."""
    fitted = [r.fitted for r in rows]
    out = []
    for held, coefs in held_out_coefficients(fitted, settings, key):
        out += [_predicted(rows[i], *coefs[coefficient_key(rows[i].fitted.run, settings)]) for i in held]
    return out


def shipped_predictions(rows: Sequence[BracketRows], fit: StepCostFit) -> list[HeldOutPrediction]:
    """Runs the shipped fit never saw (another campaign's file), predicted with its coefficients."""
    model = CalibratedModel(fit)
    return [_predicted(b, model.coefficients(b.fitted.run.engine), model.knows(b.fitted.run.engine)) for b in rows]


def _predicted(rows: BracketRows, coef: np.ndarray, engine_fit: bool) -> HeldOutPrediction:
    ttfts = [float(r.ttft @ coef) for r in rows.by_protocol.values()]
    tpots = [float(r.tpot @ coef) for r in rows.by_protocol.values()]
    row = rows.fitted
    return HeldOutPrediction(
        row.run,
        float(row.ttft @ coef),
        float(row.tpot @ coef),
        (min(ttfts), max(ttfts)),
        (min(tpots), max(tpots)),
        engine_fit,
        float(rows.lone_prefill @ coef),
    )


def step_residuals_by_engine(predictions: Sequence[HeldOutPrediction]) -> dict[str, StepResiduals]:
    """Each engine's held-out step residuals: its runs, each predicted by a fit that left the run's group out (with
    the engine's own coefficients where the rest held enough of its runs, else the pooled ones: conservative)."""
    engines = sorted({p.run.engine for p in predictions})
    return {e: step_residuals([p for p in predictions if p.run.engine == e]) for e in engines}


def step_residuals(predictions: Sequence[HeldOutPrediction]) -> StepResiduals:
    """Prefill residuals from the prefill-dominated runs' TTFTs, decode residuals from every run's TPOT."""
    return StepResiduals(
        prefill=sorted(round(p.prefill_residual, 5) for p in predictions if p.prefill_dominated),
        decode=sorted(round(p.decode_residual, 5) for p in predictions),
    )


@dataclass(frozen=True, slots=True)
class _Pools:
    """A training fold's held-out residuals: step residuals and benchmark-mean residuals, engine seen / unseen."""

    step: tuple[StepResiduals, StepResiduals]
    mean_ttft: tuple[list[float], list[float]]
    mean_tpot: tuple[list[float], list[float]]
    step_by_engine: dict[str, StepResiduals]

    @classmethod
    def of_fit(cls, fit: StepCostFit) -> _Pools:
        seen, unseen = fit.residuals_engine_seen, fit.residuals_engine_unseen
        return cls(
            (fit.step_residuals_engine_seen, fit.step_residuals_engine_unseen),
            (seen.ttft, unseen.ttft),
            (seen.tpot, unseen.tpot),
            fit.step_residuals_by_engine,
        )

    @classmethod
    def of(cls, inner: Sequence[HeldOutPrediction]) -> _Pools:
        seen = [p for p in inner if p.engine_fit]
        unseen = [p for p in inner if not p.engine_fit]

        def logs(ps: list[HeldOutPrediction], metric: str) -> list[float]:
            return [math.log(getattr(p.run, metric) / getattr(p, metric)) for p in ps]

        return cls(
            (step_residuals(seen), step_residuals(unseen)),
            (logs(seen, "ttft_ms"), logs(unseen, "ttft_ms")),
            (logs(seen, "tpot_ms"), logs(unseen, "tpot_ms")),
            step_residuals_by_engine(inner),
        )


def _covered(p: HeldOutPrediction, pools: _Pools, confidence: float) -> tuple[bool, bool, bool, bool]:
    """Whether `p`'s measured TTFT and TPOT lie in the step-and-bracket interval, and in the earlier mean one."""
    pre, pre_extra, dec, dec_extra = step_pools(*pools.step, pools.step_by_engine, p.run.engine, p.engine_fit)
    p_lo, p_hi = interval_factors(pre, pre_extra, confidence)
    d_lo, d_hi = interval_factors(dec, dec_extra, confidence)
    # The earlier benchmark-mean intervals: an engine the fold did not fit adds the wider pool.
    ttft_extra, tpot_extra = (None, None) if p.engine_fit else (pools.mean_ttft[1], pools.mean_tpot[1])
    t_lo, t_hi = interval_factors(pools.mean_ttft[0], ttft_extra, confidence)
    o_lo, o_hi = interval_factors(pools.mean_tpot[0], tpot_extra, confidence)
    r = p.run
    return (
        p.ttft_bracket_ms[0] * p_lo <= r.ttft_ms <= p.ttft_bracket_ms[1] * p_hi,
        p.tpot_bracket_ms[0] * d_lo <= r.tpot_ms <= p.tpot_bracket_ms[1] * d_hi,
        p.ttft_ms * t_lo <= r.ttft_ms <= p.ttft_ms * t_hi,
        p.tpot_ms * o_lo <= r.tpot_ms <= p.tpot_ms * o_hi,
    )


#: The holdouts the kernel-table fit draws its intervals from: a user's deployment is a campaign the fit never saw,
#: often on a GPU it never saw, not only another (model, engine, precision) group of a campaign it knows. Drawn
#: from group-out alone, the intervals covered 47 % of left-out campaigns' TTFTs (nominal 90 %).
USE_HOLDOUTS = ("group", "campaign", "gpu")


def interval_predictions(
    rows: Sequence[BracketRows], settings: FitSettings, holdouts: Sequence[str] = ("group",)
) -> list[HeldOutPrediction]:
    """The held-out predictions an interval is drawn from: every run predicted once per holdout kind in `holdouts`
    (``HOLDOUTS`` keys) that splits `rows` into two values or more, so the pool mixes the kinds of novelty a user's
    deployment brings (a model group, a measurement campaign, a GPU the fit never saw) in equal measure."""
    out: list[HeldOutPrediction] = []
    for name in holdouts:
        key = HOLDOUTS[name]
        if len({key(r.fitted.run) for r in rows}) >= 2:
            out += held_out_predictions(rows, settings, key)
    return out


def _fold_pools(
    rows: Sequence[BracketRows],
    held: set[str],
    key: Callable[[MeasuredRun], str],
    settings: FitSettings,
    holdouts: Sequence[str],
) -> _Pools | None:
    """Residual pools from the `holdouts` inside the fold's training runs (nested; None: a single group)."""
    train = [r for r in rows if key(r.fitted.run) not in held]
    if len({r.fitted.run.group for r in train}) < 2:
        return None
    return _Pools.of(interval_predictions(train, settings, holdouts))


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
ByValue = dict[str, list[tuple[HeldOutPrediction, "tuple[bool, ...] | None"]]]


def holdout_table(
    rows: Sequence[BracketRows],
    settings: FitSettings,
    holdout: str,
    *,
    confidence: float = 0.9,
    interval_holdouts: Sequence[str] = ("group",),
) -> dict[str, HoldoutSummary]:
    """Leave each value of `holdout` (a ``HOLDOUTS`` key) out: errors, bracket and interval coverage, per held-out
    value and "overall"; each fold's intervals from its own training runs' held-out residuals, drawn as the
    shipped intervals are (`interval_holdouts`, :func:`interval_predictions`)."""
    return _table(holdout_pairs(rows, settings, holdout, confidence, interval_holdouts), confidence)


def holdout_pairs(
    rows: Sequence[BracketRows],
    settings: FitSettings,
    holdout: str,
    confidence: float = 0.9,
    interval_holdouts: Sequence[str] = ("group",),
) -> ByValue:
    """:func:`holdout_table`'s held-out predictions by the value left out, each with whether its measured TTFT and
    TPOT lay in the fold's intervals (and in the earlier mean ones; None: no interval): to be regrouped by any key
    (``summary_table``)."""
    key = HOLDOUTS[holdout]
    predictions = held_out_predictions(rows, settings, key)
    by_value: ByValue = {}
    for value in sorted({key(p.run) for p in predictions}):
        pools = _fold_pools(rows, {value}, key, settings, interval_holdouts)
        held = [p for p in predictions if key(p.run) == value]
        by_value[value] = [(p, None if pools is None else _covered(p, pools, confidence)) for p in held]
    return by_value


def shipped_table(
    predictions: Sequence[HeldOutPrediction],
    fit: StepCostFit,
    key: Callable[[MeasuredRun], str],
    *,
    confidence: float = 0.9,
) -> dict[str, HoldoutSummary]:
    """The shipped fit on runs it never saw, by `key` and "overall", its intervals from its own residuals."""
    pools = _Pools.of_fit(fit)
    by_value: ByValue = {}
    for p in predictions:
        by_value.setdefault(key(p.run), []).append((p, _covered(p, pools, confidence)))
    return _table(dict(sorted(by_value.items())), confidence)


def summary_table(by_value: ByValue, confidence: float = 0.9) -> dict[str, HoldoutSummary]:
    """Each value's errors and coverage, and "overall" (`by_value` as :func:`holdout_pairs` gives it, regrouped)."""
    return _table(by_value, confidence)


def _table(by_value: ByValue, confidence: float) -> dict[str, HoldoutSummary]:
    table = {}
    for value, pairs in [*by_value.items(), ("overall", [x for v in by_value.values() for x in v])]:
        covered = [c for _, c in pairs if c is not None]
        table[value] = _summary([p for p, _ in pairs], covered, confidence)
    return table
