"""Fidelity of the calibrated GPU step-cost model: leave one campaign, model or (model, engine, precision) group out.

    .venv/bin/python benchmarks/gpu_fidelity.py [--runs FILE] [--write] [--json OUT] [--predict FILE]
    .venv/bin/python benchmarks/gpu_fidelity.py --moe [--limit N] [--write] [--breakdown]   (MoE: moe_fidelity.py)
    .venv/bin/python benchmarks/gpu_fidelity.py --moe --judge-runs FILE   (the shipped MoE fit on FILE: moe_judge.py)

(--runs defaults to the runs shipped in recommender/perf/fit/measured_runs, with their source in SOURCE.md.)

Every measured closed-loop run shipped in recommender/perf/fit/measured_runs is replayed through the
closed-loop benchmark simulation (recommender/perf/sim/closed_loop.py) under every client protocol
(step_fit.CLIENT_PROTOCOLS: opening burst counted or dropped, mean TPOT or decode inter-token latency).
Leaving out in turn each (model, engine, precision) group, each campaign and each model, the step cost
is fitted on the rest (per engine where that engine has other runs, engine-agnostic otherwise) and the
held-out runs are predicted: median and P90 |error| with each campaign's modelled client, the error
outside the protocol bracket, the share of runs the bracket explains, and the coverage of the nominal
90 % intervals (recommender/perf/fit/validation.py). Targets (issue 27): TTFT median <= 25 % (P90 <= 60 %),
TPOT median <= 8 % (P90 <= 20 %), coverage 80-95 %, under leave-one-campaign-out and leave-one-model-out.

--predict FILE replays the runs of another file (same columns, an optional `campaign` column: other GPUs,
models, engines) through the step cost `plan` and `estimate` give each run's configuration (the shipped kernel fit
on aiconfigurator-core's tables where they cover it, the datasheet fit elsewhere: perf/fit/paths.py), which never
saw them, and prints per basis the same figures per (campaign, GPU, model, engine, precision, release line) group
with that fit's intervals, the signed bias (median measured / predicted), and the rows it could not replay and why:
how a measured set held out from the calibration is judged. Leave-one-GPU-out on that path: path_fidelity.py.

--write refits on every run and writes recommender/perf/step/step_cost_fit.json, the artifact the search,
`plan` and `estimate` use (its held-out step residuals give the SLA check's upper step costs).
Also replays the runs through the uncalibrated roofline (assumed efficiencies) for the
before/after comparison.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import NoReturn

from recommender.config.destinations import check_parent
from recommender.engines import PROFILES
from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.build import build_fit
from recommender.perf.fit.paths import KERNELS, bias_table, by_basis
from recommender.perf.fit.serving_runs import (
    DEFAULT_RUNS,
    KERNEL_RUNS,
    KERNEL_RUNS_SOURCE,
    RUNS_SOURCE,
    MeasuredRun,
    load_runs,
    read_runs,
    runs_digest,
)
from recommender.perf.fit.step_fit import (
    BenchmarkProtocol,
    FitSettings,
    Prediction,
    by_group,
    client_benchmark,
    replay_config,
)
from recommender.perf.fit.validation import USE_HOLDOUTS, ByValue, bracket_rows, shipped_predictions, shipped_table
from recommender.perf.model.shape import ModelShape
from recommender.perf.sim.closed_loop import replay
from recommender.perf.step.calibrated import (
    FIT_PATH,
    KERNEL_FIT_PATH,
    ErrorSummary,
    HoldoutSummary,
    StepCostFit,
    load_fit,
    load_kernel_calibration,
)
from recommender.perf.step.cost import RooflineStepCost
from recommender.perf.step.features import StepFeatures
from recommender.perf.step.kernel_tables import KernelTables, KernelTablesUnavailable, kernel_package_version
from recommender.quantize import get_scheme


def _roofline(runs: list[MeasuredRun], shapes: dict[str, ModelShape], protocol: BenchmarkProtocol) -> list[Prediction]:
    """The same replays with the assumed-efficiency roofline: the error before calibration."""
    catalog, out = load_catalog(), []
    for run in runs:
        shape, method, accel = shapes[run.model], get_scheme(run.scheme), catalog.get(run.hardware)
        cost = RooflineStepCost(
            shape, method, accel, tensor_parallel=run.tensor_parallel, kv_cache_dtype=run.kv_cache_dtype
        )
        features = StepFeatures(shape, method, accel, run.tensor_parallel, run.kv_cache_dtype)
        config = replay_config(
            shape, features, run.profile, concurrency=run.concurrency, kv_cache_dtype=run.kv_cache_dtype
        )
        got = replay(cost, config, client_benchmark(run, protocol))
        out.append(Prediction(run, got.ttft_ms.mean, got.tpot_ms.mean, False))
    return out


def _table(title: str, table: dict[str, ErrorSummary]) -> None:
    print(f"\n{title}")
    print(f"  {'group':44s} {'runs':>5s}  {'TTFT med':>9s} {'TTFT p90':>9s}  {'TPOT med':>9s} {'TPOT p90':>9s}")
    for group, e in table.items():
        print(
            f"  {group:44s} {e.runs:5d}  {e.ttft_median:9.1%} {e.ttft_p90:9.1%}  {e.tpot_median:9.1%} {e.tpot_p90:9.1%}"
        )


def _holdout_table(title: str, table: dict[str, HoldoutSummary]) -> None:
    print(f"\n{title}")
    width = max(len(v) for v in table)
    print(
        f"  {'left out':{width}s} {'runs':>5s}  {'TTFT med':>8s} {'p90':>6s}  {'TPOT med':>8s} {'p90':>6s}  "
        f"{'bracket TTFT':>12s} {'p90':>6s} {'in bracket':>10s}  {'cover TTFT':>10s} {'TPOT':>6s}  "
        f"{'before':>6s} {'':>6s}"
    )
    for value, e in table.items():
        print(
            f"  {value:{width}s} {e.runs:5d}  {e.ttft_median:8.1%} {e.ttft_p90:6.1%}  {e.tpot_median:8.1%} "
            f"{e.tpot_p90:6.1%}  {e.bracket_ttft_median:12.1%} {e.bracket_ttft_p90:6.1%} {e.explained_ttft:10.0%}  "
            f"{_share(e.coverage_ttft):>10s} {_share(e.coverage_tpot):>6s}  {_share(e.coverage_ttft_before):>6s} "
            f"{_share(e.coverage_tpot_before):>6s}"
        )


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _refuse(problem: str, fix: str) -> NoReturn:
    """Bad input: one line naming the flag and the fix, exit code 2 (as the CLI does)."""
    print(f"error: {problem} (fix: {fix})", file=sys.stderr)
    raise SystemExit(2)


def _check_json_out(path: Path) -> None:
    """The --json file's folder exists and takes a file (probed by writing one), as the CLI checks its outputs."""
    try:
        check_parent(path, field="--json", what="file")
    except BadInputError as exc:
        _refuse(str(exc).split(" (fix: ")[0], exc.fix or "give a path in a writable folder")


