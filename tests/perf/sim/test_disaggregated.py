"""The decode pool's steps: a transferred prompt costs no prefill, only its place in the decode batch."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.disaggregated import DecodeOnlyStepCost, pool_config
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.step.cost import PrefillChunks, RooflineStepCost
from recommender.quantize import get_scheme

ROOFLINE = RooflineStepCost(
    load_architecture("llama-3.1-8b")[1], get_scheme("fp8-dynamic"), load_catalog().get("h100-sxm")
)


def test_admitting_a_transferred_prompt_is_a_decode_step_of_one_more_sequence_over_its_prompt() -> None:
    decode = DecodeOnlyStepCost(ROOFLINE)
    chunks = PrefillChunks.of([(8000, 0)])
    assert decode.prefill_step_seconds(chunks, 31, 31 * 2000) == pytest.approx(
        ROOFLINE.step_seconds(0, 32, 31 * 2000 + 8000)
    )
    assert decode.prefill_step_seconds(chunks, 31, 31 * 2000) < ROOFLINE.prefill_step_seconds(chunks, 31, 31 * 2000) / 5
    contexts = np.array([1000, 64_000])
    assert decode.decode_steps_seconds(16, contexts) == pytest.approx(ROOFLINE.decode_steps_seconds(16, contexts))
    assert "transferred KV" in decode.provenance.detail


def test_a_decode_worker_admits_whole_prompts_beside_its_batch_a_prefill_worker_keeps_its_engines() -> None:
    sglang_like = SchedulerConfig(
        kv_cache_tokens=100_000, max_num_seqs=64, max_num_batched_tokens=8192, mixed_prefill=False
    )
    decode = pool_config(sglang_like, decode=True, longest_prompt=20_000)
    assert decode.mixed_prefill and decode.max_num_batched_tokens == 20_064
    assert pool_config(sglang_like, decode=False, longest_prompt=20_000) == sglang_like
