"""Prefill and decode pools on two GPU types: each pool priced at its own GPU, the pair compared by price, and a node
link (NVLink, PCIe) refused between two GPU types.

Real parts: the shipped calibrated step costs, the continuous-batching simulator, the link and price catalogs;
the scopes are narrowed (one degree, a few batch caps, one engine) so each case simulates a handful of pools.
"""

from __future__ import annotations

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.disaggregated_plan import PoolOptions, pool_options, same_gpu_row
from recommender.fleet.layouts.layout_compare import _pairs, plan_layouts
from recommender.fleet.layouts.mixed_pools import mixed_row
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.quantize import get_scheme
from recommender.serialization import list_to_data

CATALOG = load_catalog()
LLAMA_8B = load_architecture("llama-3.1-8b")[1]
LONG_PROMPTS = Traffic(prompt_tokens=8000, output_tokens=256, requests_per_second=40)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=40)


def _options(
    hardware: str,
    traffic: Traffic,
    *,
    precision: str = "fp8",
    scheme: str = "fp8-dynamic",
    caps: tuple[int, ...] = (16, 32),
) -> PoolOptions:
    accel = CATALOG.get(hardware)
    performance = PerformanceEvaluator(CATALOG, LLAMA_8B, traffic, SLA, engines=("vllm",), require_price=False)
    scope = PlanScope(tensor_parallel=(1,), batch_sizes=caps, kv_cache_dtypes=("auto",))
    return pool_options(
        performance,
        accel,
        precision,
        get_scheme(scheme),
        link=resolve_link("infiniband-ndr", accel),
        scope=scope,
        decode_always=True,
    )


@pytest.fixture(scope="module")
def long_prompt_pools() -> dict[str, PoolOptions]:
    """8,000-token prompts, 256-token answers at 40 req/s, 16-bit: each GPU's pools (about 5 s on 2 cores)."""
    return {
        hw: _options(hw, LONG_PROMPTS, precision="bf16", scheme="baseline", caps=(16, 32, 64))
        for hw in ("h100-sxm", "h200")
    }


def test_prefill_on_h100_with_decode_on_h200_costs_less_than_either_gpu_alone(
    long_prompt_pools: dict[str, PoolOptions],
) -> None:
    # Prefill of 8,000-token prompts is compute: the H100 SXM has the H200's compute at 3.49 against 4.59 $/h.
    # Decode of 8,256-token contexts is memory: 64 of them fit the H200's 141 GB (5 GPUs), 32 the H100's 80 GB
    # (10 GPUs). Each GPU takes the pool it is cheapest at.
    h100, h200 = long_prompt_pools["h100-sxm"], long_prompt_pools["h200"]
    d, alone = mixed_row(h100, h200), [same_gpu_row(h100), same_gpu_row(h200)]
    assert (d.hardware, d.prefill_hardware, d.decode_hardware, d.link) == (
        "h100-sxm",
        "h100-sxm",
        "h200",
        "infiniband-ndr",
    )
    assert d.mixed and not alone[0].mixed
    assert d.prefill == alone[0].prefill and d.decode == alone[1].decode  # each GPU's own choice, as it chose alone
    assert d.usd_per_month is not None
    for same in alone:
        assert same.usd_per_month is not None and d.usd_per_month < same.usd_per_month
    assert d.tpot_p99_high_ms is not None and d.tpot_p99_high_ms <= 40
    assert d.ttft_p99_high_ms is not None and d.ttft_p99_high_ms <= 2000
    assert d.provenance is not None and "prefill on h100-sxm, decode on h200" in d.provenance.detail


def test_a_mixed_row_is_each_pool_at_its_own_gpus_price_and_carries_both_gpus(
    long_prompt_pools: dict[str, PoolOptions],
) -> None:
    d = mixed_row(long_prompt_pools["h100-sxm"], long_prompt_pools["h200"])
    assert d.prefill is not None and d.decode is not None and d.usd_per_month is not None
    p, q = d.prefill.estimate.gpus, d.decode.estimate.gpus
    h100, h200 = (CATALOG.hourly_price(k) for k in ("h100-sxm", "h200"))
    assert d.gpus == p + q
    assert d.usd_per_month == pytest.approx((p * h100 + q * h200) * HOURS_PER_MONTH, rel=1e-12)
    [mixed, same] = list_to_data([d, same_gpu_row(long_prompt_pools["h100-sxm"])])
    assert (mixed["prefill_hardware"], mixed["decode_hardware"]) == ("h100-sxm", "h200")
    assert same["hardware"] == same["prefill_hardware"] == same["decode_hardware"] == "h100-sxm"


