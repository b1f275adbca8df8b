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
are computed from (``features.py``); nothing measured supports that step, and the
provenance says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from recommender.perf.step.audited_gpus import AuditedGpus, load_audited_gpus
from recommender.perf.step.features import FEATURES, N_FEATURES, FeatureStepCost, StepFeatures
from recommender.perf.step.fit_artifact import ErrorSummary, HoldoutSummary, StepCostFit, StepResiduals
from recommender.perf.step.kernel_features import KernelStepFeatures
from recommender.perf.step.kernel_tables import KernelTables, KernelTablesUnavailable, kernel_package_version
from recommender.perf.step.moe_calibration import MoeFit, load_moe_fit
from recommender.perf.step.upper import StepFactors, UpperStepCost
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme

__all__ = [
    "FIT_PATH",
    "KERNEL_FIT_PATH",
    "MIN_ENGINE_RESIDUALS",
    "CalibratedModel",
    "ErrorSummary",
    "HoldoutSummary",
    "Interval",
    "KernelCalibration",
    "StepCostFit",
    "load_kernel_calibration",
    "release_line",
    "host_time_note",
    "shipped_model",
    "StepResiduals",
    "interval_factors",
    "load_fit",
    "step_pools",
]

FIT_PATH = Path(__file__).with_name("step_cost_fit.json")
_LAYERS = FEATURES.index("layers")
#: The fit of what kernels do not show (host time per step and layer, collectives), on top of measured kernel
#: times, for configurations aiconfigurator-core has tables of (``benchmarks/gpu_fidelity.py --write``).
KERNEL_FIT_PATH = Path(__file__).with_name("step_cost_fit_kernels.json")
#: The GPU the measured runs ran on; figures for any other are moved through datasheets.
CALIBRATED_ON = "h100-sxm"

Metric = Literal["ttft", "tpot"]


#: An engine's own held-out step residuals set its step intervals once it has this many of a kind (prefill or
#: decode); with fewer, the pool of every engine the fit had runs of does.
MIN_ENGINE_RESIDUALS = 30


def step_pools(
    seen: StepResiduals, unseen: StepResiduals, by_engine: dict[str, StepResiduals], engine: str, known: bool
) -> tuple[list[float], list[float] | None, list[float], list[float] | None]:
    """The residuals an engine's prefill and decode step intervals are drawn from: (prefill, prefill's extra pool,
    decode, decode's extra pool). The engine's own where it has ``MIN_ENGINE_RESIDUALS``, else the pool of fitted
    engines; an engine the fit has no runs of adds the pool of runs whose engine was left out (the wider end of
    both is taken, ``interval_factors``)."""
    own = by_engine.get(engine)
    prefill = own.prefill if own is not None and len(own.prefill) >= MIN_ENGINE_RESIDUALS else seen.prefill
    decode = own.decode if own is not None and len(own.decode) >= MIN_ENGINE_RESIDUALS else seen.decode
    return prefill, None if known else unseen.prefill, decode, None if known else unseen.decode


def interval_factors(seen: list[float], unseen: list[float] | None, confidence: float) -> tuple[float, float]:
    """The central interval at `confidence` of residuals log(measured / predicted), as factors on a prediction:
    from `seen`, or, where the engine was not fitted (`unseen` given), the wider of both pools at each end."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    levels = [(1 - confidence) / 2, (1 + confidence) / 2]
    lo, hi = np.quantile(seen, levels) if seen else (0.0, 0.0)
    if unseen:
        other = np.quantile(unseen, levels)
        lo, hi = min(lo, other[0]), max(hi, other[1])
    return float(np.exp(lo)), float(np.exp(hi))


#: Bumped when the simulation or the step model changes a study's latencies while the fit files stay the same
#: (2: steady-state simulations, MLA's decode FLOPs, the MoE fit; 3: MLA's decode on a 64-row tile, the MoE fit
#: regenerated; 4: the MoE fit on tensor-parallel MoE replicas, its left-out residuals as their step factors).
PERF_MODEL_REVISION = 4


def fit_digest(path: Path = FIT_PATH, kernel_path: Path = KERNEL_FIT_PATH) -> str:
    """A short hash of the shipped fits, of the model's revision and of whether the kernel tables can be read here:
    which performance model a study's latencies came from (a study made with measured kernels is not resumed on the
    datasheet alone, nor one made by an earlier simulator on this one)."""
    digest = hashlib.sha256(path.read_bytes())
    digest.update(f"revision {PERF_MODEL_REVISION}".encode())
    if kernel_path.is_file():
        digest.update(kernel_path.read_bytes())
        digest.update(str(kernel_package_version()).encode())
    return digest.hexdigest()[:8]


def load_fit(path: Path = FIT_PATH) -> StepCostFit:
    return StepCostFit.model_validate_json(path.read_text(encoding="utf-8"))


class Interval(BaseModel):
    """A predicted figure's interval at a confidence level."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    low: float
    high: float
    confidence: float


