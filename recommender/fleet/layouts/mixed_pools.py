"""Disaggregated pools on two GPU types: prefill on one GPU (compute for long prompts), decode on another (memory
bandwidth and capacity for the batch), each pool priced at its own GPU's hourly price.

Each GPU's pool choices come from ``disaggregated_plan.pool_options`` (simulated once per GPU and precision);
a mixed row pairs the prefill pools of one GPU with the decode pools of another at the same engine, KV cache
dtype and (where the engine needs it) the same tensor-parallel degree, and keeps the cheapest per month.
Both pools serve one checkpoint (one quantization scheme): the KV moves as it is cached and decoded.

Two GPU types are never in one NVLink domain (an NVLink/NVSwitch domain is one system of one GPU type) nor, as
deployed, on one PCIe host, so a mixed pair's KV crosses a network link (``scope: cluster`` in the link
catalog): a node link named for a mixed pair is bad input naming ``--link``. The rule (``mixed_link_reason``,
``check_mixed_link``) lives with the link catalog, where the spec's checks read it too.
"""

from __future__ import annotations

import math
from dataclasses import replace

from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow, PoolOptions, pooled_row
from recommender.perf.catalog.links import check_mixed_link, mixed_link_reason

__all__ = ["check_mixed_link", "mixed_cost", "mixed_link_reason", "mixed_row"]


def mixed_row(prefill: PoolOptions, decode: PoolOptions) -> DisaggregatedRow:
    """Prefill pools of `prefill`'s GPU with decode pools of `decode`'s, the cheapest per month (then fewest GPUs);
    a row with a `note` where the link, the schemes or the SLA rule the pair out."""
    p_key, d_key = prefill.accel.key, decode.accel.key
    empty = DisaggregatedRow(
        p_key,
        prefill.precision,
        prefill.method.name,
        prefill.link.name,
        prefill_hardware=p_key,
        decode_hardware=d_key,
    )
    refused = mixed_link_reason(prefill.link, p_key, d_key)
    if refused is not None:
        return replace(empty, note=f"refused: {refused}")
    if prefill.method.name != decode.method.name:
        note = f"the pools would serve different schemes ({prefill.method.name}, {decode.method.name})"
        return replace(empty, note=note)
    best: DisaggregatedRow | None = None
    for key, (pools, prefill_pool, _) in prefill.choices.items():
        other = decode.choices.get(key)
        if prefill_pool is None or other is None or other[2] is None:
            continue
        row = pooled_row(pools, prefill.link, prefill_pool, other[2], decode_accel=decode.accel)
        if (row.transfer_ms or 0.0) > pools.budgets.transfer_ms * (1 + 1e-9):
            continue  # the other GPU's decode pool holds less of the shared prefixes than the TTFT split assumed
        if best is None or mixed_cost(row) < mixed_cost(best):
            best = row
    if best is None:
        note = f"no prefill pool on {p_key} with a decode pool on {d_key} meets the SLA (or fits)"
        return replace(empty, note=note)
    return best


def mixed_cost(row: DisaggregatedRow) -> tuple[float, float]:
    """$/month, then GPUs (infinite where unknown): what orders pools on two GPU types."""
    return (
        math.inf if row.usd_per_month is None else row.usd_per_month,
        math.inf if row.gpus is None else row.gpus,
    )
