"""What the measured MoE runs calibrate on top of the dense fit: ``moe_step_fit.json``.

Written by ``benchmarks/gpu_fidelity.py --moe --write`` (the fit: ``perf/fit/moe_fit.py``) from the aggregated and
disaggregated MoE runs of ``perf/fit/measured_runs/moe_disagg_runs.csv``: a scale on the whole calibrated step of an
expert-parallel rank (the all-to-all included) and a per-layer time added to it, with the leave-one-model-out
errors and interval coverage they were judged by. The expert-parallel step cost (``expert_parallel.py``) applies
them and carries the artifact's provenance, so ``plan`` prices EP candidates with what the runs showed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["MOE_FIT_PATH", "MoeFit", "MoeSummary", "load_moe_fit"]

MOE_FIT_PATH = Path(__file__).with_name("moe_step_fit.json")


class MoeSummary(BaseModel):
    """Median and P90 |predicted / measured - 1|, the share inside the nested 90 % interval, and the prior's
    (dense fit alone) medians."""

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

    def parameter(self, name: str) -> float:
        return self.theta[self.parameters.index(name)] if name in self.parameters else 0.0


def load_moe_fit(path: Path = MOE_FIT_PATH) -> MoeFit:
    return MoeFit.model_validate_json(path.read_text(encoding="utf-8"))
