"""Where a figure came from, as a typed value rather than free text parsed by its prefix.

Three kinds, as the design's honesty rules name them:

* ``measured``: timed on a device here (the detail names the device and what ran);
* ``calibrated``: a model fitted to measured runs (the detail names the runs, the fit and
  its cross-validated error);
* ``modeled``: physics or a catalog entry with stated assumptions, nothing measured.

Reports, MLflow tags and plots read ``kind`` — never a prefix of ``detail``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProvenanceKind = Literal["measured", "calibrated", "modeled"]
#: What a calibrated GPU step cost stands on: the GPU's measured kernel tables (aiconfigurator-core) or its
#: datasheet figures; empty for figures where the distinction does not apply.
StepBasis = Literal["measured kernels", "datasheet", ""]


@dataclass(frozen=True, slots=True)
class Provenance:
    """The kind of a figure and, in words, what exactly produced it."""

    kind: ProvenanceKind
    detail: str
    basis: StepBasis = ""

    def __str__(self) -> str:
        kind = f"{self.kind} ({self.basis})" if self.basis else self.kind
        return f"{kind}: {self.detail}" if self.detail else kind

    def extended(self, more: str) -> Provenance:
        """The same kind with more said about how the figure was derived (a simulation on top, say)."""
        return Provenance(self.kind, f"{self.detail}; {more}" if self.detail else more, self.basis)
