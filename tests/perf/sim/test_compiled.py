"""The compiled replay against its reference: the Python scheduler, on a grid of configurations.

Every case replays the same requests through ``ContinuousBatchingSimulation`` (Python, step by step) and through
``compiled.run_compiled``, on the calibrated step costs the search uses (datasheet and measured-kernel features,
point and upper end, every engine's batching, a KV cache small enough to preempt, prompts whole or chunked,
speculative decoding, a decode worker's steps, shared prefixes and conversations through the prefix cache), and
asks for the same run: the same number of steps and
preemptions, and every request's first token and finish at the same time to the rounding of the sums.
"""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.compiled import compiled_cost, run_compiled
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.disaggregated import DecodeOnlyStepCost
from recommender.perf.sim.scheduler import ContinuousBatchingSimulation, SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.speculative import SpeculativeDecoding, SpeculativeStepCost, decode_steps_workload
from recommender.perf.sim.workload import LengthDist, SharedPrefix, make_workload
from recommender.perf.step.calibrated import CalibratedModel, shipped_model
from recommender.perf.step.compiled_cost import compile_step_cost
from recommender.perf.step.cost import PrefillChunks, RooflineStepCost
from recommender.perf.step.features import StepFeatures
from recommender.perf.step.kernel_features import KernelStepFeatures
from recommender.quantize import get_scheme

_, LLAMA_8B = load_architecture("llama-3.1-8b")
#: Times agree to this (relative): the compiled loop sums each step where Python sums a stretch at once.
RTOL = 1e-9


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> CalibratedModel:
    return shipped_model(tmp_path_factory.mktemp("kernel-tables"))


def _cost(calibrated: CalibratedModel, gpu: str, engine: str, upper: bool, scheme: str = "fp8-dynamic") -> object:
    point = calibrated.step_cost(
        LLAMA_8B, get_scheme(scheme), load_catalog().get(gpu), engine, kv_cache_dtype="fp8" if engine else "auto"
    )
    return calibrated.upper_step_cost(point, engine, 0.9) if upper else point


def _config(engine: str, kv_tokens: int, **overrides: object) -> SchedulerConfig:
    base = SchedulerConfig(kv_cache_tokens=kv_tokens, max_num_seqs=128, max_num_batched_tokens=2048)
    config = PROFILES[engine].batching(base)
    if overrides:
        from dataclasses import replace

        config = replace(config, **overrides)  # type: ignore[arg-type]
    return config


def _same_run(compiled: object, reference: object) -> None:
    a, b = compiled, reference
    assert a.steps == b.steps  # type: ignore[attr-defined]
    assert a.preemptions == b.preemptions  # type: ignore[attr-defined]
    assert a.max_step_tokens == b.max_step_tokens  # type: ignore[attr-defined]
    assert a.prefill_tokens == b.prefill_tokens  # type: ignore[attr-defined]
    np.testing.assert_allclose(a.ttft_s, b.ttft_s, rtol=RTOL)  # type: ignore[attr-defined]
    np.testing.assert_allclose(a.e2e_s, b.e2e_s, rtol=RTOL)  # type: ignore[attr-defined]


# GPUs with measured kernel tables (h100-sxm, l40s) and without (l4, mi300x: the datasheet).
GRID = [
    (gpu, engine, upper, rate, kv)
    for gpu in ("h100-sxm", "l40s", "l4", "mi300x")
    for engine in ("vllm", "sglang", "trtllm")
    for upper in (False, True)
    for rate, kv in ((2.0, 400_000), (40.0, 60_000))
]


@pytest.mark.parametrize(("gpu", "engine", "upper", "rate", "kv"), GRID)
def test_the_compiled_loop_replays_the_python_scheduler_step_for_step(
    calibrated: CalibratedModel, gpu: str, engine: str, upper: bool, rate: float, kv: int
) -> None:
    cost = _cost(calibrated, gpu, engine, upper)
    config = _config(engine, kv)
    workload = make_workload(prompt=LengthDist(900, 0.8), output=LengthDist(200, 0.8), n_requests=300, rate=rate)
    compiled = compiled_cost(cost, config)  # type: ignore[arg-type]
    assert compiled is not None
    reference = ContinuousBatchingSimulation(cost, workload, config).run()  # type: ignore[arg-type]
    _same_run(run_compiled(compiled, workload, config), reference)


