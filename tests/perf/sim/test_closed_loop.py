"""Closed-loop benchmarks replayed in the simulator: concurrency held in flight, prefill alone or mixed, means
linear in the step's coefficients (what the fit rests on), and whole-request reservation."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, replay
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.step.cost import RooflineStepCost
from recommender.perf.step.features import N_FEATURES, FeatureStepCost, StepFeatures
from recommender.provenance import Provenance
from recommender.quantize import get_scheme

_P = Provenance("modeled", "test")


@pytest.fixture(scope="module")
def qwen() -> StepFeatures:
    return StepFeatures(load_architecture("qwen3-32b")[1], get_scheme("baseline"), load_catalog().get("h100-sxm"), 2)


def _config(mixed: bool = True) -> SchedulerConfig:
    return SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=1024, max_num_batched_tokens=8192, mixed_prefill=mixed)


def test_closed_loop_keeps_concurrency_in_flight_and_sends_on_completion(qwen: StepFeatures) -> None:
    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    lone = replay(cost, _config(), ClosedLoopBenchmark(concurrency=1, prompt_tokens=512, output_tokens=64, rounds=3))
    # One in flight: no queueing, every request sees the same prefill and decode steps.
    assert lone.ttft_ms.p99 == pytest.approx(lone.ttft_ms.p50, rel=1e-9)
    assert lone.requests == 3
    busy = replay(cost, _config(), ClosedLoopBenchmark(concurrency=32, prompt_tokens=512, output_tokens=64))
    # 32 prompts at once queue behind each other's prefill (16 k tokens > one 8 k step) and decode as a batch.
    assert busy.ttft_ms.mean > 1.5 * lone.ttft_ms.mean
    assert busy.tpot_ms.mean > lone.tpot_ms.mean
    assert busy.output_tokens_per_s > 10 * lone.output_tokens_per_s


def test_prefill_alone_moves_time_from_tpot_to_ttft(qwen: StepFeatures) -> None:
    """SGLang's default runs a prefill batch alone: a wave of new prompts is prefilled whole before any of it
    decodes (long TTFT, as its measured runs show: TTFT is 30-46 % of a request's time at concurrency 64),
    while mixed steps (vLLM) start decoding early and carry prefill chunks in decode steps (longer TPOT)."""
    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    bench = ClosedLoopBenchmark(concurrency=16, prompt_tokens=2048, output_tokens=128)
    mixed, alone = replay(cost, _config(True), bench), replay(cost, _config(False), bench)
    assert alone.ttft_ms.mean > 1.5 * mixed.ttft_ms.mean
    assert alone.tpot_ms.mean < mixed.tpot_ms.mean


def test_benchmark_means_are_linear_in_the_coefficients(qwen: StepFeatures) -> None:
    """What the fit rests on: arrivals sit on step boundaries, so the composition of steps does not move."""
    bench = ClosedLoopBenchmark(concurrency=24, prompt_tokens=1500, output_tokens=100)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 2, N_FEATURES), rng.uniform(0, 2, N_FEATURES)
    a[0] = b[0] = 1e-3  # steps strictly positive
    ra, rb = (replay(FeatureStepCost(qwen, c, _P), _config(), bench) for c in (a, b))
    rab = replay(FeatureStepCost(qwen, a + b, _P), _config(), bench)
    assert rab.ttft_ms.mean == pytest.approx(ra.ttft_ms.mean + rb.ttft_ms.mean, rel=1e-9)
    assert rab.tpot_ms.mean == pytest.approx(ra.tpot_ms.mean + rb.tpot_ms.mean, rel=1e-9)


def test_whole_request_reservation_queues_instead_of_preempting(qwen: StepFeatures) -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT: a KV cache for about 4 whole requests runs 4 at a time, never preempts."""
    from recommender.perf.sim.scheduler import ContinuousBatchingSimulation
    from recommender.perf.sim.workload import make_workload

    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    workload = make_workload(prompt=400, output=800, n_requests=16, rate=1e3)
    kv = 4 * 1200  # vLLM admits a dozen short prompts, then must preempt as their outputs grow
    vllm_like = ContinuousBatchingSimulation(cost, workload, SchedulerConfig(kv_cache_tokens=kv)).run()
    reserving = ContinuousBatchingSimulation(
        cost, workload, SchedulerConfig(kv_cache_tokens=kv, reserve_whole_request=True)
    ).run()
    assert vllm_like.preemptions > 0 and reserving.preemptions == 0
    arrivals = workload.arrivals_s
    first_done = float(np.min(arrivals[:4] + reserving.e2e_s[:4]))
    assert float(arrivals[4] + reserving.ttft_s[4]) >= first_done  # the fifth starts only when one has finished
    assert reserving.n_requests == 16 and not np.isnan(reserving.e2e_s).any()
