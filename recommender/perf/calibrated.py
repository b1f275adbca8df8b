"""The calibrated step-cost model as shipped: fitted coefficients per engine, and intervals from cross-validation.

``benchmarks/gpu_fidelity.py --write`` fits the coefficients on the measured runs
(``step_fit.py``) and writes ``step_cost_fit.json`` beside this module: the data's source and
sha256, how the benchmark client was modelled, the coefficients (engine-agnostic and per
engine, with each engine's run count), and the leave-one-group-out log residuals
log(measured / predicted) of TTFT and TPOT. Those residuals are the prediction intervals:
at confidence c, a predicted latency x lies in [x e^q((1-c)/2), x e^q((1+c)/2)], with q the
residuals' quantiles — from the groups whose engine the fit had seen, or, for an engine it
has no runs of, the wider of those and the groups whose engine was left out entirely.

Moving to another GPU keeps the coefficients and swaps the datasheet figures the features
are computed from (``step_features.py``); nothing measured supports that step, and the
provenance says so.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from recommender.perf.engine_profiles import ENGINE_PROFILES
from recommender.perf.step_features import N_FEATURES, FeatureStepCost, StepFeatures
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.perf.catalog import Accelerator
    from recommender.perf.shape import ModelShape
    from recommender.quantize import QuantMethod

__all__ = ["FIT_PATH", "CalibratedModel", "ErrorSummary", "Interval", "StepCostFit", "load_fit"]

FIT_PATH = Path(__file__).with_name("step_cost_fit.json")
#: The GPU the measured runs ran on; figures for any other are moved through datasheets.
CALIBRATED_ON = "h100-sxm"

Metric = Literal["ttft", "tpot"]


class ErrorSummary(BaseModel):
    """Median and P90 of |predicted / measured - 1| over some runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    runs: int
    ttft_median: float
    ttft_p90: float
    tpot_median: float
    tpot_p90: float


class Residuals(BaseModel):
    """Cross-validated log(measured / predicted), sorted, for one pool of runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ttft: list[float]
    tpot: list[float]


class StepCostFit(BaseModel):
    """Everything ``step_cost_fit.json`` holds (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    data: str
    data_sha256: str
    protocol_rounds: int = Field(ge=1)
    protocol_warmup_rounds: int = Field(ge=0)
    tpot_weight: float
    shrinkage: float
    min_engine_runs: int = Field(ge=1)
    coefficient_names: list[str]
    pooled: list[float]
    engines: dict[str, list[float]]
    engine_runs: dict[str, int]
    residuals_engine_seen: Residuals
    residuals_engine_unseen: Residuals
    cross_validation: dict[str, ErrorSummary]
    in_sample: dict[str, ErrorSummary]
    #: Each engine's batching as the replays simulated it (``EngineProfile.describe``): the coefficients hold
    #: only with it, and a changed profile changes the fit's digest once refitted (tests/test_step_fit.py).
    engine_batching: dict[str, str] = Field(default_factory=dict)


def fit_digest(path: Path = FIT_PATH) -> str:
    """A short hash of the shipped fit: which performance model a study's latencies came from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def load_fit(path: Path = FIT_PATH) -> StepCostFit:
    return StepCostFit.model_validate_json(path.read_text(encoding="utf-8"))


class Interval(BaseModel):
    """A predicted figure's interval at a confidence level."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    low: float
    high: float
    confidence: float


class CalibratedModel:
    """The shipped fit, turned into step-cost models and intervals for an engine on a GPU."""

    def __init__(self, fit: StepCostFit) -> None:
        self.fit = fit

    def knows(self, engine: str) -> bool:
        return engine in self.fit.engines

    def coefficients(self, engine: str) -> np.ndarray:
        return np.array(self.fit.engines.get(engine, self.fit.pooled))

    def request_overhead_ms(self, engine: str) -> float:
        """The fixed time every TTFT carries beyond the steps (see ``step_fit.COEFFICIENTS``)."""
        return float(self.coefficients(engine)[N_FEATURES]) * 1e3

    def step_cost(
        self, shape: ModelShape, method: QuantMethod, accel: Accelerator, engine: str, *,
        tensor_parallel: int = 1, kv_cache_dtype: str = "auto", release: str | None = None,
    ) -> FeatureStepCost:  # fmt: skip
        """The calibrated step cost of `engine` (its `release`; None: the current one) serving `method` on `accel`."""
        profile = ENGINE_PROFILES.get(engine)
        reads_at_width = profile.reads_kv_at_cache_width(release) if profile is not None else True
        features = StepFeatures(shape, method, accel, tensor_parallel, kv_cache_dtype, reads_at_width)
        coef = self.coefficients(engine)[:N_FEATURES]
        return FeatureStepCost(features, coef, self.provenance(accel, engine), floor_s=1e-6)

    def provenance(self, accel: Accelerator, engine: str) -> Provenance:
        fit = self.fit
        cv = fit.cross_validation["overall"]
        if self.knows(engine):
            whose = f"{engine}'s step cost fitted on {fit.engine_runs[engine]} measured {engine} runs"
        else:
            whose = f"engine-agnostic step cost (no measured {engine} runs; wider interval)"
        where = (
            "on the GPU the runs measured" if accel.key == CALIBRATED_ON else
            f"moved from {CALIBRATED_ON} to {accel.key} through its datasheet "
            f"({accel.memory_bandwidth_gbps:g} GB/s, dense peaks {accel.peak_tflops}; unmeasured step)"
        )  # fmt: skip
        return Provenance(
            "calibrated",
            f"{whose}, of {sum(fit.engine_runs.values())} runs in {fit.data.split(':')[0]} "
            f"(sha256 {fit.data_sha256[:12]}), non-negative least squares on relative error; leave-one-(model, engine, "
            f"precision)-out error median TTFT {cv.ttft_median:.0%}, TPOT {cv.tpot_median:.0%}; {where}",
        )

    def interval(self, value: float, metric: Metric, engine: str, confidence: float) -> Interval:
        """The interval of a predicted `metric` value at `confidence` (central, from cross-validation residuals)."""
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        levels = [(1 - confidence) / 2, (1 + confidence) / 2]
        seen = np.quantile(getattr(self.fit.residuals_engine_seen, metric), levels)
        lo, hi = seen
        if not self.knows(engine):  # the wider of both pools at each end: never narrower than a fitted engine's
            unseen = np.quantile(getattr(self.fit.residuals_engine_unseen, metric), levels)
            lo, hi = min(lo, unseen[0]), max(hi, unseen[1])
        return Interval(low=value * float(np.exp(lo)), high=value * float(np.exp(hi)), confidence=confidence)

    def upper_factor(self, metric: Metric, engine: str, confidence: float) -> float:
        """Upper end of the interval over the prediction, at `confidence`: what an SLA check multiplies by."""
        return self.interval(1.0, metric, engine, confidence).high
