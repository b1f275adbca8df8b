"""Fit the step-time scale of each GPU no measured run calibrates, on its audited MLPerf capacities.

    .venv/bin/python benchmarks/fit_audited_gpus.py [--write]

The audited rows (``perf/fit/measured_runs/mlperf_v41_v51/cases.csv``, status ``run``) of CDNA 3 GPUs (MI300X,
MI325X: no kernel tables, no measured closed-loop run) are asked of `plan`'s own capacity search
(``fleet.plan.plan_one``: the row's configuration, mean lengths, SLA, upper-bound check) on a grid of two scales,
one on the datasheet step's bandwidth terms and one on its compute terms (``perf/step/audited_gpus.py``), and the
pair with the least squared log error of capacity over the family's rows is kept. Judged before it ships: each row
predicted by the pair fitted without it, and each GPU's rows by the pair fitted on the other GPU's alone. Leaving
out the submitter is not possible: every representable AMD row is AMD's own (Dell's MI300X row states no TP,
``cases.csv`` c10). MI355X (CDNA 4), with no audited row, takes the family's pair, its step intervals widened by how
far the leave-one-GPU-out pairs moved from it.
``--write`` writes ``recommender/perf/step/audited_gpu_fit.json``; without it the table is printed only.
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recommender.config.candidate import KVCacheDtype
from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_scope import PlanScope
from recommender.paths import cache_root
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.step.audited_gpus import AUDITED_FIT_PATH, AuditedGpu, AuditedGpus
from recommender.perf.step.calibrated import CalibratedModel, load_fit, load_kernel_calibration

_ROOT = Path(__file__).resolve().parent.parent
_DATA = "recommender/perf/fit/measured_runs/mlperf_v41_v51/cases.csv"
_GPUS = ("mi300x", "mi325x")
_DERIVED = {"mi355x": _GPUS}


@dataclass(frozen=True)
class Row:
    """One audited row as `plan` is asked it."""

    case: str
    gpu: str
    round: str
    model: str
    precision: str
    engine: str
    tensor_parallel: int
    kv_cache_dtype: KVCacheDtype
    traffic: Traffic
    sla: LatencySLA
    price_set: str
    measured: float


def _rows() -> list[Row]:
    with (_ROOT / _DATA).open(encoding="utf-8") as handle:
        cases = [r for r in csv.DictReader(handle) if r["status"] == "run" and r["gpu"] in _GPUS]
    return [
        Row(
            case=r["case_id"],
            gpu=r["gpu"],
            round="v5.1" if "v51" in r["source_file"] else "v4.1",
            model=r["model"],
            precision=r["precision"],
            engine=r["engine"],
            tensor_parallel=int(r["tp"]),
            kv_cache_dtype="fp8" if r["kv_mlperf"] == "fp8" else "auto",
            traffic=Traffic(
                prompt_tokens=round(float(r["input_tokens_mean"])),
                output_tokens=round(float(r["output_tokens_per_sample"])),
                requests_per_second=float(r["per_replica_rps"]),
            ),
            sla=LatencySLA(ttft_p99_ms=float(r["ttft_constraint_ms"]), tpot_p99_ms=float(r["tpot_constraint_ms"])),
            price_set=r["price_set"],
            measured=float(r["per_replica_rps"]),
        )
        for r in cases
    ]


def _gmean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


class Planner:
    """`plan_one` for a row at given scales of its GPU's datasheet step (memoised: the grid reuses them)."""

    def __init__(self) -> None:
        self.fit = load_fit()
        self.kernels = load_kernel_calibration(cache_dir=cache_root() / "kernel_tables")
        self._seen: dict[tuple[str, float, float], float] = {}

    def capacity(self, row: Row, scales: tuple[float, float]) -> float:
        key = (row.case, *scales)
        if key not in self._seen:
            self._seen[key] = self._capacity(row, scales)
        return self._seen[key]

    def _capacity(self, row: Row, scales: tuple[float, float]) -> float:
        catalog = load_catalog(price_set=row.price_set)
        _, shape = load_architecture(row.model)
        fitted = AuditedGpu(bandwidth_scale=scales[0], compute_scale=scales[1])
        audited = AuditedGpus(source="fit", command="", gpus={row.gpu: fitted})
        found = plan_one(
            shape,
            catalog.get(row.gpu),
            row.precision,
            traffic=row.traffic,
            sla=row.sla,
            scope=PlanScope(tensor_parallel=(row.tensor_parallel,), kv_cache_dtypes=(row.kv_cache_dtype,)),
            catalog=catalog,
            engines=(row.engine,),
            calibrated=CalibratedModel(self.fit, self.kernels, audited=audited),
        )
        return float(found.max_rps_per_replica or 0.0)

    def error(self, row: Row, scales: tuple[float, float]) -> float:
        """log(predicted / measured), a capacity of 0 counted as a hundredth of the measured rate."""
        return math.log(max(self.capacity(row, scales), row.measured / 100) / row.measured)

    def best(self, rows: list[Row]) -> tuple[float, float]:
        """The grid pair with the least squared log error over `rows`, plus a small pull towards the datasheet path
        (``RIDGE``: with one row, two scales are not determined; the pull picks the smallest move that fits it)."""

        def loss(pair: tuple[float, float]) -> float:
            return sum(self.error(r, pair) ** 2 for r in rows) + RIDGE * sum(math.log(s) ** 2 for s in pair)

        return min(GRID, key=loss)