def test_a_kv_cache_that_runs_short_preempts_the_same_requests(calibrated: CalibratedModel) -> None:
    cost = _cost(calibrated, "h200", "vllm", upper=False)
    config = _config("vllm", 20_000)
    workload = make_workload(prompt=LengthDist(1500, 0.5), output=LengthDist(600, 0.5), n_requests=300, rate=30.0)
    reference = ContinuousBatchingSimulation(cost, workload, config).run()  # type: ignore[arg-type]
    assert reference.preemptions > 50  # the case is the one it names
    compiled = compiled_cost(cost, config)  # type: ignore[arg-type]
    assert compiled is not None
    _same_run(run_compiled(compiled, workload, config), reference)


@pytest.mark.parametrize("chunked", [True, False])
def test_whole_prompts_and_chunked_prompts_schedule_alike(calibrated: CalibratedModel, chunked: bool) -> None:
    cost = _cost(calibrated, "b200", "vllm", upper=True)
    config = _config("vllm", 200_000, chunked_prefill=chunked, max_num_batched_tokens=16_384)
    workload = make_workload(prompt=LengthDist(2000, 0.3), output=LengthDist(100, 0.6), n_requests=300, rate=20.0)
    compiled = compiled_cost(cost, config)  # type: ignore[arg-type]
    assert compiled is not None
    reference = ContinuousBatchingSimulation(cost, workload, config).run()  # type: ignore[arg-type]
    _same_run(run_compiled(compiled, workload, config), reference)


@pytest.mark.parametrize("gpu", ["h100-sxm", "l4"])
def test_speculative_steps_verify_the_same_drafts(calibrated: CalibratedModel, gpu: str) -> None:
    cost = _cost(calibrated, gpu, "vllm", upper=True)
    config = _config("vllm", 300_000)
    speculation = SpeculativeDecoding("eagle3", 3, 2.4, 3.0)
    workload = make_workload(prompt=LengthDist(800, 0.5), output=LengthDist(300, 0.5), n_requests=300, rate=15.0)
    steps = decode_steps_workload(workload, speculation)
    reference = ContinuousBatchingSimulation(
        SpeculativeStepCost(cost, speculation),  # type: ignore[arg-type]
        steps,
        config,
        fast_decode=False,  # Python's stretch interpolates a speculative step between its ends; step by step is exact
    ).run()
    compiled = compiled_cost(cost, config, speculation)  # type: ignore[arg-type]
    assert compiled is not None
    _same_run(run_compiled(compiled, steps, config), reference)


def test_a_decode_worker_prices_admitted_prompts_as_transferred_kv(calibrated: CalibratedModel) -> None:
    cost = DecodeOnlyStepCost(_cost(calibrated, "h200", "vllm", upper=True))  # type: ignore[arg-type]
    config = _config("vllm", 300_000, max_num_batched_tokens=16_384)
    workload = make_workload(prompt=LengthDist(2000, 0.5), output=LengthDist(300, 0.5), n_requests=300, rate=25.0)
    compiled = compiled_cost(cost, config)
    assert compiled is not None
    reference = ContinuousBatchingSimulation(cost, workload, config).run()
    _same_run(run_compiled(compiled, workload, config), reference)


def test_simulate_takes_the_compiled_loop_and_gives_the_reference_answer(calibrated: CalibratedModel) -> None:
    cost = _cost(calibrated, "h100-sxm", "sglang", upper=False)
    config = _config("sglang", 200_000)
    workload = make_workload(prompt=LengthDist(500, 0.5), output=LengthDist(200, 0.5), n_requests=300, rate=30.0)
    reference = ContinuousBatchingSimulation(cost, workload, config).run(ttft_sla_ms=500, tpot_sla_ms=30)  # type: ignore[arg-type]
    result = simulate(cost, workload, config, ttft_sla_ms=500, tpot_sla_ms=30)  # type: ignore[arg-type]
    _same_run(result, reference)
    assert result.goodput_rps == pytest.approx(reference.goodput_rps, rel=RTOL)


