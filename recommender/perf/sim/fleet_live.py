"""A fleet routed as it runs: every replica replayed up to each arrival, the router deciding on their state then.

A load-aware router (llm-d's default endpoint picker: queue depth, KV-cache usage and a prefix bonus, summed with
weights) reads each replica's waiting queue and KV usage at the moment a request arrives; routing before the
replicas run, from guessed completions, sends a burst to whichever replica looked idle (the two-pass routing of
``routing.py``'s other policies). Here each replica's compiled loop (``compiled_fleet.advance``, every replica in
one call: ``advance_fleet``) runs to the arrival,
the router scores the replicas on what they hold then, and the request joins the one it picks: one pass, and the
routing is the one a router deciding as the requests arrive makes. llm-d reads the queue and the usage from the
engines' metrics, scraped every 50 ms (llm-d/llm-d-inference-scheduler@520af478 ``pkg/epp/server/options.go``); here
they are read at most one engine step after the arrival, the step in progress when it came.

Only the compiled loop replays in pieces: a step cost with no compiled form, or speculative decoding, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from recommender.perf.sim.compiled import compiled_cost
from recommender.perf.sim.compiled_fleet import advance_fleet
from recommender.perf.sim.compiled_prefix import X_HIT_TOKENS, prefix_arrays
from recommender.perf.sim.compiled_state import (
    CONFIG_FIELDS,
    S_MAX_STEP_TOKENS,
    S_PREEMPTIONS,
    S_PREFILLED,
    S_STEPS,
    Prefix,
    RunArrays,
    new_run,
)
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.scheduler import check_runnable

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.perf.sim.routing import Router
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.perf.sim.workload import IntArray, Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["replay_routed", "subset"]


def subset(workload: Workload, idx: IntArray) -> Workload:
    """The requests `idx` of `workload` (arrival order kept), with their prefix and history keys."""

    def pick(a: IntArray | None) -> IntArray | None:
        return None if a is None else a[idx]

    return replace(
        workload,
        arrivals_s=workload.arrivals_s[idx],
        prompt_tokens=workload.prompt_tokens[idx],
        output_tokens=workload.output_tokens[idx],
        prefix_keys=pick(workload.prefix_keys),
        prefix_tokens=pick(workload.prefix_tokens),
        history_keys=pick(workload.history_keys),
    )


@dataclass(slots=True)
class _Fleet:
    """The replicas' replays in progress, side by side for ``advance_fleet``: each run array and prefix-cache array
    stacked by replica (row r: replica r's), the routing marks (row r of `mines`: 1 routed here, 0 elsewhere, -1 not
    yet), each replica's clock, KV usage and waiting queue, and `fresh` while nothing was routed to it since it last
    ran (its state is then the one it stopped in)."""

    runs: RunArrays
    pxs: Prefix
    mines: np.ndarray
    clocks: np.ndarray
    usage: np.ndarray
    queues: np.ndarray
    fresh: np.ndarray

    @classmethod
    def new(cls, workload: Workload, config: SchedulerConfig, replicas: int) -> _Fleet:
        prompts = np.ascontiguousarray(workload.prompt_tokens, dtype=np.int64)
        outputs = np.ascontiguousarray(workload.output_tokens, dtype=np.int64)

        def stacked(a: np.ndarray) -> np.ndarray:  # a copy per replica (writable, C-contiguous)
            return np.repeat(a[np.newaxis], replicas, axis=0)

        run, px = new_run(prompts, outputs, config.block_size), prefix_arrays(workload)
        runs = cast("RunArrays", tuple(stacked(a) for a in run))
        n = len(workload)
        return cls(
            runs,
            (stacked(px[0]), stacked(px[1]), stacked(px[2])),
            np.full((replicas, n), -1, dtype=np.int8),
            np.zeros(replicas),
            np.zeros(replicas),
            np.zeros(replicas, dtype=np.int64),
            np.zeros(replicas, dtype=np.bool_),
        )

    def run_of(self, r: int) -> tuple[RunArrays, Prefix]:
        """Replica `r`'s run and prefix cache (views of its rows)."""
        run = cast("RunArrays", tuple(a[r] for a in self.runs))
        return run, (self.pxs[0][r], self.pxs[1][r], self.pxs[2][r])


