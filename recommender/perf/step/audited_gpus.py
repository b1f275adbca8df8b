"""GPUs no measured serving run calibrates, calibrated on audited capacities instead: two step scales each.

AMD GPUs have no kernel tables in aiconfigurator-core and no closed-loop runs among the handed-over data, so their
step cost is the H100 fit moved through their datasheets, and the audited MLPerf Inference v4.1 / v5.1 rows
(``perf/fit/measured_runs/mlperf_v41_v51/``) said that path is optimistic: MI300X under vLLM carries x0.53-0.65 of
what `plan` predicted, MI325X x0.84-0.97 (``benchmarks/audited_capacity.py`` before this file). One factor on the
whole step did not hold out of sample: the interactive rows (small batches, weight streaming) wanted x1.0-1.2, the
server rows (large batches, matrix work) x1.5-1.7. So each GPU gets two: one on the bandwidth terms
(``weights``, ``kv``: the share of the datasheet bandwidth its kernels reach, relative to the H100's) and one on the
compute terms (``linear``, ``attention``, ``tokens``); host time per step and layer is left as fitted.
``benchmarks/fit_audited_gpus.py`` finds them per GPU as the pair at which `plan`'s own capacity search (same
path, same SLA check at the upper bound) carries the GPU's audited rates best (least squares on log capacity, with a
small pull towards the datasheet path), and writes beside them each row predicted by the pair fitted without it.
One pair for MI300X and MI325X together did not hold (leaving either GPU out, 0 of 7 rows within x1.25): the
MI325X submissions carry 1.3-2.1x the MI300X ones where the datasheets differ by 1.13x in bandwidth. MI355X (CDNA 4,
no audited row) takes the two GPUs' geometric mean with its step intervals widened by their spread, and its
provenance says so.

Only the datasheet path is scaled: a GPU with kernel tables is priced from measured kernels and never here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from recommender.perf.step.features import FEATURES, N_FEATURES

__all__ = ["AUDITED_FIT_PATH", "BANDWIDTH_TERMS", "COMPUTE_TERMS", "AuditedGpu", "AuditedGpus", "load_audited_gpus"]

AUDITED_FIT_PATH = Path(__file__).with_name("audited_gpu_fit.json")


#: The step features each scale multiplies (``features.FEATURES`` names).
BANDWIDTH_TERMS = ("weights", "kv")
COMPUTE_TERMS = ("linear", "attention", "tokens")


class AuditedGpu(BaseModel):
    """One GPU's scales on its datasheet step terms, and where they came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bandwidth_scale: float
    compute_scale: float
    #: The audited rows (``cases.csv`` ids) the scales were fitted on; empty for a derived GPU.
    rows: tuple[str, ...] = ()
    #: For a GPU without rows of its own: the GPUs whose scales it takes.
    derived_from: tuple[str, ...] = ()
    #: Extra width on its step intervals (1.0: none): a derived GPU's, the spread of the GPUs it is derived from.
    widen: float = 1.0
    #: Held-out check: each of its rows' measured / predicted capacity with the scales fitted without that row.
    held_out_row: dict[str, float] = {}

    def scales(self) -> np.ndarray:
        """A multiplier per step coefficient (``features.FEATURES`` order): 1 on the terms not scaled."""
        out = np.ones(N_FEATURES)
        out[[FEATURES.index(t) for t in BANDWIDTH_TERMS]] = self.bandwidth_scale
        out[[FEATURES.index(t) for t in COMPUTE_TERMS]] = self.compute_scale
        return out

    def note(self, gpu: str, source: str) -> str:
        """The provenance's words for these scales."""
        scaled = f"bandwidth terms x{self.bandwidth_scale:.2f}, compute terms x{self.compute_scale:.2f}"
        if self.derived_from:
            return (
                f"calibrated: audited MLPerf rows of {', '.join(self.derived_from)} ({scaled}; {gpu} has no audited "
                f"row: its datasheet carries the rest, step intervals widened x{self.widen:.2f}; {source})"
            )
        row = ", ".join(f"{k} x{v:.2f}" for k, v in sorted(self.held_out_row.items()))
        return (
            f"calibrated: audited MLPerf rows {', '.join(self.rows)} ({scaled} over the datasheet path; measured / "
            f"predicted capacity leaving each row out {row}; {source})"
        )


class AuditedGpus(BaseModel):
    """The shipped scales, the data they came from and the command that wrote them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    command: str
    gpus: dict[str, AuditedGpu]

    def of(self, gpu: str) -> AuditedGpu | None:
        return self.gpus.get(gpu)


@cache
def load_audited_gpus(path: Path = AUDITED_FIT_PATH) -> AuditedGpus:
    """The shipped scales (none when the file is absent: every GPU on its datasheet path as before)."""
    if not path.is_file():
        return AuditedGpus(source="", command="", gpus={})
    return AuditedGpus.model_validate_json(path.read_text(encoding="utf-8"))
