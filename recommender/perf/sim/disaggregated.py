"""Disaggregated serving: a prefill pool and a decode pool, each simulated on the user's traffic, the KV moved between.

The serving stacks that split prefill from decode (vLLM's NixlConnector under llm-d or Dynamo, SGLang's
``--disaggregation-mode``, TensorRT-LLM's disaggregated serving) run a request in three legs:

1. a prefill worker computes the prompt (vLLM's proxy sends it with ``max_tokens=1``): simulated here as the
   user's traffic with one output token on the prefill pool's own batching, so its P99 TTFT is the prefill
   leg's, queueing and chunking included;
2. the prompt's KV moves to a decode worker (``perf/model/kv_transfer.py``: latency + the bytes its prefix
   cache lacks over the link), taken at the longest prompt the traffic draws, less the shared prefix the decode
   pool's simulated cache holds where the engine skips sending it (``transfer_credit.py``, from this pool's
   ``prefix_hit_rate``);
3. the decode worker, its KV blocks for the whole prompt reserved on admission, emits every output token:
   simulated as the user's traffic on the decode pool's batching with the prompt's computation free
   (``DecodeOnlyStepCost``: the admitting step is a decode step of the new sequence over its transferred
   prompt) and no prefill ever interrupting the decode batch (``mixed_prefill`` on, a token budget above
   any prompt). The admitting step emits the first decode token: counting the output's first token twice
   is one decode step conservative.

The user's P99 TTFT is bounded by the sum of the legs' P99s (prefill TTFT + transfer + the decode side's
wait for room and its first step); P99 TPOT is the decode pool's. Each pool's capacity is the highest rate
whose simulated P99s meet its share of the TTFT (a `split` of what the transfer leaves) and, for decode,
the TPOT limit, with every step at the upper end of its interval as for an aggregated replica; the pool
sizes follow from the target rate, so the prefill:decode ratio is the traffic's, not a rule. Pools are
independent given the split, so each pool's configuration is chosen on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from recommender.perf.sim.capacity import max_rate_within_sla, replicas_needed
from recommender.perf.sim.decode_only import DecodeOnlyStepCost
from recommender.perf.sim.serving import SIMULATED_REQUESTS
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import make_workload
from recommender.perf.step.cost import PrefillChunks
from recommender.provenance import Provenance  # at run time: the rows' types are resolved when serialized

if TYPE_CHECKING:
    from recommender.perf.sim.results import SimulationResult
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.serving import TrafficLoad
    from recommender.perf.step.cost import StepCostModel

__all__ = ["DecodeOnlyStepCost", "PoolEstimate", "PoolSetup", "decode_pool", "prefill_pool", "pool_config"]

_NO_PREFILL = PrefillChunks()


@dataclass(frozen=True, slots=True)
class PoolSetup:
    """One pool's worker: its step costs (point and the SLA check's upper end), batching, GPUs and fixed TTFT."""

    point: StepCostModel
    upper: StepCostModel
    config: SchedulerConfig
    gpus_per_worker: int
    #: The TTFT every request carries outside the steps (the request's way through the engine), ms.
    ttft_offset_ms: float = 0.0
    #: Attention ranks one worker runs, each with its own sequences and the same steps (an expert-parallel worker
    #: with data-parallel attention); the steps are one rank's and the worker carries `ranks` times its rate.
    ranks: int = 1


@dataclass(frozen=True, slots=True)
class PoolEstimate:
    """One pool at the target traffic: its capacity per worker within its limits and its P99s at its load."""

    requests_per_s: float
    workers: int
    gpus: int
    ttft_p99_ms: float
    tpot_p99_ms: float
    ttft_p99_high_ms: float
    tpot_p99_high_ms: float
    load_per_worker_rps: float
    provenance: Provenance
    #: Share of prompt tokens the worker's prefix cache held at its load, steps at their upper end (None: no prompt
    #: shares a prefix, or a prefill pool). What the KV transfer credits (``transfer_credit.py``); not serialized
    #: (the row's provenance says what it saved).
    prefix_hit_rate: Annotated[float | None, Field(exclude=True)] = field(default=None, compare=False)

    @property
    def serves(self) -> bool:
        return self.requests_per_s > 0


def pool_config(config: SchedulerConfig, *, decode: bool, longest_prompt: int) -> SchedulerConfig:
    """A pool's batching: a decode worker admits a transferred prompt whole beside its running batch (no chunking
    of work it does not compute, never a prefill-only step); a prefill worker keeps its engine's."""
    if not decode:
        return config
    budget = max(config.max_num_batched_tokens, longest_prompt + config.max_num_seqs)
    return replace(config, max_num_batched_tokens=budget, mixed_prefill=True, chunked_prefill=True)


