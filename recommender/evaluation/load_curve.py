"""A replica's load curve: P99 TTFT and TPOT from a trickle of traffic up to 1.3x its capacity, for the report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# LatencySLA and Provenance at run time, not under TYPE_CHECKING: serialization reads LoadCurve's annotations.
from recommender.config.spec import LatencySLA
from recommender.evaluation.refusal import Refused
from recommender.perf.sim.serving import SIMULATED_REQUESTS
from recommender.perf.sim.simulate import simulate as simulate_workload
from recommender.perf.sim.workload import make_workload
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.evaluation.performance import PerformanceEvaluator


@dataclass(frozen=True, slots=True)
class LoadPoint:
    rate_per_s: float
    ttft_p99_ms: float
    tpot_p99_ms: float
    #: Upper ends of the P99s' intervals at the SLA's confidence (None: measured step times, no interval).
    ttft_p99_high_ms: float | None = None
    tpot_p99_high_ms: float | None = None


@dataclass(frozen=True)
class LoadCurve:
    """P99 latencies of one replica from a trickle of traffic to 1.3x its capacity within the SLA."""

    points: list[LoadPoint]
    sla: LatencySLA
    capacity_rate_per_s: float
    provenance: Provenance


def load_curve(evaluator: PerformanceEvaluator, c: Candidate, *, points: int = 8) -> LoadCurve | None:
    """P99 TTFT and TPOT of one replica from a trickle of traffic up to 1.3x its capacity within the SLA (None:
    pruned). Probes are kept per process: after a resume a local winner is probed again."""
    try:
        performance = evaluator.performance(c)
    except Refused:
        return None
    setup = performance.setup
    cost, scheduler, traffic = setup.step_cost, setup.scheduler, evaluator.traffic
    capacity = performance.serving.requests_per_s
    if capacity <= 0:
        return None
    # On a calibrated GPU: the request overhead on TTFT, and the same workload with the steps at their upper ends.
    upper = evaluator.checked_step_cost(cost, setup.engine)
    overhead = evaluator.request_overhead_ms(setup.engine, cost)
    curve = []
    for i in range(1, points + 1):
        rate = capacity * 1.3 * i / points
        workload = make_workload(
            prompt=traffic.prompt_tokens,
            output=traffic.output_tokens,
            n_requests=SIMULATED_REQUESTS,
            rate=rate,
            **evaluator.load.sharing,
        )
        p = simulate_workload(cost, workload, scheduler, speculation=setup.speculation)
        high = simulate_workload(upper, workload, scheduler, speculation=setup.speculation) if setup.engine else p
        curve.append(
            LoadPoint(rate, p.ttft_ms.p99, p.tpot_ms.p99)
            if not setup.engine
            else LoadPoint(rate, p.ttft_ms.p99 + overhead, p.tpot_ms.p99, high.ttft_ms.p99 + overhead, high.tpot_ms.p99)
        )
    return LoadCurve(curve, evaluator.sla, capacity, cost.provenance.extended("continuous-batching simulation"))
