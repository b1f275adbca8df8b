"""A disaggregated search candidate's pools at two tensor-parallel degrees: the prefill pool at the candidate's
`tensor_parallel`, the decode pool at its `decode_tensor_parallel` (``config/decode_degrees.py``), on one GPU or two.

`plan --layout disaggregated` already chooses each pool's degree on its own: each pool's options are simulated per
degree (``disaggregated_plan.pool_options``) and a prefill pool of one degree pairs with a decode pool of another,
except where the engine moves the KV only between equal degrees (``equal_pool_tp_reason``: SGLang for a non-MLA
model with sliding-window layers). The candidate asks for one pair, so each pool's options are those of `plan` at a
scope narrowed to that pool's one degree, paired as `plan` pairs two GPUs' pools (``mixed_pools.mixed_row``: same
engine and KV dtype, the cheapest per month), the engines that refuse unequal degrees left out of the pairing. Where
every engine of the spec refuses them the candidate is pruned with the engine's reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.deploy.disaggregated import equal_pool_tp_reason
from recommender.evaluation.refusal import Refused
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, pool_options
from recommender.fleet.layouts.mixed_pools import mixed_row
from recommender.perf.catalog.links import resolve_link

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.fleet.plan_scope import PlanScope
    from recommender.perf.catalog.gpus import Accelerator

__all__ = ["paired_pools", "unequal_degree_refusals"]


def unequal_degree_refusals(performance: PerformanceEvaluator, prefill_tp: int, decode_tp: int) -> dict[str, str]:
    """Each of the evaluator's engines that cannot move this model's KV from a prefill pool at `prefill_tp` to a
    decode pool at `decode_tp`, with why (empty: the degrees are equal, or every engine can)."""
    if prefill_tp == decode_tp:
        return {}
    shape = performance.shape
    window = shape.attention is not None and bool(shape.attention.window) and shape.attention.n_window_layers > 0
    reasons = {e: equal_pool_tp_reason(e, window_layers=window, latent_kv=shape.latent_kv) for e in performance.engines}
    return {engine: reason for engine, reason in reasons.items() if reason is not None}


def paired_pools(
    performance: PerformanceEvaluator, c: Candidate, accel: Accelerator, *, link: str, scope: PlanScope
) -> DisaggregatedRow:
    """The cheapest prefill pool of `c` on `accel` at `scope` (its one degree, `c.tensor_parallel`) with a decode pool
    on `c.decode_gpu` at `c.decode_tp`; `Refused` where every engine refuses the pair of degrees."""
    refused = unequal_degree_refusals(performance, c.tensor_parallel, c.decode_tp)
    if refused and len(refused) == len(performance.engines):
        reason = "; ".join(dict.fromkeys(refused.values()))
        raise Refused("runnable", f"{reason} (prefill TP{c.tensor_parallel}, decode TP{c.decode_tp})")
    decode_accel = performance.catalog.get(c.decode_gpu)
    prefill = pool_options(performance, accel, c.precision, c.base_scheme, link=resolve_link(link, accel), scope=scope)
    decode = pool_options(
        performance,
        decode_accel,
        c.precision,
        c.base_scheme,
        link=resolve_link(link, decode_accel),
        scope=replace(scope, tensor_parallel=(c.decode_tp,)),
        decode_always=True,  # the decode pool at its own degree, whether or not a prefill pool at it serves
    )
    allowed = {key: pools for key, pools in decode.choices.items() if key[0] not in refused}
    return mixed_row(prefill, replace(decode, choices=allowed))
