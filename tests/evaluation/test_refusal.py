"""`Refused`: a candidate that cannot run or fit, raised where the check fails and made a pruned result once.

The candidates are real configurations on the catalog's GPUs with a real architecture; the broken lines are the
ones results.json and MLflow held before the refusal was an exception (main at eeb95f6).
"""

from __future__ import annotations

import pickle
import traceback

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LOCAL_DEVICE, LatencySLA, Traffic
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.load_curve import load_curve
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.refusal import Refused
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import MemoryFit
from recommender.perf.model.shape import ModelShape

CATALOG = load_catalog()
_, LLAMA_8B = load_architecture("llama-3.1-8b")
_, LLAMA_70B = load_architecture("llama-3.1-70b")
TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=0.5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=200)


def _evaluator(shape: ModelShape = LLAMA_8B) -> PerformanceEvaluator:
    return PerformanceEvaluator(CATALOG, shape, TRAFFIC, SLA)


def _refusal(evaluator: PerformanceEvaluator, c: Candidate) -> Refused:
    with pytest.raises(Refused) as caught:
        evaluator.setup(c)
    return caught.value


def test_a_refusal_carries_its_constraint_key_its_reason_and_the_memory_fit() -> None:
    fit = MemoryFit(needed_gb=90.0, available_gb=70.0)
    refused = Refused("memory", "needs 90 GB, 70 usable", fit)
    assert (refused.key, refused.reason, refused.memory) == ("memory", "needs 90 GB, 70 usable", fit)
    assert str(refused) == refused.broken == "memory: needs 90 GB, 70 usable"
    again = pickle.loads(pickle.dumps(refused))  # every argument in `args`: it crosses a process like any exception
    assert (again.key, again.reason, again.memory) == (refused.key, refused.reason, refused.memory)
    assert Refused("runnable", "no engine").memory is None


def test_its_result_is_the_pruned_candidate_with_its_one_limit_broken() -> None:
    c = Candidate("bf16", "baseline", "l40s", 8)
    fit = MemoryFit(needed_gb=90.0, available_gb=70.0)
    result = Refused("memory", "needs 90 GB, 70 usable", fit).result(c)
    assert result.candidate == c and result.status == "pruned"
    assert result.constraints == Constraints.refused("memory") and result.broken == ["memory: needs 90 GB, 70 usable"]
    assert result.memory == fit and result.serving is None and result.cost is None and result.engines == ()


def test_a_runnable_check_raises_with_the_key_and_the_reason_results_json_held() -> None:
    evaluator = _evaluator()
    too_wide = _refusal(evaluator, Candidate("bf16", "baseline", "h100-sxm", 8, tensor_parallel=16))
    assert (too_wide.key, too_wide.reason) == ("runnable", "tensor_parallel 16 > 8 devices per node")
    uneven = _refusal(evaluator, Candidate("bf16", "baseline", "h100-sxm", 8, tensor_parallel=3))
    assert uneven.reason == "tensor_parallel 3: its 32 attention heads do not split 3 ways"
    local = _refusal(evaluator, Candidate("bf16", "baseline", LOCAL_DEVICE, 8))
    assert local.reason == "the local device is not measured in this command (architecture-only projection)"
    speculative = _refusal(evaluator, Candidate("bf16", "baseline", "h100-sxm", 8, speculative="ngram"))
    assert speculative.reason.startswith("speculative ngram: its acceptance is measured on the model")
    evaluation_only = _refusal(evaluator, Candidate("int8", "torchao-int8-wo", "h100-sxm", 8))
    assert evaluation_only.reason.startswith("torchao-int8-wo is evaluation only")
    assert {r.key for r in (too_wide, uneven, local, speculative, evaluation_only)} == {"runnable"}
    assert all(r.memory is None for r in (too_wide, uneven, local, speculative, evaluation_only))


def test_a_memory_check_raises_with_the_fit_it_measured() -> None:
    too_big = _refusal(_evaluator(LLAMA_70B), Candidate("bf16", "baseline", "l40s", 8))
    assert too_big.key == "memory" and too_big.reason.startswith("needs 143.80 GB per device")
    assert too_big.memory is not None and too_big.memory.constraint > 0
    unheld = _refusal(_evaluator(), Candidate("bf16", "baseline", "l4", 256))
    assert unheld.key == "memory" and unheld.reason == (
        "batch cap 256 never fills: the KV cache holds 28,051 tokens, 54 prompts of 512 tokens at once — "
        "a cap of 54 or less serves the same"
    )
    assert unheld.memory is not None and unheld.memory.constraint <= 0  # it fits; its cap is what is refused


def test_evaluate_catches_it_once_and_stores_the_pruned_result() -> None:
    evaluator = _evaluator()
    c = Candidate("fp8", "fp8-dynamic", "a100-80gb", 8)
    refused = _refusal(evaluator, c)
    result = evaluator.evaluate(c)
    assert result == refused.result(c)
    assert result.broken[0].startswith("runnable: no engine in engines: [vllm, sglang] launches fp8-dynamic on a100")


def test_a_refused_candidate_is_refused_again_from_the_cache_with_a_fresh_traceback() -> None:
    evaluator = _evaluator(LLAMA_70B)
    c = Candidate("bf16", "baseline", "l40s", 8)
    depths = []
    for _ in range(3):
        with pytest.raises(Refused) as caught:
            evaluator.performance(c)
        assert caught.value.key == "memory"
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[1] == depths[2]  # raised again from the cache, its traceback does not grow with each ask
    with pytest.raises(Refused):
        evaluator.chosen_setup(c)
    assert load_curve(evaluator, c) is None


def test_a_runnable_candidate_raises_nothing() -> None:
    evaluator = _evaluator()
    c = Candidate("bf16", "baseline", "h100-sxm", 8)
    assert evaluator.setup(c).engines and evaluator.evaluate(c).status == "evaluated"
    assert evaluator.chosen_setup(c) is evaluator.performance(c).setup
