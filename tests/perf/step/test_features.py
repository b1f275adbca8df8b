"""The ``kv`` feature: decode attention's KV read, or its FLOPs where they outlast the read (MLA's absorbed decode).

Known answers: DeepSeek-V3 on H200 with all 128 heads on one GPU decodes compute-bound (FlashMLA's analysis: 2 x
heads FLOPs per latent element read); at 16 heads a GPU (TP 8) the kernel's 64-row tile computes 64 heads' FLOPs,
compute-bound again; a grouped-query model's feature is the read alone, unchanged; a prefill chunk's prefix is read,
not decoded.
"""

from __future__ import annotations

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import DECODE_ATTENTION_EFFICIENCY, FEATURES, StepFeatures
from recommender.perf.step.rates import mla_decode_row_padding
from recommender.quantize import get_scheme

H200 = load_catalog().get("h200")
FP8 = get_scheme("fp8-dynamic")
DEEPSEEK = load_architecture("deepseek-v3")[1]
KV = FEATURES.index("kv")
BW = H200.memory_bandwidth_gbps * 1e9
#: Absorbed decode FLOPs per cached token of DeepSeek-V3, all layers, per head: 2 x (576 + 512) x 61.
PER_HEAD = 2 * (576 + 512) * 61


def _kv(features: StepFeatures, context: int, chunks: PrefillChunks | None = None) -> float:
    return float(features.of_step(chunks or PrefillChunks(), 4, context)[KV])


def test_mla_with_every_head_on_one_gpu_decodes_compute_bound() -> None:
    one_gpu = StepFeatures(DEEPSEEK, FP8, H200, 1, "fp8")
    compute = 128 * PER_HEAD / (H200.peak_flops("bf16") * DECODE_ATTENTION_EFFICIENCY)
    read = 61 * 576 * 1.0 / BW  # fp8 latent
    assert compute > 2 * read
    assert _kv(one_gpu, 10_000) == pytest.approx(10_000 * compute, rel=1e-9)
    steps = one_gpu.of_decode_steps(4, np.array([10_000, 20_000]))
    assert steps[:, KV] == pytest.approx([10_000 * compute, 20_000 * compute], rel=1e-9)


def test_mla_at_sixteen_heads_a_gpu_computes_a_whole_64_row_tile_and_is_compute_bound_again() -> None:
    """TP 8 leaves 16 heads a GPU; the absorbed decode kernel's tile still computes 64 query rows (FlashMLA's
    ``BLOCK_SIZE_M``), so the step pays 64 heads' FLOPs, which on an H200 outlast the read of the whole latent."""
    tp8 = StepFeatures(DEEPSEEK, FP8, H200, 8, "fp8")
    assert mla_decode_row_padding(DEEPSEEK, 8) == 4.0
    compute = 64 * PER_HEAD / (H200.peak_flops("bf16") * DECODE_ATTENTION_EFFICIENCY)
    read = 61 * 576 / BW
    assert 16 * PER_HEAD / (H200.peak_flops("bf16") * DECODE_ATTENTION_EFFICIENCY) < read < compute
    assert _kv(tp8, 10_000) == pytest.approx(10_000 * compute, rel=1e-9)


def test_mla_tile_padding_only_where_a_gpu_has_fewer_than_64_heads_and_only_for_mla() -> None:
    assert [mla_decode_row_padding(DEEPSEEK, tp) for tp in (1, 2, 4, 8, 16)] == [1.0, 1.0, 2.0, 4.0, 8.0]
    llama = load_architecture("llama-3.1-8b")[1]
    assert mla_decode_row_padding(llama, 8) == 1.0


def test_a_prefill_chunks_prefix_is_read_not_decoded() -> None:
    one_gpu = StepFeatures(DEEPSEEK, FP8, H200, 1, "fp8")
    chunk = PrefillChunks(tokens=512, seqs=1, sum_sq=512 * 512, sum_cross=512 * 2048, prior_tokens=2048)
    read = 61 * 576 / BW
    compute = 128 * PER_HEAD / (H200.peak_flops("bf16") * DECODE_ATTENTION_EFFICIENCY)
    assert _kv(one_gpu, 2048 + 6000, chunk) == pytest.approx(2048 * read + 6000 * compute, rel=1e-9)


def test_a_grouped_query_models_kv_feature_is_the_read_alone() -> None:
    llama = load_architecture("llama-3.1-8b")[1]
    f = StepFeatures(llama, FP8, H200, 1, "fp8")
    assert _kv(f, 10_000) == 10_000 * (f.rates.kv_bytes_per_token / f.rates.bandwidth)


@pytest.mark.parametrize(
    ("model", "scheme", "tp"),
    [("llama-3.1-8b", "fp8-dynamic", 1), ("llama-3.1-70b", "baseline", 4), ("deepseek-v3", "fp8-dynamic", 8)],
)
def test_the_plain_float_step_equals_the_feature_rows_dot_product(model: str, scheme: str, tp: int) -> None:
    """The simulator's per-step path (``step_seconds``) prices a step as ``of_step(...) @ coefficients`` does, for
    prefill, mixed and decode steps, dense and MoE (whose streamed weights vary with the tokens)."""
    f = StepFeatures(load_architecture(model)[1], get_scheme(scheme), H200, tp, "auto")
    coefficients = np.random.default_rng(0).uniform(0.5, 3.0, len(FEATURES))
    floats = tuple(float(x) for x in coefficients)
    for chunks, decode, context in [
        (PrefillChunks(), 64, 64 * 900),
        (PrefillChunks.single(2048), 0, 2048),
        (PrefillChunks(tokens=512, seqs=2, sum_sq=2 * 256 * 256, sum_cross=256 * 1024, prior_tokens=1024), 31, 40_000),
    ]:
        row = f.of_step(chunks, decode, context)
        assert f.step_seconds(chunks, decode, context, floats) == pytest.approx(float(row @ coefficients), rel=1e-12)
