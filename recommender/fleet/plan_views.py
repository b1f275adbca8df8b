"""Which comparison a plan shows beside its rows: one decision for `plan`'s flags and for a spec's space.

A plan answers with its rows (``plan.py``) and, where asked, a comparison: aggregated replicas against
disaggregated prefill and decode pools (``layout_compare.py``), or tensor against expert parallelism
(``parallelism.py``), or the fleet behind each routing policy asked for (``routing_compare.py``). The command
line and `plan --spec` used to decide which on their own, with their own copies
of the rules (which layouts, which expert-parallel degrees, which pools may be expert-parallel). Here the two
front ends only translate what they were given into `PlanViews` (`views_of_flags`, `views_of_space`), and
`compare` computes what it asks for from one `PlanRequest`.

The two translations differ where the two front ends do: the command line shows one table, so
``--layout disaggregated --expert-parallel`` compares the layouts with expert-parallel pools instead of adding the
tensor-against-expert table; a spec's plan shows every comparison its space searches, each at the space's own
degrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from recommender.config.candidate import DISAGGREGATED
from recommender.fleet.layouts.layout_compare import LayoutComparison, plan_layouts
from recommender.fleet.layouts.parallelism import ParallelismComparison, plan_parallelism
from recommender.fleet.layouts.pool_workers import ExpertParallelPools
from recommender.fleet.layouts.routing_compare import RoutingComparison, compare_routing
from recommender.fleet.plan import plan

if TYPE_CHECKING:
    from recommender.config.space import Space
    from recommender.fleet.plan_request import PlanRequest
    from recommender.fleet.plan_row import PlanRow
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["Compared", "PlanViews", "compare", "views_of_flags", "views_of_space"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanViews:
    """The comparisons a plan computes besides its rows (none: the rows answer alone)."""

    #: Aggregated against disaggregated pools, per GPU and precision, then pools on two GPU types.
    layouts: bool = False
    #: The pools' tensor-parallel degrees; None: the request's scope.
    layout_degrees: tuple[int, ...] | None = None
    #: The decode pools' GPUs paired with each prefill GPU of another type; None: the request's GPUs.
    decode_hardware: list[str] | None = None
    #: The expert-parallel workers a pool may take instead of a tensor-parallel one; None: tensor-parallel pools.
    pools: ExpertParallelPools | None = None
    #: Tensor-parallel against expert-parallel replicas, per GPU and precision.
    parallelism: bool = False
    #: The expert-parallel replicas' degrees; None: the request's scope.
    parallel_degrees: tuple[int, ...] | None = None
    #: Expert popularity as a Zipf exponent, and EPLB's extra expert slots, for the expert-parallel replicas.
    skew: float = 0.0
    redundant_experts: int = 0
    #: The routing policies each row's fleet is sized behind (empty: none; the rows count one replica times N).
    routing: tuple[RoutingPolicy, ...] = ()

    @property
    def any(self) -> bool:
        """Whether a comparison is asked for at all."""
        return self.layouts or self.parallelism or bool(self.routing)


def views_of_flags(
    layouts: list[str],
    *,
    expert_parallel: bool,
    skew: float,
    redundant_experts: int,
    decode_hardware: list[str] | None,
    routing: tuple[RoutingPolicy, ...] = (),
) -> PlanViews:
    """`plan --layout/--expert-parallel/--routing`: one comparison. With disaggregated among the layouts, the
    layouts (each pool expert-parallel too with ``--expert-parallel``, at the plan's degrees); else with
    ``--expert-parallel``, tensor against expert parallelism; else with ``--routing``, the routed fleets (the flags
    are refused together: ``config/dependencies.py``); else none."""
    if DISAGGREGATED in layouts:
        pools = ExpertParallelPools(skew=skew, redundant_experts=redundant_experts) if expert_parallel else None
        return PlanViews(layouts=True, decode_hardware=decode_hardware, pools=pools)
    return PlanViews(parallelism=expert_parallel, skew=skew, redundant_experts=redundant_experts, routing=routing)


def views_of_space(space: Space) -> PlanViews:
    """`plan --spec`: every comparison the space searches. With disaggregated in ``space.layout``, the layouts at
    the space's ``tensor_parallel`` degrees and ``decode_hardware`` (each pool expert-parallel too at its
    ``expert_parallel`` degrees above 1); with such degrees, tensor against expert parallelism at them too; with
    ``routing``, the rows' fleets behind each policy."""
    degrees = tuple(d for d in space.expert_parallel if d > 1)
    pools = ExpertParallelPools(space.expert_skew, space.redundant_experts, degrees=degrees) if degrees else None
    return PlanViews(
        layouts=DISAGGREGATED in space.layout,
        layout_degrees=tuple(space.tensor_parallel),
        decode_hardware=space.decode_hardware,
        pools=pools,
        parallelism=bool(degrees),
        parallel_degrees=degrees,
        skew=space.expert_skew,
        redundant_experts=space.redundant_experts,
        routing=tuple(space.routing or ()),
    )


@dataclass(frozen=True)
class Compared:
    """The comparisons computed (each empty where not asked)."""

    layouts: list[LayoutComparison] = field(default_factory=list)
    parallelism: list[ParallelismComparison] = field(default_factory=list)
    routing: list[RoutingComparison] = field(default_factory=list)
    #: The plain rows the routed fleets were sized from (empty where routing was not asked).
    routed_rows: list[PlanRow] = field(default_factory=list)

    @property
    def comparisons(self) -> list[LayoutComparison | ParallelismComparison | RoutingComparison]:
        return [*self.layouts, *self.parallelism, *self.routing]

    @property
    def rows(self) -> list[PlanRow]:
        """Each comparison's plain plan row (aggregated, tensor-parallel, routed): what an empty plan is refused on."""
        return [c.aggregated for c in self.layouts] + [c.tensor_parallel for c in self.parallelism] + self.routed_rows


def _at(request: PlanRequest, degrees: tuple[int, ...] | None) -> PlanRequest:
    """The request with its scope's tensor-parallel degrees replaced by `degrees` (None: as it is)."""
    return request if degrees is None else replace(request, scope=replace(request.scope, tensor_parallel=degrees))


def compare(request: PlanRequest, views: PlanViews, rows: list[PlanRow] | None = None) -> Compared:
    """The comparisons `views` asks for, planned from `request` (its progress callback hears each one's pairs);
    the routed fleets are sized from `rows` where given (the plan's own rows), else from the rows planned here."""
    layouts = (
        plan_layouts(
            _at(request, views.layout_degrees), decode_hardware=views.decode_hardware, expert_parallel=views.pools
        )
        if views.layouts
        else []
    )
    parallelism = (
        plan_parallelism(
            _at(request, views.parallel_degrees), skew=views.skew, redundant_experts=views.redundant_experts
        )
        if views.parallelism
        else []
    )
    routed_rows = (rows if rows is not None else plan(request)) if views.routing else []
    routing = compare_routing(request, routed_rows, views.routing) if views.routing else []
    return Compared(layouts, parallelism, routing, routed_rows)
