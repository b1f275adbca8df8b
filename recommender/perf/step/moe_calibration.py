"""What the measured MoE runs calibrate on top of the dense fit: ``moe_step_fit.json``.

Written by ``benchmarks/gpu_fidelity.py --moe --write`` (the fit: ``perf/fit/moe_fit.py``) from the aggregated and
disaggregated MoE runs of ``perf/fit/measured_runs/moe_disagg_runs.csv``: a scale on the whole calibrated step of a
MoE rank (the all-to-all included) and a per-layer time added to it, with the leave-one-model-out errors and
interval coverage they were judged by, and the left-out runs' log residuals themselves.

Every MoE step cost the tool prices stands on what the validation judged (``CalibratedModel`` for a tensor-parallel
MoE replica, ``expert_parallel.py`` for an EP rank), and its uncertainty is the validation's: the SLA check's upper
step factors and ``estimate``'s intervals are at least what the left-out models' runs showed (a new MoE model is
what a user brings, and the dense fit's step residuals, measured on dense models, are narrower than a MoE model's
leave-one-model-out error: decode x1.0-1.25 against about x1.7 at 90 %).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from recommender.perf.step.fit_artifact import ErrorSummary

__all__ = ["MOE_FIT_PATH", "PREFILL_CLIENTS", "MoeFit", "MoeSummary", "load_moe_fit"]

MOE_FIT_PATH = Path(__file__).with_name("moe_step_fit.json")
#: Clients per attention rank at most for a run's TTFT residual to stand for a prefill step's error.
PREFILL_CLIENTS = 4


class MoeSummary(ErrorSummary):
    """Median and P90 |predicted / measured - 1| (``ErrorSummary``), the share inside the nested 90 % interval, and
    the prior's (dense fit alone) medians."""

    coverage_ttft: float | None = None
    coverage_tpot: float | None = None
    before_ttft_median: float | None = None
    before_tpot_median: float | None = None


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
    leave_one_model_out: dict[str, MoeSummary]
    skipped: dict[str, int]
    #: In-sample predictions (ms) of a few runs, for the consistency test: run id -> [TTFT, TPOT].
    check_runs: dict[str, tuple[float, float]]
    #: Leave-one-model-out log(measured / predicted) of the aggregated runs' mean TTFT: a disaggregated run's TTFT
    #: carries the replay's prefill-pool queue (``moe_rows.queue_factor``), not only its steps.
    ttft_log_residuals: list[float] = []
    #: Leave-one-model-out log(measured / predicted) of every run's mean TPOT.
    tpot_log_residuals: list[float] = []
    #: The aggregated runs' TTFT residuals at most ``PREFILL_CLIENTS`` clients per attention rank: a prompt waits for
    #: few others there, so the residual is the prefill steps' own error, not the queue's amplification of it (which
    #: the SLA check's simulation adds itself).
    prefill_log_residuals: list[float] = []

    def parameter(self, name: str) -> float:
        return self.theta[self.parameters.index(name)] if name in self.parameters else 0.0

    def coefficients(self, dense: np.ndarray, layers_index: int) -> np.ndarray:
        """A dense engine's step coefficients as a MoE step's: scaled, with the per-layer time added."""
        out = np.asarray(dense, dtype=float) * self.parameter("scale")
        out[layers_index] += self.parameter("layers")
        return out

    @property
    def note(self) -> str:
        """What a MoE step cost's provenance adds."""
        return (
            f"MoE step scaled by {self.parameter('scale'):.3f}, +{self.parameter('layers') * 1e6:.1f} us per layer: "
            f"{self.provenance}"
        )

    def step_factors(self, confidence: float) -> tuple[float, float]:
        """One-sided upper (prefill, decode) factors at `confidence`: the left-out runs' lightly loaded TTFT and
        every TPOT residual's quantiles (1.0 where none are stored)."""
        return _upper(self.prefill_log_residuals, confidence), _upper(self.tpot_log_residuals, confidence)

    def interval(self, metric: str, confidence: float) -> tuple[float, float]:
        """The central interval at `confidence` of a predicted benchmark mean (`metric` 'ttft' or 'tpot')."""
        logs = self.ttft_log_residuals if metric == "ttft" else self.tpot_log_residuals
        if not logs:
            return 1.0, 1.0
        lo, hi = np.quantile(logs, [(1 - confidence) / 2, (1 + confidence) / 2])
        return float(np.exp(lo)), float(np.exp(hi))


def _upper(logs: list[float], confidence: float) -> float:
    return max(1.0, float(np.exp(np.quantile(logs, confidence)))) if logs else 1.0


def load_moe_fit(path: Path = MOE_FIT_PATH) -> MoeFit:
    return MoeFit.model_validate_json(path.read_text(encoding="utf-8"))
