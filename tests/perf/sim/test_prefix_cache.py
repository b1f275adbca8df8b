"""Prefix caching in the simulator: a shared prefix's prefill is skipped by what the hit rate says, the cache
shares the KV capacity with the running requests, and a workload that shares nothing is unchanged to the cent."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.speed import Performance
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.prefix_cache import PrefixCache
from recommender.perf.sim.scheduler import ContinuousBatchingSimulation, SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import SharedPrefix, make_workload
from recommender.perf.step.cost import PrefillChunks, RooflineStepCost
from recommender.quantize import get_scheme

_, LLAMA3_8B = load_architecture("llama-3.1-8b")
PROMPT, PREFIX, OUTPUT = 3000, 2048, 64


@pytest.fixture(scope="module")
def roofline() -> RooflineStepCost:
    return RooflineStepCost(LLAMA3_8B, get_scheme("baseline"), load_catalog().get("h100-sxm"))


def test_cache_pins_what_is_read_and_evicts_least_recently_used_first() -> None:
    cache = PrefixCache()
    cache.publish(1, 10)
    cache.publish(2, 5)
    cache.acquire(1)
    assert (cache.blocks, cache.pinned) == (15, 10)
    cache.evict(100)  # only the unreferenced entry goes
    assert (cache.cached(1), cache.cached(2), cache.blocks) == (10, 0, 10)
    cache.release(1)
    cache.publish(3, 4)  # 3 is now the most recently used
    cache.evict(1)
    assert (cache.cached(1), cache.cached(3), cache.pinned) == (0, 4, 0)
    assert cache.publish(3, 6) == 2 and cache.blocks == 6  # a longer prefix under the same key grows it


def test_a_shared_prefix_skips_exactly_the_prefill_the_hit_rate_says(roofline: RooflineStepCost) -> None:
    """At a trickle (one request at a time) every request after the first finds the 2,048-token prefix cached."""
    n = 50
    APART = [10.0 * i for i in range(n)]  # noqa: N806 - each request served alone
    workload = make_workload(prompt=PROMPT, output=OUTPUT, arrivals=APART, prefix=SharedPrefix(PREFIX))
    result = simulate(roofline, workload, SchedulerConfig(kv_cache_tokens=200_000, max_num_seqs=32))
    assert result.prefix_hit_tokens == (n - 1) * PREFIX
    assert result.prefill_tokens == n * PROMPT - (n - 1) * PREFIX
    assert result.prefix_hit_rate == pytest.approx((n - 1) * PREFIX / (n * PROMPT))
    alone = simulate(
        roofline,
        make_workload(prompt=PROMPT, output=OUTPUT, arrivals=APART),
        SchedulerConfig(kv_cache_tokens=200_000, max_num_seqs=32),
    )
    # A hit's TTFT is the prefill of its last 952 tokens (reading the cached 2,048), not of 3,000.
    hit_ttft = roofline.prefill_step_seconds(PrefillChunks.of([(PROMPT - PREFIX, PREFIX)]), 0, PREFIX)
    assert result.ttft_s[1:] == pytest.approx([hit_ttft] * (n - 1), rel=1e-9)
    assert alone.ttft_s[1:] == pytest.approx([roofline.step_seconds(PROMPT, 0, 0)] * (n - 1), rel=1e-9)


def test_fast_decode_and_step_by_step_agree_with_a_prefix_cache_under_pressure(roofline: RooflineStepCost) -> None:
    """A cache too small for every template: prefixes are evicted, requests preempted; both paths agree."""
    prefix = SharedPrefix(PREFIX, fraction=0.8, templates=6)
    workload = make_workload(prompt=PROMPT, output=200, n_requests=300, rate=8.0, prefix=prefix)
    config = SchedulerConfig(kv_cache_tokens=24_000, max_num_seqs=64)
    fast = ContinuousBatchingSimulation(roofline, workload, config).run()
    slow = ContinuousBatchingSimulation(roofline, workload, config, fast_decode=False).run()
    assert fast.ttft_ms.p99 == pytest.approx(slow.ttft_ms.p99, rel=1e-9)
    assert fast.tpot_ms.p99 == pytest.approx(slow.tpot_ms.p99, rel=1e-9)
    assert fast.prefix_hit_tokens == slow.prefix_hit_tokens
    # Six prefixes of 128 blocks beside the running requests in 1,500 blocks: some hits, fewer than a big cache's.
    roomy = simulate(roofline, workload, SchedulerConfig(kv_cache_tokens=400_000, max_num_seqs=64))
    assert 0 < fast.prefix_hit_rate < roomy.prefix_hit_rate


def _evaluate(traffic: Traffic) -> Performance:
    evaluator = PerformanceEvaluator(load_catalog(), LLAMA3_8B, traffic, LatencySLA(ttft_p99_ms=1500, tpot_p99_ms=80))
    performance = evaluator.performance(Candidate("bf16", "baseline", "h100-sxm", 64))
    assert isinstance(performance, Performance) and performance.cost is not None
    return performance


def test_a_shared_prefix_cuts_the_monthly_cost_and_sharing_nothing_changes_nothing() -> None:
    """Prefill-heavy traffic (3,000-token prompts, 64-token answers): the 2,048 shared tokens are most of the work."""
    base = {"prompt_tokens": PROMPT, "output_tokens": OUTPUT, "requests_per_second": 40.0}
    plain = _evaluate(Traffic(**base))
    unshared = _evaluate(Traffic(**base, shared_prefix={"tokens": PREFIX, "fraction": 0.0}))
    shared = _evaluate(Traffic(**base, shared_prefix={"tokens": PREFIX}))
    assert plain.cost is not None and unshared.cost is not None and shared.cost is not None
    # No request shares anything: the same simulation to the cent (the prefix stream draws nothing else).
    assert round(unshared.cost.usd_per_month, 2) == round(plain.cost.usd_per_month, 2)
    assert unshared.serving.requests_per_s == plain.serving.requests_per_s
    assert plain.serving.prefix_hit_rate is None and unshared.serving.prefix_hit_rate == 0.0
    hit = shared.serving.prefix_hit_rate
    assert hit is not None and hit == pytest.approx(PREFIX / PROMPT, rel=0.02)
    # Capacity rises about as the prompt tokens left to compute fall (decode and fixed costs dilute it).
    gain = shared.serving.requests_per_s / plain.serving.requests_per_s
    assert 2.5 < gain <= 1 / (1 - hit) * 1.05  # 3.03x: the prefill the hits skip was most of the work
    assert shared.cost.usd_per_month < plain.cost.usd_per_month
    assert shared.cost.replicas == pytest.approx(plain.cost.replicas / gain, abs=1.0)


def test_a_conversation_s_next_turn_reads_its_history_from_the_cache(roofline: RooflineStepCost) -> None:
    """Turns 30 s apart, one conversation at a time: turn j computes only its new message (and the partial block
    before it); its history, kept when turn j-1 finished, is read from the cache."""
    turns, message, output = 4, 200, 150
    conversation = Conversation(turns=turns, think_time_s=30.0, message_tokens=message)
    workload = make_workload(prompt=1500, output=output, n_requests=turns * 10, rate=0.01, conversation=conversation)
    assert workload.history_keys is not None and workload.prefix_tokens is not None
    later = workload.prefix_tokens > 0
    assert np.all(workload.prompt_tokens[later] == workload.prefix_tokens[later] + message)
    result = simulate(roofline, workload, SchedulerConfig(kv_cache_tokens=400_000, max_num_seqs=32))
    # Every later turn hits its history's full blocks; the first turn of each conversation computes everything.
    expected = int(((workload.prefix_tokens[later] - 1) // 16 * 16).sum())
    assert result.prefix_hit_tokens == expected
    assert result.prefill_tokens == int(workload.prompt_tokens.sum()) - expected
    fast = ContinuousBatchingSimulation(roofline, workload, SchedulerConfig(kv_cache_tokens=6_000, max_num_seqs=8))
    slow = ContinuousBatchingSimulation(
        roofline, workload, SchedulerConfig(kv_cache_tokens=6_000, max_num_seqs=8), fast_decode=False
    )
    a, b = fast.run(), slow.run()
    assert a.prefix_hit_tokens == b.prefix_hit_tokens and a.ttft_ms.p99 == pytest.approx(b.ttft_ms.p99, rel=1e-9)


def test_a_conversation_longer_than_any_request_may_be_is_refused() -> None:
    with pytest.raises(BadInputError, match="traffic.conversation: the longest request"):
        Traffic(
            prompt_tokens=1000,
            output_tokens=100,
            requests_per_second=1.0,
            conversation={"turns": 1000, "think_time_s": 1, "message_tokens": 100_000},
        )
