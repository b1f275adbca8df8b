"""Routing policies side by side on one GPU at one precision: the replicas each router's fleet needs, and why.

A plan row's replicas are one replica's capacity divided into the traffic: they hold where every replica sees what
the one simulated saw. With prefix caching that is a router's doing: behind round-robin a conversation's next turn
lands on the replica holding its history 1 time in N. So each row that serves the traffic is sized again as a fleet
(``perf/sim/fleet_sizing.py``: N replicas of its configuration behind the policy, the whole traffic, each replica
with its own cache, P99s over every request), per policy asked for (`plan --routing`, ``space.routing``), from the
row's own count. The steps are the ones the row's SLA check ran (every step at the upper end of its calibrated
interval, the TTFT's request overhead added), so a policy that keeps what one replica kept needs the row's replicas.

The policies run on the same GPU type, so the one with fewer replicas costs less at any price; a tie goes to the
first in ``routing.POLICIES``' order (round-robin: what a plain Service gives, no router to deploy). The winner's
router settings (llm-d's InferencePool values with its EndpointPickerConfig, Dynamo's Frontend arguments,
``deploy/router_config.py``) come with the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.deploy.routed import routed_deployments
from recommender.deploy.router_config import Unmapped, dynamo_router, llm_d_router, model_labels, plain_service_note
from recommender.engines import EngineLaunch
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.plan import row_launches
from recommender.fleet.plan_row import PlanRow
from recommender.perf.sim.fleet_sizing import size_fleet
from recommender.perf.sim.routing import POLICIES, Router, RoutingPolicy

if TYPE_CHECKING:
    from recommender.fleet.plan_request import PlanRequest
    from recommender.perf.sim.fleet_sizing import FleetSizing

__all__ = [
    "RoutedFleet",
    "RouterSettings",
    "RoutingComparison",
    "compare_routing",
    "routed_launch",
    "router_settings",
]

#: The most replicas a policy's fleet is sized up to: this many times the row's own count, and at least 8 more.
MAX_REPLICAS_FACTOR = 3
#: Hit rates closer than this are the same: the winner then wins on how it spreads the load, not on hits.
SAME_HITS = 0.02
#: Requests per replica a fleet run takes, at most (the row's own P99 run may be longer: its P99s settled further).
PER_REPLICA_REQUESTS = 4_000


@dataclass(frozen=True, slots=True)
class RoutedFleet:
    """One policy's fleet: the fewest replicas found within the SLA (`met`; else the most tried), its hit rate and
    P99s (at the steps' upper ends, TTFT overhead included) there, its $/month, and how it was found."""

    policy: RoutingPolicy
    replicas: int
    met: bool
    prefix_hit_rate: float
    ttft_p99_ms: float
    tpot_p99_ms: float
    usd_per_month: float | None
    requests_simulated: int
    replicas_tried: tuple[int, ...]
    #: The fewest and the most requests a replica was sent.
    requests_per_replica: tuple[int, int]


@dataclass(frozen=True, slots=True)
class RouterSettings:
    """The router a policy deploys as: llm-d's InferencePool values ("" where llm-d has no setting for it) and
    Dynamo's Frontend arguments (empty likewise), with the notes saying what each does or why it has none."""

    policy: RoutingPolicy
    llm_d_values: str
    dynamo_frontend_args: list[str]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RoutingComparison:
    """One GPU and precision: the plan row (one replica's capacity into the traffic), each policy's fleet, the
    winner (fewest replicas; "" where none met the SLA) and why, and the winner's router settings."""

    hardware: str
    precision: str
    row: PlanRow
    fleets: list[RoutedFleet]
    winner: str
    reason: str
    router: RouterSettings | None
    #: The winner's fleet as it deploys: the row's engine command (its note on what a plain Service gives up), then
    #: llm-d's InferencePool values and Dynamo's DynamoGraphDeployment carrying the winner's router
    #: (``deploy/routed.py``); empty without a model to serve or a winner.
    launch: list[EngineLaunch] = field(default_factory=list)


def router_settings(policy: RoutingPolicy, model: str) -> RouterSettings:
    """`policy` as llm-d's and Dynamo's router settings for aggregated replicas of `model`."""
    values, notes = llm_d_router(policy, disaggregated=False, labels=model_labels(model or "model"))
    dynamo = dynamo_router(policy)
    args = [] if isinstance(dynamo, Unmapped) else list(dynamo.args)
    return RouterSettings(policy, values, args, [*notes, dynamo.note, plain_service_note(policy)])


def routed_launch(request: PlanRequest, row: PlanRow, winner: RoutedFleet) -> list[EngineLaunch]:
    """The row's engine launch behind `winner`'s router and the frameworks' files deploying its fleet of
    `winner.replicas` replicas there (empty where the plan names no model)."""
    if not request.model or row.result is None:
        return []
    entries = row_launches(row, request.model, request.catalog, request.traffic, winner.policy)
    if not entries or entries[0].engine != row.engine:
        return entries
    tp = row.result.candidate.tensor_parallel
    return [
        entries[0],
        *routed_deployments(entries[0], tensor_parallel=tp, replicas=winner.replicas, routing=winner.policy),
    ]


def _fleet(row: PlanRow, policy: RoutingPolicy, sizing: FleetSizing, overhead_ms: float) -> RoutedFleet:
    measured = sizing.judged.result
    per_replica = sizing.result.requests_per_replica
    monthly = None if row.usd_per_month is None or not row.replicas else row.usd_per_month / row.replicas
    return RoutedFleet(
        policy=policy,
        replicas=sizing.replicas,
        met=sizing.met,
        prefix_hit_rate=sizing.result.prefix_hit_rate,
        ttft_p99_ms=measured.ttft_ms.p99 + overhead_ms,
        tpot_p99_ms=measured.tpot_ms.p99,
        usd_per_month=None if monthly is None else monthly * sizing.replicas,
        requests_simulated=len(sizing.result.assignment),
        replicas_tried=sizing.tried,
        requests_per_replica=(min(per_replica), max(per_replica)),
    )


def _sized(performance: PerformanceEvaluator, row: PlanRow, policies: tuple[RoutingPolicy, ...]) -> list[RoutedFleet]:
    """Each policy's fleet of `row`'s configuration, on the steps its SLA check ran."""
    assert row.result is not None and row.replicas is not None
    setup = performance.chosen_setup(row.result.candidate)
    engine, point = setup.engine, setup.step_cost
    sla = performance.simulated_sla(engine, point)
    served = row.result.serving
    per_replica = min(PER_REPLICA_REQUESTS, max(600, (served.requests_simulated or 0) if served else 0))
    fleets = []
    for policy in policies:
        sizing = size_fleet(
            performance.checked_step_cost(point, engine),
            setup.scheduler,
            traffic=performance.load,
            router=Router(policy=policy),
            ttft_p99_ms=sla.ttft_p99_ms,
            tpot_p99_ms=sla.tpot_p99_ms,
            start=row.replicas,
            max_replicas=max(MAX_REPLICAS_FACTOR * row.replicas, row.replicas + 8),
            per_replica=per_replica,
            speculation=setup.speculation,
        )
        fleets.append(_fleet(row, policy, sizing, performance.request_overhead_ms(engine, point)))
    return fleets


def _reason(row: PlanRow, fleets: list[RoutedFleet], winner: RoutedFleet | None, shares: bool) -> str:
    if winner is None:
        return f"no policy's fleet met the SLA within {max(f.replicas for f in fleets)} replicas"
    rates = ", ".join(f"{f.policy} {f.prefix_hit_rate:.0%}" for f in fleets)
    if not shares:
        more = [
            f"{f.policy} {f.replicas if f.met else f'> {f.replicas}'}"
            for f in fleets
            if f.replicas != winner.replicas or not f.met
        ]
        needs = (
            f"every policy needs {winner.replicas} replicas"
            if not more
            else (
                f"{winner.policy} needs {winner.replicas} replicas (" + ", ".join(more) + ": how they spread the load)"
            )
        )
        return (
            f"{needs}: the traffic shares no prompt prefix (no traffic.shared_prefix or conversation), so no router "
            f"changes what a replica's cache holds; the tie goes to {winner.policy}"
            + (", which a plain Service gives" if winner.policy == "round-robin" else "")
        )
    beaten = [f for f in fleets if f.replicas > winner.replicas or not f.met]
    if not beaten:
        return (
            f"every policy needs {winner.replicas} replicas (hit rates {rates}): the prefix-cache hits a router keeps "
            f"do not move a replica's capacity across a whole replica here; the tie goes to {winner.policy}"
        )
    worst = max(beaten, key=lambda f: f.replicas)
    if winner.prefix_hit_rate - worst.prefix_hit_rate < SAME_HITS:
        return (
            f"{winner.policy} needs {winner.replicas} replicas against {worst.policy}'s {worst.replicas} "
            f"({row.replicas} from one replica's capacity) at the same hit rates ({rates}): every replica caches "
            f"the shared prefixes whatever the router, so the fleets differ in how evenly they load the replicas "
            f"(at {winner.replicas} replicas {winner.policy}'s P99 TTFT is {winner.ttft_p99_ms:.0f} ms)"
        )
    return (
        f"{winner.policy} needs {winner.replicas} replicas against {worst.policy}'s {worst.replicas} "
        f"({row.replicas} from one replica's capacity): its fleet serves {winner.prefix_hit_rate:.0%} of prompt tokens "
        f"from the replicas' caches against {worst.prefix_hit_rate:.0%} (hit rates {rates}), so each replica "
        "prefills less and carries more within the SLA"
    )


def compare_routing(
    request: PlanRequest, rows: list[PlanRow], policies: tuple[RoutingPolicy, ...]
) -> list[RoutingComparison]:
    """Each row of `rows` that serves the traffic sized as a fleet behind each of `policies` (in
    ``routing.POLICIES``' order); the rows that serve nothing are left out."""
    ordered = tuple(p for p in POLICIES if p in policies)
    found = []
    for row in rows:
        if row.result is None or not row.replicas or not row.capacity:
            continue
        performance = PerformanceEvaluator(
            request.catalog,
            request.shape,
            request.traffic,
            request.sla,
            engines=request.engines,
            require_price=False,
            settle_within=0,
            engine_releases=request.scope.engine_releases,
        )
        fleets = _sized(performance, row, ordered)
        met = [f for f in fleets if f.met]
        winner = min(met, key=lambda f: (f.replicas, ordered.index(f.policy)), default=None)
        reason = _reason(row, fleets, winner, performance.load.shares_prompts)
        router = None if winner is None else router_settings(winner.policy, request.model)
        launch = [] if winner is None else routed_launch(request, row, winner)
        name = winner.policy if winner else ""
        found.append(RoutingComparison(row.hardware, row.precision, row, fleets, name, reason, router, launch))
    return found
