"""The step fit on measured runs: coefficients held at their physical floors, cross-validation, a runs file of
other GPUs and models, a run predicted as the fit computed it, and `benchmarks/gpu_fidelity.py --predict`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.serving_runs import load_runs
from recommender.perf.fit.step_fit import BenchmarkProtocol, FitSettings, cross_validate, design_rows
from recommender.perf.step.calibrated import load_fit
from recommender.quantize import get_scheme


def test_no_fitted_part_of_a_step_runs_faster_than_the_datasheet() -> None:
    """Left free, the fit read the KV cache at twice the H100's bandwidth; the shipped fit and any refit keep
    every bandwidth and compute coefficient at or above its physical floor."""
    from recommender.perf.fit.step_fit import COEFFICIENTS, PHYSICAL_FLOORS, DesignRow, fit_pooled

    fit = load_fit()
    floors = np.array([PHYSICAL_FLOORS.get(name, 0.0) for name in COEFFICIENTS])
    for coefficients in [fit.pooled, *fit.engines.values()]:
        assert np.all(np.asarray(coefficients) >= floors - 1e-9), coefficients
    # Runs that a KV read at half its datasheet time would fit exactly: the fit stops at the floor instead.
    kv = COEFFICIENTS.index("kv")
    run = load_runs(schemes=get_scheme, profiles=PROFILES)[0]
    ttft, tpot = np.zeros(len(COEFFICIENTS)), np.zeros(len(COEFFICIENTS))
    ttft[kv], tpot[kv] = 2.0 * run.ttft_ms, 2.0 * run.tpot_ms  # unbounded, NNLS would answer 0.5
    coefficients = fit_pooled([DesignRow(run, ttft, tpot)], FitSettings())
    assert coefficients[kv] == pytest.approx(1.0)
    assert np.all(coefficients >= floors - 1e-9)


def test_cross_validation_predicts_a_held_out_group_better_than_chance() -> None:
    """A small refit from scratch: two groups, each predicted by the other engine's fit alone."""
    runs = [
        r
        for r in load_runs(schemes=get_scheme, profiles=PROFILES)
        if r.model == "qwen3-32b" and r.tensor_parallel == 4 and r.concurrency <= 16
    ]
    shapes = {"qwen3-32b": load_architecture("qwen3-32b")[1]}
    rows = design_rows(runs, shapes, load_catalog(), BenchmarkProtocol())
    predictions = cross_validate(rows, FitSettings())
    errors = np.abs([p.tpot_ms / p.run.tpot_ms - 1 for p in predictions])
    assert len(predictions) == len(runs) and float(np.median(errors)) < 0.5


_HEADER = (
    "id,backend,backend_version,model_path,system,precision,gemm_quant_mode,isl,osl,batch_size,tp_size,pp_size,"
    "attention_dp_size,silicon_ttft_ms,silicon_tpot_ms"
)


