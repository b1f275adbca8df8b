"""Plan rows side by side: each (GPU, precision) row is its own evaluator and simulations, so rows run in
separate processes, one per CPU core the process may use.

`plan` is a Python simulation bound to one core per row; a plan of ten rows on a two-core laptop waits for one
core while the other idles. Rows are independent (each builds its own ``PerformanceEvaluator``; the kernel-table
cache on disk is written whole or not at all), so the answer is the same in any order: only the wall time moves.
Processes are spawned, not forked: a progress bar's refresh thread may hold a lock at the moment of a fork.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Caps the processes (`1`: every row in this process, as before); default: the CPU cores this process may use.
WORKERS_ENV = "RECOMMENDER_PLAN_PROCESSES"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, which a container's CPU set narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity call
        return os.cpu_count() or 1


def row_processes(rows: int) -> int:
    """How many processes plan `rows` rows: the usable cores (at most `WORKERS_ENV`), never more than the rows."""
    limit = os.environ.get(WORKERS_ENV, "").strip()
    cores = usable_cores() if not limit.isdigit() or int(limit) < 1 else min(int(limit), usable_cores())
    return max(1, min(rows, cores))


def map_rows(work: Callable[[T], R], items: Sequence[T], on_done: Callable[[T], None] | None = None) -> list[R]:
    """`work(item)` for every item, in the items' order; `on_done(item)` as each finishes (a progress bar).

    `work` must pickle (a module-level function, or a ``functools.partial`` of one) when more than one process
    runs; an error in a row is raised here, as it would be in this process.
    """
    processes = row_processes(len(items))
    if processes == 1:
        results = []
        for item in items:
            results.append(work(item))
            if on_done is not None:
                on_done(item)
        return results
    answers: dict[int, R] = {}
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            futures = {pool.submit(work, item): i for i, item in enumerate(items)}
            for future in as_completed(futures):
                i = futures[future]
                answers[i] = future.result()
                if on_done is not None:
                    on_done(items[i])
        except BaseException:  # Ctrl-C or a row's error: no row still queued starts
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [answers[i] for i in range(len(items))]
