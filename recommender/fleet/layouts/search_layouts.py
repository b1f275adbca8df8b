"""The search's answer to "does disaggregation pay here": the winner's scheme and GPU in both layouts, side by side.

`plan --layout aggregated --layout disaggregated` compares a GPU's best aggregated row with its best pools and says
why the winner wins (``layout_compare.compare_layouts``). A search that sampled both layouts holds the same two
results as candidates; this picks, for the recommended scheme and GPU, each layout's cheapest candidate that meets
the latency limits (else its cheapest evaluated one), and asks the same function, so the two commands give one
reason in one wording. A winner whose pools run two GPU types (`decode_hardware`) is compared with the aggregated
candidate of its prefill GPU by $/month, as `plan` compares its mixed pools (``layout_compare.compare_mixed``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from recommender.evaluation.two_pools import LayoutVerdict
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow
from recommender.fleet.layouts.layout_compare import LayoutComparison, compare_layouts, compare_mixed
from recommender.fleet.plan_row import PlanRow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from recommender.config.workload import LatencySLA
    from recommender.evaluation.candidate import CandidateResult

__all__ = ["layout_verdict"]


def _best(results: Sequence[CandidateResult], layout: str, like: CandidateResult) -> CandidateResult | None:
    """The cheapest evaluated candidate of `layout` on `like`'s scheme and GPU (pools: on `like`'s decode GPU too,
    one GPU where `like` is aggregated), those within the latency limits first."""
    c = like.candidate
    same = [
        r
        for r in results
        if r.candidate.layout == layout
        and r.status == "evaluated"
        and (r.cost is not None or layout == "aggregated")
        and (r.candidate.method, r.candidate.hardware, r.candidate.kv_cache_dtype)
        == (c.method, c.hardware, c.kv_cache_dtype)
        and (layout == "aggregated" or r.candidate.decode_gpu == c.decode_gpu)
    ]
    if not same:
        return None
    return min(same, key=lambda r: (r.constraints.ttft > 0 or r.constraints.tpot > 0, r.usd_per_month or math.inf))


def _plan_row(result: CandidateResult, target_rps: float) -> PlanRow:
    c = result.candidate
    return PlanRow(c.hardware, c.precision, c.method, result, target_rps, None, "", result.quality_verdict, "")


def _pools_row(result: CandidateResult) -> DisaggregatedRow:
    pools, c, cost, serving = result.pools, result.candidate, result.cost, result.serving
    assert pools is not None and cost is not None and serving is not None
    return DisaggregatedRow(
        c.hardware,
        c.precision,
        c.method,
        pools.link,
        engine=pools.engine,
        kv_cache_dtype=pools.kv_cache_dtype,
        prefill=pools.prefill,
        decode=pools.decode,
        transfer_ms=pools.transfer_ms,
        gpus=pools.gpus,
        usd_per_month=cost.usd_per_month,
        ttft_p99_ms=serving.ttft_ms.p99,
        ttft_p99_high_ms=serving.ttft_p99_high_ms,
        tpot_p99_ms=serving.tpot_ms.p99,
        tpot_p99_high_ms=serving.tpot_p99_high_ms,
        provenance=serving.provenance,
        launch=pools.launch,
        prefill_hardware=c.hardware,
        decode_hardware=c.decode_gpu,
    )


def layout_verdict(
    results: Sequence[CandidateResult], winner: CandidateResult | None, *, target_rps: float, sla: LatencySLA
) -> LayoutVerdict | None:
    """Both layouts of the winner's scheme and GPU and why the cheaper wins; None when the search did not price
    both (an aggregated-only space, or no evaluated candidate of one layout there)."""
    if winner is None:
        return None
    agg, dis = _best(results, "aggregated", winner), _best(results, "disaggregated", winner)
    if agg is None or dis is None:
        return None
    row = _plan_row(agg, target_rps)
    pools = _pools_row(dis)
    if pools.mixed:  # two GPU types: by price, not GPU count
        c = agg.candidate
        alone = DisaggregatedRow(c.hardware, c.precision, c.method, pools.link)
        got = compare_mixed([LayoutComparison(c.hardware, c.precision, row, alone, "", "")], pools)
    else:
        got = compare_layouts(row, pools, target_rps=target_rps, tpot_limit_ms=sla.tpot_p99_ms)
    return LayoutVerdict(
        agg.key,
        dis.key,
        None if agg.cost is None else agg.cost.accelerators,
        pools.gpus,
        agg.usd_per_month,
        dis.usd_per_month,
        got.winner,
        got.reason,
    )
