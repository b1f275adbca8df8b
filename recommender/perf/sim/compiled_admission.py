"""Admission and preemption compiled: ``admission.py``'s policy over the compiled run's arrays.

Running requests first (each partly prefilled prompt's next chunk, oldest first), then the queue first come, first
served while seats, the token budget and KV blocks allow (its cached prefix read, not computed); when blocks run
short the newest running request is preempted (recompute: back to the front of the queue).
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim import compiled_prefix as prefix
from recommender.perf.sim.compiled_decoding import append, blocks_at, decode_remove, remove
from recommender.perf.sim.compiled_prefix import X_DECODING_SHARED, X_PINNED
from recommender.perf.sim.compiled_state import (
    C_BS,
    C_CAP,
    C_CHUNKED,
    C_MAX_SEQS,
    C_RESERVE,
    DECODE,
    NONE,
    PREFILL,
    R_COMPUTED,
    R_GENERATED,
    R_HELD,
    R_OUTPUT,
    R_PNEXT,
    R_PPREV,
    R_PROMPT,
    R_RPREV,
    R_STATE,
    S_D,
    S_HELD_PREFILL,
    S_P_COUNT,
    S_P_HEAD,
    S_PREEMPTED,
    S_PREEMPTIONS,
    S_R_COUNT,
    S_R_TAIL,
    S_RESERVED,
    S_W_HEAD,
    S_W_LEN,
    WAITING,
    Prefix,
)

__all__ = ["admit_waiting", "evict_overflow", "free_blocks", "preempt_newest", "schedule_prefilling", "whole_blocks"]


@cached_njit(error_model="numpy", inline="always")
def free_blocks(st: np.ndarray, conf: np.ndarray, hist: np.ndarray, px: Prefix, step: int) -> int:  # pragma: no cover
    """``Admission._free_blocks`` at step counter `step`: the prefix cache's unreferenced blocks count as free."""
    x = px[2]
    blocks = blocks_at(st, hist, conf[C_BS], step)
    return conf[C_CAP] - blocks + x[X_DECODING_SHARED] - st[S_HELD_PREFILL] - x[X_PINNED]


@cached_njit(error_model="numpy", inline="always")
def evict_overflow(
    st: np.ndarray, conf: np.ndarray, hist: np.ndarray, px: Prefix, step: int
) -> None:  # pragma: no cover
    """``_evict_overflow``: evict unreferenced prefixes until the running requests' blocks and the cache's fit."""
    over = prefix.evictable(px[2]) - free_blocks(st, conf, hist, px, step)
    if over > 0:
        prefix.evict(px[1], px[2], over)


