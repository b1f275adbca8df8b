"""What the MoE runs calibrate beyond the dense fit, judged leave-one-model-out.

The dense fit (``step_cost_fit.json``) prices each step from datasheet features with per-engine coefficients;
MoE serving adds what no datasheet shows: grouped-GEMM and routing efficiency, the engines' per-step host work
around the MoE layers, the all-to-all's real cost. Fitted here, on the runs' design rows (``moe_rows.py``) and
nothing else, are a scale on the whole prior step cost, a per-engine step overhead, and additive per-layer,
weight, matrix, KV, all-to-all and request terms, each >= 0 (NNLS on relative error, TPOT rows weighted as the
dense fit weights them). Leave-one-model-out: fitted on two models' runs, the third is predicted; its 90 %
intervals come from a leave-one-model-out inside the two training models (nested), as ``validation.py`` does for
the dense fit, so the coverage is what a user of an unseen model would get.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.optimize import nnls

from recommender.perf.fit.moe_rows import COLUMNS, MoeRow
from recommender.perf.fit.step_fit import FitSettings

__all__ = [
    "ENGINES",
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

ENGINES = ("sglang", "trtllm", "vllm")
_ADDED = ("layers", "weights", "linear", "kv", "all_to_all")
#: The fitted parameters, in order: a scale on the prior step cost, per-engine step overheads (s), added terms.
PARAMETERS = ("scale", *(f"step:{e}" for e in ENGINES), *_ADDED, "request")
_STEP, _REQUEST = COLUMNS.index("step"), COLUMNS.index("request")
CONFIDENCE = 0.9


def prior_coefficients(engine_coefficients: Sequence[float]) -> np.ndarray:
    """``COLUMNS``' coefficients from a dense engine's (features..., request): the all-to-all at its modeled cost."""
    c = np.asarray(engine_coefficients, dtype=float)
    return np.concatenate([c[:-1], [1.0], c[-1:]])


def _design(row: MoeRow, prior: np.ndarray, metric: str) -> tuple[np.ndarray, float]:
    """(`metric`'s columns over ``PARAMETERS``, its fixed ms) for `row`."""
    cols = row.ttft if metric == "ttft" else row.tpot
    x = np.zeros(len(PARAMETERS))
    x[0] = float(cols[:_REQUEST] @ prior[:_REQUEST])
    if row.run.engine in ENGINES:
        x[1 + ENGINES.index(row.run.engine)] = cols[_STEP]
    for i, name in enumerate(_ADDED):
        x[1 + len(ENGINES) + i] = cols[COLUMNS.index(name)]
    x[-1] = cols[_REQUEST]
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


def fit_extras(rows: Sequence[MoeRow], priors: Priors, settings: FitSettings = FitSettings()) -> np.ndarray:
    """``PARAMETERS`` fitted on `rows`: NNLS on relative error, TPOT rows weighted by `settings.tpot_weight`."""
    a, b = [], []
    for row in rows:
        prior, w = priors(row.run.engine), settings.tpot_weight
        for metric, measured, weight in (("ttft", row.run.ttft_ms, 1.0), ("tpot", row.run.tpot_ms, w)):
            x, fixed = _design(row, prior, metric)
            a.append(weight * x / measured)
            b.append(weight * (1.0 - fixed / measured))
    matrix = np.array(a)
    scale = np.where(matrix.max(axis=0) > 0, matrix.max(axis=0), 1.0)
    theta, _ = nnls(matrix / scale, np.array(b), maxiter=100 * len(PARAMETERS))
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


class Summary(BaseModel):
    """Median and P90 |predicted / measured - 1| and the share inside the 90 % interval (None: no interval)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: int
    ttft_median: float
    ttft_p90: float
    tpot_median: float
    tpot_p90: float
    coverage_ttft: float | None = None
    coverage_tpot: float | None = None
    before_ttft_median: float | None = None
    before_tpot_median: float | None = None


def _summary(ps: Sequence[MoePrediction], before: Sequence[MoePrediction], held: LeftOut | None) -> Summary:
    ttft = np.abs([p.ttft_ms / p.row.run.ttft_ms - 1 for p in ps])
    tpot = np.abs([p.tpot_ms / p.row.run.tpot_ms - 1 for p in ps])

    def covered(metric: int, interval: tuple[float, float]) -> float:
        measured = [(p.row.run.ttft_ms, p.ttft_ms) if metric == 0 else (p.row.run.tpot_ms, p.tpot_ms) for p in ps]
        return float(np.mean([interval[0] * q <= m <= interval[1] * q for m, q in measured]))

    return Summary(
        runs=len(ps),
        ttft_median=float(np.median(ttft)),
        ttft_p90=float(np.percentile(ttft, 90)),
        tpot_median=float(np.median(tpot)),
        tpot_p90=float(np.percentile(tpot, 90)),
        coverage_ttft=covered(0, held.ttft_interval) if held else None,
        coverage_tpot=covered(1, held.tpot_interval) if held else None,
        before_ttft_median=float(np.median(np.abs([p.ttft_ms / p.row.run.ttft_ms - 1 for p in before]))),
        before_tpot_median=float(np.median(np.abs([p.tpot_ms / p.row.run.tpot_ms - 1 for p in before]))),
    )


def summarize(folds: Sequence[LeftOut]) -> dict[str, Summary]:
    """Per left-out model and layout, per model, and over all left-out runs ("overall")."""
    table: dict[str, Summary] = {}
    for fold in folds:
        table[fold.model] = _summary(fold.predictions, fold.before, fold)
        for layout in ("agg", "disagg"):
            idx = [i for i, p in enumerate(fold.predictions) if p.row.run.layout == layout]
            if idx:
                ps, bs = [fold.predictions[i] for i in idx], [fold.before[i] for i in idx]
                table[f"{fold.model}/{layout}"] = _summary(ps, bs, fold)
    every = [p for f in folds for p in f.predictions]
    before = [p for f in folds for p in f.before]
    table["overall"] = _summary(every, before, None)
    return table


class MoeFit(BaseModel):
    """``moe_step_fit.json``: the parameters fitted on every run, and how they did leave-one-model-out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data: str
    data_sha256: str
    provenance: str
    parameters: list[str]
    theta: list[float]
    ttft_interval: tuple[float, float]
    tpot_interval: tuple[float, float]
    leave_one_model_out: dict[str, Summary]
    skipped: dict[str, int]
    #: In-sample predictions (ms) of a few runs, for the consistency test: run id -> [TTFT, TPOT].
    check_runs: dict[str, tuple[float, float]]
