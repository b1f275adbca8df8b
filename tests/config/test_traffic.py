"""Traffic as a profile in the spec: hourly rates or a CSV trace, their lengths, and bad input refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recommender.cli import main as cli
from recommender.config.spec import load_spec
from recommender.config.traffic import hourly_rates, length_models
from recommender.perf.sim.workload import EmpiricalLengths, LengthDist
from tests.conftest import DAILY_SPEC, DEMO_SPEC, REPO, write_spec


def _spec(tmp_path: Path, traffic: dict[str, Any], **top: Any) -> Path:
    return write_spec(tmp_path / "spec.yaml", {"traffic": traffic, **top}, base=DAILY_SPEC)


def test_the_constant_form_is_unchanged() -> None:
    spec = load_spec(DEMO_SPEC)
    assert spec.traffic.profile is None and spec.fleet is None
    assert hourly_rates(None, spec.traffic.requests_per_second) == [1375.0] * 24
    assert length_models(None, 960, 32) == (960, 32)


def test_an_hourly_profile_sizes_for_its_peak_with_lognormal_lengths() -> None:
    spec = load_spec(DAILY_SPEC)
    profile = spec.traffic.profile
    assert profile is not None and spec.traffic.requests_per_second == 40.0
    assert hourly_rates(profile, spec.traffic.requests_per_second)[14] == 40.0
    prompt, output = length_models(profile, spec.traffic.prompt_tokens, spec.traffic.output_tokens)
    assert prompt == LengthDist(1200, 1.5) and output == LengthDist(250, 0.8)
    assert spec.fleet is not None and spec.fleet.prompt_buckets == [512, 2048]


def test_a_trace_gives_hourly_rates_and_its_own_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    rows += [f"{i * 360.0},100,10" for i in range(10)]  # hour 0: 10 requests
    rows += [f"{3600 + i * 120.0},3000,50" for i in range(30)]  # hour 1: 30 requests
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "day.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    path = _spec(tmp_path, {"profile": {"trace": "traces/day.csv"}})
    monkeypatch.chdir(REPO)  # the trace is found from the spec's folder, not the working directory
    traffic = load_spec(path).traffic
    assert traffic.profile is not None
    rates = hourly_rates(traffic.profile, traffic.requests_per_second)
    assert rates[0] == pytest.approx(10 / 3600) and rates[1] == pytest.approx(30 / 3600) and sum(rates[2:]) == 0
    assert traffic.requests_per_second == pytest.approx(30 / 3600)
    assert (traffic.prompt_tokens, traffic.output_tokens) == (round((10 * 100 + 30 * 3000) / 40), 40)
    prompt, _ = length_models(traffic.profile, traffic.prompt_tokens, traffic.output_tokens)
    assert isinstance(prompt, EmpiricalLengths)
    assert set(prompt.sample(200, np.random.default_rng(0)).tolist()) == {100, 3000}


BAD = [
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [1.0] * 23}},
        "traffic.profile.hourly_rps",
        "24 hourly rates",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [-1.0] + [1.0] * 23}},
        "traffic.profile.hourly_rps[0]",
        "greater than or equal to 0",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [float("nan")] * 24}},
        "traffic.profile.hourly_rps[0]",
        "finite",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [0.0] * 24}},
        "traffic.profile.hourly_rps",
        "peak hour's rate is below",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [1.0] * 23 + [1e9]}},
        "traffic.profile.hourly_rps[23]",
        "less than or equal to 10000000",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [1.0] * 24, "prompt_cv": 50}},
        "traffic.profile.prompt_cv",
        "less than or equal to 10",
    ),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [1.0] * 24, "trace": "t.csv"}},
        "traffic.profile",
        "exactly one of hourly_rps",
    ),
    ({"profile": {"trace": "missing.csv"}}, "traffic.profile.trace", "not found"),
    ({"profile": {"trace": "bad.csv"}}, "traffic.profile.trace", "bad.csv line 3"),
    ({"profile": {"trace": "ms.csv"}}, "traffic.profile.trace", "spans 1,000 days"),
    ({"profile": {"trace": "a\0b.csv"}}, "traffic.profile.trace", "not a usable path"),
    (
        {"prompt_tokens": 100, "output_tokens": 10, "profile": {"hourly_rps": [1.0] * 24, "rate": 2}},
        "traffic.profile.rate",
        "unknown key",
    ),
]


@pytest.mark.parametrize(("traffic", "field", "problem"), BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_a_bad_profile_is_one_line_exit_2(
    traffic: dict[str, Any],
    field: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "bad.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,10,10\n1,ten,10\n", encoding="utf-8")
    (tmp_path / "ms.csv").write_text("0,10,10\n86400000,10,10\n", encoding="utf-8")  # milliseconds, not seconds
    _exits_2(["plan", "--spec", str(_spec(tmp_path, traffic))], f"{field}: ", problem, monkeypatch, capsys)


@pytest.mark.parametrize(
    ("fleet", "field", "problem"),
    [
        ({"headroom": 0.5}, "fleet.headroom", "greater than or equal to 1"),
        ({"min_replicas": 0}, "fleet.min_replicas", "greater than or equal to 1"),
        ({"prompt_buckets": [2048, 512]}, "fleet.prompt_buckets", "must increase"),
    ],
)
def test_a_bad_fleet_policy_is_one_line_exit_2(
    fleet: dict[str, Any],
    field: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _spec(tmp_path, {"prompt_tokens": 100, "output_tokens": 10, "requests_per_second": 1}, fleet=fleet)
    _exits_2(["plan", "--spec", str(path)], f"{field}: ", problem, monkeypatch, capsys)


def _exits_2(
    args: list[str], field: str, problem: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["recommender", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert field in lines[0] and problem in lines[0], lines[0]


def test_a_request_longer_than_the_kv_cache_leaves_no_capacity() -> None:
    """A long tail (or a trace) may hold a request no replica's KV cache holds: it would never run, so rate 0."""
    from recommender.config.candidate import Candidate
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.evaluation.speed import Setup
    from recommender.perf.catalog.architectures import load_architecture
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.perf.sim.capacity import max_rate_within_sla

    _, shape = load_architecture("llama-3.1-8b")
    traffic = Traffic(prompt_tokens=500, output_tokens=100, requests_per_second=1)
    setup = PerformanceEvaluator(load_catalog(), shape, traffic, LatencySLA(ttft_p99_ms=5000, tpot_p99_ms=200)).setup(
        Candidate("bf16", "baseline", "l40s", 8)
    )
    assert isinstance(setup, Setup)
    too_long = setup.scheduler.kv_cache_tokens + 10
    search = max_rate_within_sla(
        setup.step_cost,
        setup.scheduler,
        prompt=EmpiricalLengths((500, too_long)),
        output=100,
        ttft_p99_ms=5000,
        tpot_p99_ms=200,
        n_requests=50,
    )
    assert search.rate_per_s == 0.0 and search.result is None
    fits = max_rate_within_sla(
        setup.step_cost,
        setup.scheduler,
        prompt=EmpiricalLengths((500, 600)),
        output=100,
        ttft_p99_ms=5000,
        tpot_p99_ms=200,
        n_requests=50,
    )
    assert fits.rate_per_s > 0


def test_a_trace_header_in_another_order_is_read_by_name(tmp_path: Path) -> None:
    from recommender.config.traffic import read_trace
    from recommender.errors import BadInputError

    path = tmp_path / "reordered.csv"
    path.write_text("output_tokens,arrival_s,prompt_tokens\n20,0.0,100\n30,1.5,200\n", encoding="utf-8")
    trace = read_trace(path)
    assert (trace.arrivals_s, trace.prompt_tokens, trace.output_tokens) == ([0.0, 1.5], [100, 200], [20, 30])
    path.write_text("when,prompt,output\n0,100,20\n1,200,30\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="line 1: the header must name arrival_s, prompt_tokens, output_tokens"):
        read_trace(path)