@pytest.mark.slow  # about 20 s on 2 cores: both GPUs' aggregated plans, then the pools
def test_the_layout_comparison_picks_the_mixed_pools_naming_both_gpus() -> None:
    found = plan_layouts(
        PlanRequest(
            shape=LLAMA_8B,
            catalog=CATALOG,
            hardware=("h100-sxm", "h200"),
            precisions=("bf16",),
            traffic=LONG_PROMPTS,
            sla=SLA,
            link="infiniband-ndr",
            scope=PlanScope(tensor_parallel=(1,), batch_sizes=(16, 32, 64), kv_cache_dtypes=("auto",)),
            engines=("vllm",),
            model="meta-llama/Llama-3.1-8B-Instruct",
        )
    )
    h100, h200, mixed = found
    d = mixed.disaggregated
    assert mixed.hardware == "h100-sxm+h200" and mixed.winner == "disaggregated", mixed.reason
    assert mixed.reason.startswith("mixed pools save") and "on h100-sxm" in mixed.reason and "on h200" in mixed.reason
    assert d.usd_per_month is not None
    for same in (h100, h200):
        assert same.aggregated.usd_per_month is not None and d.usd_per_month < same.aggregated.usd_per_month
        assert same.disaggregated.usd_per_month is not None and d.usd_per_month < same.disaggregated.usd_per_month
    assert d.launch is not None and any("h100-sxm" in n and "h200" in n for n in d.launch.notes)


def test_decode_on_l40s_is_priced_at_the_l40s_price_and_does_not_pay_where_its_bandwidth_is_too_low() -> None:
    # 8,000 + 64 tokens at 20 req/s: one H100 SXM decodes the whole load at 3.49 $/h; the L40S (864 GB/s against
    # 3,350) needs 9 workers at 1.09 $/h for the same load: cheaper per GPU, dearer per token decoded. The mixed row
    # is honest about it rather than forced to win.
    traffic = Traffic(prompt_tokens=8000, output_tokens=64, requests_per_second=20)
    h100, l40s = _options("h100-sxm", traffic), _options("l40s", traffic)
    row = mixed_row(h100, l40s)
    assert row.prefill is not None and row.decode is not None and row.usd_per_month is not None, row.note
    p, q = row.prefill.estimate.gpus, row.decode.estimate.gpus
    expected = (p * CATALOG.hourly_price("h100-sxm") + q * CATALOG.hourly_price("l40s")) * HOURS_PER_MONTH
    assert row.usd_per_month == pytest.approx(expected, rel=1e-12)
    alone = same_gpu_row(h100)
    assert alone.usd_per_month is not None and alone.decode is not None
    assert q > alone.decode.estimate.gpus and row.usd_per_month > alone.usd_per_month


def test_a_node_link_never_joins_two_gpu_types() -> None:
    h100, h200 = CATALOG.get("h100-sxm"), CATALOG.get("h200")
    assert _pairs([h100, h200], None, "infiniband-ndr") == [("h100-sxm", "h200"), ("h200", "h100-sxm")]
    assert _pairs([h100, h200], None, "nvlink") == []  # only the same-GPU rows, as before mixed pools
    with pytest.raises(BadInputError) as info:  # asked for by --decode-hardware: refused naming the link
        _pairs([h100], [h200], "nvlink")
    assert info.value.field == "--link" and "two GPU types" in str(info.value) and "\n" not in str(info.value)
    nvlink = resolve_link("nvlink", h100)
    empty = PoolOptions(h100, "fp8", get_scheme("fp8-dynamic"), nvlink, {})
    refused = mixed_row(empty, PoolOptions(h200, "fp8", get_scheme("fp8-dynamic"), nvlink, {}))
    assert refused.note.startswith("refused: nvlink cannot join") and refused.usd_per_month is None