#: Precisions no measured run in the shipped fit used: their step costs rest on datasheet figures alone.
UNMEASURED_PRECISIONS = frozenset({"fp4"})


@dataclass(frozen=True)
class KernelCalibration:
    """The kernel-table step cost: its fit (host time and collectives over measured kernels) and the tables."""

    fit: StepCostFit
    tables: KernelTables


def load_kernel_calibration(path: Path = KERNEL_FIT_PATH, *, cache_dir: Path | None = None) -> KernelCalibration | None:
    """The shipped kernel fit with its tables (kept on disk under `cache_dir` where given), or None where the
    artifact is absent."""
    return KernelCalibration(load_fit(path), KernelTables(cache_dir)) if path.is_file() else None


def _is_moe(point: FeatureStepCost | None) -> bool:
    """Whether `point` prices a MoE model (its intervals are the MoE runs' as well as the dense fit's)."""
    return point is not None and point.features.shape.moe is not None


def _uncalibrated(accel: Accelerator) -> bool:
    """No measured serving run on this vendor's GPUs calibrates the step cost (AMD: issue 39, item 4)."""
    return accel.vendor != "nvidia"


def shipped_model(kernel_cache: Path | None = None) -> CalibratedModel:
    """The shipped datasheet fit and, where shipped, the kernel fit, its tables kept under `kernel_cache` (the
    caller's cache root: perf reads no environment)."""
    return CalibratedModel(load_fit(), load_kernel_calibration(cache_dir=kernel_cache))


def _version(line: str) -> tuple[int, ...]:
    return tuple(int(x) for x in line.split(" ")[1].split("."))


def release_line(fit: StepCostFit, engine: str, release: str | None = None) -> str | None:
    """The release line of `engine` whose host time `fit` prices with: `release` ("0.12", "0.12.0" or "vllm 0.12")
    where the fit calibrated that line, else None (the engine's set over all its releases); without `release`, the
    newest line the fit calibrated (a line whose runs did not record their release is never the default)."""
    lines = [k for k in fit.releases if k.split(" ")[0] == engine and k.split(" ")[1][:1].isdigit()]
    if release is None:
        return max(lines, key=_version, default=None)
    parts = release.removeprefix(f"{engine} ").split(".")
    wanted = f"{engine} {'.'.join(parts[:2])}" if len(parts) >= 2 else ""
    return wanted if wanted in fit.releases else None


def host_time_note(fit: StepCostFit, engine: str, release: str | None) -> str:
    """Which release's host time a kernel-table step cost carries, and how it was chosen (the provenance's words)."""
    line = release_line(fit, engine, release)
    if line is not None:
        how = "asked for" if release is not None else "the newest release line calibrated (default)"
        return f"host time of {line} ({fit.release_runs.get(line, 0)} measured runs; {how})"
    if release is not None:
        return f"host time of {engine} over all its measured releases: release {release} not calibrated"
    return f"host time of {engine} over all its measured releases (no release line calibrated)"


