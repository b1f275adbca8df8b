"""A search candidate laid out as disaggregated pools: priced by the same planner as `plan --layout disaggregated`.

The candidate names one scheme, GPU, tensor-parallel degree, batch cap and KV cache dtype; both pools run that
degree (the pools of `plan` at a narrowed scope: ``PlanScope`` of that one degree, cap and KV dtype) unless
`decode_tensor_parallel` gives the decode pool its own (``decode_degree.py``), the decode pool that cap, and the
workers of each pool follow from the traffic (``plan_disaggregated``). The result is a
`CandidateResult` like an aggregated candidate's, so the decision ranks both layouts by $/month on one table:

- serving: the user's P99s (TTFT = prefill P99 + KV transfer + decode wait, TPOT = the decode pool's, each with its
  upper end), the deployment's capacity as sized (the pool that saturates first), P50/P95 not simulated (NaN);
- cost: the pools' GPUs at the GPU's price, ``replicas`` the workers of both pools, $/1M tokens at saturation
  (each pool's GPU-hours per request, summed); with `decode_hardware`, the decode pool runs that GPU, each pool at
  its own GPU's price (``mixed_candidate.py``);
- pools: both pools, the KV transfer and their launch (``with_launch``).

Its quality is its scheme's: the evaluator measures a scheme once, whatever the layout.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.config.candidate import AGGREGATED, Candidate
from recommender.config.spec import LOCAL_DEVICE
from recommender.errors import BadInputError
from recommender.evaluation.refusal import Refused
from recommender.evaluation.speed import Performance, speed_result
from recommender.evaluation.two_pools import TwoPools
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow
from recommender.fleet.layouts.disaggregated_row_launch import with_launch
from recommender.fleet.layouts.mixed_candidate import candidate_pools, decode_setup, pools_cost
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.links import resolve_link
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.serving import ServingEstimate
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.evaluation.speed import Setup

__all__ = ["evaluate_disaggregated"]


def evaluate_disaggregated(
    performance: PerformanceEvaluator, c: Candidate, *, link: str, model: str = ""
) -> CandidateResult:
    """`c` (layout disaggregated) judged on speed, memory and cost, its quality still unknown; pruned with the
    reason where its pools cannot run, fit or meet the SLA. `model`: what the pools' commands serve ('' none)."""
    try:
        setup = _checked(performance, c, link)
        decode_at = setup  # the decode pool's worker: another GPU or degree is checked on its own twin
        if c.decode_hardware or c.decode_tensor_parallel:
            decode_at = decode_setup(performance, c, link)  # ``mixed_candidate.py``
        accel = performance.catalog.get(c.hardware)
        scope = PlanScope(
            batch_sizes=(c.batch_size,), tensor_parallel=(c.tensor_parallel,), kv_cache_dtypes=(c.kv_cache_dtype,)
        )
        row = candidate_pools(performance, c, accel, link=link, scope=scope)
        if row.prefill is None or row.decode is None:
            degrees = f"TP{c.tensor_parallel}" + (f", decode TP{c.decode_tp}" if c.decode_tensor_parallel else "")
            raise Refused("tpot", f"{row.note} ({degrees}, batch {c.batch_size}, over {link})")
    except Refused as refused:
        return refused.result(c)
    prefill, decode = row.prefill, row.decode
    assert prefill is not None and decode is not None  # refused above otherwise
    if model:
        decode_accel = performance.catalog.get(c.decode_gpu)
        row = with_launch(
            row, model=model, accel=accel, max_model_len=performance.traffic.max_model_len, decode_accel=decode_accel
        )
    pools = TwoPools(row.engine, row.kv_cache_dtype, row.link, row.transfer_ms or 0.0, prefill, decode, row.launch)
    serving = _serving(performance, row, pools)
    chosen = replace(setup, engine=row.engine)
    cost = pools_cost(performance, setup, decode_at, pools, mixed=bool(c.decode_hardware))
    result = speed_result(c, Performance(chosen, serving, cost), performance.sla)
    return replace(result, pools=pools)


def _checked(performance: PerformanceEvaluator, c: Candidate, link: str) -> Setup:
    """The aggregated twin's setup (what each pool's worker runs: scheme, GPU, degree, cap, KV dtype); `Refused`
    where the pools cannot run or fit, or the layout is not modelled for `c`."""
    if c.hardware == LOCAL_DEVICE:
        raise Refused("runnable", "disaggregated pools are planned on catalog GPUs; the local device is one replica")
    if c.speculative != NONE:
        raise Refused("runnable", "speculative decoding is not modelled in disaggregated pools")
    setup = performance.setup(replace(c, layout=AGGREGATED, decode_hardware="", decode_tensor_parallel=0))
    try:
        resolve_link(link, performance.catalog.get(c.hardware))
    except BadInputError as exc:  # the spec's link checked per GPU: NVLink on a PCIe card
        raise Refused("runnable", f"link {exc.problem}") from None
    return setup


def _serving(performance: PerformanceEvaluator, row: DisaggregatedRow, pools: TwoPools) -> ServingEstimate:
    assert row.ttft_p99_ms is not None and row.tpot_p99_ms is not None and row.provenance is not None
    p, d = pools.prefill.estimate, pools.decode.estimate
    capacity = min(p.workers * p.requests_per_s, d.workers * d.requests_per_s)
    t = performance.traffic
    return ServingEstimate(
        ttft_ms=Percentiles(math.nan, math.nan, row.ttft_p99_ms),
        tpot_ms=Percentiles(math.nan, math.nan, row.tpot_p99_ms),
        requests_per_s=capacity,
        tokens_per_s=capacity * (t.prompt_tokens + t.output_tokens),
        load_per_replica_rps=t.requests_per_second,
        provenance=row.provenance,
        engine=row.engine,
        ttft_p99_high_ms=row.ttft_p99_high_ms,
        tpot_p99_high_ms=row.tpot_p99_high_ms,
        confidence=performance.sla.confidence,
    )
