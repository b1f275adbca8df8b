"""Is the decode step's upper end honest at small batches? The kernel fit's held-out decode residuals by regime.

The SLA check runs every decode step at the upper end of its interval: the 90th percentile of held-out decode
residuals (``CalibratedModel.step_factors``), pooled over every run of the engine whatever its batch. This splits
the same held-out predictions (the shipped kernel fit's runs, each predicted by fits that left its model group,
campaign or GPU out: ``interval_predictions``) by the run's concurrency, at most 32 in flight (the interactive
regime) or more, and prints each engine's upper end per regime with the runs it rests on.

    .venv/bin/python benchmarks/decode_regimes.py    # about 5 min on 2 shared cores (the kernel tables' design rows)
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import numpy as np
from gpu_fidelity import _covered

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.serving_runs import KERNEL_RUNS, load_runs
from recommender.perf.fit.step_fit import FitSettings
from recommender.perf.fit.validation import USE_HOLDOUTS, bracket_rows, interval_predictions
from recommender.perf.step.kernel_tables import KernelTables
from recommender.quantize import get_scheme

#: The interactive regime's bound on requests in flight (issue 53, item 5: 1-32).
SMALL = 32


def main() -> None:
    started = time.perf_counter()
    runs = [r for path in KERNEL_RUNS for r in load_runs(path, schemes=get_scheme, profiles=PROFILES)]
    shapes = {m: load_architecture(m)[1] for m in sorted({r.model for r in runs})}
    tables = KernelTables()
    rows = bracket_rows(_covered(runs, shapes, tables), shapes, load_catalog(), kernels=tables)
    predictions = interval_predictions(rows, FitSettings(), USE_HOLDOUTS)
    print(f"{len(predictions)} held-out predictions of {len(rows)} runs ({', '.join(USE_HOLDOUTS)} left out in turn)")
    regimes: dict[tuple[str, str], list[float]] = defaultdict(list)
    sources: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for p in predictions:
        key = (p.run.engine, f"<= {SMALL}" if p.run.concurrency <= SMALL else f"> {SMALL}")
        regimes[key].append(p.decode_residual)
        sources[key][f"{p.run.release} {p.run.hardware}{' static' if p.run.static_batch else ''}"] += 1
    print(f"{'engine':7} {'in flight':9} {'held out':>8} {'q0.90':>6} {'q0.95':>6}  from")
    for (engine, regime), residuals in sorted(regimes.items()):
        q90, q95 = np.exp(np.quantile(residuals, [0.90, 0.95]))
        where = ", ".join(f"{k} {n}" for k, n in sources[(engine, regime)].most_common())
        print(f"{engine:7} {regime:9} {len(residuals):8d} x{q90:5.3f} x{q95:5.3f}  {where}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