def replay_routed(
    cost: StepCostModel,
    workload: Workload,
    config: SchedulerConfig,
    *,
    replicas: int,
    router: Router,
    ttft_sla_ms: float | None = None,
    tpot_sla_ms: float | None = None,
    speculation: SpeculativeDecoding | None = None,
) -> tuple[IntArray, tuple[SimulationResult | None, ...]]:
    """Each request's replica as `router` (a live policy) picks it at its arrival, and each replica's result."""
    compiled = compiled_cost(cost, config, speculation)
    if compiled is None or speculation is not None:
        raise ValueError(
            f"{router.policy} routing replays the replicas together on the compiled loop: it needs a step cost with a "
            "compiled form (a calibrated one) and no speculative decoding"
        )
    check_runnable(workload, config)
    arrivals = np.ascontiguousarray(workload.arrivals_s, dtype=np.float64)
    conf = np.array([int(getattr(config, name)) for name in CONFIG_FIELDS] + [compiled.mode], dtype=np.int64)
    fleet = _Fleet.new(workload, config, replicas)

    def run_to(at: float) -> None:
        stalled = advance_fleet(
            arrivals,
            fleet.mines,
            conf,
            compiled.drafted_per_step,
            compiled.table.arrays,
            fleet.pxs,
            fleet.runs,
            fleet.clocks,
            fleet.fresh,
            fleet.usage,
            fleet.queues,
            at,
        )
        if stalled >= 0:
            raise RuntimeError("scheduler stalled: nothing runnable")

    assignment = _route(router, workload, fleet, run_to, config)
    fleet.fresh[:] = False
    run_to(np.inf)  # every replica served to its last request
    runs = tuple(
        _result(workload, *fleet.run_of(r), np.flatnonzero(assignment == r), ttft_sla_ms, tpot_sla_ms)
        for r in range(replicas)
    )
    return assignment, runs


def _route(
    router: Router,
    workload: Workload,
    fleet: _Fleet,
    run_to: Callable[[float], None],
    config: SchedulerConfig,
) -> IntArray:
    """Route every request in arrival order, each replica run to the arrival first (``advance_fleet``)."""
    n, replicas, bs = len(workload), len(fleet.clocks), router.block_size
    index = router.prefix_index(replicas, config.kv_blocks)
    keys = workload.prefix_keys.tolist() if workload.prefix_keys is not None else [-1] * n
    shared = workload.prefix_tokens.tolist() if workload.prefix_tokens is not None else [0] * n
    history = workload.history_keys.tolist() if workload.history_keys is not None else [-1] * n
    prompts, arrivals = workload.prompt_tokens.tolist(), workload.arrivals_s.tolist()
    ties = np.random.default_rng(router.seed).random((n, replicas))
    out = np.empty(n, dtype=np.int64)
    mines, fresh = fleet.mines, fleet.fresh
    for i in range(n):
        run_to(arrivals[i])
        matched = index.matches(keys[i], shared[i])
        r = router.weighted_pick(fleet.queues, fleet.usage, matched, prompts[i] // bs, ties[i])
        mines[:, i] = 0
        mines[r, i] = 1
        fresh[r] = False
        if keys[i] >= 0:
            index.record(r, keys[i], shared[i])
        if history[i] >= 0:
            index.record(r, history[i], prompts[i])
        out[i] = r
    return out


def _result(
    workload: Workload,
    run: RunArrays,
    px: Prefix,
    idx: IntArray,
    ttft_sla_ms: float | None,
    tpot_sla_ms: float | None,
) -> SimulationResult | None:
    """The replica's requests' result, as ``run_compiled`` makes it (None: it was sent none)."""
    if not len(idx):
        return None
    st, first, finish = run[0], run[2], run[3]
    return SimulationResult.of_run(
        subset(workload, idx),
        first[idx],
        finish[idx],
        preemptions=int(st[S_PREEMPTIONS]),
        steps=int(st[S_STEPS]),
        max_step_tokens=int(st[S_MAX_STEP_TOKENS]),
        ttft_sla_ms=ttft_sla_ms,
        tpot_sla_ms=tpot_sla_ms,
        prefix_hit_tokens=int(px[2][X_HIT_TOKENS]),
        prefill_tokens=int(st[S_PREFILLED]),
    )
