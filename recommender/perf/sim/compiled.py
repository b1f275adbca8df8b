"""The continuous-batching replay compiled: which simulations the compiled loop serves, and their results.

``compiled_loop.py`` is the scheduler of ``scheduler.py`` and ``admission.py`` line for line (vLLM v1's policy;
TensorRT-LLM's whole-request reservation and SGLang's prefill-alone steps as the config says) over arrays, each
step priced by the compiled step cost (``perf/step/compiled_cost.py``), the prefix cache compiled beside it
(``compiled_prefix.py``). Python's scheduler stays the reference: it serves what the compiled loop does not (closed
loops, step costs without a compiled form), and the tests replay a grid of configurations through both
(``tests/perf/sim/test_compiled.py``). The two agree to the rounding of the sums: the compiled loop prices each
step of a decode stretch on its own where Python sums a stretch at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.sim.compiled_loop import run_loop
from recommender.perf.sim.compiled_prefix import X_HIT_TOKENS, prefix_arrays
from recommender.perf.sim.compiled_state import CONFIG_FIELDS, DECODE_ONLY, PLAIN, SPECULATIVE, STATE
from recommender.perf.sim.decode_only import DecodeOnlyStepCost
from recommender.perf.sim.results import SimulationResult
from recommender.perf.step.compiled_cost import CompiledStepCost, compile_step_cost

if TYPE_CHECKING:
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.workload import Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["CompiledCost", "compiled_cost", "run_compiled"]


@dataclass(frozen=True, slots=True)
class CompiledCost:
    """A step cost in the compiled loop's form: the tabulated cost, how steps are handed to it
    (``compiled_state.PLAIN``, ``SPECULATIVE`` or ``DECODE_ONLY``) and the drafts each decoder verifies."""

    table: CompiledStepCost
    mode: int
    drafted_per_step: float = 0.0


def compiled_cost(
    cost: StepCostModel, config: SchedulerConfig, speculation: SpeculativeDecoding | None = None
) -> CompiledCost | None:
    """`cost` (with `speculation`'s drafts where given) as the compiled loop prices it, or None where it has no
    compiled form (the Python scheduler then runs)."""
    mode, inner, drafts = PLAIN, cost, 0.0
    if type(cost) is DecodeOnlyStepCost:
        if speculation is not None:
            return None
        mode, inner = DECODE_ONLY, cost.inner
    elif speculation is not None:
        mode, drafts = SPECULATIVE, speculation.drafted_per_step
    seats = config.max_num_seqs
    # A step holds at most the token budget; drafts add up to that many per decoder; a decode worker's step counts
    # its admitted sequences as decoders.
    tokens = config.max_num_batched_tokens + (math.ceil(seats * drafts) + 1 if drafts else 0)
    table = compile_step_cost(inner, max_tokens=max(tokens, seats), max_seqs=seats)
    return None if table is None else CompiledCost(table, mode, drafts)


def run_compiled(
    cost: CompiledCost,
    workload: Workload,
    config: SchedulerConfig,
    *,
    ttft_sla_ms: float | None = None,
    tpot_sla_ms: float | None = None,
) -> SimulationResult:
    """Serve `workload` with `config`'s scheduler (its shared prefixes and conversation histories through the
    replica's prefix cache), each step priced by `cost`; every request completes. The same result as
    ``ContinuousBatchingSimulation(...).run(...)`` to the rounding of the sums."""
    prefix = prefix_arrays(workload)
    conf = np.array([int(getattr(config, name)) for name in CONFIG_FIELDS] + [cost.mode], dtype=np.int64)
    t = cost.table
    first, finish, state = run_loop(
        np.ascontiguousarray(workload.arrivals_s, dtype=np.float64),
        np.ascontiguousarray(workload.prompt_tokens, dtype=np.int64),
        np.ascontiguousarray(workload.output_tokens, dtype=np.int64),
        conf,
        cost.drafted_per_step,
        t.arrays,
        prefix,
    )
    if state[STATE["stalled"]]:
        raise RuntimeError("scheduler stalled: nothing runnable")
    return SimulationResult.of_run(
        workload,
        first,
        finish,
        preemptions=int(state[STATE["preemptions"]]),
        steps=int(state[STATE["steps"]]),
        max_step_tokens=int(state[STATE["max_step_tokens"]]),
        ttft_sla_ms=ttft_sla_ms,
        tpot_sla_ms=tpot_sla_ms,
        prefix_hit_tokens=int(prefix[2][X_HIT_TOKENS]),
        prefill_tokens=int(state[STATE["prefill_tokens"]]),
    )
