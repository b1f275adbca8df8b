"""Expert parallelism: the all-to-all by volume over the links, skewed expert load and EPLB, memory per GPU.

Known answers: DeepEP V1's published low-latency kernel times on H800 + ConnectX-7 400 Gb/s (deepseek-ai/DeepEP
docs/legacy.md @ 0297fc80: 128 tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine), hand-computed
packings, and the DeepSeek-V3 expert count.
"""

from __future__ import annotations

import numpy as np
import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import known_links, resolve_link
from recommender.perf.model.all_to_all import FP8_DISPATCH_BYTES, all_to_all_cost, dispatch_bytes_per_element
from recommender.perf.model.expert_load import eplb_load, static_load, zipf_popularity
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_kv_bytes_per_token_per_gpu, ep_memory

CATALOG = load_catalog()
H100, H100_PCIE = CATALOG.get("h100-sxm"), CATALOG.get("h100-pcie")
NVLINK, IB = resolve_link("nvlink", H100), resolve_link("infiniband-ndr", H100)
_, DEEPSEEK_V3 = load_architecture("deepseek-v3")
_, GPT_OSS_120B = load_architecture("gpt-oss-120b")

#: DeepEP V1 low-latency kernels: EP degree -> (dispatch us, combine us).
DEEPEP_LOW_LATENCY = {16: (118, 195), 32: (155, 273), 64: (173, 314), 128: (192, 369), 256: (194, 360)}


@pytest.mark.parametrize("ep", sorted(DEEPEP_LOW_LATENCY))
def test_all_to_all_reproduces_deepep_published_times(ep: int) -> None:
    cost = all_to_all_cost(128, top_k=8, hidden=7168, ep=ep, gpus_per_node=8, node_link=NVLINK, network_link=IB)
    dispatch_us, combine_us = DEEPEP_LOW_LATENCY[ep]
    assert cost.dispatch_s * 1e6 == pytest.approx(dispatch_us, rel=0.15)
    assert cost.combine_s * 1e6 == pytest.approx(combine_us, rel=0.15)


def test_all_to_all_volume_is_tokens_times_top_k_times_hidden_times_bytes() -> None:
    cost = all_to_all_cost(
        100, top_k=4, hidden=1000, ep=8, gpus_per_node=8, node_link=NVLINK, dispatch_bytes=2.0, combine_bytes=2.0
    )
    assert cost.network_bytes == 0.0
    assert cost.node_bytes == pytest.approx(100 * 4 * 1000 * (2 + 2) * 7 / 8)  # 7 of 8 pairs leave the GPU
    assert cost.dispatch_s == pytest.approx(NVLINK.latency_s + 100 * 4 * 1000 * 2 * 7 / 8 / NVLINK.bytes_per_s)
    skewed = all_to_all_cost(100, top_k=4, hidden=1000, ep=8, gpus_per_node=8, node_link=NVLINK, imbalance=2.0)
    assert skewed.node_bytes == pytest.approx(
        2 * all_to_all_cost(100, top_k=4, hidden=1000, ep=8, gpus_per_node=8, node_link=NVLINK).node_bytes
    )


def test_fp8_schemes_dispatch_in_fp8_and_16_bit_schemes_in_16_bits() -> None:
    assert dispatch_bytes_per_element("fp8") == FP8_DISPATCH_BYTES == 1 + 4 / 128
    assert dispatch_bytes_per_element("bf16") == 2.0


def test_expert_parallelism_across_nodes_needs_a_network_link() -> None:
    with pytest.raises(BadInputError) as info:
        all_to_all_cost(128, top_k=8, hidden=7168, ep=16, gpus_per_node=8, node_link=NVLINK)
    assert info.value.field == "link" and "\n" not in str(info.value)


def test_links_come_from_the_catalog_and_unknown_ones_are_refused() -> None:
    assert NVLINK.bytes_per_s == pytest.approx(900 / 2 * 0.78 * 1e9)  # H100's NVLink 4, per direction, measured share
    assert IB.bytes_per_s == 50e9 and set(known_links()) >= {"nvlink", "pcie", "infiniband-ndr", "roce-400g"}
    with pytest.raises(BadInputError) as info:
        resolve_link("infiniband-hdr", H100, field="space.link")
    assert info.value.field == "space.link" and "infiniband-ndr" in info.value.fix
    with pytest.raises(BadInputError) as info:
        resolve_link("nvlink", H100_PCIE)
    assert "pcie" in info.value.fix


