"""The shipped MoE fit judged out of sample on an independent campaign (``gpu_fidelity.py --moe --judge-runs FILE``).

    .venv/bin/python benchmarks/gpu_fidelity.py --moe --judge-runs \\
        recommender/perf/fit/measured_runs/dstack_deepseek_r1_runs.csv [--json OUT]

Replays every run of FILE (the MoE runs' columns; dstack's DeepSeek-R1 campaign on 8 x H200 and 8 x MI300X,
``benchmarks/import_dstack_runs.py``) through the same step model as ``moe_fidelity.py`` and predicts it with the
SHIPPED fit (``perf/step/moe_step_fit.json``, fitted on the AIConfigurator file only): nothing is fitted on FILE.
Per GPU x engine, per GPU and overall: median and P90 of |predicted / measured - 1| for TTFT and TPOT, the median
predicted / measured ratio (below 1: the model is optimistic), and the share of runs inside the shipped fit's 90 %
intervals (its pooled leave-one-model-out factors). MI300X is priced from its datasheet, uncalibrated: no AMD run is
in any fit.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from recommender.engines import PROFILES
from recommender.perf.fit.moe_fit import MoePrediction, predict
from recommender.perf.fit.moe_runs import read_moe_runs
from recommender.perf.step.moe_calibration import MoeFit, load_moe_fit
from recommender.quantize import get_scheme


@dataclass(frozen=True, slots=True)
class JudgeSummary:
    """Errors of a group of out-of-sample predictions: |pred / meas - 1| median and P90, the pred / meas ratio's
    median, and the share of measured values inside the shipped fit's 90 % intervals."""

    runs: int
    ttft_median: float
    ttft_p90: float
    tpot_median: float
    tpot_p90: float
    ttft_ratio: float
    tpot_ratio: float
    coverage_ttft: float
    coverage_tpot: float


def _summary(ps: Sequence[MoePrediction], fit: MoeFit) -> JudgeSummary:
    ttft = np.array([p.ttft_ms / p.row.run.ttft_ms for p in ps])
    tpot = np.array([p.tpot_ms / p.row.run.tpot_ms for p in ps])
    (tlo, thi), (plo, phi) = fit.ttft_interval, fit.tpot_interval
    # measured inside [lo x predicted, hi x predicted]  <=>  predicted / measured inside [1 / hi, 1 / lo]
    return JudgeSummary(
        runs=len(ps),
        ttft_median=float(np.median(np.abs(ttft - 1))),
        ttft_p90=float(np.percentile(np.abs(ttft - 1), 90)),
        tpot_median=float(np.median(np.abs(tpot - 1))),
        tpot_p90=float(np.percentile(np.abs(tpot - 1), 90)),
        ttft_ratio=float(np.median(ttft)),
        tpot_ratio=float(np.median(tpot)),
        coverage_ttft=float(np.mean((1 / thi <= ttft) & (ttft <= 1 / tlo))),
        coverage_tpot=float(np.mean((1 / phi <= tpot) & (tpot <= 1 / plo))),
    )


def judge_table(predictions: Sequence[MoePrediction], fit: MoeFit) -> dict[str, JudgeSummary]:
    """Per GPU x engine, per GPU, and over every run ("overall")."""
    table: dict[str, JudgeSummary] = {}
    for gpu in sorted({p.row.run.hardware for p in predictions}):
        for engine in sorted({p.row.run.engine for p in predictions if p.row.run.hardware == gpu}):
            chosen = [p for p in predictions if (p.row.run.hardware, p.row.run.engine) == (gpu, engine)]
            table[f"{gpu}/{engine}"] = _summary(chosen, fit)
        table[gpu] = _summary([p for p in predictions if p.row.run.hardware == gpu], fit)
    table["overall"] = _summary(predictions, fit)
    return table


def judge(path: Path, fit: MoeFit) -> tuple[list[MoePrediction], dict[str, int]]:
    """Every replayable run of `path` predicted by `fit` (never refitted), and the rows skipped by reason."""
    from moe_fidelity import design, priors  # benchmarks/moe_fidelity.py, beside this script

    runs, skipped = read_moe_runs(path, schemes=get_scheme, profiles=PROFILES)
    rows = design(runs, skipped)
    return predict(rows, priors().__getitem__, np.array(fit.theta)), skipped


def _print(predictions: Sequence[MoePrediction], table: dict[str, JudgeSummary]) -> None:
    print(f"  {'run':52s} {'TTFT pred':>10s} {'meas':>10s} {'ratio':>6s}  {'TPOT pred':>9s} {'meas':>7s} {'ratio':>6s}")
    for p in predictions:
        run = p.row.run
        print(
            f"  {run.run_id:52s} {p.ttft_ms:10.0f} {run.ttft_ms:10.0f} {p.ttft_ms / run.ttft_ms:6.2f}"
            f"  {p.tpot_ms:9.1f} {run.tpot_ms:7.1f} {p.tpot_ms / run.tpot_ms:6.2f}"
        )
    print(
        f"\n  {'group':18s} {'runs':>4s}  {'TTFT med':>8s} {'p90':>6s} {'ratio':>6s}  {'TPOT med':>8s} {'p90':>6s}"
        f" {'ratio':>6s}  {'cover TTFT':>10s} {'TPOT':>5s}"
    )
    for name, s in table.items():
        print(
            f"  {name:18s} {s.runs:4d}  {s.ttft_median:8.1%} {s.ttft_p90:6.1%} {s.ttft_ratio:6.2f}  "
            f"{s.tpot_median:8.1%} {s.tpot_p90:6.1%} {s.tpot_ratio:6.2f}  "
            f"{s.coverage_ttft:10.0%} {s.coverage_tpot:5.0%}"
        )


def main(args: argparse.Namespace) -> None:
    """``gpu_fidelity.py --moe --judge-runs FILE``: predict FILE with the shipped fit and print the judge table."""
    fit = load_moe_fit()
    predictions, skipped = judge(args.judge_runs, fit)
    print(f"{len(predictions)} runs of {args.judge_runs.name} predicted by the shipped fit ({fit.provenance})")
    for why, count in sorted(skipped.items()):
        print(f"  skipped {count} rows: {why}")
    print(
        f"  90 % intervals: TTFT x[{fit.ttft_interval[0]:.2f}, {fit.ttft_interval[1]:.2f}], "
        f"TPOT x[{fit.tpot_interval[0]:.2f}, {fit.tpot_interval[1]:.2f}] of the prediction; "
        "ratio = predicted / measured\n"
    )
    table = judge_table(predictions, fit)
    _print(predictions, table)
    if args.json:
        args.json.write_text(json.dumps({k: asdict(v) for k, v in table.items()}, indent=2))
