"""The decision: $/month at the spec's traffic first, ties to the least quantized and most launchable scheme,
quality measured only where it can decide, and the line saying when quantizing does not pay.

Speed and cost come from the real `PerformanceEvaluator` (memory plan, roofline step cost, batching
simulation, catalog price) for Llama-3.1-8B; quality is attached as a typed `QualityResult`, the
evidence the search would have measured.
"""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.decision import rules as decision
from recommender.decision.recommendation import build
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.evaluator import with_quality
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import Catalog
from recommender.perf.pricing import CostEstimate
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.report.table import render

_, LLAMA_8B = load_architecture("llama-3.1-8b")
LOW_TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=0.3)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=200)


def passed(result: CandidateResult, margin: float) -> CandidateResult:
    """`result` with a passing quality verdict whose worst check is `margin` inside its threshold."""
    c = result.candidate
    check = Check("task", "acc", 0.5, 0.5 + margin, margin, margin, "max_absolute_drop 0.03", "pass")
    return with_quality(result, QualityResult(c.method, c.precision, "pass", [check], None, "cpu", 0.0))


@pytest.fixture(scope="module")
def catalog(contract_catalog: Catalog) -> Catalog:
    """L4 and T4 at contract prices (conftest.CONTRACT_PRICES): the default price set lists neither."""
    return contract_catalog


def evaluate(catalog: Catalog, *candidates: Candidate, traffic: Traffic = LOW_TRAFFIC) -> list[CandidateResult]:
    evaluator = PerformanceEvaluator(catalog, LLAMA_8B, traffic, SLA)
    return [evaluator.evaluate(c) for c in candidates]


def test_int8_costing_the_same_per_month_as_bf16_on_the_same_gpu_loses_to_bf16(catalog: Catalog) -> None:
    bf16, int8 = evaluate(catalog, Candidate("bf16", "baseline", "l4", 8), Candidate("int8", "int8-w8a8", "l4", 8))
    assert bf16.cost is not None and int8.cost is not None
    assert bf16.cost.replicas == int8.cost.replicas == 1  # one L4 carries 0.3 requests/s either way
    assert bf16.usd_per_month == int8.usd_per_month == pytest.approx(0.44 * 730)
    assert int8.usd_per_1m_tokens is not None and bf16.usd_per_1m_tokens is not None
    assert int8.usd_per_1m_tokens < bf16.usd_per_1m_tokens  # int8 is cheaper per token at capacity...
    results = [passed(bf16, -0.01), passed(int8, -0.02)]  # ...and even has the better quality margin
    winner = decision.pick(results)
    assert winner is not None and winner.key == "bf16/baseline@l4x1/bs8"  # the least quantized wins the tie

    rec = build(results, winner=winner, current=winner, study="s", model="m", release="r", use_case="u")
    assert rec.winner is winner and [t.key for t in rec.ties] == ["int8/int8-w8a8@l4x1/bs8"]
    assert rec.quantization_note == (
        "quantization does not pay at this traffic: bf16 on l4 costs the same $321/month as int8/int8-w8a8@l4x1/bs8"
    )
    assert "$/month" in rec.tie_policy and "least quantized" in rec.tie_policy
    out = io.StringIO()
    render(rec, Console(file=out, width=200))
    assert rec.quantization_note in out.getvalue()


def test_quantizing_pays_when_it_saves_a_gpu_and_then_no_note(catalog: Catalog) -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=8)
    bf16, int4 = evaluate(
        catalog,
        Candidate("bf16", "baseline", "l4", 32),
        Candidate("int4", "w4a16-gptq-g128", "l4", 32),
        traffic=traffic,
    )
    assert bf16.cost is not None and int4.cost is not None and int4.cost.replicas < bf16.cost.replicas
    results = [passed(bf16, -0.01), passed(int4, -0.005)]
    rec = build(results, winner=decision.pick(results), current=bf16, study="s", model="m", release="r", use_case="u")
    assert rec.winner is not None and rec.winner.key == int4.key and rec.ties == []
    assert rec.quantization_note is None


