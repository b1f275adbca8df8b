"""vLLM's n-gram proposer replayed: known drafts, known step counts, and what a step costs with its drafts."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.speculative import SpeculativeDecoding, SpeculativeStepCost
from recommender.perf.sim.workload import make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme
from recommender.speculation.acceptance import rate_of
from recommender.speculation.methods import NgramMethod, parse_speculative, speculative_error
from recommender.speculation.ngram import DecodeReplay, propose, replay

NGRAM = NgramMethod()


def test_the_longest_suffix_s_earliest_occurrence_is_drafted() -> None:
    assert propose(np.array([1, 2, 3, 4, 5, 1, 2, 3]), NGRAM).tolist() == [4, 5, 1, 2]  # [1, 2, 3] at 0
    assert propose(np.array([7, 8, 9, 7, 8, 5, 7, 8, 9, 7, 8]), NGRAM).tolist() == [5, 7, 8, 9]  # 4-gram first
    assert propose(np.array([1, 2, 3, 4, 5]), NGRAM).size == 0  # no suffix of 2+ tokens occurred before
    assert propose(np.array([1, 2, 9, 1, 2]), NgramMethod(k=2)).tolist() == [9, 1]


def test_a_replay_counts_steps_tokens_and_drafts() -> None:
    """Prompt 1..8, greedy 1..9: step 1 has no match, step 2 accepts [3,4,5,6], step 3 accepts [7,8] of [7,8,1,2]."""
    steps = replay(np.arange(1, 9), np.arange(1, 10), NGRAM)
    assert steps == DecodeReplay(steps=3, tokens=8, drafted=8)
    # A continuation no earlier text predicts: one token per step, nothing drafted.
    assert replay(np.array([1, 2, 3]), np.array([10, 11, 12, 13]), NGRAM) == DecodeReplay(3, 3, 0)


def test_acceptance_pools_steps_and_its_interval_covers_the_pooled_ratio() -> None:
    replays = [DecodeReplay(10, 20, 12), DecodeReplay(10, 10, 0), DecodeReplay(5, 15, 15)]
    rate = rate_of(replays, NGRAM, "three documents")
    assert rate.tokens_per_step == pytest.approx(45 / 25) and rate.drafted_per_step == pytest.approx(27 / 25)
    assert rate.tokens_per_step_low <= rate.tokens_per_step <= rate.tokens_per_step_high
    with pytest.raises(ValueError, match="nothing to measure"):
        rate_of([DecodeReplay(0, 0, 0)], NGRAM, "one empty document")


def test_speculative_names() -> None:
    assert parse_speculative("none") is None and parse_speculative("ngram") == NgramMethod()
    assert parse_speculative("ngram:7") == NgramMethod(k=7)
    assert speculative_error("eagle3:org/head") is not None and "second network" in str(speculative_error("mtp"))
    assert "K must be 1 to 16" in str(speculative_error("ngram:0"))


@pytest.fixture(scope="module")
def vllm_8b() -> object:
    _, shape = load_architecture("llama-3.1-8b")
    return CalibratedModel(load_fit()).step_cost(shape, get_scheme("baseline"), load_catalog().get("h100-sxm"), "vllm")


def test_no_drafts_and_no_acceptance_is_the_plain_step(vllm_8b: object) -> None:
    idle = SpeculativeStepCost(vllm_8b, SpeculativeDecoding("ngram", 4, 1.0, 0.0))  # type: ignore[arg-type]
    for args in ((0, 64, 64 * 1500), (512, 8, 8 * 900), (2048, 0, 0)):
        assert idle.step_seconds(*args) == vllm_8b.step_seconds(*args)  # type: ignore[attr-defined]
    contexts = np.array([1000, 5000, 9000])
    assert idle.decode_steps_seconds(4, contexts) == pytest.approx(vllm_8b.decode_steps_seconds(4, contexts))  # type: ignore[attr-defined]


def test_speculation_pays_at_batch_one_and_less_at_a_full_batch(vllm_8b: object) -> None:
    """Verification is almost free while the weights' streaming binds (batch 1) and costs its FLOPs at 256."""
    spec = SpeculativeDecoding("ngram", 4, 2.0, 3.0)
    config = SchedulerConfig(kv_cache_tokens=400_000, max_num_seqs=256)
    lone = make_workload(prompt=1000, output=200, n_requests=40, rate=0.05)
    plain, fast = simulate(vllm_8b, lone, config), simulate(vllm_8b, lone, config, speculation=spec)  # type: ignore[arg-type]
    assert 1.8 < plain.tpot_ms.p50 / fast.tpot_ms.p50 <= 2.0
    assert plain.ttft_ms.p50 == pytest.approx(fast.ttft_ms.p50)  # the prefill is the same
    busy = make_workload(prompt=1000, output=200, n_requests=1500, rate=80.0)
    plain_busy = simulate(vllm_8b, busy, config)  # type: ignore[arg-type]
    fast_busy = simulate(vllm_8b, busy, config, speculation=spec)  # type: ignore[arg-type]
    gain_busy = fast_busy.output_tokens_per_s / plain_busy.output_tokens_per_s
    assert gain_busy < plain.tpot_ms.p50 / fast.tpot_ms.p50
    assert (fast.output_tokens_per_s, fast_busy.steps) != (plain.output_tokens_per_s, plain_busy.steps)
