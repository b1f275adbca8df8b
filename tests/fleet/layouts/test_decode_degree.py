"""A search candidate whose decode pool runs its own tensor-parallel degree (`decode_tensor_parallel`): each pool
priced at its degree by `plan`'s pool options, launched at it, and pruned where the engine moves the KV only between
equal degrees.

Real parts: the shipped calibrated step costs, the continuous-batching simulator, the link and price catalogs; one
engine (two where the equal-degree rule leaves one), one batch cap, so each case simulates a handful of pools.
"""

from __future__ import annotations

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import Traffic
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.decode_degree import unequal_degree_refusals
from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.fleet.layouts.disaggregated_plan import pool_options
from recommender.fleet.layouts.mixed_pools import mixed_row
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.links import resolve_link
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.quantize import get_scheme
from tests.fleet.layouts.test_mixed_candidate import CATALOG, LLAMA_8B, SLA

#: Prefill at TP1, decode at TP2 on one H100 SXM type.
WIDER = Candidate("bf16", "baseline", "h100-sxm", 32, 1, layout="disaggregated", decode_tensor_parallel=2)
GPT_OSS = load_architecture("gpt-oss-20b")[1]  # sliding-window layers, no latent KV: SGLang's equal-degree case
SHORT = Traffic(prompt_tokens=512, output_tokens=64, requests_per_second=1)


@pytest.fixture(scope="module")
def performance() -> PerformanceEvaluator:
    """One evaluator for the module: the pools `plan` pairs are simulated once, as the search's worker does."""
    return PerformanceEvaluator(CATALOG, LLAMA_8B, SHORT, SLA, engines=("vllm",))


@pytest.fixture(scope="module")
def wider(performance: PerformanceEvaluator) -> CandidateResult:
    """The TP1 + TP2 pools with their launch (a few seconds on 2 cores)."""
    return evaluate_disaggregated(performance, WIDER, link="infiniband-ndr", model="meta-llama/Llama-3.1-8B")


def test_each_pool_runs_its_own_degree_as_plan_pairs_them(
    wider: CandidateResult, performance: PerformanceEvaluator
) -> None:
    assert wider.status == "evaluated" and wider.pools is not None and wider.cost is not None, wider.broken
    assert (wider.pools.prefill.tensor_parallel, wider.pools.decode.tensor_parallel) == (1, 2)
    accel = CATALOG.get("h100-sxm")
    link = resolve_link("infiniband-ndr", accel)
    options = [
        pool_options(
            performance,
            accel,
            "bf16",
            get_scheme("baseline"),
            link=link,
            scope=PlanScope(tensor_parallel=(tp,), batch_sizes=(32,), kv_cache_dtypes=("auto",)),
            decode_always=tp == 2,
        )
        for tp in (1, 2)
    ]
    row = mixed_row(*options)
    assert (row.prefill, row.decode) == (wider.pools.prefill, wider.pools.decode)
    gpus = wider.pools.prefill.estimate.gpus + wider.pools.decode.estimate.gpus
    assert wider.pools.decode.estimate.gpus % 2 == 0 and wider.cost.accelerators == gpus
    hourly = CATALOG.hourly_price("h100-sxm")
    assert hourly is not None
    assert wider.cost.usd_per_month == pytest.approx(hourly * gpus * HOURS_PER_MONTH, rel=1e-12)


def test_the_launch_carries_each_pools_degree_and_the_key_the_decode_degree(wider: CandidateResult) -> None:
    assert wider.key == "bf16/baseline@h100-sxmx1/bs32/disagg/decode-tp2"
    assert wider.pools is not None and wider.pools.launch is not None
    assert "--tensor-parallel-size 2" in wider.pools.launch.decode
    assert "--tensor-parallel-size 2" not in wider.pools.launch.prefill


def test_a_decode_degree_wider_than_the_node_is_pruned(performance: PerformanceEvaluator) -> None:
    c = Candidate("bf16", "baseline", "h100-sxm", 32, 1, layout="disaggregated", decode_tensor_parallel=16)
    refused = evaluate_disaggregated(performance, c, link="infiniband-ndr")
    assert refused.status == "pruned" and refused.broken[0].startswith("runnable"), refused.broken


def test_sglang_prunes_unequal_degrees_of_a_sliding_window_model_with_its_reason() -> None:
    sglang = PerformanceEvaluator(CATALOG, GPT_OSS, SHORT, SLA, engines=("sglang",))
    c = Candidate("bf16", "baseline", "h100-sxm", 32, 1, layout="disaggregated", decode_tensor_parallel=2)
    refused = evaluate_disaggregated(sglang, c, link="infiniband-ndr")
    assert refused.status == "pruned" and refused.pools is None
    assert refused.broken == [
        "runnable: SGLang transfers the KV of a sliding-window hybrid model only between equal TP sizes "
        "(prefill TP1, decode TP2)"
    ]
    assert unequal_degree_refusals(sglang, 2, 2) == {}  # equal degrees: nothing refused
    llama = PerformanceEvaluator(CATALOG, LLAMA_8B, SHORT, SLA, engines=("sglang", "vllm"))
    assert unequal_degree_refusals(llama, 1, 2) == {}  # no window layers: SGLang pairs any degrees


def test_an_engine_that_pairs_unequal_degrees_still_serves_the_candidate() -> None:
    both = PerformanceEvaluator(CATALOG, GPT_OSS, SHORT, SLA, engines=("sglang", "vllm"))
    c = Candidate("bf16", "baseline", "h100-sxm", 32, 1, layout="disaggregated", decode_tensor_parallel=2)
    assert set(unequal_degree_refusals(both, 1, 2)) == {"sglang"}
    result = evaluate_disaggregated(both, c, link="infiniband-ndr")
    assert result.status == "evaluated" and result.pools is not None, result.broken
    assert result.pools.engine == "vllm"
    assert (result.pools.prefill.tensor_parallel, result.pools.decode.tensor_parallel) == (1, 2)
