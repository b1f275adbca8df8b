"""The decision's rules on plain values: results built from dollars and verdicts, no simulator, no model.

`test_decision.py` checks the same rules on results the real performance pipeline produced; these pin the
rules themselves (the order of the tie-breaks, the band, what cannot win) where every figure is chosen.
"""

from __future__ import annotations

import pytest

from recommender.config.candidate import Candidate
from recommender.decision import rules
from recommender.decision.recommendation import build
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.perf.pricing import COST_TOLERANCE, CostEstimate, tie_band
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.quantize.precisions import least_quantized


def result(
    precision: str,
    method: str,
    month: float,
    *,
    per_token: float = 1.0,
    margin: float | None = -0.01,
    engines: tuple[str, ...] = ("vllm",),
    broken: tuple[str, ...] = (),
    kv: str = "auto",
) -> CandidateResult:
    """An evaluated candidate costing `month` $/month; quality passed at `margin` (None: unverified)."""
    c = Candidate(precision, method, "l40s", 8, kv_cache_dtype=kv)  # type: ignore[arg-type]
    cost = CostEstimate(per_token, 1, 1, month, month / 730, "test")
    if margin is None:
        quality = QualityResult(method, precision, "unverified", [], None, "cpu", 0.0, reason="not measured")
    else:
        check = Check("task", "acc", 0.5, 0.5, 0.0, margin, "max_absolute_drop 0.02", "pass", threshold_scale=0.02)
        quality = QualityResult(method, precision, "pass", [check], None, "cpu", 0.0)
    return CandidateResult(
        c, "evaluated", Constraints(quality=margin or 1.0), list(broken), quality=quality, cost=cost, engines=engines
    )


def test_the_cheapest_feasible_per_month_wins() -> None:
    cheap, dear = result("int4", "w4a16-gptq-g128", 500.0), result("bf16", "baseline", 900.0)
    assert rules.pick([dear, cheap]) is cheap and rules.ties([dear, cheap], cheap) == []


def test_within_the_band_the_least_quantized_then_the_most_engines_then_the_margin_win() -> None:
    int4 = result("int4", "w4a16-gptq-g128", 1000.0)
    fp8 = result("fp8", "fp8-dynamic", 1000.0 * (1 + COST_TOLERANCE))  # on the band's edge: a tie
    assert rules.pick([int4, fp8]) is fp8
    one, two = result("fp8", "fp8-dynamic", 1000.0), result("fp8", "fp8-dynamic", 1005.0, engines=("vllm", "sglang"))
    assert rules.pick([one, two]) is two
    tight = result("fp8", "fp8-dynamic", 1000.0, margin=-0.001)
    roomy = result("fp8", "fp8-dynamic", 1004.0, margin=-0.01)
    assert rules.pick([tight, roomy]) is roomy  # normalised margins: -0.05 against -0.5
    fp8_kv = result("fp8", "fp8-dynamic", 1000.0, kv="fp8")
    assert rules.pick([fp8_kv, one]) is one  # a 16-bit KV cache is less quantized


def test_past_the_band_cost_decides_alone() -> None:
    int4 = result("int4", "w4a16-gptq-g128", 1000.0)
    bf16 = result("bf16", "baseline", 1000.0 * (1 + COST_TOLERANCE) + 0.5)
    assert rules.pick([bf16, int4]) is int4 and rules.ties([bf16, int4], int4) == []


def test_unverified_or_broken_never_wins_and_cheaper_infeasible_ones_are_listed() -> None:
    winner = result("bf16", "baseline", 900.0)
    unverified = result("int4", "bnb-nf4", 300.0, margin=None)
    slow = result("int8", "int8-w8a8", 400.0, broken=("tpot: 31 ms > 30 ms",))
    dear_broken = result("fp8", "fp8-dynamic", 950.0, broken=("ttft",))
    results = [winner, unverified, slow, dear_broken]
    assert rules.pick(results) is winner
    assert rules.rejected_cheaper(results, winner) == [unverified, slow]
    assert rules.pick([unverified, slow]) is None


def test_the_cost_bound_is_the_cheapest_feasible_plus_the_tolerance() -> None:
    a, b = result("bf16", "baseline", 800.0), result("int8", "int8-w8a8", 700.0, margin=None)
    bound = rules.cost_bound([a, b])
    assert bound is not None and bound.usd_per_month == pytest.approx(800.0 * (1 + COST_TOLERANCE))
    assert bound.feasible == (a,) and rules.cost_bound([b]) is None


def test_tie_band_is_shared_by_any_priced_items() -> None:
    assert tie_band([100.9, 101.1, 100.0], lambda x: x) == [100.9, 100.0]  # within 1 % of 100, in order
    assert tie_band([], lambda x: x) == []
    assert least_quantized("bf16") < least_quantized("fp8") < least_quantized("int4")


def _keyed(key: str, cost: float, *, broken: list[str] | None = None, quality: float = -0.01) -> CandidateResult:
    precision, rest = key.split("/")
    return CandidateResult(
        candidate=Candidate(precision, rest, "l4", 8),
        status="evaluated",
        constraints=Constraints(quality=quality),
        broken=broken or [],
        quality=QualityResult(rest, precision, "pass", [], None, "cpu", 0.0),
        cost=CostEstimate(
            usd_per_1m_tokens=cost,
            replicas=1,
            accelerators=1,
            usd_per_month=cost * 1000,
            price_per_hour_usd=1.0,
            price_source="t",
        ),
    )


def test_pick_cheapest_feasible_and_list_cheaper_rejects() -> None:
    results = [
        _keyed("bf16/baseline", 1.00, quality=-0.05),
        _keyed("int8/bnb-llm-int8", 0.60, quality=-0.02),
        _keyed("int4/bnb-nf4", 0.40, broken=["quality: fidelity mean_kl 0.05 breaks mean KL <= 0.02"]),
    ]
    assert rules.pick(results).candidate.method == "bnb-llm-int8"
    rec = build(
        results, winner=rules.pick(results), current=results[0], study="s", model="m", release="r", use_case="u"
    )
    assert [r.candidate.method for r in rec.rejected_cheaper] == ["bnb-nf4"]
    assert rec.saving is not None and rec.saving.percent_per_1m_tokens == pytest.approx(40.0)
    # Within 1 % of the cheapest price, the better quality margin wins.
    tie = [_keyed("int8/a", 0.600, quality=-0.001), _keyed("bf16/b", 0.605, quality=-0.05)]
    assert rules.pick(tie).candidate.method == "b"
    # The candidate it won the tie against is listed as a tie, a 2 % dearer one is not.
    tied_results = [*tie, _keyed("bf16/c", 0.612)]
    tied = build(
        tied_results, winner=rules.pick(tied_results), current=None, study="s", model="m", release="r", use_case="u"
    )
    assert [t.candidate.method for t in tied.ties] == ["a"]
