"""The shipped step-cost artifact: coefficients fitted on every run, and the held-out checks that judge them.

``benchmarks/gpu_fidelity.py --write`` calls :func:`build_fit` and writes ``step_cost_fit.json``
(``calibrated.StepCostFit``): the coefficients (``step_fit.py``), the leave-one-group-out residuals of
benchmark means (the intervals ``estimate`` gives a benchmark client), the step-cost residuals beyond
the client-protocol bracket (the intervals the SLA check simulates with) and the leave-one-campaign-,
model- and group-out tables (``validation.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from recommender.perf.fit.design_rows import COEFFICIENTS, BenchmarkProtocol, DesignRow
from recommender.perf.fit.step_fit import (
    FitSettings,
    by_group,
    coefficient_sets,
    coefficients_for,
    cross_validate,
    fit_pooled,
    in_sample,
    residuals,
)
from recommender.perf.fit.validation import (
    BracketRows,
    holdout_table,
    interval_predictions,
    step_residuals,
    step_residuals_by_engine,
)
from recommender.perf.sim.engine_profiles import EngineProfile
from recommender.perf.step.calibrated import StepCostFit

__all__ = ["build_fit"]


def _holdouts(rows: Sequence[DesignRow]) -> list[str]:
    """What is left out whole: campaigns, models, groups, and GPUs where the runs span more than one."""
    gpus = {r.run.hardware for r in rows}
    return ["campaign", "model", "group", *(["gpu"] if len(gpus) > 1 else [])]


def build_fit(
    bracket: Sequence[BracketRows],
    *,
    data: str,
    data_sha256: str,
    protocol: BenchmarkProtocol,
    settings: FitSettings,
    profiles: Mapping[str, EngineProfile],
    interval_holdouts: Sequence[str] = ("group",),
) -> StepCostFit:
    """The shipped artifact from every run's design rows under each client protocol (see the module docstring)."""
    rows = [b.fitted for b in bracket]
    pooled = fit_pooled(rows, settings)
    fitted = {e: coefficients_for(e, rows, settings, pooled) for e in sorted({r.run.engine for r in rows})}
    coefs = {e: c for e, (c, own) in fitted.items() if own}
    lines = sorted({r.run.release for r in rows if r.run.engine in coefs}) if settings.release_lines else []
    line_runs = {k: n for k in lines if (n := sum(r.run.release == k for r in rows)) >= settings.min_engine_runs}
    releases = coefficient_sets(list(line_runs), rows, settings, pooled)
    cv = cross_validate(rows, settings)
    steps = interval_predictions(bracket, settings, interval_holdouts)
    return StepCostFit(
        data=data,
        data_sha256=data_sha256,
        protocol_rounds=protocol.rounds,
        protocol_warmup_rounds=protocol.warmup_rounds,
        tpot_weight=settings.tpot_weight,
        shrinkage=settings.shrinkage,
        min_engine_runs=settings.min_engine_runs,
        coefficient_names=list(COEFFICIENTS),
        pooled=pooled.tolist(),
        engines={e: c.tolist() for e, c in coefs.items()},
        engine_runs={e: sum(r.run.engine == e for r in rows) for e in coefs},
        residuals_engine_seen=residuals([p for p in cv if p.engine_fit]),
        residuals_engine_unseen=residuals([p for p in cv if not p.engine_fit]),
        cross_validation=by_group(cv),
        in_sample=by_group(in_sample(rows, settings)),
        engine_batching={e: p.describe() for e, p in profiles.items()},
        step_residuals_engine_seen=step_residuals([p for p in steps if p.engine_fit]),
        step_residuals_engine_unseen=step_residuals([p for p in steps if not p.engine_fit]),
        step_residuals_by_engine=step_residuals_by_engine(steps),
        releases={k: c.tolist() for k, (c, _) in releases.items()},
        release_runs=line_runs,
        validation={
            name: holdout_table(bracket, settings, name, interval_holdouts=interval_holdouts)
            for name in _holdouts(rows)
        },
    )
