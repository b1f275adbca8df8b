"""Fidelity of the MoE / expert-parallel / disaggregated step model, leave-one-model-out (``gpu_fidelity.py --moe``).

    .venv/bin/python benchmarks/gpu_fidelity.py --moe [--limit N] [--write] [--json OUT] [--breakdown]

Replays every run of recommender/perf/fit/measured_runs/moe_disagg_runs.csv (gpt-oss-120b, Qwen3-235B-A22B-FP8,
DeepSeek-V3; aggregated and disaggregated; TensorRT-LLM, SGLang, vLLM) through the tool's step model for its layout
(recommender/perf/fit/moe_rows.py): one attention rank in the closed loop at its share of the client's concurrency
(aggregated); the decode pool's TPOT at its batch and the prefill pool's TTFT with the closed loop's queue and the
KV transfer (disaggregated). Rows it cannot replay are counted by reason. The dense fit's engine coefficients are
the prior; what MoE adds (recommender/perf/fit/moe_fit.py) is fitted on two models and the third predicted, with
90 % intervals from a nested leave-one-model-out inside the two. "before" is the prior alone (nothing fitted).
--limit N replays every N-th run (development); --write refits on every run and writes
recommender/perf/step/moe_step_fit.json; --breakdown adds each model's measured / predicted TPOT (left out) by
engine, GPU, scheme, layout and attention / MoE split: where a miss sits.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import numpy as np

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.moe_fit import (
    PARAMETERS,
    LeftOut,
    MoeFit,
    Summary,
    fit_extras,
    leave_one_model_out,
    predict,
    prior_coefficients,
    summarize,
)
from recommender.perf.fit.moe_rows import MoeRow, moe_row
from recommender.perf.fit.moe_runs import MOE_RUNS, MOE_RUNS_SOURCE, MoeRun, read_moe_runs
from recommender.perf.fit.serving_runs import runs_digest
from recommender.perf.step.calibrated import load_fit
from recommender.perf.step.moe_calibration import MOE_FIT_PATH, PREFILL_CLIENTS
from recommender.quantize import get_scheme

#: Runs whose in-sample predictions the artifact keeps for its consistency test (every CHECK_STRIDE-th run).
CHECK_STRIDE = 97


def priors() -> dict[str, np.ndarray]:
    """The dense fit's coefficients per engine as ``moe_rows.COLUMNS`` coefficients."""
    fit = load_fit()
    return {e: prior_coefficients(c) for e, c in fit.engines.items()}


def design(runs: Sequence[MoeRun], skipped: dict[str, int]) -> list[MoeRow]:
    """Every run's design row (the replays: computed once, shared by every fold); a run whose layout the tool's
    memory model says cannot hold one request is counted in `skipped`."""
    shapes = {m: load_architecture(m)[1] for m in sorted({r.model for r in runs})}
    catalog, prior = load_catalog(), priors()
    rows = []
    for run in runs:
        try:
            rows.append(moe_row(run, shapes, catalog, prior[run.engine]))
        except ValueError as exc:
            if "KV cache" not in str(exc):
                raise
            why = "the tool's memory model leaves no KV cache for one request on this layout (weights do not fit)"
            skipped[why] = skipped.get(why, 0) + 1
    return rows


def _print(table: dict[str, Summary]) -> None:
    print(
        f"  {'left out':26s} {'runs':>5s}  {'TTFT med':>8s} {'p90':>7s}  {'TPOT med':>8s} {'p90':>6s}  "
        f"{'cover TTFT':>10s} {'TPOT':>5s}  {'before TTFT':>11s} {'TPOT':>6s}"
    )
    for name, s in table.items():
        cover = "-" if s.coverage_ttft is None else f"{s.coverage_ttft:.0%}"
        cover_p = "-" if s.coverage_tpot is None else f"{s.coverage_tpot:.0%}"
        print(
            f"  {name:26s} {s.runs:5d}  {s.ttft_median:8.1%} {s.ttft_p90:7.1%}  {s.tpot_median:8.1%} {s.tpot_p90:6.1%}"
            f"  {cover:>10s} {cover_p:>5s}  {s.before_ttft_median or 0:11.1%} {s.before_tpot_median or 0:6.1%}"
        )


def _split(run: MoeRun) -> str:
    """The decode pool's layout: attention tensor- or data-parallel, MoE tensor- or expert-parallel."""
    pool = run.decode
    return f"attention {'DP' if pool.attention_dp > 1 else 'TP'} / MoE {'EP' if pool.moe_ep > 1 else 'TP'}"


