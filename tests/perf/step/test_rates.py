"""One configuration's datasheet rates (``perf/step/rates.py``), read by both step-cost models.

Known answers for Llama-3.1-8B on an H100 SXM (32 layers, hidden 4096, 8 KV heads of 128, vocabulary 128,256;
3.35 TB/s, 989 TFLOPS bf16 and 1,979 fp8 dense), and the roofline and the calibrated features built over one
grid of shapes, schemes, GPUs and tensor-parallel degrees holding equal rates.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import weight_bytes
from recommender.perf.step.cost import PrefillChunks, RooflineStepCost
from recommender.perf.step.features import FEATURES, StepFeatures
from recommender.perf.step.rates import StepRates
from recommender.perf.step.roofline import Efficiency
from recommender.quantize import get_scheme

CATALOG = load_catalog()
H100 = CATALOG.get("h100-sxm")
LLAMA = load_architecture("llama-3.1-8b")[1]


def test_rates_of_llama_8b_fp8_on_two_h100s_are_the_datasheet_figures_split_over_the_gpus() -> None:
    r = StepRates(LLAMA, get_scheme("fp8-dynamic"), H100, tensor_parallel=2, kv_cache_dtype="fp8")
    assert (r.bandwidth, r.peak, r.peak16) == (3350e9, 1979e12, 989e12)
    assert r.head_flops_per_seq == 2.0 * 4096 * 128_256 / 2
    assert r.attention_flops == r.decode_attention_flops == 4 * 32 * 32 * 128 / 2  # 4 x layers x heads x head_dim
    assert r.kv_bytes_per_token == 2 * 32 * 8 * 128 * 1 / 2  # K and V, every layer, 8 KV heads, fp8, over 2 GPUs
    assert r.weight_bytes == weight_bytes(LLAMA, get_scheme("fp8-dynamic")) / 2
    assert not r.weights_vary and r.weight_bytes_at(4096) == r.weight_bytes


def test_weight_only_schemes_compute_at_the_16_bit_peak_and_bnb_4bit_weights_vary_with_the_tokens() -> None:
    gptq = StepRates(LLAMA, get_scheme("w4a16-gptq-g128"), H100)
    assert gptq.peak == gptq.peak16 == 989e12
    nf4 = StepRates(LLAMA, get_scheme("bnb-nf4"), H100)
    assert nf4.weights_vary and nf4.weight_bytes_at(1) < nf4.weight_bytes_at(2)  # 16-bit write and read above 1 token


def test_rates_refuse_a_tensor_parallel_degree_below_one() -> None:
    with pytest.raises(ValueError, match="tensor_parallel must be >= 1"):
        StepRates(LLAMA, get_scheme("baseline"), H100, tensor_parallel=0)


_GRID = [
    (arch, scheme, gpu, tp, kv)
    for arch in ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3")
    for scheme in ("baseline", "fp8-dynamic", "w4a16-gptq-g128", "bnb-nf4")
    for gpu, tp in (("h100-sxm", 1), ("a100-80gb", 2), ("l4", 4), ("mi300x", 8))
    for kv in ("auto", "fp8")
]


@pytest.mark.parametrize(("arch", "scheme", "gpu", "tp", "kv"), _GRID)
def test_the_roofline_and_the_calibrated_features_read_the_same_rates(
    arch: str, scheme: str, gpu: str, tp: int, kv: str
) -> None:
    shape, method, accel = load_architecture(arch)[1], get_scheme(scheme), CATALOG.get(gpu)
    roofline = RooflineStepCost(shape, method, accel, tp, kv, Efficiency())
    features = StepFeatures(shape, method, accel, tp, kv, kv_read_at_cache_width=True)
    assert roofline.rates == features.rates == StepRates(shape, method, accel, tp, kv)


def test_features_that_read_kv_at_16_bits_hold_rates_at_the_16_bit_width() -> None:
    fp8 = get_scheme("fp8-dynamic")
    at_16 = StepFeatures(LLAMA, fp8, H100, 1, "fp8", kv_read_at_cache_width=False)
    assert at_16.rates == StepRates(LLAMA, fp8, H100, 1, "auto")
    assert at_16.rates.kv_bytes_per_token == 2 * StepFeatures(LLAMA, fp8, H100, 1, "fp8").rates.kv_bytes_per_token


def test_each_model_prices_a_step_from_the_rates_it_holds() -> None:
    """The roofline's bounds and the features' datasheet seconds, recomputed from the rates alone."""
    method, eff = get_scheme("fp8-dynamic"), Efficiency()
    roofline, features = RooflineStepCost(LLAMA, method, H100, efficiency=eff), StepFeatures(LLAMA, method, H100)
    r, chunks, decode, context = roofline.rates, PrefillChunks.of([(300, 100), (17, 0)]), 5, 4000
    tokens = chunks.tokens + decode
    flops = (
        tokens * r.body_flops_per_token
        + (chunks.seqs + decode) * r.head_flops_per_seq
        + r.attention_flops * (chunks.sum_sq + chunks.sum_cross)
        + r.decode_attention_flops * (context - chunks.prior_tokens)
    )
    moved = r.weight_bytes + context * r.kv_bytes_per_token
    expected = max(flops / (r.peak * eff.compute), moved / (r.bandwidth * eff.bandwidth)) + eff.step_overhead_s
    assert roofline.prefill_step_seconds(chunks, decode, context) == pytest.approx(expected, rel=1e-12)
    row = dict(zip(FEATURES, features.of_step(chunks, decode, context), strict=True))
    assert row["weights"] == pytest.approx(r.weight_bytes / r.bandwidth, rel=1e-12)
    assert row["kv"] == pytest.approx(context * r.kv_bytes_per_token / r.bandwidth, rel=1e-12)
    assert row["attention"] == pytest.approx((chunks.sum_sq + chunks.sum_cross) * r.attention_flops / r.peak16)


def test_rates_are_plain_values_not_computed_on_each_read() -> None:
    """The simulator reads them millions of times: every rate is a stored float or bool, no property."""
    r = StepRates(LLAMA, get_scheme("baseline"), H100)
    computed = [f.name for f in dataclasses.fields(r) if not f.init]
    assert computed and not any(isinstance(getattr(StepRates, name, None), property) for name in computed)
    assert all(type(getattr(r, name)) in (float, bool) for name in computed)
    assert np.isfinite([getattr(r, name) for name in computed]).all()
