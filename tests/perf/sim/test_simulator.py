"""Known answers for the continuous-batching simulator.

The step *cost* is faked where a known answer needs round numbers (a constant decode step
plus a per-prompt-token prefill cost); the scheduler and event loop under test are real.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from recommender.config.spec import Traffic
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.capacity import max_rate_within_sla, replicas_needed
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.scheduler import ContinuousBatchingSimulation, SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import LengthDist, Workload, make_workload, workload_from_traffic
from recommender.perf.step.cost import RooflineStepCost, TableStepCost
from recommender.perf.step.roofline import project_step_times
from recommender.provenance import Provenance
from recommender.quantize import get_scheme

_, LLAMA3_8B = load_architecture("llama-3.1-8b")  # the shipped config.json numbers
DECODE_S = 0.010
PER_PREFILL_TOKEN_S = 1e-5


@dataclass
class FakeCost:
    """A step costs a fixed 10 ms plus 10 us per prompt token; records what each step held."""

    calls: list[tuple[int, int, int]] = field(default_factory=list)
    provenance: Provenance = Provenance("modeled", "a fake step cost of round numbers")

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        self.calls.append((prefill_tokens, decode_seqs, context_tokens))
        return DECODE_S + prefill_tokens * PER_PREFILL_TOKEN_S


def _prefill_s(tokens: int) -> float:
    return DECODE_S + tokens * PER_PREFILL_TOKEN_S


def _config(**overrides: object) -> SchedulerConfig:
    values: dict[str, object] = {"kv_cache_tokens": 100_000, "max_num_seqs": 8, "max_num_batched_tokens": 1024}
    return SchedulerConfig(**(values | overrides))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def roofline() -> RooflineStepCost:
    return RooflineStepCost(LLAMA3_8B, get_scheme("baseline"), load_catalog().get("h100-sxm"))


# (a) one request alone


def test_lone_request_sees_one_prefill_then_decode_steps() -> None:
    workload = make_workload(prompt=100, output=50, arrivals=[0.0])
    result = simulate(FakeCost(), workload, _config())
    assert result.ttft_s[0] == pytest.approx(_prefill_s(100))
    assert result.tpot_s[0] == pytest.approx(DECODE_S)
    assert result.e2e_s[0] == pytest.approx(_prefill_s(100) + 49 * DECODE_S)
    assert result.steps == 50
    assert result.preemptions == 0


def test_roofline_step_cost_equals_project_step_times(roofline: RooflineStepCost) -> None:
    accel = load_catalog().get("h100-sxm")
    for tp in (1, 2):
        cost = RooflineStepCost(LLAMA3_8B, get_scheme("baseline"), accel, tensor_parallel=tp)
        ref = project_step_times(
            LLAMA3_8B,
            get_scheme("baseline"),
            accel,
            prompt_tokens=512,
            batch_size=64,
            context_tokens=700,
            tensor_parallel=tp,
        )
        assert cost.step_seconds(512, 0, 0) == pytest.approx(ref.prefill_s, rel=1e-12)
        assert cost.step_seconds(0, 64, 64 * 700) == pytest.approx(ref.decode_step_s, rel=1e-12)
        contexts = np.array([64 * 700, 64 * 9000])
        vector = cost.decode_steps_seconds(64, contexts)
        assert vector == pytest.approx([cost.step_seconds(0, 64, int(c)) for c in contexts], rel=1e-12)


def test_lone_request_on_roofline(roofline: RooflineStepCost) -> None:
    result = simulate(roofline, make_workload(prompt=512, output=3, arrivals=[0.0]), _config())
    decodes = [roofline.step_seconds(0, 1, 513), roofline.step_seconds(0, 1, 514)]
    assert result.ttft_s[0] == pytest.approx(roofline.step_seconds(512, 0, 0))
    assert result.tpot_s[0] == pytest.approx(sum(decodes) / 2)


# (b) far below and far above capacity


def test_light_load_ttft_is_the_prefill_time() -> None:
    workload = make_workload(prompt=100, output=20, n_requests=300, rate=0.05, seed=1)
    result = simulate(FakeCost(), workload, _config())
    assert result.ttft_ms.p50 == pytest.approx(_prefill_s(100) * 1e3)
    assert _prefill_s(100) * 1e3 <= result.ttft_ms.p99 <= (_prefill_s(100) + DECODE_S) * 1e3 + 1e-9
    assert result.tpot_ms.p50 == pytest.approx(DECODE_S * 1e3)
    assert result.tpot_ms.p99 < 1.02 * DECODE_S * 1e3  # now and then a prefill joins a decode step


def test_overload_queues_and_throughput_saturates() -> None:
    config = _config(max_num_seqs=8)
    small, large = (
        simulate(FakeCost(), make_workload(prompt=100, output=100, n_requests=n, rate=1000.0, seed=2), config)
        for n in (200, 400)
    )
    assert large.ttft_ms.p99 > 1.8 * small.ttft_ms.p99  # the queue, hence the wait, doubles
    assert large.e2e_ms.p50 > 1.8 * small.e2e_ms.p50
    bound = config.max_num_seqs / DECODE_S  # tokens/s when every step decodes a full batch
    assert 0.9 * bound < large.output_tokens_per_s <= bound
    assert large.tpot_ms.p99 < 1.1 * DECODE_S * 1e3  # queued requests wait before, not during, decoding


# (c) preemption


@pytest.mark.parametrize("chunked", [True, False])
def test_tiny_kv_cache_preempts_and_everything_completes(chunked: bool) -> None:
    prompt, output = LengthDist(40, 0.5, maximum=60), LengthDist(60, 0.5, maximum=90)
    workload = make_workload(prompt=prompt, output=output, n_requests=60, rate=200.0, seed=3)
    tiny = simulate(FakeCost(), workload, _config(kv_cache_tokens=160, chunked_prefill=chunked))
    roomy = simulate(FakeCost(), workload, _config(chunked_prefill=chunked))
    assert tiny.preemptions > 0
    assert roomy.preemptions == 0
    assert np.isfinite(tiny.e2e_s).all() and (tiny.ttft_s > 0).all()
    assert tiny.e2e_ms.p99 > roomy.e2e_ms.p99
    assert tiny.output_tokens_per_s * tiny.duration_s == pytest.approx(workload.output_tokens.sum())


def test_request_larger_than_the_cache_is_refused() -> None:
    with pytest.raises(ValueError, match="KV cache"):
        simulate(FakeCost(), make_workload(prompt=100, output=100, arrivals=[0.0]), _config(kv_cache_tokens=160))


# (d) chunked prefill


def test_chunked_prefill_bounds_tokens_per_step() -> None:
    cost = FakeCost()
    workload = make_workload(prompt=1000, output=30, n_requests=20, rate=50.0, seed=4)
    result = simulate(cost, workload, _config(max_num_seqs=4, max_num_batched_tokens=256))
    per_step = [p + n for p, n, _ in cost.calls]
    assert max(per_step) == result.max_step_tokens <= 256
    assert per_step.count(256) > 0  # full budgets were used: prompts were split
    alone = FakeCost()
    lone = simulate(alone, make_workload(prompt=1000, output=2, arrivals=[0.0]), _config(max_num_batched_tokens=256))
    assert [p for p, _, _ in alone.calls] == [256, 256, 256, 232, 0]
    assert lone.ttft_s[0] == pytest.approx(3 * _prefill_s(256) + _prefill_s(232))
    assert [c for _, _, c in alone.calls] == [0, 256, 512, 768, 1001]


def test_without_chunking_a_prompt_runs_whole_and_alone() -> None:
    cost = FakeCost()
    workload = make_workload(prompt=LengthDist(200, 0.5, maximum=900), output=20, n_requests=40, rate=100.0, seed=5)
    simulate(cost, workload, _config(chunked_prefill=False))
    prompts = set(workload.prompt_tokens.tolist()) | {0}
    assert all(p in prompts for p, _, _ in cost.calls)
    with pytest.raises(ValueError, match="chunked prefill"):
        simulate(FakeCost(), make_workload(prompt=2000, output=2, arrivals=[0.0]), _config(chunked_prefill=False))


# (e) capacity search


def test_max_rate_meets_the_sla_and_twenty_percent_more_does_not() -> None:
    config = _config(max_num_seqs=8)
    kwargs = {"prompt": LengthDist(100, 0.5), "output": LengthDist(50, 0.5), "n_requests": 600, "seed": 6}
    search = max_rate_within_sla(FakeCost(), config, ttft_p99_ms=100.0, tpot_p99_ms=15.0, **kwargs)  # type: ignore[arg-type]
    assert search.rate_per_s > 0 and search.result is not None and search.settled is not None
    # The answer's run is reproduced by the same requests, as many as it settled on.
    kwargs["n_requests"] = search.settled.requests
    at = simulate(FakeCost(), make_workload(rate=search.rate_per_s, **kwargs), config)  # type: ignore[arg-type]
    above = simulate(FakeCost(), make_workload(rate=search.rate_per_s * 1.2, **kwargs), config)  # type: ignore[arg-type]
    assert np.array_equal(at.ttft_s, search.result.ttft_s)
    assert search.result.meets(ttft_p99_ms=100.0, tpot_p99_ms=15.0)
    assert not above.meets(ttft_p99_ms=100.0, tpot_p99_ms=15.0)
    assert replicas_needed(search.rate_per_s * 2.5, search.rate_per_s) == 3


def test_unreachable_sla_gives_zero_rate() -> None:
    search = max_rate_within_sla(
        FakeCost(), _config(), prompt=100, output=10, ttft_p99_ms=5.0, tpot_p99_ms=50.0, n_requests=100
    )
    assert search.rate_per_s == 0.0 and search.result is None
    with pytest.raises(ValueError):
        replicas_needed(10.0, search.rate_per_s)


def test_replicas_needed_rounds_up_exact_multiples_stay() -> None:
    assert replicas_needed(30.0, 10.0) == 3
    assert replicas_needed(30.1, 10.0) == 4
    assert replicas_needed(0.5, 10.0) == 1


# (f) determinism, and the fast decode path against plain stepping


def test_same_seed_same_result_other_seed_differs(roofline: RooflineStepCost) -> None:
    def run(seed: int) -> SimulationResult:
        workload = make_workload(
            prompt=LengthDist(300, 1.0), output=LengthDist(100, 1.0), n_requests=500, rate=20.0, seed=seed
        )
        return simulate(roofline, workload, _config(max_num_seqs=32, kv_cache_tokens=20_000))

    first, second, other = run(7), run(7), run(8)
    np.testing.assert_array_equal(first.ttft_s, second.ttft_s)
    np.testing.assert_array_equal(first.e2e_s, second.e2e_s)
    assert first.preemptions == second.preemptions and first.steps == second.steps
    assert not np.array_equal(first.ttft_s, other.ttft_s)


def test_fast_decode_runs_match_step_by_step(roofline: RooflineStepCost) -> None:
    workload = make_workload(prompt=LengthDist(400, 1.0), output=LengthDist(200, 1.0), n_requests=400, rate=8.0, seed=9)
    config = _config(max_num_seqs=16, max_num_batched_tokens=512, kv_cache_tokens=12_000)
    fast = simulate(roofline, workload, config)
    slow = ContinuousBatchingSimulation(roofline, workload, config, fast_decode=False).run()
    assert fast.preemptions == slow.preemptions > 0
    assert fast.steps == slow.steps
    np.testing.assert_allclose(fast.e2e_s, slow.e2e_s, rtol=1e-9)
    np.testing.assert_allclose(fast.ttft_s, slow.ttft_s, rtol=1e-9)


# workloads, results and the measured-table cost


def test_lognormal_lengths_have_the_asked_mean_and_cv() -> None:
    draws = LengthDist(500, 0.8).sample(200_000, np.random.default_rng(0))
    assert draws.min() >= 1
    assert draws.mean() == pytest.approx(500, rel=0.02)
    assert draws.std() / draws.mean() == pytest.approx(0.8, rel=0.05)
    assert (LengthDist(3.0).sample(4, np.random.default_rng(0)) == 3).all()


def test_rescaled_workload_keeps_its_requests() -> None:
    workload = make_workload(prompt=LengthDist(100, 0.5), output=20, n_requests=1000, rate=3.0, seed=0)
    faster = workload.at_rate(12.0)
    assert (len(faster) - 1) / faster.arrivals_s[-1] == pytest.approx(12.0)
    ratio = faster.arrivals_s[1:] / workload.arrivals_s[1:]
    np.testing.assert_allclose(ratio, ratio[0])  # the same gaps, compressed
    np.testing.assert_array_equal(faster.prompt_tokens, workload.prompt_tokens)


def test_workload_from_traffic_and_trace() -> None:
    traffic = Traffic(prompt_tokens=256, output_tokens=64, requests_per_second=5.0)
    workload = workload_from_traffic(traffic, n_requests=4000, seed=0)
    assert (workload.prompt_tokens == 256).all() and (workload.output_tokens == 64).all()
    assert (len(workload) - 1) / workload.arrivals_s[-1] == pytest.approx(5.0, rel=0.05)
    trace = make_workload(prompt=10, output=5, arrivals=[0.0, 0.0, 0.5])
    result = simulate(FakeCost(), trace, _config())
    assert result.ttft_s[0] == result.ttft_s[1] == pytest.approx(_prefill_s(20))  # both prompts in one step
    with pytest.raises(ValueError):
        make_workload(prompt=10, output=5, rate=1.0, arrivals=[0.0])


def test_warmup_requests_are_left_out_of_percentiles() -> None:
    arrivals = np.arange(20) * 10.0  # 20 requests far apart; the first two (10 %) have long prompts
    prompts = np.array([900, 900] + [10] * 18)
    workload = Workload(arrivals, prompts, np.full(20, 5))
    result = simulate(FakeCost(), workload, _config())
    assert result.ttft_s[0] == pytest.approx(_prefill_s(900))
    assert result.ttft_ms.p99 == pytest.approx(_prefill_s(10) * 1e3)
    assert result.goodput_rps is None
    graded = simulate(FakeCost(), workload, _config(), ttft_sla_ms=_prefill_s(10) * 1e3 + 1e-6, tpot_sla_ms=1000)
    assert graded.goodput_rps == pytest.approx(18 / graded.duration_s)


def test_table_step_cost_interpolates_and_extrapolates() -> None:
    table = TableStepCost(prefill={128: 0.02, 512: 0.05}, decode={1: 0.01, 8: 0.012})
    assert table.step_seconds(320, 0, 0) == pytest.approx(0.035)
    assert table.step_seconds(1024, 0, 0) == pytest.approx(0.1)  # proportional above the last point
    assert table.step_seconds(0, 4, 999) == pytest.approx(0.01 + 3 / 7 * 0.002)
    assert table.step_seconds(16, 4, 0) == pytest.approx(max(0.02, table.step_seconds(0, 4, 0)))
    result = simulate(table, make_workload(prompt=128, output=11, arrivals=[0.0]), _config())
    assert result.ttft_s[0] == pytest.approx(0.02) and result.tpot_s[0] == pytest.approx(0.01)
    assert not math.isnan(result.e2e_ms.p99)


def test_rate_search_terminates_and_stays_sustainable_under_a_loose_sla() -> None:
    """An SLA no finite queue can break must not send the search to infinity: capacity caps it."""
    search = max_rate_within_sla(
        FakeCost(), _config(), prompt=32, output=16, ttft_p99_ms=1e9, tpot_p99_ms=1e9, n_requests=200
    )
    decode_only_capacity = 8 / (16 * DECODE_S)
    assert 0 < search.rate_per_s <= decode_only_capacity
    assert search.evaluations < 30
