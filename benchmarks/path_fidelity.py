"""Leave-one-GPU-out through the path users get: each run on the step cost ``plan`` and ``estimate`` give its GPU.

    .venv/bin/python benchmarks/path_fidelity.py [--runs FILE ...] [--release-lines] [--rows-cache DIR] [--json OUT]

Every handed-over closed-loop run of a dense model (``serving_runs.HANDED_OVER_RUNS``: the H100 sweep, DLI's
TensorRT-LLM 0.9 static batches on L40S/H100/H200/A100, the H200 runs of today's releases) is priced on the basis
``CalibratedModel.step_cost`` gives its configuration (``perf/fit/paths.py``: aiconfigurator-core's kernel tables
where they cover it, the datasheet elsewhere), replayed under every client protocol, and predicted by a fit that
never saw its GPU (each fold's intervals from its own training runs' held-out residuals, drawn as the shipped ones
are: ``validation.USE_HOLDOUTS``). Printed per basis: per left-out GPU, and per (GPU, engine release line): runs,
median |error| of TTFT and TPOT, signed bias (median measured / predicted: below 1, the model is slower than the
runs), and the share of runs inside the nominal 90 % intervals. Targets (issue 53): TTFT median <= 20 %, TPOT <= 10 %,
bias x0.9-1.1 for every GPU with >= 10 runs, coverage 80-95 %.

--release-lines fits host time per engine release line (``FitSettings.release_lines``) instead of per engine.
--rows-cache DIR keeps the replays (the slow part: minutes on 2 cores) keyed by the runs' bytes and the step
model's files, so the fit variants are compared on the same rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.design_rows import DesignRow
from recommender.perf.fit.paths import BASES, KERNELS, bias_table, by_basis
from recommender.perf.fit.serving_runs import HANDED_OVER_RUNS, MeasuredRun, load_runs, runs_digest
from recommender.perf.fit.step_fit import FitSettings
from recommender.perf.fit.validation import (
    USE_HOLDOUTS,
    BracketRows,
    ByValue,
    bracket_rows,
    holdout_pairs,
    summary_table,
)
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.kernel_tables import KernelTables
from recommender.quantize import get_scheme

_MODEL_FILES = ("perf/step/kernel_features.py", "perf/step/features.py", "perf/fit/design_rows.py", "perf/sim")


def _model_digest() -> str:
    """The step model's and simulator's source files: a cached replay is read only by the code that made it."""
    root = Path(__file__).resolve().parents[1] / "recommender"
    digest = hashlib.sha256()
    for name in _MODEL_FILES:
        path = root / name
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def _rows(
    runs: list[MeasuredRun], shapes: dict[str, ModelShape], tables: KernelTables | None, cache: Path | None, tag: str
) -> list[BracketRows]:
    """`runs`' bracket rows (``validation.bracket_rows``), read from or written to `cache`."""
    path = None if cache is None else cache / f"{tag}.npz"
    if path is not None and path.is_file():
        saved = np.load(path)
        names = [str(n) for n in saved["protocols"]]
        return [
            BracketRows(
                {n: DesignRow(run, saved["ttft"][i, k], saved["tpot"][i, k]) for k, n in enumerate(names)},
                saved["lone"][i],
            )
            for i, run in enumerate(runs)
        ]
    rows = bracket_rows(runs, shapes, load_catalog(), kernels=tables)
    if path is not None and rows:
        names = list(rows[0].by_protocol)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            protocols=np.array(names),
            ttft=np.array([[r.by_protocol[n].ttft for n in names] for r in rows]),
            tpot=np.array([[r.by_protocol[n].tpot for n in names] for r in rows]),
            lone=np.array([r.lone_prefill for r in rows]),
        )
    return rows


def _regroup(pairs: ByValue, settings: FitSettings) -> ByValue:
    """The left-out GPUs' predictions regrouped by GPU and engine release line."""
    out: ByValue = {}
    for pair in (x for v in pairs.values() for x in v):
        run = pair[0].run
        out.setdefault(f"{run.hardware} / {run.release}", []).append(pair)
    return dict(sorted(out.items()))


def _print(title: str, basis: str, pairs: ByValue) -> dict[str, dict[str, float | int | None]]:
    table, bias = summary_table(pairs), bias_table(pairs)
    print(f"\n{title} [{basis}]")
    print(
        f"  {'left out / group':34s} {'runs':>5s}  {'TTFT med':>8s} {'TPOT med':>8s}  {'bias TTFT':>9s} "
        f"{'TPOT':>6s}  {'cover TTFT':>10s} {'TPOT':>5s}"
    )
    out: dict[str, dict[str, float | int | None]] = {}
    for value, e in table.items():
        b = bias[value]
        cover = ["-" if c is None else f"{c:.0%}" for c in (e.coverage_ttft, e.coverage_tpot)]
        print(
            f"  {value:34s} {e.runs:5d}  {e.ttft_median:8.1%} {e.tpot_median:8.1%}  x{b[0]:8.2f} x{b[1]:5.2f}  "
            f"{cover[0]:>10s} {cover[1]:>5s}"
        )
        out[value] = {
            "runs": e.runs,
            "ttft_median": e.ttft_median,
            "tpot_median": e.tpot_median,
            "ttft_bias": b[0],
            "tpot_bias": b[1],
            "coverage_ttft": e.coverage_ttft,
            "coverage_tpot": e.coverage_tpot,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, action="append", help="a runs file (repeatable; default: handed over)")
    parser.add_argument("--release-lines", action="store_true", help="host time per engine release line")
    parser.add_argument("--rows-cache", type=Path, help="keep the replays here (compare fit variants on them)")
    parser.add_argument("--json", type=Path, help="also write the tables as JSON here")
    args = parser.parse_args()
    files = list(args.runs or HANDED_OVER_RUNS)
    runs = [run for path in files for run in load_runs(path, schemes=get_scheme, profiles=PROFILES)]
    shapes = {m: load_architecture(m)[1] for m in sorted({r.model for r in runs})}
    started, tables = time.perf_counter(), KernelTables()
    split = by_basis(runs, shapes, tables)
    settings = FitSettings(release_lines=args.release_lines)
    print(
        f"{len(runs)} runs of {', '.join(p.name for p in files)}; "
        + ", ".join(f"{len(v)} on {b}" for b, v in split.items())
        + f"; coefficient sets per {'engine release line' if args.release_lines else 'engine'}"
    )
    doc = {}
    tag = f"{runs_digest(*files)[:12]}-{_model_digest()}"
    for basis in BASES:
        if len({r.hardware for r in split[basis]}) < 2:
            print(f"\n[{basis}] {len(split[basis])} runs on fewer than two GPUs: no GPU to leave out")
            continue
        rows = _rows(split[basis], shapes, tables if basis == KERNELS else None, args.rows_cache, f"{basis[0]}-{tag}")
        print(f"[{basis}] replays ready in {time.perf_counter() - started:.0f} s")
        pairs = holdout_pairs(rows, settings, "gpu", interval_holdouts=USE_HOLDOUTS)
        by_release = _regroup(pairs, settings)
        doc[basis] = {
            "by_gpu": _print("Leave one GPU out", basis, pairs),
            "by_gpu_release": _print("Leave one GPU out, by GPU and engine release line", basis, by_release),
        }
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
