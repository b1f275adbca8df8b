"""A disaggregated search candidate's pools, on one GPU or on two (`decode_hardware`), and their price.

One GPU: `plan --layout disaggregated`'s same-GPU pools (``plan_disaggregated``). Two GPU types: `plan`'s mixed pools
(``mixed_pools.mixed_row``) at the candidate's narrowed scope: the prefill GPU's pool options and the decode GPU's
(``pool_options`` with ``decode_always``: the decode GPU decodes what the other prefills), paired at one engine and
KV cache dtype, each pool at its degree (``decode_degree.py``), the decode pool at its batch cap. The KV
crosses the spec's link, which must be a network link between two GPU types (``links.mixed_link_reason``: a pair
over NVLink or PCIe is pruned with that reason). Both pools serve one checkpoint, so the decode GPU must launch the
scheme and hold the model there too (its aggregated twin's setup, ``decode_setup``).

The price (``pools_cost``): each pool's GPUs at its own GPU's hourly price per month, $/1M tokens at saturation from
each pool's GPU-hours per request at its own price; `price_per_hour_usd` the pools' mean per GPU-hour (the figure a
report shows per GPU), `price_source` each GPU's price with its source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.candidate import LOCAL_DEVICE, Candidate
from recommender.errors import BadInputError
from recommender.evaluation.refusal import Refused
from recommender.fleet.layouts.decode_degree import paired_pools
from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, plan_disaggregated
from recommender.perf.catalog.links import mixed_link_reason, resolve_link
from recommender.perf.pricing import HOURS_PER_MONTH, CostEstimate

if TYPE_CHECKING:
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.evaluation.speed import Setup
    from recommender.evaluation.two_pools import TwoPools
    from recommender.fleet.plan_scope import PlanScope
    from recommender.perf.catalog.gpus import Accelerator

__all__ = ["candidate_pools", "decode_setup", "pools_cost"]


def decode_setup(performance: PerformanceEvaluator, c: Candidate, link: str) -> Setup:
    """The decode GPU's worker at the decode degree as an aggregated replica would run it (the scheme launched
    there, the model held, the GPU priced); `Refused` with the reason where it is not, or where `link` cannot join
    the two GPU types."""
    if c.decode_hardware == LOCAL_DEVICE:
        raise Refused("runnable", "disaggregated pools are planned on catalog GPUs; the local device is one replica")
    try:
        prefill = resolve_link(link, performance.catalog.get(c.hardware))
        resolve_link(link, performance.catalog.get(c.decode_gpu))
    except BadInputError as exc:  # a GPU the catalog lacks (a study read on another machine), NVLink on a PCIe card
        raise Refused("runnable", f"decode pool on {c.decode_gpu}: {exc.problem}") from None
    reason = mixed_link_reason(prefill, c.hardware, c.decode_gpu)
    if reason is not None:
        raise Refused("runnable", reason)
    twin = Candidate(
        c.precision,
        c.method,
        c.decode_gpu,
        c.batch_size,
        c.decode_tp,
        c.max_num_batched_tokens,
        c.kv_cache_dtype,
    )
    return performance.setup(twin)


def candidate_pools(
    performance: PerformanceEvaluator, c: Candidate, accel: Accelerator, *, link: str, scope: PlanScope
) -> DisaggregatedRow:
    """The cheapest pools of `c` at `scope`: on `accel` alone at one degree, or prefill there and decode on
    `c.decode_hardware` and/or at `c.decode_tensor_parallel` (``decode_degree.paired_pools``)."""
    if not c.decode_hardware and not c.decode_tensor_parallel:
        return plan_disaggregated(
            performance, accel, c.precision, c.base_scheme, link=resolve_link(link, accel), scope=scope
        )
    return paired_pools(performance, c, accel, link=link, scope=scope)


def pools_cost(
    performance: PerformanceEvaluator, prefill: Setup, decode: Setup, pools: TwoPools, *, mixed: bool
) -> CostEstimate | None:
    """The pools' price, each pool at its own GPU's (`prefill`'s and `decode`'s setups; `mixed` False: one GPU,
    priced as one price times all the pools' GPUs); None where a GPU has no price."""
    p_hourly, d_hourly = prefill.price_per_hour_usd, decode.price_per_hour_usd
    if p_hourly is None or d_hourly is None:
        return None
    t = performance.traffic
    priced = ((p_hourly, pools.prefill), (d_hourly, pools.decode))
    per_request_usd = sum(
        hourly * pool.tensor_parallel / (pool.estimate.requests_per_s * 3600.0) for hourly, pool in priced
    )
    if mixed:
        monthly = sum(hourly * pool.estimate.gpus for hourly, pool in priced) * HOURS_PER_MONTH
        source = f"prefill GPUs {p_hourly:g} $/h ({prefill.price_source}); decode GPUs {d_hourly:g} $/h "
        source += f"({decode.price_source})"
        sets = dict.fromkeys((prefill.price_set, decode.price_set))
    else:
        monthly, source, sets = p_hourly * pools.gpus * HOURS_PER_MONTH, prefill.price_source, {prefill.price_set: None}
    return CostEstimate(
        usd_per_1m_tokens=per_request_usd / (t.prompt_tokens + t.output_tokens) * 1e6,
        replicas=pools.prefill.estimate.workers + pools.decode.estimate.workers,
        accelerators=pools.gpus,
        usd_per_month=monthly,
        price_per_hour_usd=monthly / (pools.gpus * HOURS_PER_MONTH) if mixed else p_hourly,
        price_source=source,
        price_set="; ".join(s for s in sets if s),
    )
