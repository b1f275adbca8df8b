"""Audited open-loop capacities against `plan`: each MLPerf Server/Interactive row asked as a user would ask it.

    .venv/bin/python benchmarks/audited_capacity.py [--workers 2] [--json OUT]

The rows are the handed-over MLPerf Inference v4.1 / v5.1 results (``perf/fit/measured_runs/mlperf_v41_v51/``,
``cases.csv``: status ``run``, 21 of 26). For each, `recommender plan` is run in its own process with the
submission's configuration pointed at (``--hardware``, ``--precision``, ``--engine``, ``--tensor-parallel``,
``--kv-cache-dtype``), the dataset's mean prompt and output lengths, the scenario's P99 limits and its price set,
and its ``max_rps_per_replica`` (the highest Poisson rate one replica carries within the SLA at steady state) is set
beside the audited ``samples_per_s / replicas``. The step-cost fits never saw these rows; the AMD rows calibrate their
GPUs' audited scales (below). Printed per row: the basis `plan` used (measured kernels or datasheet), whether the
row's GPU is among the GPUs the shipped fit was calibrated on (the others are left out by construction), measured /
predicted, and the counts the issue judges (within 25 %; AMD rows within x1.25). A row that calibrates its GPU's
audited scales (``perf/step/audited_gpu_fit.json``: the AMD rows) is judged by its held-out ratio, the prediction of
the scales fitted without it (``benchmarks/fit_audited_gpus.py``), marked "(held out)" with its in-sample figure
beside it. A row `plan` cannot answer (an SLA not met even by a lone request, a configuration refused) is printed
with the line it said and counts as a miss.

Known gaps, said rather than hidden: MLPerf's lengths vary (OpenOrca input CV 0.77), `plan` is asked at the means;
the vendors' tuned batch caps (580-2,048) are not passed (plan tries its own).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from recommender.perf.step.audited_gpus import load_audited_gpus

_ROOT = Path(__file__).resolve().parent.parent
_CASES = _ROOT / "recommender" / "perf" / "fit" / "measured_runs" / "mlperf_v41_v51" / "cases.csv"
_RUN = "import sys; from recommender.cli.main import main; sys.argv = ['recommender'] + sys.argv[1:]; main()"
#: GPUs whose measured runs the shipped step-cost fit saw (``step_cost_fit_kernels.json`` ``data``: the H100 SXM
#: serving sweep and DLI's TensorRT-LLM 0.9 static batches on L40S, H100 SXM, H200 and A100 SXM).
_FIT_GPUS = frozenset({"h100-sxm", "l40s", "h200", "a100-80gb"})
_AMD = frozenset({"mi300x", "mi325x", "mi355x"})


@dataclass(frozen=True)
class Answer:
    """One audited row and what `plan` said of it."""

    case: str
    gpu: str
    model: str
    scenario: str
    engine: str
    precision: str
    tensor_parallel: int
    measured_rps: float
    predicted_rps: float | None
    basis: str
    gpu_in_fit: bool
    said: str
    #: measured / predicted with the row left out of the audited scales of its GPU, where the row calibrates them.
    held_out: float | None = None

    @property
    def ratio(self) -> float | None:
        """measured / predicted (held out where the row calibrates its GPU): above 1, `plan` is pessimistic."""
        if self.held_out is not None:
            return self.held_out
        return self.measured_rps / self.predicted_rps if self.predicted_rps else None


def _args(row: dict[str, str]) -> list[str]:
    lengths = (round(float(row["input_tokens_mean"])), round(float(row["output_tokens_per_sample"])))
    return [
        "plan",
        *("--model", row["model"], "--hardware", row["gpu"], "--precision", row["precision"]),
        *("--engine", row["engine"], "--tensor-parallel", row["tp"]),
        *("--kv-cache-dtype", "fp8" if row["kv_mlperf"] == "fp8" else "auto"),
        *("--prompt-tokens", str(lengths[0]), "--output-tokens", str(lengths[1])),
        *("--rps", row["per_replica_rps"], "--ttft-ms", row["ttft_constraint_ms"]),
        *("--tpot-ms", row["tpot_constraint_ms"], "--price-set", row["price_set"], "--json"),
    ]


def _ask(row: dict[str, str]) -> Answer:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *_args(row)], capture_output=True, text=True, cwd=_ROOT, timeout=1800
    )
    predicted, basis, said = None, "", ""
    if done.returncode == 0:
        rows = json.loads(done.stdout)
        best = max(rows, key=lambda r: r.get("max_rps_per_replica") or 0.0)
        predicted = best.get("max_rps_per_replica")
        detail = str(best["provenance"]["detail"])
        basis = detail.split(" (")[0].split(":")[0] + ("; audited scales" if "calibrated: audited" in detail else "")
    else:
        said = (done.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
    return Answer(
        case=row["case_id"],
        gpu=row["gpu"],
        model=row["model"],
        scenario=row["scenario"],
        engine=row["engine"],
        precision=row["precision"],
        tensor_parallel=int(row["tp"]),
        measured_rps=float(row["per_replica_rps"]),
        predicted_rps=predicted,
        basis=basis,
        gpu_in_fit=row["gpu"] in _FIT_GPUS,
        said=said,
        held_out=_held_out(row["gpu"], row["case_id"]),
    )


def _held_out(gpu: str, case: str) -> float | None:
    """The shipped audited scales' leave-this-row-out ratio (``perf/step/audited_gpu_fit.json``), if it has one."""
    fitted = load_audited_gpus().of(gpu)
    return None if fitted is None else fitted.held_out_row.get(case)


