"""One planning question: what `plan`, `plan_layouts` and `plan_parallelism` are each asked.

The three planners answered the same question (this architecture on these GPUs at these precisions, at this
traffic and SLA, served by these engines, within this scope) through the same ten to thirteen keyword arguments,
repeated at every call site: the command line, `plan --spec` and the tests. A setting added to one planner had to be
threaded through all of them, and a call site could drift (one planner asked with the spec's link, another
without). The request is that question as one frozen value; what only one planner reads (the decode pools' GPUs,
the experts' skew) stays that planner's own keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.config.space import DEFAULT_LINK
from recommender.engines import DEFAULT_ENGINES
from recommender.fleet.plan_scope import PlanScope

if TYPE_CHECKING:
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape

__all__ = ["PlanRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """Every (GPU, precision) pair of `hardware` x `precisions` for the model `shape`, priced from `catalog`, at
    `traffic` within `sla`, served by `engines`, trying what `scope` allows.

    Frozen so that one request can be handed to several planners (the plain rows, then a comparison) and each sees
    the question the user asked; `dataclasses.replace` makes a variant (another scope's degrees, no progress bar).
    """

    shape: ModelShape
    catalog: Catalog
    hardware: tuple[str, ...]
    precisions: tuple[str, ...]
    traffic: Traffic
    sla: LatencySLA
    #: The engines a row may be served by (a spec's `engines`; the search and the GPU mix use the same).
    engines: tuple[str, ...] = DEFAULT_ENGINES
    #: What each pair tries: degrees, KV cache dtypes, batch caps, a scheme per precision (``plan_scope``).
    scope: PlanScope = field(default_factory=PlanScope)
    #: The link the KV cache crosses between disaggregated pools, and between the nodes of an expert-parallel
    #: replica (``perf/catalog/links.yaml``).
    link: str = DEFAULT_LINK
    #: What the launch commands serve (a hub id or a path); "" leaves the rows without a launch command.
    model: str = ""
    #: Hears each pair's "gpu/precision" once it is planned (a progress bar); never sent to a row process.
    on_row: Callable[[str], None] | None = None

    @property
    def pairs(self) -> int:
        """How many (GPU, precision) pairs the request plans: a progress bar's total."""
        return len(self.hardware) * len(self.precisions)

    def heard(self, hardware: str, precision: str) -> None:
        """Tell `on_row` (if any) that the pair is planned."""
        if self.on_row is not None:
            self.on_row(f"{hardware}/{precision}")
