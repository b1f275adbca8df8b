"""The step cost a configuration gets when ``plan`` and ``estimate`` price it, and judging that path.

``calibrated.CalibratedModel.step_cost`` prices a configuration on aiconfigurator-core's measured kernels where it
has tables of it (the kernel fit, ``step_cost_fit_kernels.json``) and on the datasheet otherwise
(``step_cost_fit.json``).
A validation that replays runs through the datasheet fit alone judges a path few users get: :func:`basis_of` makes
the same choice for a measured run, so each run is replayed, fitted and left out on its own basis
(``benchmarks/path_fidelity.py``, ``benchmarks/gpu_fidelity.py --predict``), and :func:`bias_table` gives the signed
error (median measured / predicted) beside the absolute one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recommender.perf.fit.serving_runs import MeasuredRun
from recommender.perf.fit.validation import ByValue, HeldOutPrediction
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.kernel_tables import KernelTables, KernelTablesUnavailable

__all__ = ["BASES", "DATASHEET", "KERNELS", "basis_of", "bias_table", "by_basis"]

KERNELS = "kernel tables"
DATASHEET = "datasheet"
BASES = (KERNELS, DATASHEET)


def basis_of(run: MeasuredRun, shape: ModelShape, tables: KernelTables | None) -> str:
    """The step cost `run`'s configuration gets from ``CalibratedModel.step_cost``: :data:`KERNELS` where the tables
    cover it (the same lookup, same arguments), else :data:`DATASHEET`; `tables` None: no kernel fit shipped."""
    if tables is None:
        return DATASHEET
    try:
        tables.get(shape, run.numerics, run.hardware, run.engine, run.tensor_parallel, run.kv_cache_dtype)
    except KernelTablesUnavailable:
        return DATASHEET
    return KERNELS


def by_basis(
    runs: Sequence[MeasuredRun], shapes: dict[str, ModelShape], tables: KernelTables | None
) -> dict[str, list[MeasuredRun]]:
    """`runs` split by the basis each is priced on (both keys present, possibly empty)."""
    out: dict[str, list[MeasuredRun]] = {basis: [] for basis in BASES}
    for run in runs:
        out[basis_of(run, shapes[run.model], tables)].append(run)
    return out


def _bias(predictions: Sequence[HeldOutPrediction]) -> tuple[float, float]:
    ttft = np.median([p.run.ttft_ms / p.ttft_ms for p in predictions])
    tpot = np.median([p.run.tpot_ms / p.tpot_ms for p in predictions])
    return float(ttft), float(tpot)


def bias_table(by_value: ByValue) -> dict[str, tuple[float, float]]:
    """Each value's signed error, median measured / predicted TTFT and TPOT (below 1: the model is slower than
    reality), and "overall"."""
    table = {value: _bias([p for p, _ in pairs]) for value, pairs in by_value.items() if pairs}
    every = [p for pairs in by_value.values() for p, _ in pairs]
    return table | ({"overall": _bias(every)} if every else {})
