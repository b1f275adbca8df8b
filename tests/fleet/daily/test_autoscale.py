"""Autoscaling: a constant profile answers as the constant rate does; a 3x peak saves what the hours say.

Capacities come from the real simulator on a catalog GPU (modeled), so the schedule is checked
on the figures `plan` and `search` use, not on numbers made up for the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, SearchSpec
from recommender.config.traffic import hourly_rates
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.daily.autoscale import replicas_for, schedule
from recommender.money import usd
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.provenance import Provenance
from tests.conftest import DAILY_SPEC, REPO, build_spec

SLA = LatencySLA(ttft_p99_ms=1500, tpot_p99_ms=60)
H100 = Candidate("fp8", "fp8-dynamic", "h100-sxm", 64)


def _spec(traffic: dict[str, Any]) -> SearchSpec:
    return build_spec({"traffic": traffic}, base=DAILY_SPEC)


def _evaluate(spec: SearchSpec) -> Any:
    _, shape = load_architecture("llama-3.1-8b")
    return PerformanceEvaluator(load_catalog(), shape, spec.traffic, SLA).evaluate(H100)


def test_a_constant_profile_gives_the_constant_rates_answer() -> None:
    constant = _spec({"prompt_tokens": 800, "output_tokens": 200, "requests_per_second": 25})
    flat = _spec({"prompt_tokens": 800, "output_tokens": 200, "profile": {"hourly_rps": [25] * 24}})
    assert flat.traffic.requests_per_second == constant.traffic.requests_per_second
    a, b = _evaluate(constant), _evaluate(flat)
    assert a.serving == b.serving and a.cost == b.cost and a.cost is not None
    plan = schedule(
        hourly_rates(flat.traffic.profile, flat.traffic.requests_per_second),
        candidate_key=H100.key,
        capacity_rps=b.serving.requests_per_s,
        usd_per_replica_hour=b.cost.price_per_hour_usd,
        headroom=1.0,
        min_replicas=1,
        provenance=b.serving.provenance,
    )
    assert {h.replicas for h in plan.hours} == {a.cost.replicas} and plan.static_replicas == a.cost.replicas
    assert plan.usd_per_month_autoscaled == pytest.approx(plan.usd_per_month_static)
    assert plan.usd_per_month_static == pytest.approx(a.cost.usd_per_month)


def test_a_3x_peak_saves_what_the_off_peak_hours_do_not_pay() -> None:
    """16 hours at r, 8 hours at 3r, r = 2 replicas' capacity: 2 then 6 replicas; static pays 6 all day."""
    spec = _spec({"prompt_tokens": 800, "output_tokens": 200, "requests_per_second": 10})
    result = _evaluate(spec)
    capacity = result.serving.requests_per_s
    base = 2 * capacity * 0.99
    rates = [base] * 8 + [3 * base] * 8 + [base] * 8
    plan = schedule(
        rates,
        candidate_key=H100.key,
        capacity_rps=capacity,
        usd_per_replica_hour=3.0,
        headroom=1.0,
        min_replicas=1,
        provenance=Provenance("modeled", "test"),
    )
    assert [h.replicas for h in plan.hours] == [2] * 8 + [6] * 8 + [2] * 8 and plan.static_replicas == 6
    assert plan.usd_per_month_static == pytest.approx(6 * 3.0 * HOURS_PER_MONTH)
    assert plan.usd_per_month_autoscaled == pytest.approx((16 * 2 + 8 * 6) / 24 * 3.0 * HOURS_PER_MONTH)
    assert plan.saving_percent == pytest.approx(100 * (1 - 80 / 144))