def test_the_cheapest_candidate_no_engine_launches_is_pruned_and_the_next_one_wins(catalog: Catalog) -> None:
    traffic = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=0.5)
    results = evaluate(
        catalog,
        Candidate("int8", "torchao-int8-wo", "l4", 8),  # int8 on the cheapest GPU, but evaluation only
        Candidate("bf16", "baseline", "t4", 8),  # no bf16 on Turing
        Candidate("int8", "int8-w8a8", "l4", 8),
        Candidate("bf16", "baseline", "l4", 8),
        traffic=traffic,
    )
    assert [r.status for r in results] == ["pruned", "pruned", "evaluated", "evaluated"]
    assert "evaluation only" in results[0].broken[0] and "launches baseline on t4" in results[1].broken[0]
    int8, bf16 = results[2], results[3]
    assert int8.cost is not None and bf16.cost is not None and int8.cost.replicas < bf16.cost.replicas
    results = [r if r.status == "pruned" else passed(r, -0.01) for r in results]
    winner = decision.pick(results)
    assert winner is not None and winner.key == "int8/int8-w8a8@l4x1/bs8"
    assert decision.rejected_cheaper(results, winner) == []  # pruned candidates have no price to undercut with


def _priced(
    key: str,
    month: float,
    *,
    engines: tuple[str, ...] = ("vllm", "sglang"),
    margin: float = -0.01,
    feasible: bool = True,
) -> CandidateResult:
    """A candidate result with a price and, when `feasible`, a passing quality (the decision's input)."""
    precision, method, hardware = key.replace("@", "/").split("/")
    cost = CostEstimate(
        usd_per_1m_tokens=month / 1000,
        replicas=1,
        accelerators=1,
        usd_per_month=month,
        price_per_hour_usd=month / 730,
        price_source="t",
    )
    constraints = Constraints(quality=1.0, ttft=-0.5, tpot=-0.5)
    result = CandidateResult(
        Candidate(precision, method, hardware, 8), "evaluated", constraints, [], cost=cost, engines=engines
    )
    return passed(result, margin) if feasible else result


def test_ties_go_to_more_bits_then_more_engines_then_quality_then_price_per_token() -> None:
    gptq = _priced("int4/w4a16-gptq-g128@l4", 321.0, engines=("vllm", "sglang"), margin=-0.001)
    awq = _priced("int4/w4a16-awq-g128@l4", 320.0, engines=("vllm",), margin=-0.05)
    assert decision.pick([gptq, awq]) is gptq  # same bits; more engines beat a better quality margin
    fp8 = _priced("fp8/fp8-dynamic@l4", 322.0, margin=-0.001)
    assert decision.pick([gptq, awq, fp8]) is fp8  # within 1 % of the cheapest: 8 bits beat 4
    dear = _priced("bf16/baseline@l4", 330.0, margin=-0.5)
    assert decision.pick([gptq, awq, fp8, dear]) is fp8  # 3 % dearer per month: not a tie
    twin = _priced("fp8/fp8-dynamic@l40s", 322.0, margin=-0.02)
    assert decision.pick([fp8, twin]) is twin  # same bits and engines: the quality margin decides


