"""What the MoE runs calibrate beyond the dense fit, judged leave-one-model-out.

The dense fit (``step_cost_fit.json``) prices each step from datasheet features with per-engine coefficients;
MoE serving adds what no datasheet shows: grouped-GEMM and routing efficiency, the engines' per-step host work
around the MoE layers, the all-to-all's real cost. Fitted here, on the runs' design rows (``moe_rows.py``) and
nothing else, are a scale on the whole prior step cost, a per-engine step overhead, and additive per-layer,
weight, matrix, KV, all-to-all and request terms, each >= 0 (NNLS on relative error, TPOT rows weighted as the
dense fit weights them, each model's runs weighted to one model's worth: the fit is for a model it has not seen,
and a model with twice the runs is not twice the evidence of how an unseen one behaves; left-out TPOT median 21.5 %
unweighted, 20.7 % so). Leave-one-model-out: fitted on two models' runs, the third is predicted; its 90 %
intervals come from a leave-one-model-out inside the two training models (nested), as ``validation.py`` does for
the dense fit, so the coverage is what a user of an unseen model would get.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from recommender.perf.fit.moe_rows import COLUMNS, MoeRow
from recommender.perf.fit.step_fit import FitSettings
from recommender.perf.step.moe_calibration import MoeFit, MoeSummary

__all__ = [
    "PARAMETERS",
    "LeftOut",
    "MoeFit",
    "MoePrediction",
    "fit_extras",
    "leave_one_model_out",
    "predict",
    "prior_coefficients",
    "summarize",
]

#: The fitted parameters: a scale on the prior's whole step cost (MoE kernels' efficiency against the dense fit's,
#: the all-to-all's against its model) and a per-layer overhead added to every step (the MoE layers' routing,
#: permutation and launches beyond a dense layer's), s.
PARAMETERS = ("scale", "layers")
_LAYERS, _REQUEST = COLUMNS.index("layers"), COLUMNS.index("request")
CONFIDENCE = 0.9
#: Iterations of the reweighted fit (least absolute relative error: one run's outlier TTFT, a 462 s queue, must not
#: set the scale of every other) and the residual below which a row's weight stops growing.
_IRLS_ROUNDS, _IRLS_FLOOR = 8, 0.02


def prior_coefficients(engine_coefficients: Sequence[float]) -> np.ndarray:
    """``COLUMNS``' coefficients from a dense engine's (features..., request): the all-to-all at its modeled cost."""
    c = np.asarray(engine_coefficients, dtype=float)
    return np.concatenate([c[:-1], [1.0], c[-1:]])


def _design(row: MoeRow, prior: np.ndarray, metric: str) -> tuple[np.ndarray, float]:
    """(`metric`'s columns over ``PARAMETERS``, its fixed ms: the request's time and the KV transfer) for `row`."""
    cols = row.ttft if metric == "ttft" else row.tpot
    x = np.array([float(cols[:_REQUEST] @ prior[:_REQUEST]), cols[_LAYERS]])
    fixed = cols[_REQUEST] * prior[_REQUEST] + (row.ttft_fixed_ms if metric == "ttft" else 0.0)
    return x, fixed


@dataclass(frozen=True, slots=True)
class MoePrediction:
    row: MoeRow
    ttft_ms: float
    tpot_ms: float

    @property
    def log_ratios(self) -> tuple[float, float]:
        return float(np.log(self.row.run.ttft_ms / self.ttft_ms)), float(np.log(self.row.run.tpot_ms / self.tpot_ms))


Priors = Callable[[str], np.ndarray]


def fit_extras(rows: Sequence[MoeRow], priors: Priors, settings: FitSettings | None = None) -> np.ndarray:
    """``PARAMETERS`` fitted on `rows`: least absolute relative error (reweighted NNLS), TPOT rows weighted by
    `settings.tpot_weight` as the dense fit weights them, each model's runs by one model's worth."""
    a, b, shares = [], [], []
    w = (settings or FitSettings()).tpot_weight
    runs = Counter(row.run.model for row in rows)
    for row in rows:
        prior = priors(row.run.engine)
        for metric, measured, weight in (("ttft", row.run.ttft_ms, 1.0), ("tpot", row.run.tpot_ms, w)):
            x, fixed = _design(row, prior, metric)
            a.append(weight * x / measured)
            b.append(weight * (1.0 - fixed / measured))
            shares.append(1.0 / runs[row.run.model])
    matrix, target = np.array(a), np.array(b)
    # Each model's runs weigh one model's worth in the absolute loss the reweighting minimises (a weight w on a
    # squared residual is sqrt(w) on the row).
    share = np.sqrt(np.array(shares) * len(rows) / len(runs))
    scale = np.where(matrix.max(axis=0) > 0, matrix.max(axis=0), 1.0)
    weights = np.ones(len(target))
    for _ in range(_IRLS_ROUNDS):
        rows_weight = weights * share
        theta, _ = nnls(matrix / scale * rows_weight[:, None], target * rows_weight, maxiter=100 * len(PARAMETERS))
        weights = 1.0 / np.sqrt(np.maximum(np.abs(matrix / scale @ theta - target), _IRLS_FLOOR))
    return np.asarray(theta / scale)


def predict(rows: Sequence[MoeRow], priors: Priors, theta: np.ndarray) -> list[MoePrediction]:
    out = []
    for row in rows:
        prior = priors(row.run.engine)
        (xt, ft), (xp, fp) = _design(row, prior, "ttft"), _design(row, prior, "tpot")
        out.append(MoePrediction(row, max(float(xt @ theta) + ft, 1e-6), max(float(xp @ theta) + fp, 1e-6)))
    return out


def _before() -> np.ndarray:
    theta = np.zeros(len(PARAMETERS))
    theta[0] = 1.0
    return theta


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A left-out model's predictions with the interval factors its training models' nested residuals give."""

    model: str
    predictions: list[MoePrediction]
    before: list[MoePrediction]
    ttft_interval: tuple[float, float]
    tpot_interval: tuple[float, float]