def test_headroom_and_the_floor() -> None:
    assert replicas_for(10.0, 5.0, headroom=1.0, min_replicas=1) == 2  # an exact multiple stays 2
    assert replicas_for(10.0, 5.0, headroom=1.2, min_replicas=1) == 3
    assert replicas_for(0.0, 5.0, headroom=1.2, min_replicas=2) == 2
    with pytest.raises(ValueError, match="no traffic"):
        replicas_for(1.0, 0.0, headroom=1.0, min_replicas=1)


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_plan_spec_prints_both_answers(tmp_path: Path) -> None:
    """`plan --spec` on a small daily space: the schedule, autoscaled vs static, and the mix's verdict."""
    import json
    import subprocess
    import sys

    data = yaml.safe_load((REPO / "search_spaces" / "daily-mix.yaml").read_text(encoding="utf-8"))
    data["use_case"] = str(REPO / "evals" / "chat-assistant.yaml")
    data["space"] = {"methods": {"fp8": ["fp8-dynamic"]}, "hardware": ["l40s", "h100-sxm"], "batch_sizes": [64]}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "plan", "--spec", str(tmp_path / "small.yaml"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    fleet = json.loads(run.stdout)
    hours = fleet["autoscale"]["hours"]
    assert len(hours) == 24 and max(h["replicas"] for h in hours) == fleet["autoscale"]["static_replicas"]
    assert fleet["autoscale"]["usd_per_month_autoscaled"] < fleet["autoscale"]["usd_per_month_static"]
    mix = fleet["mix"]
    assert mix["usd_per_month"] <= mix["usd_per_month_single"] + 1e-6
    assert ("saves" in mix["verdict"]) == mix["recommended"] and mix["pools"]


def test_the_report_plots_rate_and_replicas_over_the_day() -> None:
    from recommender.decision.recommendation import Counts, Recommendation
    from recommender.report.figure_data import DAILY
    from recommender.report.plots import draw_figures

    rates = [10.0] * 8 + [30.0] * 8 + [10.0] * 8
    plan = schedule(
        rates,
        candidate_key=H100.key,
        capacity_rps=7.0,
        usd_per_replica_hour=3.0,
        headroom=1.2,
        min_replicas=1,
        provenance=Provenance("modeled", "test"),
    )
    recommendation = Recommendation(
        "s", "m", "r", "u", None, None, None, [], "policy", Counts(0, 0, 0, 0, 0), autoscale=plan
    )
    plots = [p for p in draw_figures(recommendation, []) if p.info.name == DAILY]
    assert len(plots) == 1 and plots[0].png.startswith(b"\x89PNG")
    assert f"{usd(plan.usd_per_month_static)}/month" in plots[0].info.caption


def test_a_search_with_a_profile_schedules_its_winner_and_mixes_only_passed_schemes() -> None:
    """daily_answers on the search's own results: the winner's schedule; the mix among quality-passed candidates."""
    from recommender.decision import rules as decision
    from recommender.evaluation.evaluator import with_quality
    from recommender.fleet.daily.winner import daily_answers
    from recommender.quality.result import QualityResult
    from recommender.quality.verdict import Check

    def passed(result: Any) -> Any:
        c = result.candidate
        check = Check("task", "acc", 0.5, 0.49, -0.01, -0.01, "max_absolute_drop 0.03", "pass")
        return with_quality(result, QualityResult(c.method, c.precision, "pass", [check], None, "cpu", 0.0))

    spec = _spec({"prompt_tokens": 800, "output_tokens": 200, "profile": {"hourly_rps": [4] * 12 + [60] * 12}})
    _, shape = load_architecture("llama-3.1-8b")
    performance = PerformanceEvaluator(load_catalog(), shape, spec.traffic, SLA)
    unverified = performance.evaluate(Candidate("int4", "w4a16-gptq-g128", "l40s", 64))
    results = [
        passed(performance.evaluate(H100)),
        passed(performance.evaluate(Candidate("fp8", "fp8-dynamic", "l40s", 64))),
        unverified,
    ]
    winner = decision.pick(results)
    assert winner is not None
    autoscale, mix = daily_answers(spec, performance, results, winner)
    assert autoscale is not None and autoscale.candidate_key == winner.key
    assert [h.rate_rps for h in autoscale.hours] == [4.0] * 12 + [60.0] * 12
    assert autoscale.usd_per_month_autoscaled < autoscale.usd_per_month_static
    assert mix is not None and unverified.key not in mix.options
    assert all(pool.quality == "measured: pass" for pool in mix.pools)