PREFIXES = [
    # (prefix, kv cache tokens): one system prompt; three templates on 70 % of requests; a cache small enough that
    # the running requests evict cached prefixes and preempt each other.
    (SharedPrefix(tokens=512), 400_000),
    (SharedPrefix(tokens=700, fraction=0.7, templates=3), 400_000),
    (SharedPrefix(tokens=600, fraction=0.8, templates=40), 24_000),
]


@pytest.mark.parametrize(("shared", "kv"), PREFIXES)
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_shared_prefixes_are_cached_read_and_evicted_as_in_python(
    calibrated: CalibratedModel, shared: SharedPrefix, kv: int, engine: str
) -> None:
    cost = _cost(calibrated, "h100-sxm", engine, upper=True)
    config = _config(engine, kv)
    workload = make_workload(
        prompt=LengthDist(1200, 0.4), output=LengthDist(150, 0.5), n_requests=300, rate=25.0, prefix=shared
    )
    compiled = compiled_cost(cost, config)  # type: ignore[arg-type]
    assert compiled is not None
    reference = ContinuousBatchingSimulation(cost, workload, config).run()  # type: ignore[arg-type]
    assert reference.prefix_hit_tokens > 0
    result = run_compiled(compiled, workload, config)
    _same_run(result, reference)
    assert result.prefix_hit_tokens == reference.prefix_hit_tokens


@pytest.mark.parametrize("kv", [400_000, 30_000])
def test_conversations_read_their_history_from_the_cache_as_in_python(calibrated: CalibratedModel, kv: int) -> None:
    cost = _cost(calibrated, "l4", "vllm", upper=False)
    config = _config("vllm", kv)
    workload = make_workload(
        prompt=LengthDist(400, 0.3),
        output=LengthDist(120, 0.3),
        n_requests=320,
        rate=6.0,
        conversation=Conversation(turns=4, think_time_s=5.0, message_tokens=60),
        prefix=SharedPrefix(tokens=256),
    )
    assert workload.history_keys is not None  # the case is the one it names
    compiled = compiled_cost(cost, config)  # type: ignore[arg-type]
    assert compiled is not None
    reference = ContinuousBatchingSimulation(cost, workload, config).run()  # type: ignore[arg-type]
    result = run_compiled(compiled, workload, config)
    _same_run(result, reference)
    assert result.prefix_hit_tokens == reference.prefix_hit_tokens > 0


def test_step_costs_without_a_compiled_form_are_left_to_python() -> None:
    roofline = RooflineStepCost(LLAMA_8B, get_scheme("baseline"), load_catalog().get("h100-sxm"))
    assert compile_step_cost(roofline, max_tokens=2048, max_seqs=64) is None


@pytest.mark.parametrize("gpu", ["h100-sxm", "l4"])
def test_a_compiled_step_prices_every_step_shape_as_its_source(calibrated: CalibratedModel, gpu: str) -> None:
    for upper in (False, True):
        cost = _cost(calibrated, gpu, "vllm", upper)
        table = compile_step_cost(cost, max_tokens=4096, max_seqs=256)  # type: ignore[arg-type]
        assert table is not None
        rng = np.random.default_rng(1)
        for _ in range(300):
            n = int(rng.integers(0, 257))
            seqs = int(rng.integers(0, 5))
            tokens = int(rng.integers(seqs, 4096 - n + 1)) if seqs else 0
            computed = int(rng.integers(0, 30_000)) if seqs else 0
            chunks = (
                PrefillChunks(tokens, seqs, tokens * tokens, tokens * computed, computed) if seqs else PrefillChunks()
            )
            context = computed + n * int(rng.integers(1, 40_000))
            want = cost.prefill_step_seconds(chunks, n, context)  # type: ignore[attr-defined]
            assert table.seconds(chunks, n, context) == pytest.approx(want, rel=RTOL)


def test_the_grid_covers_both_feature_sources(calibrated: CalibratedModel) -> None:
    """The grid above is only worth its cases if it crosses measured kernels and the datasheet."""
    sources = {type(_cost(calibrated, gpu, "vllm", False).features) for gpu in ("h100-sxm", "l4")}  # type: ignore[attr-defined]
    assert sources == {KernelStepFeatures, StepFeatures}