#: Weight of the pull towards scales of 1 (squared log scale), against squared log capacity errors.
RIDGE = 0.02


#: Bandwidth scale x compute scale: 10 % steps, from the datasheet path as is (1.0) to well beyond the rows.
GRID = [(round(b, 4), round(c, 4)) for b in np.geomspace(0.7, 2.1, 12) for c in np.geomspace(0.8, 3.6, 16)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write {AUDITED_FIT_PATH.name}")
    args = parser.parse_args()
    planner, rows = Planner(), _rows()
    print(f"{'case':5} {'gpu':7} {'round':5} {'measured':>8} {'fitted':>8} {'row out':>8} {'ratio':>7}")
    gpus: dict[str, AuditedGpu] = {}
    for gpu in _GPUS:
        mine = [r for r in rows if r.gpu == gpu]
        pair = planner.best(mine)
        row_out: dict[str, float] = {}
        for r in mine:
            without_row = planner.best([o for o in mine if o.case != r.case])
            fitted, by_row = planner.capacity(r, pair), planner.capacity(r, without_row)
            row_out[r.case] = r.measured / by_row if by_row else float("inf")
            print(
                f"{r.case:5} {gpu:7} {r.round:5} {r.measured:8.2f} {fitted:8.2f} {by_row:8.2f} x{row_out[r.case]:6.2f}"
            )
        print(f"{gpu}: bandwidth x{pair[0]:.3f}, compute x{pair[1]:.3f}")
        gpus[gpu] = AuditedGpu(
            bandwidth_scale=pair[0],
            compute_scale=pair[1],
            rows=tuple(r.case for r in mine),
            held_out_row={k: round(v, 3) for k, v in row_out.items()},
        )
    for gpu, family in _DERIVED.items():
        pairs = [(gpus[g].bandwidth_scale, gpus[g].compute_scale) for g in family]
        mean = (round(_gmean([p[0] for p in pairs]), 4), round(_gmean([p[1] for p in pairs]), 4))
        spread = max(max(p[i] / mean[i], mean[i] / p[i]) for p in pairs for i in (0, 1))
        gpus[gpu] = AuditedGpu(
            bandwidth_scale=mean[0], compute_scale=mean[1], derived_from=family, widen=round(spread, 4)
        )
        print(f"{gpu}: bandwidth x{mean[0]:.3f}, compute x{mean[1]:.3f}, intervals widened x{spread:.2f}")
    result = AuditedGpus(
        source=f"{_DATA} (MLPerf Inference v4.1 / v5.1 audited Server and Interactive rows)",
        command="benchmarks/fit_audited_gpus.py --write",
        gpus=gpus,
    )
    if args.write:
        AUDITED_FIT_PATH.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        print(f"wrote {AUDITED_FIT_PATH}")


if __name__ == "__main__":
    main()
