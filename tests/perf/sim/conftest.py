"""The fleet tests' shared replica: Llama 3.1 8B in bf16 on one H100 under vLLM, the shipped calibrated step cost."""

from __future__ import annotations

import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme

_, LLAMA_8B = load_architecture("llama-3.1-8b")


@pytest.fixture(scope="module")
def cost() -> object:
    h100 = load_catalog().get("h100-sxm")
    return CalibratedModel(load_fit(), None).step_cost(LLAMA_8B, get_scheme("baseline"), h100, "vllm")


@pytest.fixture(scope="module")
def config() -> SchedulerConfig:
    h100 = load_catalog().get("h100-sxm")
    kv = kv_cache_tokens(LLAMA_8B, get_scheme("baseline"), h100, max_num_seqs=256)
    return PROFILES["vllm"].batching(SchedulerConfig(kv_cache_tokens=kv, max_num_seqs=256))