def _unserved(provenance: Provenance) -> PoolEstimate:
    return PoolEstimate(0.0, 0, 0, math.nan, math.nan, math.nan, math.nan, 0.0, provenance)


def _at_load(
    cost: StepCostModel, traffic: TrafficLoad, output: int | None, rate: float, config: SchedulerConfig
) -> SimulationResult:
    workload = make_workload(
        prompt=traffic.prompt,
        output=traffic.output if output is None else output,
        n_requests=SIMULATED_REQUESTS,
        rate=rate,
        **traffic.sharing,
    )
    return simulate(cost, workload, config)


def _pool(
    pool: PoolSetup,
    traffic: TrafficLoad,
    *,
    ttft_budget_ms: float,
    tpot_limit_ms: float,
    decode: bool,
    longest_prompt: int,
    label: str,
) -> PoolEstimate:
    point = DecodeOnlyStepCost(pool.point) if decode else pool.point
    upper = DecodeOnlyStepCost(pool.upper) if decode else pool.upper
    config = pool_config(pool.config, decode=decode, longest_prompt=longest_prompt)
    output = None if decode else 1
    provenance = upper.provenance.extended(label)
    budget = ttft_budget_ms - pool.ttft_offset_ms
    if budget <= 0:
        return _unserved(provenance)
    search = max_rate_within_sla(
        upper,
        config,
        prompt=traffic.prompt,
        output=traffic.output if decode else 1,
        ttft_p99_ms=budget,
        tpot_p99_ms=tpot_limit_ms,
        n_requests=SIMULATED_REQUESTS,
        **traffic.sharing,
    )
    if search.rate_per_s <= 0:
        return _unserved(provenance)
    per_worker = search.rate_per_s * pool.ranks
    workers = replicas_needed(traffic.requests_per_second, per_worker)
    load = traffic.requests_per_second / (workers * pool.ranks)  # what each rank carries
    high = _at_load(upper, traffic, output, load, config)
    low = _at_load(point, traffic, output, load, config)
    return PoolEstimate(
        requests_per_s=per_worker,
        workers=workers,
        gpus=workers * pool.gpus_per_worker,
        ttft_p99_ms=low.ttft_ms.p99 + pool.ttft_offset_ms,
        tpot_p99_ms=low.tpot_ms.p99,
        ttft_p99_high_ms=high.ttft_ms.p99 + pool.ttft_offset_ms,
        tpot_p99_high_ms=high.tpot_ms.p99,
        load_per_worker_rps=load * pool.ranks,
        provenance=provenance,
        prefix_hit_rate=high.prefix_hit_rate if decode and traffic.shares_prompts else None,
    )


def prefill_pool(pool: PoolSetup, traffic: TrafficLoad, *, ttft_budget_ms: float) -> PoolEstimate:
    """The prefill pool: workers whose P99 TTFT (one output token, the prefill worker's whole job) meets its budget."""
    return _pool(
        pool,
        traffic,
        ttft_budget_ms=ttft_budget_ms,
        tpot_limit_ms=math.inf,
        decode=False,
        longest_prompt=0,
        label="prefill pool: prompts only (max_tokens 1), the KV handed on",
    )


def decode_pool(
    pool: PoolSetup, traffic: TrafficLoad, *, ttft_budget_ms: float, tpot_limit_ms: float, longest_prompt: int
) -> PoolEstimate:
    """The decode pool: workers whose P99 TPOT meets the limit and whose P99 wait for a transferred request's first
    decode step (room for its KV, then one step) meets its share of the TTFT."""
    return _pool(
        pool,
        traffic,
        ttft_budget_ms=ttft_budget_ms,
        tpot_limit_ms=tpot_limit_ms,
        decode=True,
        longest_prompt=longest_prompt,
        label="decode pool: transferred KV reserved on admission, no prefill interrupting the batch",
    )