def _predict(path: Path, json_out: Path | None) -> None:
    """Out of sample: `path`'s runs through the shipped coefficients."""
    if not path.is_file():
        _refuse(
            f"--predict: no file {path}",
            "pass a CSV with the columns of recommender/perf/fit/measured_runs/serving_runs_h100.csv",
        )
    try:
        loaded = read_runs(path, schemes=get_scheme, profiles=PROFILES)
    except (UnicodeDecodeError, csv.Error) as exc:
        _refuse(f"--predict: {path} is not a readable CSV ({exc})", "pass a UTF-8 CSV with the shared file's columns")
    if not loaded.runs:
        _refuse(
            f"--predict: none of the {sum(loaded.skipped.values())} rows of {path} can be replayed "
            f"({'; '.join(sorted(loaded.skipped)) or 'the file has no rows'})",
            "rows need a known engine, GPU, precision and shipped model",
        )
    catalog, shapes = load_catalog(), {m: load_architecture(m)[1] for m in sorted({r.model for r in loaded.runs})}
    kernels = load_kernel_calibration()
    split = by_basis(loaded.runs, shapes, None if kernels is None else kernels.tables)
    started, doc = time.perf_counter(), {}
    for why, count in sorted(loaded.skipped.items()):
        print(f"  skipped {count} rows: {why}")
    for basis, runs in split.items():
        if not runs:
            continue
        on_kernels = basis == KERNELS and kernels is not None
        fit, fit_path = (kernels.fit, KERNEL_FIT_PATH) if on_kernels and kernels else (load_fit(), FIT_PATH)
        rows = bracket_rows(runs, shapes, catalog, kernels=kernels.tables if on_kernels and kernels else None)
        predictions = shipped_predictions(rows, fit)
        print(
            f"\n{len(runs)} runs of {path} on {basis} (the step cost plan and estimate give them), replayed through "
            f"{fit_path.name} under every client protocol (fitted on {fit.data.split(':')[0]}) in "
            f"{time.perf_counter() - started:.1f} s"
        )
        pairs: ByValue = {}
        for p in predictions:
            pairs.setdefault(_predict_key(p.run), []).append((p, None))
        table = shipped_table(predictions, fit, key=_predict_key)
        _holdout_table(f"Out of sample [{basis}] (the shipped fit on runs it never saw)", table)
        _bias_table(f"Signed bias [{basis}]: median measured / predicted (below 1: the model is slower)", pairs)
        doc[basis] = {g: e.model_dump() for g, e in table.items()}
    if json_out:
        json_out.write_text(json.dumps({"out_of_sample": doc, "skipped": loaded.skipped}, indent=2))


