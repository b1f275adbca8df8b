"""dstack's DeepSeek-R1 campaign, the MoE fit's out-of-sample judge: the converted file reads with every skipped row
counted, the converter writes what is shipped, and a few runs replay to finite predictions of the shipped fit."""

from __future__ import annotations

import csv
import math
from collections import Counter
from dataclasses import astuple

import numpy as np

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.moe_fit import predict, prior_coefficients
from recommender.perf.fit.moe_rows import moe_row
from recommender.perf.fit.moe_runs import DSTACK_RUNS, read_moe_runs
from recommender.perf.step.calibrated import load_fit
from recommender.perf.step.moe_calibration import load_moe_fit
from recommender.quantize import get_scheme
from tests.benchmark_scripts import load_benchmark

PREFIX = "prompts share a cached prefix (the closed-loop replay has no prefix cache)"
#: One row of online_results.csv at dstackai/benchmarks@7f37e669, as published (the header's columns used here).
RAW = {
    "GPU": "mi300x",
    "backend": "vllm",
    "dataset_name": "random",
    "max_concurrency": "128",
    "completed": "500",
    "total_input_tokens": "1600000",
    "total_output_tokens": "400000",
    "mean_ttft_ms": "22245.64614",
    "mean_tpot_ms": "109.0719536",
}


def test_runs_read_with_every_skipped_row_counted() -> None:
    runs, skipped = read_moe_runs(DSTACK_RUNS, schemes=get_scheme, profiles=PROFILES)
    assert len(runs) == 45 and skipped == {PREFIX: 9}
    assert Counter((r.hardware, r.engine) for r in runs) == {
        (gpu, engine): 9 for gpu, engine in [("h200", "sglang"), ("h200", "trtllm"), ("h200", "vllm")]
    } | {("mi300x", "sglang"): 9, ("mi300x", "vllm"): 9}
    assert {r.model for r in runs} == {"deepseek-v3"} and {r.kv_cache_dtype for r in runs} == {"auto"}
    assert {r.prompt_tokens for r in runs} == {3200} and {r.output_tokens for r in runs} == {800, 1600, 3200, 6400}
    assert {r.requests for r in runs} == {499, 500} and {r.layout for r in runs} == {"agg"}
    sglang_h200 = next(r for r in runs if (r.hardware, r.engine) == ("h200", "sglang"))
    assert sglang_h200.decode.ranks == 8 and sglang_h200.decode.expert_parallel
    trtllm = next(r for r in runs if r.engine == "trtllm")
    assert (trtllm.decode.tp, trtllm.decode.moe_tp, trtllm.decode.moe_ep) == (8, 2, 4)


def test_converter_writes_the_shipped_row() -> None:
    converter = load_benchmark("import_dstack_runs")
    with DSTACK_RUNS.open(newline="", encoding="utf-8") as f:
        shipped = list(csv.DictReader(f))
    assert len(shipped) == 54 and list(shipped[0]) == converter.COLUMNS
    assert converter._row(RAW) == shipped[0]


def test_a_few_runs_replay_to_finite_predictions_of_the_shipped_fit() -> None:
    runs, _ = read_moe_runs(DSTACK_RUNS, schemes=get_scheme, profiles=PROFILES)
    chosen = [
        r for r in runs if r.run_id.endswith(("mi300x_vllm_random_3200x800_c4", "h200_sxm_sglang_random_3200x800_c8"))
    ]
    assert len(chosen) == 2
    priors = {e: prior_coefficients(c) for e, c in load_fit().engines.items()}
    shapes = {"deepseek-v3": load_architecture("deepseek-v3")[1]}
    rows = [moe_row(r, shapes, load_catalog(), priors[r.engine]) for r in chosen]
    fit = load_moe_fit()
    predictions = predict(rows, priors.__getitem__, np.array(fit.theta))
    for p in predictions:
        assert math.isfinite(p.ttft_ms) and p.ttft_ms > 0 and math.isfinite(p.tpot_ms) and p.tpot_ms > 0
    load_benchmark("moe_fidelity")
    table = load_benchmark("moe_judge").judge_table(predictions, fit)
    assert set(table) == {"h200/sglang", "h200", "mi300x/vllm", "mi300x", "overall"}
    assert table["overall"].runs == 2 and all(math.isfinite(v) for v in astuple(table["overall"]))
