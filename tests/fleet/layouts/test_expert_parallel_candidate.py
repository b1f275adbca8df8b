"""An expert-parallel search candidate is priced by `plan --expert-parallel`'s planner (DeepSeek-V3 FP8 on H200:
its replicas of EP 8, fewer GPUs than tensor parallelism's 64, docs/moe-and-disaggregation.md), and the spec's EP
degrees are checked against the model's experts before anything runs."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic, load_spec
from recommender.errors import BadInputError
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.expert_parallel_candidate import (
    ExpertRouting,
    evaluate_expert_parallel,
    expert_parallel_winner_launch,
)
from recommender.fleet.layouts.expert_parallel_plan import plan_expert_parallel
from recommender.fleet.layouts.layout_candidate import evaluate_layout
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme
from recommender.study.layout_checks import check_layouts
from tests.conftest import write_spec

DEEPSEEK_V3 = load_architecture("deepseek-v3")[1]
LLAMA_8B = load_architecture("llama-3.1-8b")[1]


@pytest.mark.slow  # 40 s: the candidate and plan's own row each simulate EP 8 to steady state
def test_deepseek_v3_at_ep8_is_priced_as_plan_prices_it() -> None:
    traffic = Traffic(prompt_tokens=1000, output_tokens=1000, requests_per_second=20)
    sla = LatencySLA(ttft_p99_ms=3000, tpot_p99_ms=80)
    catalog = load_catalog()
    performance = PerformanceEvaluator(catalog, DEEPSEEK_V3, traffic, sla, engines=("sglang",))
    c = Candidate("fp8", "fp8-dynamic", "h200", 64, expert_parallel=8)
    result = evaluate_layout(performance, c, link="infiniband-ndr")
    assert result.status == "evaluated" and not result.broken, result.broken
    # `plan --expert-parallel`'s own row at that degree, cap and KV dtype (InfiniBand NDR is a network link: one node).
    scope = PlanScope(batch_sizes=(64,), tensor_parallel=(8,), kv_cache_dtypes=("auto",))
    planned = plan_expert_parallel(performance, catalog.get("h200"), get_scheme("fp8-dynamic"), scope=scope)
    assert planned.replicas is not None and planned.gpus == 8 * planned.replicas
    assert result.cost is not None and (result.cost.replicas, result.cost.accelerators) == (
        planned.replicas,
        planned.gpus,
    )
    assert planned.gpus < 64  # tensor parallelism needs 8 x TP8 (docs/moe-and-disaggregation.md)
    assert result.serving is not None and result.serving.engine == "sglang"
    assert "EP8 with 8 attention rank(s)" in result.serving.provenance.detail
    assert result.key.endswith("/ep8")


def test_ep_with_pools_or_on_a_dense_model_is_not_priced() -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
    sla = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50)
    performance = PerformanceEvaluator(load_catalog(), DEEPSEEK_V3, traffic, sla, engines=("sglang",))
    both = Candidate("fp8", "fp8-dynamic", "h200", 64, expert_parallel=8, layout="disaggregated")
    refused = evaluate_expert_parallel(performance, both, link="infiniband-ndr")
    assert refused.status == "pruned" and "aggregated replicas without speculation" in refused.broken[0]


@pytest.mark.parametrize(
    ("shape", "degrees", "needles"),
    [
        (DEEPSEEK_V3, [1, 24], ("space.expert_parallel", "24 GPUs do not split 256 experts evenly", "dividing 256")),
        (LLAMA_8B, [1, 8], ("space.expert_parallel", "needs a mixture-of-experts model")),
    ],
)
def test_an_ep_degree_the_model_cannot_take_is_refused_naming_the_field(
    tmp_path: Path, shape: object, degrees: list[int], needles: tuple[str, ...]
) -> None:
    spec = load_spec(write_spec(tmp_path / "ep.yaml", {"space.expert_parallel": degrees}))
    assert spec.space.expert_parallel == degrees
    with pytest.raises(BadInputError) as info:
        check_layouts(spec, load_catalog(), shape, field_prefix="")  # type: ignore[arg-type]
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_an_expert_parallel_winners_launch_is_its_engines_expert_parallel_command_as_priced() -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)  # a few seconds of simulation
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=50)
    performance = PerformanceEvaluator(load_catalog(), DEEPSEEK_V3, traffic, sla, engines=("vllm",))
    result = evaluate_expert_parallel(
        performance, Candidate("fp8", "fp8-dynamic", "h200", 64, expert_parallel=8), link="infiniband-ndr"
    )
    assert result.status == "evaluated" and result.attention_dp in (1, 8), result.broken
    launch = expert_parallel_winner_launch(performance, result, link="infiniband-ndr", model="/study/ckpt")
    first = launch[0]
    assert first.engine == "vllm" and first.command is not None
    assert first.command.startswith("vllm serve /study/ckpt ") and "--enable-expert-parallel" in first.command
    assert (
        f"--tensor-parallel-size {8 // result.attention_dp}" in first.command and "--max-num-seqs 64" in first.command
    )
    assert all(
        "--enable-expert-parallel" in (e.command or "--enable-expert-parallel") for e in launch if e.engine == "vllm"
    )
    # The frameworks' files deploy the replicas the search priced (deploy/expert_parallel.py).
    [dynamo] = [e for e in launch if e.engine.startswith("Dynamo")]
    worker = yaml.safe_load(dynamo.config_yaml or "")["spec"]["services"]["VllmDecodeWorker"]
    assert result.cost is not None and worker["replicas"] == result.cost.replicas
    # A result stored before its attention ranks were kept is planned again, to the same commands.
    assert (
        expert_parallel_winner_launch(
            performance, replace(result, attention_dp=None), link="infiniband-ndr", model="/study/ckpt"
        )
        == launch
    )


@pytest.mark.slow  # about 20 s: three EP 8 replicas of DeepSeek-V3 simulated
def test_the_specs_expert_skew_loads_the_busiest_gpu_and_its_redundant_experts_reach_the_launch() -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
    sla = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=50)
    performance = PerformanceEvaluator(load_catalog(), DEEPSEEK_V3, traffic, sla, engines=("vllm",))
    c = Candidate("fp8", "fp8-dynamic", "h200", 64, expert_parallel=8)
    uniform = evaluate_layout(performance, c, link="infiniband-ndr")
    skewed = evaluate_layout(performance, c, link="infiniband-ndr", experts=ExpertRouting(skew=1.2))
    assert uniform.serving is not None and skewed.serving is not None
    # The most popular experts' GPU carries more than the mean: fewer requests per replica.
    assert skewed.serving.requests_per_s < uniform.serving.requests_per_s
    assert _busiest(uniform) == 1.0
    balanced = evaluate_layout(
        performance, c, link="infiniband-ndr", experts=ExpertRouting(skew=1.2, redundant_experts=32)
    )
    assert balanced.serving is not None
    # EPLB's slots even the busiest GPU's load out (what the capacity gains or loses at it is the model's: each GPU
    # also streams its extra experts' weights and holds them instead of KV).
    assert _busiest(balanced) < 1.5 < _busiest(skewed)
    launch = expert_parallel_winner_launch(
        performance, balanced, link="infiniband-ndr", model="m", experts=ExpertRouting(1.2, 32)
    )
    assert launch[0].command is not None and "num_redundant_experts" in launch[0].command


def test_the_specs_redundant_experts_must_split_over_its_degrees(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path / "ep.yaml", {"space.expert_parallel": [1, 8], "space.redundant_experts": 4}))
    assert spec.space.redundant_experts == 4
    with pytest.raises(BadInputError) as info:
        check_layouts(spec, load_catalog(), DEEPSEEK_V3, field_prefix="")
    assert "space.redundant_experts" in str(info.value) and "260 experts" in str(info.value)

    # Another skew is another study (its EP latencies differ); at their defaults the fields leave the name as it was.
    plain = load_spec(write_spec(tmp_path / "plain.yaml", {"space.expert_parallel": [1, 8]}))
    skewed = load_spec(write_spec(tmp_path / "skew.yaml", {"space.expert_parallel": [1, 8], "space.expert_skew": 1.0}))
    zero = load_spec(write_spec(tmp_path / "zero.yaml", {"space.expert_parallel": [1, 8], "space.expert_skew": 0.0}))
    assert plain.fingerprint() == zero.fingerprint() != skewed.fingerprint()


def _busiest(result: CandidateResult) -> float:
    """The busiest GPU's expert load over the mean, as the result's provenance states it."""
    assert result.serving is not None
    found = re.search(r"busiest GPU at ([0-9.]+)x", result.serving.provenance.detail)
    assert found is not None, result.serving.provenance.detail
    return float(found.group(1))