def _predict_key(run: MeasuredRun) -> str:
    return f"{run.campaign}/{run.hardware}/{run.group}/{run.release}"


def _bias_table(title: str, pairs: ByValue) -> None:
    print(f"\n{title}")
    for value, (ttft, tpot) in bias_table(pairs).items():
        print(f"  {value:70s} TTFT x{ttft:5.2f}  TPOT x{tpot:5.2f}")


def _covered(runs: list[MeasuredRun], shapes: dict[str, ModelShape], tables: KernelTables) -> list[MeasuredRun]:
    """The runs aiconfigurator-core has kernel tables for (the others are counted by reason)."""
    kept, missing = [], Counter[str]()
    for run in runs:
        try:
            tables.get(
                shapes[run.model], run.numerics, run.hardware, run.engine, run.tensor_parallel, run.kv_cache_dtype
            )
            kept.append(run)
        except KernelTablesUnavailable as exc:
            missing[str(exc)] += 1
    for why, count in sorted(missing.items()):
        print(f"  no kernel tables for {count} runs: {why}")
    return kept


def _kernel_fit(args: argparse.Namespace) -> None:
    """The kernel-table step cost: host time and topology all-reduces fitted over measured kernels."""
    if kernel_package_version() is None:
        _refuse("--kernels: aiconfigurator-core is not installed", "pip install 'aiconfigurator-core==0.12.0'")
    files = list(args.runs_files or KERNEL_RUNS)
    runs = [run for path in files for run in load_runs(path, schemes=get_scheme, profiles=PROFILES)]
    shapes = {m: load_architecture(m)[1] for m in sorted({r.model for r in runs})}
    started, tables = time.perf_counter(), KernelTables()
    runs = _covered(runs, shapes, tables)
    catalog = load_catalog()
    print(
        f"{len(runs)} runs with kernel tables from {', '.join(str(f) for f in files)}; tables built in "
        f"{time.perf_counter() - started:.1f} s"
    )
    rows = bracket_rows(runs, shapes, catalog, kernels=tables)
    fit = build_fit(
        rows,
        data=KERNEL_RUNS_SOURCE,
        data_sha256=runs_digest(*files),
        protocol=BenchmarkProtocol(),
        settings=FitSettings(),
        profiles=PROFILES,
        interval_holdouts=USE_HOLDOUTS,
    )
    print(
        f"design rows and fits in {time.perf_counter() - started:.1f} s; pooled coefficients: "
        + ", ".join(f"{n} {c:.3g}" for n, c in zip(fit.coefficient_names, fit.pooled, strict=True) if c)
    )
    _report(fit, args.json, before=None)
    if args.write:
        KERNEL_FIT_PATH.write_text(fit.model_dump_json(indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {KERNEL_FIT_PATH}")


def _report(fit: StepCostFit, json_out: Path | None, before: dict[str, ErrorSummary] | None) -> None:
    if before is not None:
        _table("Before: assumed-efficiency roofline, same closed-loop replay", before)
    _table("Leave-one-group-out cross-validation", fit.cross_validation)
    _table("In sample (the shipped coefficients on the runs they were fitted on)", fit.in_sample)
    print(
        "\nHeld out whole (errors with each campaign's client; bracket: error outside [burst, steady] client "
        "protocols; cover: share of runs inside the nominal 90 % interval, step residuals + bracket, and before: "
        "benchmark-mean residuals)"
    )
    for name, table in fit.validation.items():
        _holdout_table(f"Leave one {name} out", table)
    if json_out:
        doc = {"cross_validation": fit.cross_validation, "in_sample": fit.in_sample} | (
            {"before": before} if before is not None else {}
        )
        tables = {k: {g: e.model_dump() for g, e in t.items()} for k, t in doc.items()}
        tables |= {f"leave_one_{k}_out": {g: e.model_dump() for g, e in t.items()} for k, t in fit.validation.items()}
        json_out.write_text(json.dumps(tables, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS)
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="fit and validate the kernel-table step cost (aiconfigurator-core's measured kernels + "
        f"fitted host time) on the runs of {', '.join(p.name for p in KERNEL_RUNS)}; with --write, "
        f"write {KERNEL_FIT_PATH.name}",
    )
    parser.add_argument(
        "--kernel-runs",
        dest="runs_files",
        type=Path,
        action="append",
        help="with --kernels: a runs file to fit on (repeatable; default: the shipped files)",
    )
    parser.add_argument(
        "--write", action="store_true", help=f"write the fitted artifact to {FIT_PATH} (with --moe: moe_step_fit.json)"
    )
    parser.add_argument("--json", type=Path, help="also write the error tables as JSON here")
    parser.add_argument(
        "--predict",
        type=Path,
        metavar="FILE",
        help="replay FILE's runs through the shipped fit (out of sample) instead of refitting",
    )
    parser.add_argument(
        "--moe", action="store_true", help="validate the MoE / disaggregated step model (moe_fidelity.py)"
    )
    parser.add_argument("--limit", type=int, default=0, help="with --moe: replay every N-th run (development)")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="with --moe: also print measured / predicted TPOT (left out) by engine, GPU, scheme and layout",
    )
    parser.add_argument(
        "--judge-runs",
        type=Path,
        metavar="FILE",
        help="with --moe: predict FILE's runs with the shipped MoE fit, out of sample (moe_judge.py)",
    )
    args = parser.parse_args()
    if args.json is not None:  # before any table is printed: a missing or read-only folder is refused first
        _check_json_out(args.json)
    if args.predict:
        _predict(args.predict, args.json)
        return
    if args.kernels:
        _kernel_fit(args)
        return
    if args.moe and args.judge_runs:
        from moe_judge import main as judge_main  # benchmarks/moe_judge.py, beside this script

        judge_main(args)
        return
    if args.moe:
        from moe_fidelity import main as moe_main  # benchmarks/moe_fidelity.py, beside this script

        moe_main(args)
        return
    runs = load_runs(args.runs, schemes=get_scheme, profiles=PROFILES)
    shapes = {m: load_architecture(m)[1] for m in sorted({r.model for r in runs})}
    protocol, settings = BenchmarkProtocol(), FitSettings()
    started = time.perf_counter()
    rows = bracket_rows(runs, shapes, load_catalog())
    fit = build_fit(
        rows,
        data=RUNS_SOURCE,
        data_sha256=runs_digest(args.runs),
        protocol=protocol,
        settings=settings,
        profiles=PROFILES,
    )
    print(f"{len(runs)} runs from {args.runs}; design rows and fits in {time.perf_counter() - started:.1f} s")
    print(
        f"client modelled: closed loop, {protocol.rounds} x concurrency requests; the sweep campaign counts its "
        "opening burst, the steady one drops half as warm-up; the bracket spans both for every run"
    )
    _report(fit, args.json, before=by_group(_roofline(runs, shapes, protocol)))
    if args.write:
        FIT_PATH.write_text(fit.model_dump_json(indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {FIT_PATH}")


if __name__ == "__main__":
    main()