def _print(answers: list[Answer]) -> None:
    print(
        f"{'case':5} {'gpu':13} {'model':12} {'scen.':11} {'engine':7} {'prec':5} tp {'measured':>9} "
        f"{'predicted':>9} {'meas/pred':>9}  fit-GPU  basis / what plan said"
    )
    for a in answers:
        pred = f"{a.predicted_rps:9.2f}" if a.predicted_rps else f"{'-':>9}"
        ratio = f"x{a.ratio:8.2f}" if a.ratio else f"{'-':>9}"
        held = ""
        if a.held_out is not None and a.predicted_rps:
            held = f" (held out; in sample x{a.measured_rps / a.predicted_rps:.2f})"
        print(
            f"{a.case:5} {a.gpu:13} {a.model:12} {a.scenario:11} {a.engine:7} {a.precision:5} {a.tensor_parallel:2} "
            f"{a.measured_rps:9.2f} {pred} {ratio}  {'yes' if a.gpu_in_fit else 'no':7}  {a.basis or a.said}{held}"
        )
    ratios = [a.ratio for a in answers if a.ratio]
    within = sum(1 for r in ratios if abs(r - 1.0) <= 0.25)
    amd = [a for a in answers if a.gpu in _AMD]
    amd_ok = sum(1 for a in amd if a.ratio and 1 / 1.25 <= a.ratio <= 1.25)
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else float("nan")
    print(
        f"\n{len(answers)} rows, {len(ratios)} answered; within 25 %: {within} of {len(answers)} (target >= 17 of 21); "
        f"AMD within x1.25: {amd_ok} of {len(amd)}; geometric mean measured / predicted x{gmean:.2f}"
    )
    left_out = [a.ratio for a in answers if a.ratio and not a.gpu_in_fit]
    if left_out:
        print(
            f"rows whose GPU the fit never saw: {len(left_out)}, within 25 %: "
            f"{sum(1 for r in left_out if abs(r - 1.0) <= 0.25)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="plans asked at once (each its own process)")
    parser.add_argument("--only", action="append", help="case ids to ask (repeatable), e.g. c15")
    parser.add_argument("--json", type=Path, help="write the answers here")
    args = parser.parse_args()
    with _CASES.open(encoding="utf-8") as handle:
        rows = [
            r for r in csv.DictReader(handle) if r["status"] == "run" and (not args.only or r["case_id"] in args.only)
        ]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        answers = list(pool.map(_ask, rows))
    _print(answers)
    if args.json:
        args.json.write_text(json.dumps([asdict(a) | {"ratio": a.ratio} for a in answers], indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
