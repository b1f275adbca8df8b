"""One simulation of a workload: the scheduler's replay, plain or with speculative decoding, compiled where it can.

The compiled loop (``compiled.py``) serves every workload on a calibrated step cost, shared prefixes and
conversations included; the Python scheduler (``scheduler.py``, its reference) serves step costs with no compiled
form (a measured probe table, the roofline, an expert-parallel rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.perf.sim.compiled import compiled_cost, run_compiled
from recommender.perf.sim.scheduler import ContinuousBatchingSimulation, check_runnable
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
    compiled = compiled_cost(cost, config, speculation)
    if compiled is not None:
        check_runnable(workload, config)
        if speculation is None:
            return run_compiled(compiled, workload, config, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
        steps = run_compiled(compiled, decode_steps_workload(workload, speculation), config)
        return per_token_result(steps, workload, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
    if speculation is None:
        return ContinuousBatchingSimulation(cost, workload, config).run(
            ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms
        )
    steps = ContinuousBatchingSimulation(
        SpeculativeStepCost(cost, speculation), decode_steps_workload(workload, speculation), config
    ).run()
    return per_token_result(steps, workload, ttft_sla_ms=ttft_sla_ms, tpot_sla_ms=tpot_sla_ms)