def test_uniform_popularity_loads_every_gpu_evenly() -> None:
    flat = zipf_popularity(256, 0.0)
    assert static_load(flat, 32).imbalance == pytest.approx(1.0)
    assert eplb_load(flat, 32).imbalance == pytest.approx(1.0)


def test_static_and_balanced_placements_of_four_experts_on_two_gpus() -> None:
    popularity = np.array([0.4, 0.3, 0.2, 0.1])
    # Random pairs: {0.4, 0.3} -> 0.7, {0.4, 0.2} -> 0.6, {0.4, 0.1} -> 0.5, each a third: expected max 0.6 of mean 0.5.
    assert static_load(popularity, 2).imbalance == pytest.approx(1.2, abs=0.03)
    # Balanced packing, heaviest first to the lighter GPU with room: 0.4 -> A, 0.3 -> B, 0.2 -> B, 0.1 -> A: 0.5 each.
    assert eplb_load(popularity, 2).imbalance == pytest.approx(1.0)


def test_skewed_popularity_overloads_one_gpu_and_redundant_experts_buy_it_back() -> None:
    skewed = zipf_popularity(256, 1.0)
    static, packed, replicated = static_load(skewed, 32), eplb_load(skewed, 32), eplb_load(skewed, 32, 32)
    # The hottest expert alone draws 1/H(256) = 16 % of the pairs, five GPUs' worth of the 3.1 % mean share.
    assert skewed[0] == pytest.approx(1 / sum(1 / i for i in range(1, 257)))
    assert static.imbalance > packed.imbalance > 5.0  # packing cannot split one expert
    assert replicated.imbalance < 1.05  # 32 redundant slots spread it (DeepSeek-V3's prefill
    # deployment uses 32 over EP 32: arXiv 2412.19437, section 3.4.1)
    assert replicated.busiest_share == pytest.approx(replicated.imbalance / 32)


def test_an_expert_parallel_degree_that_does_not_divide_the_experts_is_refused() -> None:
    with pytest.raises(BadInputError) as info:
        ExpertParallelLayout(ep=24).check(DEEPSEEK_V3, field="space.expert_parallel")
    assert info.value.field == "space.expert_parallel" and "256" in info.value.problem and "32" in info.value.fix
    ExpertParallelLayout(ep=16, redundant_experts=32).check(DEEPSEEK_V3)  # 288 slots over 16 GPUs: 18 each
    with pytest.raises(BadInputError):
        ExpertParallelLayout(ep=8, attention_dp=3)


def test_experts_are_sharded_by_ep_and_attention_dp_multiplies_mla_cache_room() -> None:
    device_gb = 143771 * 2**20 / 1e9  # H200's nvidia-smi total
    fp8 = 8 + 32 / (128 * 128)  # DeepSeek-V3's block-128 FP8 with fp32 scales
    tp_like, dp = (
        ep_memory(DEEPSEEK_V3, ExpertParallelLayout(ep=8, attention_dp=d), bits_per_weight=fp8, device_gb=device_gb)
        for d in (1, 8)
    )
    moe = DEEPSEEK_V3.moe
    assert moe is not None
    all_experts_gb = moe.n_moe_layers * moe.n_experts * DEEPSEEK_V3.expert_params * fp8 / 8 / 1e9
    assert tp_like.expert_gb * 8 == pytest.approx(all_experts_gb)
    # Each attention rank holds the dense weights; a rank of 8 GPUs splits them, all but MLA's down-projection, which
    # each of its GPUs holds whole (``ModelShape.tp_replicated_params``).
    replicated_gb = DEEPSEEK_V3.tp_replicated_params * fp8 / 8 / 1e9
    assert dp.dense_gb == pytest.approx(8 * (tp_like.dense_gb - replicated_gb) + replicated_gb)
    # MLA's latent is whole on every GPU of a rank: 8 ranks hold 8 sets of sequences in less room each.
    assert ep_kv_bytes_per_token_per_gpu(DEEPSEEK_V3, "auto", ExpertParallelLayout(ep=8)) == 576 * 61 * 2
    assert dp.kv_tokens > 4 * tp_like.kv_tokens
    # Grouped-query heads split inside an attention rank; the step reads the full-attention layers per context token
    # (the sliding-window layers per sequence: test_window_expert_parallel.py).
    assert ep_kv_bytes_per_token_per_gpu(GPT_OSS_120B, "auto", ExpertParallelLayout(ep=8, attention_dp=2)) == (
        GPT_OSS_120B.full_kv_bytes_per_token(2.0) / 4
    )