def _runs_file(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text("\n".join((_HEADER, *rows)) + "\n", encoding="utf-8")
    return path


def test_a_file_of_other_gpus_and_models_loads_and_says_what_it_left_out(tmp_path: Path) -> None:
    from recommender.perf.fit.serving_runs import read_runs

    path = _runs_file(
        tmp_path,
        "a_4000x1000_c_tp2,trtllm,1.2,Qwen/Qwen3-32B,h200_sxm,fp8,fp8,4000,1000,64,2,1,,600,20",
        "b,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,b200_sxm,,,1024,128,8,1,1,,50,4",
        "c,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,mi999,,,1024,128,8,1,1,,50,4",
        "d,sglang,0.5,Some/Unknown-Model,h200_sxm,,,1024,128,8,1,1,,50,4",
        "e,trtllm,1.0,Qwen/Qwen3-32B,h200_sxm,fp8,fp8,1024,128,8,2,2,,50,4",
        "f,trtllm,1.0,Qwen/Qwen3-32B,b200_sxm,fp6,fp6,1024,128,8,1,1,,50,4",
        "i,trtllm,1.2,Qwen/Qwen3-32B,b200_sxm,fp4,nvfp4,1024,128,8,1,1,,50,4",
        "g,trtllm,1.0,Qwen/Qwen3-32B,b200_sxm,,,1024,128,,1,1,,50,4",
        "h,vllm,0.12,RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8,h200_sxm,fp8,fp8,1024,128,8,2,1,,50,4",
    )
    loaded = read_runs(path, schemes=get_scheme, profiles=PROFILES)
    assert [(r.hardware, r.model, r.scheme, r.kv_cache_dtype, r.campaign) for r in loaded.runs] == [
        ("h200", "qwen3-32b", "fp8-dynamic", "fp8", "steady"),
        ("b200", "llama-3.1-8b", "baseline", "auto", "sweep"),
        ("b200", "qwen3-32b", "nvfp4", "auto", "sweep"),  # FP4 rows replay as NVFP4
        ("h200", "llama-3.1-70b", "fp8-dynamic", "fp8", "sweep"),  # a quantized re-upload: the base model's shape
    ]
    reasons = " | ".join(loaded.skipped)
    assert sum(loaded.skipped.values()) == 5
    for part in (
        "'mi999' is not in the GPU catalog",
        "'Some/Unknown-Model' has no shipped architecture",
        "pipeline",
        "'fp6' has no serving scheme",
        "malformed column",
    ):
        assert part in reasons


def test_predicting_a_run_replays_what_the_fit_computed_for_it() -> None:
    """Out-of-sample prediction (a full replay with the shipped coefficients) agrees with the fit's own
    in-sample figure for the same run (a design row times the same coefficients): one model, two paths."""
    from recommender.perf.fit.step_fit import in_sample, predict_run

    fit = load_fit()
    runs = [
        r
        for r in load_runs(schemes=get_scheme, profiles=PROFILES)
        if r.tensor_parallel == 4 and r.concurrency == 16 and r.output_tokens == 128
    ]
    shapes = {m: load_architecture(m)[1] for m in {r.model for r in runs}}
    protocol = BenchmarkProtocol(rounds=fit.protocol_rounds, warmup_rounds=fit.protocol_warmup_rounds)
    rows = design_rows(runs, shapes, load_catalog(), protocol)
    settings = FitSettings(fit.tpot_weight, fit.shrinkage, fit.min_engine_runs)
    for row in rows:
        coef = np.array(fit.engines.get(row.run.engine, fit.pooled))
        direct = predict_run(row.run, shapes[row.run.model], load_catalog(), fit, protocol)
        # The shipped step cost keeps every step >= 1 us (calibrated.py): at most that much per step apart.
        assert direct.tpot_ms == pytest.approx(float(row.tpot @ coef), abs=2e-3)
        assert direct.ttft_ms == pytest.approx(float(row.ttft @ coef), rel=1e-3)
    assert len(in_sample(rows, settings)) == len(runs) > 5


def test_fidelity_benchmark_predicts_another_file_out_of_sample(tmp_path: Path) -> None:
    path = _runs_file(
        tmp_path,
        "a,sglang,0.5.1,Qwen/Qwen3-32B,h200_sxm,,,2048,256,16,4,1,,500,11",
        "b,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,a100_sxm,,,1024,128,8,1,1,,60,9",
        "c,vllm,0.12,Some/Unknown-Model,a100_sxm,,,1024,128,8,1,1,,60,9",
    )
    out = tmp_path / "errors.json"
    run = subprocess.run(
        [sys.executable, "benchmarks/gpu_fidelity.py", "--predict", str(path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "skipped 1 rows" in run.stdout and "h200/qwen3-32b/sglang/baseline" in run.stdout
    assert " on kernel tables (the step cost plan and estimate give them)" in run.stdout  # each group's basis
    doc = json.loads(out.read_text())["out_of_sample"]  # per basis
    assert sum(table["overall"]["runs"] for table in doc.values()) == 2
    tables = {key: row for table in doc.values() for key, row in table.items()}
    llama = tables["sweep/a100-80gb/llama-3.1-8b/vllm/baseline/vllm 0.12"]
    assert 0 <= llama["tpot_median"] < 10
    assert 0 <= llama["explained_ttft"] <= 1 and llama["coverage_ttft"] in (0.0, 1.0)  # one run: in or out


def test_fidelity_benchmark_refuses_a_file_it_cannot_replay_in_one_line(tmp_path: Path) -> None:
    nothing = _runs_file(tmp_path, "c,vllm,0.12,Some/Unknown-Model,a100_sxm,,,1024,128,8,1,1,,60,9")
    for path, needle in ((tmp_path / "missing.csv", "no file"), (nothing, "none of the 1 rows")):
        run = subprocess.run(
            [sys.executable, "benchmarks/gpu_fidelity.py", "--predict", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 2 and run.stderr.count("error:") == 1 and needle in run.stderr
        assert "--predict" in run.stderr and "Traceback" not in run.stderr
