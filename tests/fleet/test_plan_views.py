"""Which comparison a plan shows: one decision (``fleet/plan_views.py``) for `plan`'s flags and a spec's space, and
the request every planner takes (``fleet/plan_request.py``). Pure: nothing is simulated."""

from __future__ import annotations

import dataclasses

import pytest

from recommender.config.space import Space
from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.layouts.pool_workers import ExpertParallelPools
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.fleet.plan_views import Compared, PlanViews, views_of_flags, views_of_space
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog


def _space(**changes: object) -> Space:
    base = {"schemes": {"fp8": ["fp8-dynamic"]}, "hardware": ["h200"], "tensor_parallel": [8]}
    return Space.model_validate({**base, **changes})


def test_plain_flags_ask_for_no_comparison() -> None:
    views = views_of_flags(["aggregated"], expert_parallel=False, skew=0.0, redundant_experts=0, decode_hardware=None)
    assert views == PlanViews() and not views.any


def test_expert_parallel_alone_compares_tensor_and_expert_parallel_replicas_at_the_plans_degrees() -> None:
    views = views_of_flags(["aggregated"], expert_parallel=True, skew=1.0, redundant_experts=32, decode_hardware=None)
    assert views.parallelism and not views.layouts and views.parallel_degrees is None
    assert (views.skew, views.redundant_experts) == (1.0, 32)


def test_disaggregated_with_expert_parallel_flags_show_one_table_the_layouts_with_expert_parallel_pools() -> None:
    views = views_of_flags(
        ["aggregated", "disaggregated"],
        expert_parallel=True,
        skew=0.5,
        redundant_experts=8,
        decode_hardware=["h200"],
    )
    assert views.layouts and not views.parallelism  # the command line prints one comparison
    assert views.pools == ExpertParallelPools(skew=0.5, redundant_experts=8) and views.decode_hardware == ["h200"]
    tensor_pools = views_of_flags(
        ["disaggregated"], expert_parallel=False, skew=0.0, redundant_experts=0, decode_hardware=None
    )
    assert tensor_pools.layouts and tensor_pools.pools is None


def test_a_space_shows_every_comparison_it_searches_at_its_own_degrees() -> None:
    space = _space(layout=["aggregated", "disaggregated"], expert_parallel=[1, 8], expert_skew=1.2)
    views = views_of_space(space)
    assert views.layouts and views.parallelism  # a spec's plan shows both
    assert views.layout_degrees == (8,) and views.parallel_degrees == (8,)
    assert views.pools == ExpertParallelPools(1.2, 0, degrees=(8,)) and views.skew == 1.2


@pytest.mark.parametrize(
    ("changes", "layouts", "parallelism"),
    [({}, False, False), ({"expert_parallel": [1]}, False, False), ({"layout": ["disaggregated"]}, True, False)],
)
def test_a_space_without_disaggregation_or_an_expert_parallel_degree_above_one_compares_less(
    changes: dict[str, object], layouts: bool, parallelism: bool
) -> None:
    views = views_of_space(_space(**changes))
    assert (views.layouts, views.parallelism, views.pools) == (layouts, parallelism, None)


def test_nothing_compared_has_no_rows_to_refuse() -> None:
    assert Compared().rows == [] and Compared().comparisons == []


def test_a_request_is_frozen_and_counts_its_pairs_for_a_progress_bar() -> None:
    heard: list[str] = []
    request = PlanRequest(
        shape=load_architecture("llama-3.1-8b")[1],
        catalog=load_catalog(),
        hardware=("h100-sxm", "h200"),
        precisions=("bf16", "fp8", "int4"),
        traffic=Traffic(prompt_tokens=512, output_tokens=256, requests_per_second=1),
        sla=LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50),
        on_row=heard.append,
    )
    assert request.pairs == 6 and request.scope == PlanScope() and request.link == "infiniband-ndr"
    request.heard("h200", "fp8")
    assert heard == ["h200/fp8"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.link = "nvlink"  # type: ignore[misc]