class CalibratedModel:
    """The shipped fit(s), turned into step-cost models and intervals for an engine on a GPU.

    With `kernels`, a configuration aiconfigurator-core has tables of gets the kernel-table step cost
    (``kernel_features.py``); every other configuration gets the datasheet one, its provenance saying why. A MoE
    model's step stands on `moe` as well (the shipped ``moe_step_fit.json`` unless given): its scale and per-layer
    time, and intervals at least as wide as its leave-one-model-out residuals (``moe_calibration.py``).
    """

    def __init__(
        self,
        fit: StepCostFit,
        kernels: KernelCalibration | None = None,
        moe: MoeFit | None = None,
        audited: AuditedGpus | None = None,
    ) -> None:
        self.fit = fit
        self.kernels = kernels
        self.moe = moe if moe is not None else load_moe_fit()
        #: Step-time scales of GPUs calibrated on audited capacities (``audited_gpus.py``): datasheet path only.
        self.audited = audited if audited is not None else load_audited_gpus()

    def _fit_of(self, point: FeatureStepCost | None) -> StepCostFit:
        on_kernels = point is not None and isinstance(point.features, KernelStepFeatures)
        return self.kernels.fit if on_kernels and self.kernels is not None else self.fit

    def knows(self, engine: str, fit: StepCostFit | None = None) -> bool:
        return engine in (fit or self.fit).engines

    def coefficients(self, engine: str, fit: StepCostFit | None = None, release: str | None = None) -> np.ndarray:
        """`engine`'s coefficients in `fit`: its release line's host time where the fit has it (``release_line``),
        else the engine's over all its releases, else the pooled set."""
        fit = fit or self.fit
        line = release_line(fit, engine, release)
        return np.array(fit.releases[line] if line else fit.engines.get(engine, fit.pooled))

    def request_overhead_ms(
        self, engine: str, point: FeatureStepCost | None = None, release: str | None = None
    ) -> float:
        """The fixed time every TTFT carries beyond the steps (see ``design_rows.COEFFICIENTS``)."""
        return float(self.coefficients(engine, self._fit_of(point), release)[N_FEATURES]) * 1e3

    def step_cost(
        self,
        shape: ModelShape,
        method: Scheme,
        accel: Accelerator,
        engine: str,
        *,
        tensor_parallel: int = 1,
        kv_cache_dtype: str = "auto",
        kv_read_at_cache_width: bool = True,
        release: str | None = None,
    ) -> FeatureStepCost:
        """The calibrated step cost of `engine` serving `method` on `accel`: on measured kernels where there are
        tables, else on the datasheet; `kv_read_at_cache_width` False for an engine release that reads an fp8 KV
        cache at 16-bit cost (``EngineProfile.reads_kv_at_cache_width``: every current release reads it at its
        width)."""
        features = StepFeatures(shape, method, accel, tensor_parallel, kv_cache_dtype, kv_read_at_cache_width)
        why_not = "no kernel fit shipped"
        if self.kernels is not None:
            try:
                table = self.kernels.tables.get(shape, method, accel.key, engine, tensor_parallel, kv_cache_dtype)
            except KernelTablesUnavailable as exc:
                why_not = str(exc)
            else:
                kernel_fit = self.kernels.fit
                provenance = self._provenance(kernel_fit, accel, engine, table.source).extended(
                    host_time_note(kernel_fit, engine, release)
                )
                return FeatureStepCost(
                    KernelStepFeatures(features, table),
                    self.coefficients(engine, kernel_fit, release)[:N_FEATURES],
                    provenance,
                    floor_s=1e-6,
                )
        coef = self.coefficients(engine, None, release)[:N_FEATURES]
        provenance = self.provenance(accel, engine, why_not)
        if release is not None:  # said where asked for (the default's words are unchanged)
            provenance = provenance.extended(host_time_note(self.fit, engine, release))
        if not kv_read_at_cache_width and kv_cache_dtype == "fp8":
            provenance = provenance.extended(
                f"{engine} {release}'s decode attention reads the fp8 KV cache at 16-bit cost"
            )
        if shape.moe is not None:
            coef = self.moe.coefficients(coef, _LAYERS)
            provenance = provenance.extended(self.moe.note)
        audited = self.audited.of(accel.key)
        if audited is not None:
            coef = coef * audited.scales()
        if method.precision in UNMEASURED_PRECISIONS:
            provenance = provenance.extended(
                f"{method.precision} linear layers at the datasheet's {method.precision} peak and "
                f"{method.bits_per_weight:g} bits per weight: no measured {method.precision} run calibrates them"
            )
        return FeatureStepCost(features, coef, provenance, floor_s=1e-6)

    def _provenance(self, fit: StepCostFit, accel: Accelerator, engine: str, tables: str) -> Provenance:
        cv = fit.cross_validation["overall"]
        return Provenance(
            "calibrated",
            f"measured kernels ({tables}) + host time per step and layer and topology all-reduces fitted on "
            f"{sum(fit.engine_runs.values()) or 'the'} measured runs in {fit.data.split(':')[0]} (sha256 "
            f"{fit.data_sha256[:12]}); leave-one-group-out error median TTFT {cv.ttft_median:.0%}, TPOT "
            f"{cv.tpot_median:.0%}; {engine} on {accel.key}",
            "measured kernels",
        )

    def provenance(self, accel: Accelerator, engine: str, why_not_kernels: str = "") -> Provenance:
        fit = self.fit
        cv = fit.cross_validation["overall"]
        if self.knows(engine):
            whose = f"{engine}'s step cost fitted on {fit.engine_runs[engine]} measured {engine} runs"
        else:
            whose = f"engine-agnostic step cost (no measured {engine} runs; wider interval)"
        where = (
            "on the GPU the runs measured"
            if accel.key == CALIBRATED_ON
            else f"moved from {CALIBRATED_ON} to {accel.key} through its datasheet "
            f"({accel.memory_bandwidth_gbps:g} GB/s, dense peaks {accel.peak_tflops}; unmeasured step)"
        )
        kernels = f"; no measured kernels: {why_not_kernels}" if why_not_kernels else ""
        audited = self.audited.of(accel.key)
        if audited is not None:
            where += f"; {audited.note(accel.key, self.audited.source)}"
        elif _uncalibrated(accel):
            where += (
                f"; datasheet, uncalibrated: no measured {accel.vendor.upper()} serving run calibrates it, "
                "intervals from the pools of engines the fit never saw"
            )
        return Provenance(
            "calibrated",
            f"datasheet step cost: {whose}, of {sum(fit.engine_runs.values())} runs in {fit.data.split(':')[0]} "
            f"(sha256 {fit.data_sha256[:12]}), non-negative least squares on relative error; leave-one-(model, "
            f"engine, precision)-out error median TTFT {cv.ttft_median:.0%}, TPOT {cv.tpot_median:.0%}; {where}"
            f"{kernels}",
            "datasheet",
        )

    def interval(
        self, value: float, metric: Metric, engine: str, confidence: float, point: FeatureStepCost | None = None
    ) -> Interval:
        """The interval of a predicted closed-loop benchmark mean at `confidence` (central, from the
        cross-validation residuals of benchmark means of the fit `point` stands on): what ``estimate`` reports
        for a benchmark client."""
        fit = self._fit_of(point)
        unseen = None if self.knows(engine, fit) else getattr(fit.residuals_engine_unseen, metric)
        lo, hi = interval_factors(getattr(fit.residuals_engine_seen, metric), unseen, confidence)
        if _is_moe(point):
            moe_lo, moe_hi = self.moe.interval(metric, confidence)
            lo, hi = min(lo, moe_lo), max(hi, moe_hi)
        return Interval(low=value * lo, high=value * hi, confidence=confidence)

    def step_factors(self, engine: str, confidence: float, point: FeatureStepCost | None = None) -> StepFactors:
        """The one-sided upper bounds of the prefill and decode step costs at `confidence`, over the point costs:
        the SLA check simulates the user's traffic with steps this much slower (``UpperStepCost``). One-sided:
        an SLA is broken only by slow steps, so at 90 % confidence the bound is the residuals' 90th percentile.
        A GPU no measured run calibrates (AMD: no kernel tables, no runs) takes the wider pools, as an engine the fit
        never saw does."""
        fit, central = self._fit_of(point), 2 * confidence - 1  # one-sided: the central interval's upper end
        known = self.knows(engine, fit) and not (point is not None and _uncalibrated(point.features.accel))
        p, p_extra, d, d_extra = step_pools(
            fit.step_residuals_engine_seen,
            fit.step_residuals_engine_unseen,
            fit.step_residuals_by_engine,
            engine,
            known,
        )
        prefill, decode = interval_factors(p, p_extra, central)[1], interval_factors(d, d_extra, central)[1]
        if _is_moe(point):
            moe_prefill, moe_decode = self.moe.step_factors(confidence)
            prefill, decode = max(prefill, moe_prefill), max(decode, moe_decode)
        if point is not None and not isinstance(point.features, KernelStepFeatures):
            audited = self.audited.of(point.features.accel.key)
            widen = audited.widen if audited is not None else 1.0
            prefill, decode = prefill * widen, decode * widen
        return StepFactors(prefill=max(prefill, 1.0), decode=max(decode, 1.0))

    def upper_step_cost(self, point: FeatureStepCost, engine: str, confidence: float) -> UpperStepCost:
        """`point`'s steps at the upper ends of their intervals (see :meth:`step_factors`)."""
        factors = self.step_factors(engine, confidence, point)
        label = point.provenance.extended(
            f"one-sided {confidence:.0%} upper bound of held-out step-cost residuals: prefill x{factors.prefill:.2f}, "
            f"decode x{factors.decode:.2f}"
        )
        return UpperStepCost(point, factors, label)
