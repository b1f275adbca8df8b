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
from recommender.perf.fit.step_fit import (
    FitSettings,
    coefficients_for,
    fit_pooled,
    held_out_coefficients,
)
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.calibrated import (
    MIN_ENGINE_RESIDUALS,
    CalibratedModel,
    Residuals,
    StepCostFit,
    StepResiduals,
)
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import N_FEATURES
from recommender.perf.step.kernel_tables import KernelTables

__all__ = [
    "HOLDOUTS",
    "PREFILL_DOMINATED",
    "USE_HOLDOUTS",
    "BracketRows",
    "HeldOutPrediction",
    "bracket_rows",
    "held_out_predictions",
    "interval_predictions",
    "shipped_predictions",
    "judged_predictions",
    "new_gpu_pool",
    "new_gpu_residuals",
    "serving_gpus",
    "step_residuals",
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
    #: Whether the fit that predicted it had serving runs on the run's GPU (``new_gpu_pool``).
    gpu_serving_seen: bool = True

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
        left_out = set(held)
        seen = serving_gpus([r for i, r in enumerate(fitted) if i not in left_out])
        out += [
            _predicted(rows[i], *coefs[rows[i].fitted.run.engine], rows[i].fitted.run.hardware in seen) for i in held
        ]
    return out


def serving_gpus(rows: Sequence[DesignRow]) -> set[str]:
    """The GPUs some of `rows` measured a serving client on (not a static batch)."""
    return {r.run.hardware for r in rows if not r.run.static_batch}


def shipped_predictions(rows: Sequence[BracketRows], fit: StepCostFit) -> list[HeldOutPrediction]:
    """Runs the shipped fit never saw (another campaign's file), predicted with its coefficients (on a GPU the fit
    has no serving runs on, where it says which it has: ``StepCostFit.serving_gpus``)."""
    model, gpus = CalibratedModel(fit), set(fit.serving_gpus)
    return [
        _predicted(b, model.coefficients(e), model.knows(e), not gpus or b.fitted.run.hardware in gpus)
        for b in rows
        for e in [b.fitted.run.engine]
    ]


def _predicted(
    rows: BracketRows, coef: np.ndarray, engine_fit: bool, gpu_serving_seen: bool = True
) -> HeldOutPrediction:
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
        gpu_serving_seen,
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


def judged_predictions(
    rows: Sequence[BracketRows], settings: FitSettings, judged: Sequence[BracketRows]
) -> list[HeldOutPrediction]:
    """The `judged` runs (a campaign never fitted: ``serving_runs.INTERVAL_RUNS``) predicted by the fit on `rows`."""
    if not judged:
        return []
    fitted = [r.fitted for r in rows]
    pooled, seen = fit_pooled(fitted, settings), serving_gpus(fitted)
    coefs = {e: coefficients_for(e, fitted, settings, pooled) for e in {j.fitted.run.engine for j in judged}}
    return [_predicted(j, *coefs[j.fitted.run.engine], j.fitted.run.hardware in seen) for j in judged]


def new_gpu_pool(predictions: Sequence[HeldOutPrediction]) -> StepResiduals | None:
    """The step residuals of serving clients predicted by a fit with no serving runs on their GPU, where they hold
    ``MIN_ENGINE_RESIDUALS`` prefill residuals (else None): the intervals of a serving client on such a GPU. A
    static batch's TTFT is one context step, a serving client's a queue and a request overhead as well, so static
    batches on a GPU calibrate its steps but not its serving clients: drawn from the pool of all held-out runs, a
    left-out GPU's serving TTFTs were 53 % covered at a nominal 90 % (the H100, whose runs are all the serving ones)."""
    new = _new_gpu(predictions)
    return step_residuals(new) if sum(p.prefill_dominated for p in new) >= MIN_ENGINE_RESIDUALS else None


def new_gpu_residuals(predictions: Sequence[HeldOutPrediction]) -> Residuals | None:
    """The benchmark-mean residuals log(measured / predicted) of the same runs as :func:`new_gpu_pool` (None where
    that is None): ``estimate``'s intervals on a GPU without serving runs."""
    new = _new_gpu(predictions)
    if sum(p.prefill_dominated for p in new) < MIN_ENGINE_RESIDUALS:
        return None
    return Residuals(
        ttft=sorted(round(math.log(p.run.ttft_ms / p.ttft_ms), 5) for p in new),
        tpot=sorted(round(math.log(p.run.tpot_ms / p.tpot_ms), 5) for p in new),
    )


def _new_gpu(predictions: Sequence[HeldOutPrediction]) -> list[HeldOutPrediction]:
    return [p for p in predictions if not p.run.static_batch and not p.gpu_serving_seen]
