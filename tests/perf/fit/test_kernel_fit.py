"""The kernel fit's data and artifact: the converted campaigns, static-batch rows, and what the shipped fit says."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.design_rows import static_row, step_features
from recommender.perf.fit.serving_runs import DLI_STATIC_RUNS, KERNEL_RUNS, NIM_RUNS, load_runs, runs_digest
from recommender.perf.step.calibrated import KERNEL_FIT_PATH, load_fit
from recommender.perf.step.features import FEATURES, N_FEATURES
from recommender.quantize import get_scheme


def test_converted_campaigns_load_whole() -> None:
    nim = load_runs(NIM_RUNS, schemes=get_scheme, profiles=PROFILES)
    dli = load_runs(DLI_STATIC_RUNS, schemes=get_scheme, profiles=PROFILES)
    assert len(nim) == 787 and {r.campaign for r in nim} == {"nim-genaiperf"}
    assert {r.hardware for r in nim} == {"a100-80gb", "h100-sxm"} and {r.model for r in nim} == {
        "llama-3-8b",
        "llama-3-70b",
    }
    assert not any(r.static_batch for r in nim)
    assert len(dli) == 924 and all(r.static_batch for r in dli)
    assert {r.hardware for r in dli} == {"l40s", "h100-sxm", "h200", "a100-80gb"}
    l40s_70b = [r for r in dli if r.hardware == "l40s" and r.model == "llama-2-70b"]
    assert {r.tensor_parallel for r in l40s_70b} == {2, 4, 8} and {r.scheme for r in l40s_70b} == {"fp8-dynamic"}


def test_static_batch_rows_count_one_context_step_and_every_decode_step() -> None:
    """Known answers: with only the per-step feature (1 s a step), a static batch's TTFT is one step and its mean
    TPOT one step; with only per-prefill-step overhead, TPOT is 0."""
    run = next(
        r
        for r in load_runs(DLI_STATIC_RUNS, schemes=get_scheme, profiles=PROFILES)
        if r.hardware == "h100-sxm" and r.tensor_parallel == 1 and r.concurrency > 1
    )
    shape = load_architecture(run.model)[1]
    row = static_row(run, step_features(run, shape, load_catalog()))
    step, prefill_step = FEATURES.index("step"), FEATURES.index("prefill_step")
    assert row.ttft[step] == pytest.approx(1e3) and row.tpot[step] == pytest.approx(1e3)
    assert row.ttft[prefill_step] == pytest.approx(1e3) and row.tpot[prefill_step] == 0
    assert row.ttft[N_FEATURES] == 0  # no request overhead in an in-process static benchmark
    # the context phase attends over `concurrency` prompts, each to itself: concurrency x prompt^2 of work
    attention = FEATURES.index("attention")
    single = static_row(
        run.__class__(**{**{f: getattr(run, f) for f in run.__dataclass_fields__}, "concurrency": 1}),
        step_features(run, shape, load_catalog()),
    )
    assert row.ttft[attention] == pytest.approx(run.concurrency * single.ttft[attention])


@pytest.mark.skipif(not KERNEL_FIT_PATH.is_file(), reason="kernel fit not shipped")
def test_shipped_kernel_fit_matches_its_data_and_holds_out_gpus() -> None:
    fit = load_fit(KERNEL_FIT_PATH)
    assert fit.data_sha256 == runs_digest(*KERNEL_RUNS), "refit: benchmarks/gpu_fidelity.py --kernels --write"
    pooled = dict(zip(fit.coefficient_names, fit.pooled, strict=True))
    assert pooled["kernels"] >= 1.0  # no engine beats its measured kernels
    for replaced in ("weights", "linear", "attention", "kv", "tokens"):  # not features of a kernel row
        assert all(np.array(fit.engines.get(e, fit.pooled))[FEATURES.index(replaced)] >= 0 for e in fit.engines)
    assert set(fit.validation["gpu"]) >= {"l40s", "h100-sxm", "h200", "a100-80gb", "overall"}
    assert set(fit.validation["campaign"]) >= {"sweep", "dli-trtllm090-static", "overall"}


@pytest.mark.skipif(not KERNEL_FIT_PATH.is_file(), reason="kernel fit not shipped")
def test_shipped_kernel_fit_intervals_cover_left_out_campaigns_as_claimed() -> None:
    """The nominal 90 % intervals, drawn from group-, campaign- and GPU-out residuals (``USE_HOLDOUTS``), cover
    80-95 % of a left-out campaign's runs; and of a left-out GPU's TPOTs (its TTFTs miss where the GPU left out
    holds every serving-client run: docs/performance-model.md)."""
    fit = load_fit(KERNEL_FIT_PATH)
    campaign, gpu = fit.validation["campaign"]["overall"], fit.validation["gpu"]["overall"]
    assert campaign.coverage_ttft is not None and 0.8 <= campaign.coverage_ttft <= 0.95
    assert campaign.coverage_tpot is not None and 0.8 <= campaign.coverage_tpot <= 0.95
    assert gpu.coverage_tpot is not None and 0.8 <= gpu.coverage_tpot <= 0.95
    for left_out in ("a100-80gb", "h200", "l40s"):
        assert (fit.validation["gpu"][left_out].coverage_ttft or 0) >= 0.8
