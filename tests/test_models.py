"""Pure models with known answers: roofline, memory, serving estimate, cost, verdicts, picking."""

from __future__ import annotations

import pytest

from recommender.candidate import Candidate, CandidateResult
from recommender.cost import estimate_cost
from recommender.perf.catalog import load_catalog
from recommender.perf.roofline import Efficiency, memory_needed_gb, project_step_times, weight_bytes
from recommender.perf.serving import steady_state
from recommender.perf.shape import ModelShape
from recommender.quality.lm_eval_runner import TaskScore
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import check_task
from recommender.quantize import get_method
from recommender.report.recommendation import build, pick
from recommender.spec import Traffic

# Llama-3-8B's shape (config.json numbers).
LLAMA3_8B = ModelShape(
    n_layers=32, hidden=4096, intermediate=14336, n_heads=32, n_kv_heads=8, head_dim=128, vocab=128256
)


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
    assert steps.provenance.startswith("modeled: roofline on catalog entry h100-sxm")


def test_memory_fit_numbers() -> None:
    need = memory_needed_gb(LLAMA3_8B, get_method("baseline"), batch_size=1, context_tokens=1)
    assert 16.0 < need < 19.5  # 16 GB of bf16 weights + embeddings + 10 % overhead
    assert memory_needed_gb(
        LLAMA3_8B, get_method("baseline"), batch_size=1, context_tokens=1, tensor_parallel=2
    ) == pytest.approx(need / 2)


def test_serving_and_cost_known_answer() -> None:
    traffic = Traffic(prompt_tokens=100, output_tokens=100, requests_per_second=10)
    est = steady_state(prefill_s=0.01, decode_step_s=0.02, batch_size=10, traffic=traffic, provenance="test")
    # one request: 0.01 s prefill + 100 steps x 0.02 s / 10 sequences = 0.21 s of replica time
    assert est.requests_per_s == pytest.approx(1 / 0.21)
    assert est.tpot_ms == pytest.approx(20 + 0.1 * 10)
    cost = estimate_cost(
        price_per_hour_usd=2.0,
        price_source="t",
        tensor_parallel=1,
        replica_tokens_per_s=est.tokens_per_s,
        replica_requests_per_s=est.requests_per_s,
        target_requests_per_s=10,
    )
    assert cost.replicas == 3  # 10 / 4.76 -> 3
    assert cost.usd_per_1m_tokens == pytest.approx(2.0 / (est.tokens_per_s * 3600) * 1e6)


def _task(th: Threshold, hib: bool = True) -> TaskThreshold:
    return TaskThreshold(task="t", metric="acc", higher_is_better=hib, threshold=th)


def _score(v: float) -> TaskScore:
    return TaskScore("t", "acc", v, None, 10)


def test_verdicts_each_threshold_kind() -> None:
    assert check_task(_task(Threshold(max_absolute_drop=0.03)), _score(0.50), _score(0.48)).verdict == "pass"
    assert check_task(_task(Threshold(max_absolute_drop=0.03)), _score(0.50), _score(0.46)).verdict == "fail"
    assert check_task(_task(Threshold(max_relative_drop=0.02), hib=False), _score(2.0), _score(2.03)).verdict == "pass"
    assert check_task(_task(Threshold(max_relative_drop=0.02), hib=False), _score(2.0), _score(2.05)).verdict == "fail"
    assert check_task(_task(Threshold(min_value=0.4)), None, _score(0.41)).verdict == "pass"
    assert check_task(_task(Threshold(max_absolute_drop=0.03)), _score(0.5), None).verdict == "unverified"
    with pytest.raises(ValueError):
        Threshold(max_absolute_drop=0.1, min_value=0.2)


def _result(key: str, cost: float, *, broken: list[str] | None = None, quality: float = -0.01) -> CandidateResult:
    precision, rest = key.split("/")
    return CandidateResult(
        candidate=Candidate(precision, rest, "l4", 8),
        status="evaluated",
        constraints={"quality": quality},
        broken=broken or [],
        quality_verdict="pass",
        cost={"usd_per_1m_tokens": cost, "usd_per_month": cost * 1000, "replicas": 1, "price_source": "t"},
        perf_provenance="modeled",
    )


def test_pick_cheapest_feasible_and_list_cheaper_rejects() -> None:
    results = [
        _result("bf16/baseline", 1.00, quality=-0.05),
        _result("int8/bnb-llm-int8", 0.60, quality=-0.02),
        _result("int4/bnb-nf4", 0.40, broken=["quality: fidelity mean_kl 0.05 breaks mean KL <= 0.02"]),
    ]
    assert pick(results).candidate.method == "bnb-llm-int8"
    rec = build(results, current_key=results[0].candidate.key, study="s", model="m", release="r", use_case="u")
    assert [r["method"] for r in rec.rejected_cheaper] == ["bnb-nf4"]
    assert rec.saving["percent_per_1m_tokens"] == pytest.approx(40.0)
    # Within 1 % of the cheapest price, the better quality margin wins.
    tie = [_result("int8/a", 0.600, quality=-0.001), _result("bf16/b", 0.605, quality=-0.05)]
    assert pick(tie).candidate.method == "b"