def test_quality_is_measured_only_where_it_can_decide() -> None:
    bf16 = _priced("bf16/baseline@l4", 321.0)
    bound = decision.cost_bound([bf16])
    assert bound is not None and bound.usd_per_month == pytest.approx(321.0 * 1.01)
    # As cheap per month and more quantized: bf16 wins any tie before quality is compared.
    int8 = _priced("int8/int8-w8a8@l4", 321.0, feasible=False)
    why = decision.quality_cannot_matter(int8, bound)
    assert why is not None and "bf16/baseline@l4x1/bs8 is feasible at $321.00/month" in why
    # Cheaper per month: it could win, so its quality is measured.
    assert decision.quality_cannot_matter(_priced("int4/w4a16-gptq-g128@t4", 300.0, feasible=False), bound) is None
    # A 16-bit twin in the tie window: the quality margin decides between them, so it is measured.
    assert decision.quality_cannot_matter(_priced("fp16/fp16@l4", 322.0, feasible=False), bound) is None
    # Above the tie window of the cheapest $/month: cannot win.
    above = decision.quality_cannot_matter(_priced("int4/w4a16-gptq-g128@a10g", 734.0, feasible=False), bound)
    assert above is not None and "$734.00/month at the target traffic is above $324.21/month" in above


def test_rejected_cheaper_are_ordered_by_what_the_user_pays_per_month() -> None:
    winner = _priced("bf16/baseline@l40s", 795.0)
    cheap_fail = _priced("int4/w4a16-awq-g128@l4", 321.0, feasible=False)
    dear_per_token = _priced("int8/int8-w8a8@l4", 320.0, feasible=False)
    assert dear_per_token.cost is not None
    dear_per_token = dataclasses.replace(
        dear_per_token, cost=dataclasses.replace(dear_per_token.cost, usd_per_1m_tokens=9.0)
    )
    rejected = decision.rejected_cheaper([winner, cheap_fail, dear_per_token], winner)
    assert [r.key for r in rejected] == [dear_per_token.key, cheap_fail.key]  # $320 < $321 a month, whatever per token


def test_a_candidate_costing_the_same_per_month_is_not_a_rejected_saving() -> None:
    winner = _priced("bf16/baseline@l40s", 795.7)
    same_month = _priced("int4/w4a16-gptq-g128@l40s", 795.7, feasible=False)
    cheaper = _priced("int8/int8-w8a8@a10g", 734.4, feasible=False)
    assert decision.rejected_cheaper([winner, same_month, cheaper], winner) == [cheaper]


def test_one_tie_band_and_one_least_quantized_order_on_plain_values() -> None:
    """The tie rule's parts as pure functions: candidates, plan rows and GPU-mix pools all use these."""
    from recommender.perf.pricing import COST_TOLERANCE, tie_band
    from recommender.quantize.precisions import least_quantized

    months = {"a": 100.0, "b": 100.0 * (1 + COST_TOLERANCE), "c": 100.0 * (1 + 2 * COST_TOLERANCE), "d": 300.0}
    assert tie_band(months, months.__getitem__) == ["a", "b"]
    assert tie_band([], months.__getitem__) == []
    order = sorted(
        [("int4", "auto"), ("bf16", "fp8"), ("fp8", "auto"), ("bf16", "auto")], key=lambda pk: least_quantized(*pk)
    )
    assert order == [("bf16", "auto"), ("bf16", "fp8"), ("fp8", "auto"), ("int4", "auto")]


def test_build_takes_the_winner_and_current_it_is_given_and_judges_the_rest_against_them() -> None:
    """The search picks the winner once and hands it to `build` (the same result its launch commands, load curve
    and assumptions were worked out for); `build` picks nothing itself, so what it says is about that result."""
    results = [
        _priced("bf16/baseline@l40s", 795.0),
        _priced("int8/int8-w8a8@l4", 321.0),
        _priced("int4/w4a16-awq-g128@l4", 300.0, feasible=False),
    ]
    bf16, int8, int4 = results
    assert decision.pick(results) is int8
    rec = build(results, winner=bf16, current=int8, study="s", model="m", release="r", use_case="u")
    assert rec.winner is bf16 and rec.current is int8
    assert rec.saving is not None and rec.saving.usd_per_month == pytest.approx(321.0 - 795.0)
    assert [r.key for r in rec.rejected_cheaper] == [int4.key]
    none = build(results, winner=None, current=None, study="s", model="m", release="r", use_case="u")
    assert none.winner is None and none.saving is None
