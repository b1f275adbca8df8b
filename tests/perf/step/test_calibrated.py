"""The calibrated step cost: datasheet features per scheme (the FP8 peak, FP8 KV-cache reads, the all-reduce's
link), the shipped fit's file and data, its intervals and its provenance."""

from __future__ import annotations

import json

import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.serving_runs import DEFAULT_RUNS, runs_digest
from recommender.perf.step.calibrated import FIT_PATH, CalibratedModel, load_fit
from recommender.perf.step.features import StepFeatures
from recommender.quantize import get_scheme


def test_linear_work_runs_at_the_peak_of_the_schemes_compute_dtype() -> None:
    """FP8 GEMMs count at the FP8 peak (twice BF16's on an H100); weight-only INT4 computes in 16-bit."""
    from recommender.perf.step.cost import PrefillChunks
    from recommender.perf.step.features import FEATURES

    shape, h100 = load_architecture("qwen3-32b")[1], load_catalog().get("h100-sxm")
    prompt, at = PrefillChunks.single(4096), FEATURES.index("linear")
    linear = {
        s: StepFeatures(shape, get_scheme(s), h100).of_step(prompt, 0, 0)[at]
        for s in ("baseline", "fp8-dynamic", "w4a16-awq-g128")
    }
    assert linear["fp8-dynamic"] == pytest.approx(linear["baseline"] / 2, rel=0.02)
    assert linear["w4a16-awq-g128"] == pytest.approx(linear["baseline"], rel=0.02)
    # 4096 tokens x 2 x 32 B parameters at 989 TFLOP/s: about 0.27 s of matrix work at the BF16 peak.
    assert 0.2 < linear["baseline"] < 0.35


def test_an_fp8_kv_cache_doubles_capacity_and_its_reads_cost_what_the_release_measured() -> None:
    """The fp8 runs' cache: twice the tokens fit; vLLM's and TensorRT-LLM 1.2's decode attention read half the
    bytes (their runs measured at or below the 16-bit bound), TensorRT-LLM 1.0's costs what a 16-bit read does
    (its 180 FP8 runs; engine_profiles). The tool predicts the current releases."""
    from recommender.perf.model.memory import kv_cache_tokens
    from recommender.perf.step.cost import PrefillChunks
    from recommender.perf.step.features import FEATURES

    shape, h100, fp8 = load_architecture("qwen3-32b")[1], load_catalog().get("h100-sxm"), get_scheme("fp8-dynamic")
    tokens = {kv: kv_cache_tokens(shape, fp8, h100, kv_cache_dtype=kv) for kv in ("auto", "fp8")}
    assert tokens["fp8"] == pytest.approx(2 * tokens["auto"], rel=0.01)
    kv_at = FEATURES.index("kv")

    def read(kv: str, engine: str, release: str | None = None) -> float:
        width = PROFILES[engine].reads_kv_at_cache_width(release)
        return float(StepFeatures(shape, fp8, h100, 1, kv, width).of_step(PrefillChunks(), 8, 40_000)[kv_at])

    sixteen = read("auto", "vllm")
    assert sixteen > 0 and read("fp8", "vllm", "0.12.0") == pytest.approx(sixteen / 2)
    assert read("fp8", "trtllm", "1.0.0rc3") == read("auto", "trtllm", "1.0.0rc3") == sixteen
    assert read("fp8", "trtllm", "1.2.0rc6.post1") == read("fp8", "trtllm") == pytest.approx(sixteen / 2)
    assert read("fp8", "trtllm", "main") == read("fp8", "trtllm", "2.0") == read("fp8", "trtllm")  # current
    model = CalibratedModel(load_fit())
    assert all(
        model.step_cost(shape, fp8, h100, e, kv_cache_dtype="fp8").features.kv_read_at_cache_width
        for e in ("vllm", "sglang", "trtllm")
    )


def test_allreduce_uses_the_one_direction_link_bandwidth() -> None:
    from recommender.perf.step.features import link_bandwidth_one_direction

    assert link_bandwidth_one_direction(load_catalog().get("h100-sxm")) == pytest.approx(450e9)  # NVLink 4: 900 bidir


def test_shipped_fit_matches_the_shared_data_and_reports_its_cross_validation() -> None:
    fit = load_fit()
    assert DEFAULT_RUNS.is_file(), "the measured runs ship in the package (recommender/perf/fit/measured_runs)"
    assert fit.data_sha256 == runs_digest(), "refit: benchmarks/gpu_fidelity.py --write"
    assert set(fit.engines) == {"vllm", "sglang", "trtllm"}
    assert sum(fit.engine_runs.values()) == 534
    assert set(fit.cross_validation) >= {"overall", "qwen3-32b/sglang/baseline", "llama-3.1-8b/trtllm/baseline"}
    assert len(fit.residuals_engine_seen.tpot) + len(fit.residuals_engine_unseen.tpot) == 534
    # The coefficients hold only with the batching the replays simulated: a changed profile needs a refit.
    assert fit.engine_batching == {e: p.describe() for e, p in PROFILES.items()}, (
        "an engine profile changed since the fit: benchmarks/gpu_fidelity.py --write"
    )


def test_intervals_are_wider_for_an_engine_without_runs_and_grow_with_confidence() -> None:
    model = CalibratedModel(load_fit())
    seen, unseen = model.interval(100.0, "tpot", "vllm", 0.9), model.interval(100.0, "tpot", "tgi", 0.9)
    assert seen.low < 100.0 < seen.high
    assert unseen.low <= seen.low and unseen.high >= seen.high
    high, low = model.step_factors("vllm", 0.95), model.step_factors("vllm", 0.8)
    assert high.prefill > low.prefill > 1.0 and high.decode > low.decode >= 1.0


def test_provenance_names_the_calibration_and_the_datasheet_move() -> None:
    model = CalibratedModel(load_fit())
    catalog = load_catalog()
    here = model.provenance(catalog.get("h100-sxm"), "sglang")
    moved = model.provenance(catalog.get("l40s"), "tgi")
    assert here.kind == moved.kind == "calibrated"
    assert "84 measured sglang runs" in here.detail and "leave-one-" in here.detail
    assert "no measured tgi runs" in moved.detail and "datasheet" in moved.detail


def test_fit_file_is_json_the_loader_reads() -> None:
    assert json.loads(FIT_PATH.read_text())["coefficient_names"][-1] == "request"
