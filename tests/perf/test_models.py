"""Pure models with known answers: roofline, memory, serving estimate, cost, statistics, verdicts, picking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.config.candidate import Candidate
from recommender.decision.recommendation import build
from recommender.decision.rules import pick
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import plan_memory, weight_bytes
from recommender.perf.pricing import CostEstimate, estimate_cost
from recommender.perf.step.roofline import Efficiency, project_step_times
from recommender.quality.evaluate import chunk_schedule
from recommender.quality.result import QualityResult
from recommender.quality.statistics import aggregate, paired_bootstrap
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import Check, overall
from recommender.quantize import get_method

# Llama-3-8B's shape (config.json numbers).
_, LLAMA3_8B = load_architecture("llama-3.1-8b")  # the shipped config.json numbers


def test_shape_counts_llama3_8b() -> None:
    total = LLAMA3_8B.body_params + 2 * LLAMA3_8B.lm_head_params
    assert total == pytest.approx(8.03e9, rel=0.01)
    # 32 layers x 8 kv heads x 128 x 2 (K,V) x 2 bytes = 128 KiB per token.
    assert LLAMA3_8B.kv_bytes_per_token() == 131072


def test_decode_is_bandwidth_bound_at_batch_one() -> None:
    h100 = load_catalog().get("h100-sxm")
    eff = Efficiency(bandwidth=1.0, compute=1.0, step_overhead_s=0.0)
    bf16 = get_method("baseline")
    steps = project_step_times(LLAMA3_8B, bf16, h100, prompt_tokens=1, batch_size=1, context_tokens=1, efficiency=eff)
    expected = weight_bytes(LLAMA3_8B, bf16) / 3.35e12
    assert steps.decode_step_s == pytest.approx(expected, rel=0.01)
    # int4 weights stream ~3x fewer bytes (lm_head stays bf16).
    nf4 = project_step_times(
        LLAMA3_8B, get_method("bnb-nf4"), h100, prompt_tokens=1, batch_size=1, context_tokens=1, efficiency=eff
    )
    assert 2.5 < steps.decode_step_s / nf4.decode_step_s < 3.6
    assert steps.provenance.kind == "modeled"
    assert steps.provenance.detail.startswith("roofline on catalog entry h100-sxm")


def test_memory_plan_known_architecture() -> None:
    bf16 = get_method("baseline")
    plan = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, max_num_batched_tokens=8192, max_num_seqs=256)
    # 8.03 B parameters at 2 bytes; the KV cache is 128 KiB per token.
    assert plan.weights_gb == pytest.approx(16.06, rel=0.01)
    assert plan.kv_bytes_per_token == 131072
    assert plan.kv_cache_tokens == int((72.0 - plan.fixed_gb) * 1e9 // 131072)
    assert 0.1 < plan.activation_gb < 2.0
    # fp8 KV doubles the tokens; tensor parallel 2 halves weights and KV per device.
    fp8 = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, kv_cache_dtype="fp8")
    assert fp8.kv_cache_tokens == pytest.approx(2 * plan.kv_cache_tokens, rel=1e-6)
    tp2 = plan_memory(LLAMA3_8B, bf16, device_gb=80.0, tensor_parallel=2)
    assert tp2.weights_gb == pytest.approx(plan.weights_gb / 2) and tp2.kv_bytes_per_token == 65536
    # More devices than KV heads: each keeps one head's replica, not a fraction of one.
    assert plan_memory(LLAMA3_8B, bf16, device_gb=80.0, tensor_parallel=16).kv_bytes_per_token == 16384


def test_memory_refusal_gives_the_numbers() -> None:
    plan = plan_memory(LLAMA3_8B, get_method("baseline"), device_gb=16.0)  # an 8B bf16 model on a 16 GB card
    why = plan.shortfall(1, 2048)
    assert why is not None and "weights 16.06" in why and "14.4 GB usable" in why
    assert plan.kv_cache_tokens == 0 and plan.max_concurrent_seqs(2048) == 0
    nf4 = plan_memory(LLAMA3_8B, get_method("bnb-nf4"), device_gb=16.0)
    assert nf4.shortfall(1, 2048) is None and nf4.max_concurrent_seqs(2048) > 1


def test_cost_known_answer() -> None:
    # A replica serving 4 requests/s of 200 tokens: 800 tokens/s; 10 requests/s need 3 replicas.
    cost = estimate_cost(
        price_per_hour_usd=2.0,
        price_source="t",
        tensor_parallel=1,
        replica_tokens_per_s=800.0,
        replica_requests_per_s=4.0,
        target_requests_per_s=10,
    )
    assert cost.replicas == 3
    assert cost.usd_per_1m_tokens == pytest.approx(2.0 / (800.0 * 3600) * 1e6)


def _task(th: Threshold, hib: bool = True, metric: str = "acc") -> TaskThreshold:
    return TaskThreshold(task="t", metric=metric, higher_is_better=hib, threshold=th)


def _acc_pairs(values: list[int]) -> np.ndarray:
    return np.asarray([[v, 1.0] for v in values], dtype=float)


def test_paired_bootstrap_identical_scores_are_not_certainty() -> None:
    base = _acc_pairs([1, 0] * 50)
    # Agreement on 100 documents still leaves room for a drop past 3 points (exact flip bounds) ...
    result = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, base.copy())
    assert result.delta == 0 and result.delta_ci[0] < -0.03 < 0.03 < result.delta_ci[1]
    assert result.verdict == "inconclusive" and result.margin == pytest.approx(-0.03)
    # ... while the reference against itself differs by zero by construction.
    same = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, base, same_model=True)
    assert same.delta_ci == (0.0, 0.0) and same.verdict == "pass"


def test_paired_bootstrap_clear_loss_fails_and_small_sample_is_inconclusive() -> None:
    base = _acc_pairs([1] * 100)
    # 20 of 100 answers flip to wrong: a 0.20 drop against an allowance of 0.03.
    worse = _acc_pairs([0] * 20 + [1] * 80)
    failed = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base, worse)
    assert failed.delta == pytest.approx(-0.20) and failed.verdict == "fail"
    assert failed.delta_ci[0] < -0.20 < failed.delta_ci[1] < -0.1
    # 1 flip in 10 documents: the interval [-0.3, 0] straddles the allowance.
    small = paired_bootstrap(_task(Threshold(max_absolute_drop=0.03)), base[:10], _acc_pairs([0] + [1] * 9))
    assert small.verdict == "inconclusive"
    assert (
        paired_bootstrap(
            _task(Threshold(max_absolute_drop=0.03)), base[:10], _acc_pairs([0] + [1] * 9), policy="point"
        ).verdict
        == "fail"
    )


def test_ratio_metrics_aggregate_like_lm_eval() -> None:
    # bits_per_byte = -sum(loglik) / sum(bytes) / ln 2 over documents, not a mean of ratios.
    pairs = np.asarray([[-100.0, 50.0], [-10.0, 50.0]])
    assert float(aggregate("bits_per_byte", pairs)) == pytest.approx(110 / 100 / math.log(2))
    assert float(aggregate("acc", _acc_pairs([1, 0, 1, 1]))) == 0.75
    base = np.asarray([[-100.0, 100.0]] * 40)  # MIN_CONTINUOUS_DOCS: fewer decide nothing
    worse = np.asarray([[-105.0, 100.0]] * 40)  # 5 % more bits per byte
    th = _task(Threshold(max_relative_drop=0.02), hib=False, metric="bits_per_byte")
    assert paired_bootstrap(th, base, worse).verdict == "fail"
    assert (
        paired_bootstrap(
            _task(Threshold(max_relative_drop=0.06), hib=False, metric="bits_per_byte"), base, worse
        ).verdict
        == "pass"
    )


def test_floor_threshold_and_overall_order() -> None:
    base = _acc_pairs([1] * 40)
    assert paired_bootstrap(_task(Threshold(min_value=0.5)), base, _acc_pairs([1] * 30 + [0] * 10)).verdict == "pass"
    with pytest.raises(ValueError):
        Threshold(max_absolute_drop=0.1, min_value=0.2)
    pass_ = Check("a", "acc", 1, 1, 0, -1, "", "pass")
    assert overall([pass_, Check("b", "acc", 1, None, None, None, "", "unverified")]) == "unverified"
    assert overall([pass_, Check("b", "acc", 1, 1, 0, 1, "", "inconclusive")]) == "inconclusive"
    assert overall([Check("b", "acc", 1, 0, -1, 1, "", "fail"), pass_]) == "fail"


def test_chunk_schedule() -> None:
    assert chunk_schedule(60, adaptive=True) == [15, 30, 60]
    assert chunk_schedule(16, adaptive=True) == [8, 16]
    assert chunk_schedule(15, adaptive=True) == [15]
    assert chunk_schedule(60, adaptive=False) == [60]


def _result(key: str, cost: float, *, broken: list[str] | None = None, quality: float = -0.01) -> CandidateResult:
    precision, rest = key.split("/")
    return CandidateResult(
        candidate=Candidate(precision, rest, "l4", 8),
        status="evaluated",
        constraints=Constraints(quality=quality),
        broken=broken or [],
        quality=QualityResult(rest, precision, "pass", [], None, "cpu", 0.0),
        cost=CostEstimate(usd_per_1m_tokens=cost, replicas=1, accelerators=1, usd_per_month=cost * 1000,
                          price_per_hour_usd=1.0, price_source="t"),  # fmt: skip
    )


def test_pick_cheapest_feasible_and_list_cheaper_rejects() -> None:
    results = [
        _result("bf16/baseline", 1.00, quality=-0.05),
        _result("int8/bnb-llm-int8", 0.60, quality=-0.02),
        _result("int4/bnb-nf4", 0.40, broken=["quality: fidelity mean_kl 0.05 breaks mean KL <= 0.02"]),
    ]
    assert pick(results).candidate.method == "bnb-llm-int8"
    rec = build(results, winner=pick(results), current=results[0], study="s", model="m", release="r", use_case="u")
    assert [r.candidate.method for r in rec.rejected_cheaper] == ["bnb-nf4"]
    assert rec.saving is not None and rec.saving.percent_per_1m_tokens == pytest.approx(40.0)
    # Within 1 % of the cheapest price, the better quality margin wins.
    tie = [_result("int8/a", 0.600, quality=-0.001), _result("bf16/b", 0.605, quality=-0.05)]
    assert pick(tie).candidate.method == "b"
    # The candidate it won the tie against is listed as a tie, a 2 % dearer one is not.
    tied_results = [*tie, _result("bf16/c", 0.612)]
    tied = build(tied_results, winner=pick(tied_results), current=None, study="s", model="m", release="r", use_case="u")
    assert [t.candidate.method for t in tied.ties] == ["a"]