def _factors(logs: Sequence[float]) -> tuple[float, float]:
    lo, hi = np.quantile(logs, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return float(np.exp(lo)), float(np.exp(hi))


def _nested(rows: Sequence[MoeRow], priors: Priors) -> tuple[tuple[float, float], tuple[float, float]]:
    """Interval factors from a leave-one-model-out inside `rows` (each model predicted by a fit on the others)."""
    ttft, tpot = [], []
    for model in sorted({r.run.model for r in rows}):
        train = [r for r in rows if r.run.model != model]
        theta = fit_extras(train, priors)
        for p in predict([r for r in rows if r.run.model == model], priors, theta):
            ttft.append(p.log_ratios[0])
            tpot.append(p.log_ratios[1])
    return _factors(ttft), _factors(tpot)


def leave_one_model_out(rows: Sequence[MoeRow], priors: Priors) -> list[LeftOut]:
    """Each model predicted by a fit on the others, with nested intervals; and the prior's (unfitted) predictions."""
    out = []
    for model in sorted({r.run.model for r in rows}):
        train = [r for r in rows if r.run.model != model]
        held = [r for r in rows if r.run.model == model]
        ttft_i, tpot_i = _nested(train, priors)
        predictions = predict(held, priors, fit_extras(train, priors))
        out.append(LeftOut(model, predictions, predict(held, priors, _before()), ttft_i, tpot_i))
    return out


Summary = MoeSummary


def _covered(p: MoePrediction, fold: LeftOut) -> tuple[bool, bool]:
    """Whether `p`'s measured TTFT and TPOT lie inside its fold's 90 % intervals."""
    (tlo, thi), (plo, phi), run = fold.ttft_interval, fold.tpot_interval, p.row.run
    return tlo * p.ttft_ms <= run.ttft_ms <= thi * p.ttft_ms, plo * p.tpot_ms <= run.tpot_ms <= phi * p.tpot_ms


def _median_error(ps: Sequence[MoePrediction], metric: int) -> np.ndarray:
    if metric == 0:
        return np.abs([p.ttft_ms / p.row.run.ttft_ms - 1 for p in ps])
    return np.abs([p.tpot_ms / p.row.run.tpot_ms - 1 for p in ps])


def _summary(triples: Sequence[tuple[MoePrediction, MoePrediction, LeftOut]]) -> Summary:
    """The errors of (prediction, the prior's prediction, its fold) triples, and their interval coverage."""
    ps, before = [t[0] for t in triples], [t[1] for t in triples]
    ttft, tpot = _median_error(ps, 0), _median_error(ps, 1)
    covered = np.array([_covered(p, fold) for p, _, fold in triples])
    return Summary(
        runs=len(ps),
        ttft_median=float(np.median(ttft)),
        ttft_p90=float(np.percentile(ttft, 90)),
        tpot_median=float(np.median(tpot)),
        tpot_p90=float(np.percentile(tpot, 90)),
        coverage_ttft=float(covered[:, 0].mean()),
        coverage_tpot=float(covered[:, 1].mean()),
        before_ttft_median=float(np.median(_median_error(before, 0))),
        before_tpot_median=float(np.median(_median_error(before, 1))),
    )


def summarize(folds: Sequence[LeftOut]) -> dict[str, Summary]:
    """Per left-out model, per left-out model and layout, and over every left-out run ("overall")."""
    triples = [(p, b, fold) for fold in folds for p, b in zip(fold.predictions, fold.before, strict=True)]
    table: dict[str, Summary] = {}
    for fold in folds:
        table[fold.model] = _summary([t for t in triples if t[2] is fold])
        for layout in ("agg", "disagg"):
            chosen = [t for t in triples if t[2] is fold and t[0].row.run.layout == layout]
            if chosen:
                table[f"{fold.model}/{layout}"] = _summary(chosen)
    for layout in ("agg", "disagg"):
        table[f"all/{layout}"] = _summary([t for t in triples if t[0].row.run.layout == layout])
    table["overall"] = _summary(triples)
    return table