def breakdown(folds: Sequence[LeftOut]) -> dict[tuple[str, str], list[float]]:
    """Each left-out run's measured / predicted TPOT, grouped per model by engine, GPU, scheme, layout and split."""
    groups: dict[tuple[str, str], list[float]] = {}
    for fold in folds:
        for p in fold.predictions:
            run = p.row.run
            ratio = run.tpot_ms / p.tpot_ms
            for key in ("all", run.engine, run.hardware, run.scheme, run.layout, _split(run)):
                groups.setdefault((run.model, key), []).append(ratio)
    return groups


def _print_breakdown(folds: Sequence[LeftOut]) -> None:
    print("\nMeasured / predicted TPOT of the left-out runs (median, P10-P90), by model and group")
    for (model, key), ratios in sorted(breakdown(folds).items()):
        lo, mid, hi = np.quantile(ratios, [0.1, 0.5, 0.9])
        print(f"  {model:18s} {key:22s} {len(ratios):5d}  {mid:5.2f}  ({lo:.2f}-{hi:.2f})")


def _artifact(rows: list[MoeRow], table: dict[str, Summary], skipped: dict[str, int], folds: list[LeftOut]) -> MoeFit:
    prior = priors()
    theta = fit_extras(rows, prior.__getitem__)
    check = rows[::CHECK_STRIDE]
    in_sample = predict(check, prior.__getitem__, theta)
    ttft_logs = [p.log_ratios[0] for f in folds for p in f.predictions]
    tpot_logs = [p.log_ratios[1] for f in folds for p in f.predictions]
    q = [0.05, 0.95]
    overall = table["overall"]
    return MoeFit(
        data=MOE_RUNS_SOURCE,
        data_sha256=runs_digest(MOE_RUNS),
        provenance=(
            f"calibrated (moe_disagg_runs, leave-one-model-out TTFT {overall.ttft_median:.0%}, "
            f"TPOT {overall.tpot_median:.0%})"
        ),
        parameters=list(PARAMETERS),
        theta=[float(t) for t in theta],
        ttft_interval=tuple(float(np.exp(v)) for v in np.quantile(ttft_logs, q)),  # type: ignore[arg-type]
        tpot_interval=tuple(float(np.exp(v)) for v in np.quantile(tpot_logs, q)),  # type: ignore[arg-type]
        leave_one_model_out=table,
        skipped=skipped,
        check_runs={p.row.run.run_id: (p.ttft_ms, p.tpot_ms) for p in in_sample},
        ttft_log_residuals=[
            round(p.log_ratios[0], 5) for f in folds for p in f.predictions if p.row.run.layout == "agg"
        ],
        tpot_log_residuals=[round(p.log_ratios[1], 5) for f in folds for p in f.predictions],
        prefill_log_residuals=[round(p.log_ratios[0], 5) for f in folds for p in f.predictions if _light(p.row.run)],
    )


def _light(run: MoeRun) -> bool:
    """An aggregated run at most ``PREFILL_CLIENTS`` clients per attention rank (its TTFT: the prefill's own)."""
    return run.layout == "agg" and -(-run.concurrency // run.decode.ranks) <= PREFILL_CLIENTS


def main(args: argparse.Namespace) -> None:
    """``gpu_fidelity.py --moe``: replay, leave one model out, print (and with --write, write the artifact)."""
    runs, skipped = read_moe_runs(MOE_RUNS, schemes=get_scheme, profiles=PROFILES)
    runs = runs[:: args.limit or 1]
    started = time.perf_counter()
    rows = design(runs, skipped)
    print(f"{len(rows)} runs of {MOE_RUNS.name} replayed in {time.perf_counter() - started:.0f} s")
    for why, count in sorted(skipped.items()):
        print(f"  skipped {count} rows: {why}")
    folds = leave_one_model_out(rows, priors().__getitem__)
    table = summarize(folds)
    print("\nLeave one model out (fitted on the other two; cover: share inside the nested 90 % interval)")
    _print(table)
    if args.breakdown:
        _print_breakdown(folds)
    if args.json:
        args.json.write_text(json.dumps({k: v.model_dump() for k, v in table.items()}, indent=2))
    if args.write:
        if args.limit:
            raise SystemExit("--write needs every run (drop --limit)")
        fit = _artifact(rows, table, skipped, folds)
        MOE_FIT_PATH.write_text(fit.model_dump_json(indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {MOE_FIT_PATH}: {fit.provenance}")
