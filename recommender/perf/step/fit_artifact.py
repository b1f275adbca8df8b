"""The step-cost fit as shipped data: what ``step_cost_fit.json`` and ``step_cost_fit_kernels.json`` hold.

Written by ``benchmarks/gpu_fidelity.py --write`` (``perf/fit/build.py``), read by ``calibrated.CalibratedModel``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ErrorSummary", "HoldoutSummary", "Residuals", "StepCostFit", "StepResiduals"]


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


class StepResiduals(BaseModel):
    """Held-out log residuals of the step costs, sorted: prefill from TTFT, decode from TPOT, each measured
    against the bracket of client protocols (0 inside it; ``validation.HeldOutPrediction``), so what a client
    protocol can explain is not counted as step-cost error."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    prefill: list[float]
    decode: list[float]


class HoldoutSummary(ErrorSummary):
    """How the fit does on the runs of one left-out campaign, model or group (``validation.py``).

    Errors are |predicted / measured - 1| with each campaign's modelled client (``*_median``, ``*_p90``) and
    outside the bracket of client protocols (``bracket_*``: 0 inside); ``explained_*``: the share of runs
    inside the bracket; ``coverage_*``: the share inside the nominal interval at ``confidence`` built from step
    residuals and the bracket, and ``coverage_*_before`` inside the interval of closed-loop mean residuals
    (the earlier method); None where the training runs held a single group (no held-out residuals to draw on).
    """

    bracket_ttft_median: float
    bracket_ttft_p90: float
    explained_ttft: float
    explained_tpot: float
    confidence: float
    coverage_ttft: float | None
    coverage_tpot: float | None
    coverage_ttft_before: float | None
    coverage_tpot_before: float | None


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
    #: only with it, and a changed profile changes the fit's digest once refitted (tests/perf/step/test_calibrated.py).
    engine_batching: dict[str, str] = Field(default_factory=dict)
    #: Step-cost residuals (prefill, decode) of the leave-one-group-out fits: the intervals the SLA check
    #: simulates the user's traffic at (``CalibratedModel.step_factors``).
    step_residuals_engine_seen: StepResiduals
    step_residuals_engine_unseen: StepResiduals
    #: Each engine's held-out step residuals (its runs, each predicted by a fit that left the run's group out).
    step_residuals_by_engine: dict[str, StepResiduals]
    #: Leave-one-campaign-out, leave-one-model-out and leave-one-group-out, each table by held-out value
    #: and "overall" (``validation.py``).
    validation: dict[str, dict[str, HoldoutSummary]]
    #: Host time per engine release line (``step_fit.FitSettings.release_lines``): coefficient sets keyed
    #: "<engine> <major.minor>" (``serving_runs.release_line``), each from that line's runs shrunk towards its engine's
    #: set, and each line's run count; empty in a fit made per engine.
    releases: dict[str, list[float]] = Field(default_factory=dict)
    release_runs: dict[str, int] = Field(default_factory=dict)
