"""A candidate past the runnable and memory checks, before an engine's step cost is chosen for it.

`PerformanceEvaluator.setup` builds one per catalog or local candidate; what follows (the engine, its calibrated
step cost, the simulation) reads it instead of repeating the eligibility and memory plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.engines.eligibility import Eligibility
    from recommender.perf.model.memory import MemoryFit
    from recommender.perf.sim.scheduler import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.quantize import QuantScheme

__all__ = ["FittedCandidate"]


@dataclass(frozen=True)
class FittedCandidate:
    """Who serves the candidate, its memory fit and its scheduler."""

    method: QuantScheme
    served: Eligibility
    fit: MemoryFit
    scheduler: SchedulerConfig
    speculation: SpeculativeDecoding | None