@cached_njit(error_model="numpy", inline="always")
def whole_blocks(req: np.ndarray, bs: int, rid: int) -> int:  # pragma: no cover (compiled)
    return -(-(req[rid, R_PROMPT] + req[rid, R_OUTPUT] - 1) // bs)


@cached_njit(error_model="numpy", inline="always")
def preempt_newest(
    st: np.ndarray, conf: np.ndarray, req: np.ndarray, hist: np.ndarray, waiting: np.ndarray, px: Prefix
) -> int:  # pragma: no cover (compiled)
    """``Admission._preempt_newest``: recompute preemption of the newest running request; its id."""
    rid = st[S_R_TAIL]
    remove(req, st, S_R_COUNT, R_RPREV, rid)
    prefix.stop_reading(px[0], px[1], px[2], rid, req[rid, R_STATE] == DECODE)
    if req[rid, R_STATE] == DECODE:
        req[rid, R_GENERATED] = decode_remove(st, hist, req, conf[C_BS], rid) + st[S_D] - req[rid, R_PROMPT]
    else:
        remove(req, st, S_P_COUNT, R_PPREV, rid)
        st[S_HELD_PREFILL] -= req[rid, R_HELD]
        req[rid, R_HELD] = 0
        req[rid, R_COMPUTED] = 0
    req[rid, R_STATE] = WAITING
    if conf[C_RESERVE]:
        st[S_RESERVED] -= whole_blocks(req, conf[C_BS], rid)
    n = waiting.shape[0]
    st[S_W_HEAD] = (st[S_W_HEAD] - 1) % n
    waiting[st[S_W_HEAD]] = rid
    st[S_W_LEN] += 1
    st[S_PREEMPTIONS] += 1
    st[S_PREEMPTED] = 1
    return rid


@cached_njit(error_model="numpy", inline="always")
def make_room(
    st: np.ndarray,
    conf: np.ndarray,
    req: np.ndarray,
    hist: np.ndarray,
    waiting: np.ndarray,
    px: Prefix,
    rid: int,
    need: int,
    budget: int,
) -> int:  # pragma: no cover (compiled)
    """``Admission._make_room``: the budget once `need` more blocks fit for `rid`; NONE if `rid` itself went."""
    while need > free_blocks(st, conf, hist, px, st[S_D]):
        was_decoding = req[st[S_R_TAIL], R_STATE] == DECODE
        if preempt_newest(st, conf, req, hist, waiting, px) == rid:
            return NONE
        if was_decoding:
            budget += 1
    return budget


@cached_njit(error_model="numpy", inline="always")
def schedule_prefilling(
    st: np.ndarray,
    conf: np.ndarray,
    req: np.ndarray,
    hist: np.ndarray,
    waiting: np.ndarray,
    chunks: np.ndarray,
    snapshot: np.ndarray,
    px: Prefix,
    budget: int,
) -> tuple[int, int]:  # pragma: no cover (compiled)
    """``Admission._schedule_prefilling``: the budget left and the KV tokens earlier chunks left for these."""
    bs, prior = conf[C_BS], 0
    n, rid = 0, st[S_P_HEAD]
    while rid != NONE:
        snapshot[n] = rid
        n += 1
        rid = req[rid, R_PNEXT]
    for i in range(n):
        rid = snapshot[i]
        if budget <= 0:
            break
        if req[rid, R_STATE] != PREFILL:
            continue  # preempted to make room for an older one
        computed = req[rid, R_COMPUTED]
        remaining = req[rid, R_PROMPT] + req[rid, R_GENERATED] - computed
        chunk = min(remaining, budget)
        if not conf[C_CHUNKED] and chunk < remaining:
            continue
        need = -(-(computed + chunk) // bs) - req[rid, R_HELD] - px[0][rid, prefix.Q_SHARED]
        room = make_room(st, conf, req, hist, waiting, px, rid, need, budget)
        if room == NONE:
            break  # as in vLLM, a request preempting itself ends this step's scheduling
        req[rid, R_HELD] += need
        st[S_HELD_PREFILL] += need
        budget = room - chunk
        chunks[chunks[0, 0] + 1, 0], chunks[chunks[0, 0] + 1, 1] = rid, chunk
        chunks[0, 0] += 1
        prior += computed
    return budget, prior


@cached_njit(error_model="numpy", inline="always")
def admit_waiting(
    st: np.ndarray,
    conf: np.ndarray,
    req: np.ndarray,
    hist: np.ndarray,
    waiting: np.ndarray,
    chunks: np.ndarray,
    px: Prefix,
    budget: int,
) -> int:  # pragma: no cover (compiled)
    """``Admission._admit_waiting``, first come, first served while seats, budget and blocks allow; the KV tokens
    their chunks read from the prefix cache."""
    q, keys, x = px
    bs, n, prior = conf[C_BS], waiting.shape[0], 0
    while st[S_W_LEN] > 0 and budget > 0 and st[S_R_COUNT] < conf[C_MAX_SEQS]:
        rid = waiting[st[S_W_HEAD]]
        length = req[rid, R_PROMPT] + req[rid, R_GENERATED]
        hit = prefix.hit_blocks(q, keys, x, bs, rid, length)
        need_tokens = length - hit * bs
        chunk = min(need_tokens, budget)
        if not conf[C_CHUNKED] and chunk < need_tokens:
            break
        blocks = -(-(hit * bs + chunk) // bs) - hit
        whole = whole_blocks(req, bs, rid)
        if blocks + prefix.pin_cost(q, keys, x, rid, hit) > free_blocks(st, conf, hist, px, st[S_D]) or (
            conf[C_RESERVE] and st[S_RESERVED] + whole > conf[C_CAP]
        ):
            break
        if conf[C_RESERVE]:
            st[S_RESERVED] += whole
        if hit:
            prefix.read(q, keys, x, bs, rid, hit)
            prior += hit * bs
        st[S_W_HEAD] = (st[S_W_HEAD] + 1) % n
        st[S_W_LEN] -= 1
        req[rid, R_STATE] = PREFILL
        append(req, st, S_R_COUNT, R_RPREV, rid)
        append(req, st, S_P_COUNT, R_PPREV, rid)
        req[rid, R_COMPUTED] = hit * bs
        req[rid, R_HELD] = blocks
        st[S_HELD_PREFILL] += blocks
        budget -= chunk
        chunks[chunks[0, 0] + 1, 0], chunks[chunks[0, 0] + 1, 1] = rid, chunk
        chunks[0, 0] += 1
        if not conf[C_CHUNKED]:
            break
    return prior
