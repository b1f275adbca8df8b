"""One simulation of a workload: the scheduler's replay, plain or with speculative decoding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.perf.sim.scheduler import ContinuousBatchingSimulation
from recommender.perf.sim.speculative import SpeculativeStepCost, decode_steps_workload, per_token_result

if TYPE_CHECKING:
    from recommender.perf.sim.results import SimulationResult
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.workload import Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["simulate"]


def simulate(
    cost: StepCostModel,
    workload: Workload,
    config: SchedulerConfig,
    *,
    ttft_sla_ms: float | None = None,
    tpot_sla_ms: float | None = None,
    speculation: SpeculativeDecoding | None = None,
) -> SimulationResult:
    """Serve `workload` with `config`'s scheduler, step durations from `cost`; every request completes.

    Goodput is counted against the SLAs given (none given: no goodput). With `speculation`, decode steps
    verify drafts and advance by the measured tokens per step (``speculative.py``); latencies are per token.
    """
    if speculation is None:
        return ContinuousBatchingSimulation(cost, workload, config).run(
            ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms
        )
    steps = ContinuousBatchingSimulation(
        SpeculativeStepCost(cost, speculation), decode_steps_workload(workload, speculation), config
    ).run()
    return per_token_result(steps, workload, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
