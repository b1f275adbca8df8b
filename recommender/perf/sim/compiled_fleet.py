"""One replica of a fleet, replayed in pieces: the compiled loop (``compiled_loop._serve``) stopped wherever the
router must decide, so the router reads each replica's state as it is when a request arrives.

A router that reads load (llm-d's queue and KV-cache scorers) decides on the replicas' state at the arrival, which
depends on everything routed before. So the fleet is replayed replica by replica up to each arrival
(``fleet_live.py``): each replica holds the whole workload's rows and a `mine` mark per request (1: routed here, 0:
routed elsewhere, -1: not routed yet); ``advance`` runs its loop as ``run_loop`` does, admitting the requests routed
here, skipping the others, and returns when the next request to arrive by its clock is not routed yet. A replica
sent every request replays exactly ``run_loop``'s steps; sent some, its decode stretches also end at the other
replicas' arrivals (``_decode_stretch`` stops at the next arrival), which splits a stretch into the same steps, priced
alike.
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim.compiled_admission import free_blocks
from recommender.perf.sim.compiled_borrow import borrowed, borrowed_inputs, borrowed_run, keep_alive
from recommender.perf.sim.compiled_loop import decode_stretch, step
from recommender.perf.sim.compiled_state import (
    C_CAP,
    S_D,
    S_NEXT,
    S_R_COUNT,
    S_STALLED,
    S_W_HEAD,
    S_W_LEN,
    Prefix,
    RunArrays,
)
from recommender.perf.step.compiled_cost import CostArrays

__all__ = ["advance", "advance_fleet", "kv_usage"]


@cached_njit(error_model="numpy")
def advance(
    arrivals: np.ndarray,
    mine: np.ndarray,
    conf: np.ndarray,
    drafted_per_step: float,
    cost: CostArrays,
    px: Prefix,
    run: RunArrays,
    t: float,
) -> tuple[float, np.ndarray, float]:  # pragma: no cover (compiled)
    """Serve from clock `t` until the next request to arrive (by the clock) is not routed yet, or every request is
    served; the clock, the completions heap (``run[6]``, or the larger one a step grew) and the KV usage then
    (``kv_usage``: one call where two would cost a dispatch each, per replica per arrival). ``S_STALLED`` is set
    where nothing was runnable. `run` and `px` are updated in place."""
    owned_heap = run[6]
    b_cost, b_px = borrowed_inputs(cost, px)
    st, req, first, finish, waiting, hist, heap, chunks, snapshot = borrowed_run(run)
    b_arrivals, b_mine, b_conf = borrowed(arrivals), borrowed(mine), borrowed(conf)
    n_req = b_arrivals.shape[0]
    while True:
        nxt = st[S_NEXT]
        while nxt < n_req and b_arrivals[nxt] <= t and b_mine[nxt] >= 0:
            if b_mine[nxt] == 1:
                waiting[(st[S_W_HEAD] + st[S_W_LEN]) % n_req] = nxt
                st[S_W_LEN] += 1
            nxt += 1
        st[S_NEXT] = nxt
        if nxt < n_req and b_arrivals[nxt] <= t:  # arrived, not routed: the router decides first
            break
        if st[S_R_COUNT] == 0 and st[S_W_LEN] == 0:
            if nxt == n_req:
                break
            t = b_arrivals[nxt]
            continue
        stretched = decode_stretch(
            t, st, b_conf, drafted_per_step, req, waiting, hist, heap, finish, b_arrivals, b_cost, b_px
        )
        if stretched != t:
            t = stretched
            continue
        t, heap, ran = step(
            t, st, b_conf, drafted_per_step, req, waiting, hist, heap, first, finish, chunks, snapshot, b_cost, b_px
        )
        if not ran:
            st[S_STALLED] = 1
            break
    usage = 1.0 - free_blocks(st, b_conf, hist, b_px, st[S_D]) / b_conf[C_CAP]
    grown = heap.shape[0] != owned_heap.shape[0]  # a heap a step grew is owned: it is returned in run[6]'s place
    keep_alive((arrivals, mine, conf, owned_heap))
    keep_alive(run)
    return t, heap if grown else owned_heap, usage


@cached_njit(error_model="numpy")
def advance_fleet(
    arrivals: np.ndarray,
    mines: np.ndarray,
    conf: np.ndarray,
    drafted_per_step: float,
    cost: CostArrays,
    pxs: Prefix,
    runs: RunArrays,
    clocks: np.ndarray,
    fresh: np.ndarray,
    usage: np.ndarray,
    queues: np.ndarray,
    at: float,
) -> int:  # pragma: no cover (compiled)
    """Every replica `r` run to the arrival at `at` with ``advance`` (its run the `r`-th rows of `runs`' arrays, its
    prefix cache those of `pxs`, its routing marks `mines[r]`), but one that is `fresh` (sent nothing since it last
    ran) with its clock past `at`, which is as it was; then its clock, KV usage and waiting queue in `clocks`,
    `usage`, `queues`. One dispatch per arrival where a call per replica cost the router more than the replicas'
    steps (16 replicas x 1,000 requests: 5.5 s). Each replica holds every request's row, so its completions heap
    (as long as the requests) never grows. Returns the first replica that stalled (nothing runnable), or -1."""
    st, req, first, finish, waiting, hist, heap, chunks, snapshot = runs
    p_req, p_keys, p_scalars = pxs
    for r in range(st.shape[0]):
        if not (fresh[r] and clocks[r] > at):
            run = (st[r], req[r], first[r], finish[r], waiting[r], hist[r], heap[r], chunks[r], snapshot[r])
            px = (p_req[r], p_keys[r], p_scalars[r])
            t, grown, used = advance(arrivals, mines[r], conf, drafted_per_step, cost, px, run, clocks[r])
            if grown.shape[0] != heap.shape[1]:
                st[r, S_STALLED] = 1  # cannot happen (the heap holds every request); refused rather than lost
            clocks[r], usage[r], fresh[r] = t, used, True
            if st[r, S_STALLED]:
                return r
        queues[r] = st[r, S_W_LEN]
    return -1


@cached_njit(error_model="numpy")
def kv_usage(conf: np.ndarray, px: Prefix, run: RunArrays) -> float:  # pragma: no cover (compiled)
    """The share of the replica's KV blocks in use, as vLLM reports ``kv_cache_usage_perc`` (its block pool's
    ``get_usage``: cached blocks no request references count as free)."""
    st, hist = run[0], run[5]
    return float(1.0 - free_blocks(st, conf, hist, px, st[S_D]) / conf[C_CAP])
