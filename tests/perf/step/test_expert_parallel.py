"""The step of an expert-parallel replica: attention at the rank's share, the busiest GPU's experts, the all-to-all.

Known answers: the feature row against hand-computed bytes and FLOPs for DeepSeek-V3 in FP8 on 8 H200s, the
all-to-all against ``all_to_all_cost`` x MoE layers, and the direction of every lever (skew slows, EPLB's
redundant experts restore, more attention ranks stream fewer dense weights per GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.all_to_all import all_to_all_cost, dispatch_bytes_per_element
from recommender.perf.model.expert_load import eplb_load, static_load, zipf_popularity
from recommender.perf.model.expert_parallel import ExpertParallelLayout
from recommender.perf.step.calibrated import shipped_model
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.expert_parallel import (
    AllToAllLinks,
    ExpertParallelStepFeatures,
    expert_parallel_step_costs,
)
from recommender.perf.step.features import FEATURES
from recommender.perf.step.moe_calibration import load_moe_fit
from recommender.quantize import get_scheme

H200 = load_catalog().get("h200")
FP8 = get_scheme("fp8-dynamic")
SHAPE = load_architecture("deepseek-v3")[1]
NVLINK = resolve_link("nvlink", H200)
LINKS = AllToAllLinks(node=NVLINK, network=None, gpus_per_node=8)
MODEL = shipped_model()


def _costs(layout: ExpertParallelLayout, imbalance: float = 1.0):  # type: ignore[no-untyped-def]
    features = ExpertParallelStepFeatures(SHAPE, FP8, H200, layout, imbalance=imbalance)
    return expert_parallel_step_costs(MODEL, features, "sglang", LINKS, confidence=0.9)


def test_a_decode_step_streams_the_rank_share_of_dense_weights_and_the_busiest_gpus_touched_experts() -> None:
    layout = ExpertParallelLayout(ep=8, attention_dp=8)
    f = ExpertParallelStepFeatures(SHAPE, FP8, H200, layout)
    row = f.of_step(PrefillChunks(), 64, 64 * 1000)
    moe = SHAPE.moe
    assert moe is not None
    bw = H200.memory_bandwidth_gbps * 1e9
    touched = 256 / 8 * (1 - (1 - 8 / 256) ** (64 * 8))  # 512 tokens on the replica touch ~all 32 local experts
    expert_bytes = moe.n_moe_layers * touched * SHAPE.expert_params * 1.0
    dense_bytes = SHAPE.dense_body_params * 1.0 + SHAPE.lm_head_params * 2.0  # attention rank of one GPU
    assert row[FEATURES.index("weights")] == pytest.approx((expert_bytes + dense_bytes) / bw, rel=1e-6)
    # KV: MLA's latent, 61 layers x 576 values x 2 bytes (16-bit cache) per context token, whole on the GPU; with all
    # 128 heads on the GPU the absorbed attention's 2 x 128 x (576 + 512) FLOPs per token and layer outlast the read
    # (at FlashMLA's 660 of 990 TFLOPS): the kernel is compute-bound.
    read = 61 * 576 * 2 / bw
    compute = 2 * 128 * (576 + 512) * 61 / (H200.peak_flops("bf16") * 660 / 990)
    assert compute > read
    assert row[FEATURES.index("kv")] == pytest.approx(64_000 * compute, rel=1e-6)
    pairs = 64 * 8 * 8
    flops = 64 * 2 * SHAPE.dense_body_params + 64 * 2 * SHAPE.lm_head_params + pairs / 8 * 2 * SHAPE.expert_params * 58
    assert row[FEATURES.index("linear")] == pytest.approx(flops / H200.peak_flops("fp8"), rel=1e-6)


def test_the_all_to_all_is_every_moe_layers_dispatch_and_combine_of_the_rank_tokens() -> None:
    point, _ = _costs(ExpertParallelLayout(ep=8, attention_dp=8))
    layer = all_to_all_cost(
        128,
        top_k=8,
        hidden=7168,
        ep=8,
        gpus_per_node=8,
        node_link=NVLINK,
        dispatch_bytes=dispatch_bytes_per_element("fp8"),
    )
    scale = load_moe_fit().parameter("scale")  # the measured MoE runs' scale on the whole step, all-to-all included
    assert point.all_to_all_seconds(128) == pytest.approx(scale * 58 * layer.seconds, rel=1e-9)
    assert point.all_to_all_seconds(0) == 0.0
    with_a2a = point.step_seconds(0, 128, 128 * 2000)
    assert with_a2a == pytest.approx(point.rank.step_seconds(0, 128, 128 * 2000) + scale * 58 * layer.seconds)


def test_the_step_carries_the_moe_runs_calibration_and_its_provenance() -> None:
    point, _ = _costs(ExpertParallelLayout(ep=8, attention_dp=8))
    moe = load_moe_fit()
    dense = MODEL.coefficients("sglang")[: len(FEATURES)]
    expected = dense * moe.parameter("scale")
    expected[FEATURES.index("layers")] += moe.parameter("layers")
    assert point.rank.coefficients == pytest.approx(expected)
    assert moe.provenance in point.provenance.detail


def test_vector_decode_steps_match_single_steps() -> None:
    point, upper = _costs(ExpertParallelLayout(ep=8, attention_dp=4))
    contexts = np.array([1000, 50_000, 200_000])
    for cost in (point, upper):
        many = cost.decode_steps_seconds(32, contexts)
        assert many == pytest.approx([cost.step_seconds(0, 32, int(c)) for c in contexts], rel=1e-9)
    assert upper.step_seconds(0, 32, 50_000) > point.step_seconds(0, 32, 50_000)


def test_skewed_expert_load_slows_the_step_and_eplb_redundant_experts_win_it_back() -> None:
    popularity = zipf_popularity(256, 1.0)
    skewed = static_load(popularity, 8).imbalance
    balanced = eplb_load(popularity, 8, redundant=32).imbalance
    assert skewed > 1.5 > balanced
    step = {
        name: _costs(
            ExpertParallelLayout(ep=8, attention_dp=8, redundant_experts=32 if name == "eplb" else 0), imbalance
        )[0].step_seconds(2048, 0, 0)
        for name, imbalance in (("even", 1.0), ("static", skewed), ("eplb", balanced))
    }
    assert step["static"] > step["even"] * 1.2
    assert step["eplb"] < step["static"]


def test_more_attention_ranks_stream_fewer_dense_weights_per_gpu_and_hold_the_latent_once_per_rank() -> None:
    one_rank = ExpertParallelStepFeatures(SHAPE, FP8, H200, ExpertParallelLayout(ep=8, attention_dp=1))
    eight = ExpertParallelStepFeatures(SHAPE, FP8, H200, ExpertParallelLayout(ep=8, attention_dp=8))
    # The same per-GPU tokens: 8 on one rank of 8 GPUs vs 1 on each of 8 ranks.
    w = FEATURES.index("weights")
    assert one_rank.of_step(PrefillChunks(), 8, 0)[w] < eight.of_step(PrefillChunks(), 1, 0)[w]
    # The latent is whole on every GPU of a rank: one rank of 8 GPUs reads 8x the context per GPU, at 16 heads a GPU
    # bandwidth-bound; eight ranks of one GPU read an eighth as much, but all 128 heads make them compute-bound.
    bw = H200.memory_bandwidth_gbps * 1e9
    read = 61 * 576 * 2 / bw
    assert one_rank.of_step(PrefillChunks(), 8, 8000)[FEATURES.index("kv")] == pytest.approx(8000 * read)
    heads_128 = 2 * 128 * (576 + 512) * 61 / (H200.peak_flops("bf16") * 660 / 990)
    assert eight.of_step(PrefillChunks(), 1, 1000)[FEATURES.index("kv")] == pytest.approx(1000 * heads_128)


def test_a_dense_model_or_a_degree_that_does_not_split_the_experts_is_refused() -> None:
    with pytest.raises(BadInputError) as info:
        ExpertParallelStepFeatures(SHAPE, FP8, H200, ExpertParallelLayout(ep=24, attention_dp=8))
    assert info.value.field == "expert_parallel"
    dense = load_architecture("llama-3.1-8b")[1]
    with pytest.raises(BadInputError):
        ExpertParallelStepFeatures(dense, FP8, H200, ExpertParallelLayout(ep=8))
