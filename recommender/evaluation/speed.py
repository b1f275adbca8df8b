"""What a candidate's speed half comes to: the setup it is simulated with, its serving estimate and price, and
the result judged on memory and latency alone (its quality still unknown). Kept apart from the evaluator so the
plan, the GPU mix and the levers can hold these values without the pipeline that makes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.perf.model.memory import MemoryFit
from recommender.perf.pricing import CostEstimate
from recommender.perf.probe import ProbeResult
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving import ServingEstimate
from recommender.perf.step.cost import StepCostModel
from recommender.quantize import QuantScheme

if TYPE_CHECKING:
    from recommender.perf.sim.speculative import SpeculativeDecoding


@dataclass(frozen=True)
class Setup:
    """A candidate that passed the runnable and memory checks, ready to simulate."""

    method: QuantScheme
    step_cost: StepCostModel
    scheduler: SchedulerConfig
    price_per_hour_usd: float | None  # None: a GPU the price set does not price (`require_price` off: `plan`)
    price_source: str
    memory: MemoryFit
    probe: ProbeResult | None
    engines: tuple[str, ...] = ()
    #: The named price set the hourly price comes from ("hardware_catalog": a contract price; "local_device").
    price_set: str = ""
    #: The engine whose calibrated step cost `step_cost` is ('' for the local device's measured steps).
    engine: str = ""
    #: Speculative decoding at its measured acceptance (None: none).
    speculation: SpeculativeDecoding | None = None


@dataclass(frozen=True)
class Performance:
    """The serving estimate and the price of a candidate that runs and fits (no price: `cost` None)."""

    setup: Setup
    serving: ServingEstimate
    cost: CostEstimate | None


def latency_checks(serving: ServingEstimate, sla: LatencySLA) -> tuple[float, float, list[str]]:
    """The TTFT and TPOT constraints (> 0: broken) at the P99s' upper ends, and a line for each one broken."""
    ttft = serving.ttft_p99_checked_ms / sla.ttft_p99_ms - 1.0
    tpot = serving.tpot_p99_checked_ms / sla.tpot_p99_ms - 1.0
    at = "" if serving.confidence is None else f" (upper end at {serving.confidence:.0%} confidence)"
    broken = []
    if ttft > 0:
        broken.append(f"ttft: P99 {serving.ttft_p99_checked_ms:.1f} ms{at} > SLA {sla.ttft_p99_ms:g} ms")
    if tpot > 0:
        broken.append(f"tpot: P99 {serving.tpot_p99_checked_ms:.2f} ms{at} > SLA {sla.tpot_p99_ms:g} ms")
    return ttft, tpot, broken


def speed_result(c: Candidate, perf: Performance, sla: LatencySLA) -> CandidateResult:
    """The candidate judged on speed, memory and cost alone; its quality still unknown (constraint 1)."""
    serving = perf.serving
    ttft, tpot, broken = latency_checks(serving, sla)
    constraints = Constraints(runnable=0.0, memory=perf.setup.memory.constraint, quality=1.0, ttft=ttft, tpot=tpot)
    return CandidateResult(
        candidate=c,
        status="evaluated",
        constraints=constraints,
        broken=broken,
        serving=serving,
        cost=perf.cost,
        memory=perf.setup.memory,
        probe=perf.setup.probe,
        # The engine the figures are for comes first: the recommendation names it.
        engines=tuple(sorted(perf.setup.engines, key=lambda e: e != perf.setup.engine)),
    )
