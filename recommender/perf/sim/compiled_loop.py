"""The compiled scheduler loop (numba): ``admission.py`` and ``scheduler.py`` over arrays, one step at a time.

Read beside those two modules: each function here names the method it follows. Per-request state is one int64
row per request (columns ``R_*``); the run's scalars one int64 array (``S_*``); the running and prefilling
requests are doubly linked lists through their rows, in admission order (the running list's tail is the newest,
the first preempted); the queue is a ring buffer (a preempted request goes back to its front); the decoders'
completions a binary heap of (step, id) rows, lazily invalidated as ``decoding.py``'s is. The prefix cache's
state (``compiled_prefix.py``) travels beside it as one tuple of arrays.
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim import compiled_prefix as prefix
from recommender.perf.sim.compiled_admission import (
    admit_waiting,
    evict_overflow,
    free_blocks,
    make_room,
    schedule_prefilling,
    whole_blocks,
)
from recommender.perf.sim.compiled_borrow import borrowed, borrowed_inputs, borrowed_run, keep_alive
from recommender.perf.sim.compiled_decoding import blocks_at, decode_add, decode_remove, heap_pop, remove
from recommender.perf.sim.compiled_prefix import X_DECODING_SHARED, X_PINNED
from recommender.perf.sim.compiled_pricing import price, price_chunks
from recommender.perf.sim.compiled_state import (
    C_BS,
    C_BUDGET,
    C_CAP,
    C_CHUNKED,
    C_MAX_SEQS,
    C_MIXED,
    C_MODE,
    C_RESERVE,
    DECODE,
    DONE,
    NONE,
    PLAIN,
    R_COMPUTED,
    R_FINISH_STEP,
    R_GENERATED,
    R_HELD,
    R_OUTPUT,
    R_PPREV,
    R_PROMPT,
    R_RPREV,
    R_STATE,
    S_D,
    S_DCOUNT,
    S_HEAP_N,
    S_HELD_PREFILL,
    S_MAX_STEP_TOKENS,
    S_NEXT,
    S_OFFSET_SUM,
    S_P_COUNT,
    S_PREEMPTED,
    S_PREFILLED,
    S_R_COUNT,
    S_RESERVED,
    S_STALLED,
    S_STEPS,
    S_W_HEAD,
    S_W_LEN,
    Prefix,
    RunArrays,
    new_run,
)
from recommender.perf.step.compiled_cost import CostArrays, decode_run_seconds

__all__ = ["decode_stretch", "run_loop", "step"]

#: Whether the queue's head may be admitted while the decoders run alone (``_head_blocked``).
OPEN, BLOCKED, NO_STRETCH = 0, 1, 2


@cached_njit(error_model="numpy", inline="always")
def _finish_decoders(
    st: np.ndarray,
    conf: np.ndarray,
    req: np.ndarray,
    hist: np.ndarray,
    heap: np.ndarray,
    finish: np.ndarray,
    px: Prefix,
    t: float,
    step: int,
) -> None:  # pragma: no cover (compiled)
    """``_finish_decoders``: retire the decoders whose last token the step with counter `step` sampled."""
    q, keys, x = px
    while st[S_HEAP_N] > 0 and heap[0, 0] <= step:
        rid = heap[0, 1]
        heap_pop(heap, st)
        if req[rid, R_FINISH_STEP] == step:
            decode_remove(st, hist, req, conf[C_BS], rid)
            req[rid, R_STATE] = DONE
            finish[rid] = t
            if conf[C_RESERVE]:
                st[S_RESERVED] -= whole_blocks(req, conf[C_BS], rid)
            prefix.finish(q, keys, x, conf[C_BS], rid, req[rid, R_PROMPT] + req[rid, R_OUTPUT])
            prefix.stop_reading(q, keys, x, rid, True)
            remove(req, st, S_R_COUNT, R_RPREV, rid)


@cached_njit(error_model="numpy", inline="always")
def _finish_chunks(
    st: np.ndarray,
    conf: np.ndarray,
    req: np.ndarray,
    hist: np.ndarray,
    heap: np.ndarray,
    chunks: np.ndarray,
    first: np.ndarray,
    finish: np.ndarray,
    px: Prefix,
    t: float,
) -> np.ndarray:  # pragma: no cover (compiled)
    """``_finish_chunks``: prefills that reached their end sample a token, then decode or finish; the heap."""
    q, keys, x = px
    bs, d = conf[C_BS], st[S_D]
    for i in range(chunks[0, 0]):
        rid, chunk = chunks[i + 1, 0], chunks[i + 1, 1]
        req[rid, R_COMPUTED] += chunk
        length = req[rid, R_PROMPT] + req[rid, R_GENERATED]
        if req[rid, R_COMPUTED] < length:
            continue
        req[rid, R_GENERATED] += 1
        if req[rid, R_GENERATED] == 1:
            first[rid] = t
        remove(req, st, S_P_COUNT, R_PPREV, rid)
        st[S_HELD_PREFILL] -= req[rid, R_HELD]
        req[rid, R_HELD] = 0
        prefix.publish(q, keys, x, bs, rid)
        if req[rid, R_GENERATED] == req[rid, R_OUTPUT]:
            req[rid, R_STATE] = DONE
            finish[rid] = t
            if conf[C_RESERVE]:
                st[S_RESERVED] -= whole_blocks(req, bs, rid)
            prefix.finish(q, keys, x, bs, rid, length + 1)
            prefix.stop_reading(q, keys, x, rid, False)
            remove(req, st, S_R_COUNT, R_RPREV, rid)
            continue
        offset = length + 1 - d  # the next step (counter d) reads length + 1 tokens
        req[rid, R_STATE] = DECODE
        prefix.start_decoding(q, x, rid)
        heap = decode_add(st, hist, req, heap, bs, rid, offset, req[rid, R_OUTPUT] + req[rid, R_PROMPT] - 1 - offset)
    return heap


@cached_njit(error_model="numpy", inline="always")
def _head_blocked(
    st: np.ndarray, conf: np.ndarray, req: np.ndarray, hist: np.ndarray, waiting: np.ndarray, px: Prefix
) -> int:  # pragma: no cover (compiled)
    """``_decode_stretch``'s ``blocked``: ``BLOCKED`` where no waiting request can be admitted while the decoders run
    alone (the seats or the token budget taken, or the queue's head does not fit), ``OPEN`` where it can (or the
    queue is empty), ``NO_STRETCH`` where the head's cached prefix is evictable (a step that evicts it may let it
    in: no stretch is taken)."""
    budget_left = conf[C_BUDGET] - st[S_DCOUNT]
    if st[S_R_COUNT] >= conf[C_MAX_SEQS] or budget_left <= 0:
        return BLOCKED
    if st[S_W_LEN] == 0:
        return OPEN
    q, keys, x = px
    bs, head = conf[C_BS], waiting[st[S_W_HEAD]]
    length = req[head, R_PROMPT] + req[head, R_GENERATED]
    hit = prefix.hit_blocks(q, keys, x, bs, head, length)
    need = length - hit * bs
    chunk = min(need, budget_left) if conf[C_CHUNKED] else need
    if prefix.pin_cost(q, keys, x, head, hit):
        return NO_STRETCH
    blocks = -(-(hit * bs + chunk) // bs) - hit
    return BLOCKED if chunk > budget_left or blocks > free_blocks(st, conf, hist, px, st[S_D]) else OPEN


@cached_njit(error_model="numpy", inline="always")
def _fitting_steps(st: np.ndarray, hist: np.ndarray, bs: int, cap: int, horizon: int) -> int:  # pragma: no cover
    """How many of the next `horizon` pure decode steps the decoders' blocks fit `cap` (blocks never shrink as the
    decoders grow: the last fitting step is bisected, as ``DecodingSequences.decode_run`` does)."""
    d = st[S_D]
    if blocks_at(st, hist, bs, d + horizon - 1) <= cap:
        return horizon
    lo, hi = 0, horizon - 1  # step d + lo fits, step d + hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if blocks_at(st, hist, bs, d + mid) <= cap:
            lo = mid
        else:
            hi = mid
    return hi


@cached_njit(error_model="numpy", inline="always")
def decode_stretch(
    t: float,
    st: np.ndarray,
    conf: np.ndarray,
    drafted_per_step: float,
    req: np.ndarray,
    waiting: np.ndarray,
    hist: np.ndarray,
    heap: np.ndarray,
    finish: np.ndarray,
    arrivals: np.ndarray,
    cost: CostArrays,
    px: Prefix,
) -> float:  # pragma: no cover (compiled)
    """``ContinuousBatchingSimulation._decode_stretch``: pure decode steps in which nothing else can happen (no
    prompt prefilling, the queue's head not admissible), up to the next completion, the step whose blocks no longer
    fit, or the next arrival where it could be admitted; the time after them (`t` where fewer than two qualify:
    the caller takes an ordinary step). Each step is priced on its own: the same sums as step by step."""
    n_dec, d = st[S_DCOUNT], st[S_D]
    if n_dec == 0 or st[S_P_COUNT] > 0:
        return t
    head = _head_blocked(st, conf, req, hist, waiting, px)
    if head == NO_STRETCH or (head == OPEN and st[S_W_LEN] > 0):
        return t
    blocked = head == BLOCKED
    while req[heap[0, 1], R_FINISH_STEP] != heap[0, 0]:  # stale completions (preempted decoders)
        heap_pop(heap, st)
    horizon = heap[0, 0] - d + 1  # steps up to and including the next completion
    if horizon < 2:
        return t
    nxt = st[S_NEXT]
    next_arrival = arrivals[nxt] if nxt < arrivals.shape[0] and not blocked else np.inf
    horizon = _fitting_steps(st, hist, conf[C_BS], conf[C_CAP] + px[2][X_DECODING_SHARED] - px[2][X_PINNED], horizon)
    if horizon < 2:
        return t
    first_context = st[S_OFFSET_SUM] + n_dec * d
    if conf[C_MODE] == PLAIN:
        k, elapsed = decode_run_seconds(cost, n_dec, first_context, horizon, t, next_arrival)
    else:
        elapsed, k = 0.0, 0
        while k < horizon and (k == 0 or t + elapsed < next_arrival):
            elapsed += price(cost, conf[C_MODE], drafted_per_step, 0, 0, 0, 0, 0, n_dec, first_context + n_dec * k)
            k += 1
    if k < 2:
        return t
    t += elapsed
    st[S_D] = d + k
    st[S_STEPS] += k
    st[S_MAX_STEP_TOKENS] = max(st[S_MAX_STEP_TOKENS], n_dec)
    if k == horizon:
        # Before the last step the decoders held the most blocks: the step-by-step path evicted for them then.
        evict_overflow(st, conf, hist, px, d + k - 1)
        _finish_decoders(st, conf, req, hist, heap, finish, px, t, d + k - 1)
    evict_overflow(st, conf, hist, px, st[S_D])
    return t


@cached_njit(error_model="numpy", inline="always")
def step(
    t: float,
    st: np.ndarray,
    conf: np.ndarray,
    drafted_per_step: float,
    req: np.ndarray,
    waiting: np.ndarray,
    hist: np.ndarray,
    heap: np.ndarray,
    first: np.ndarray,
    finish: np.ndarray,
    chunks: np.ndarray,
    snapshot: np.ndarray,
    cost: CostArrays,
    px: Prefix,
) -> tuple[float, np.ndarray, bool]:  # pragma: no cover (compiled)
    """``ContinuousBatchingSimulation._step``: make room, schedule prefill chunks, admit, price, retire; the time,
    the heap, and False where nothing was runnable."""
    st[S_PREEMPTED] = 0
    chunks[0, 0] = 0
    prefill_alone = not conf[C_MIXED] and (st[S_P_COUNT] > 0 or st[S_W_LEN] > 0)
    budget = conf[C_BUDGET] - (0 if prefill_alone else st[S_DCOUNT])
    # _preempt_until_decoders_fit: room for no more blocks, on behalf of no request (so never NONE)
    budget = make_room(st, conf, req, hist, waiting, px, NONE, 0, budget)
    prior_context = 0
    if st[S_P_COUNT] > 0:
        budget, prior_context = schedule_prefilling(st, conf, req, hist, waiting, chunks, snapshot, px, budget)
    if not st[S_PREEMPTED]:
        prior_context += admit_waiting(st, conf, req, hist, waiting, chunks, px, budget)
    prefill_alone = prefill_alone and chunks[0, 0] > 0  # decoders wait only for a step that prefills
    n_dec = 0 if prefill_alone else st[S_DCOUNT]
    if chunks[0, 0] == 0 and n_dec == 0:
        return t, heap, st[S_PREEMPTED] == 1  # preempted requests are admitted again next step
    prefill_tokens = 0
    for i in range(chunks[0, 0]):
        prefill_tokens += chunks[i + 1, 1]
    st[S_PREFILLED] += prefill_tokens
    context = (0 if prefill_alone else st[S_OFFSET_SUM] + st[S_DCOUNT] * st[S_D]) + prior_context
    t += price_chunks(cost, conf[C_MODE], drafted_per_step, req, chunks, n_dec, context)
    st[S_STEPS] += 1
    st[S_MAX_STEP_TOKENS] = max(st[S_MAX_STEP_TOKENS], prefill_tokens + n_dec)
    if not prefill_alone:  # the decoders' step counter advances only when they ran
        _finish_decoders(st, conf, req, hist, heap, finish, px, t, st[S_D])
        st[S_D] += 1
    heap = _finish_chunks(st, conf, req, hist, heap, chunks, first, finish, px, t)
    evict_overflow(st, conf, hist, px, st[S_D])
    return t, heap, True


@cached_njit(error_model="numpy")
def run_loop(
    arrivals: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    conf: np.ndarray,
    drafted_per_step: float,
    cost: CostArrays,
    px: Prefix,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover (compiled)
    """``ContinuousBatchingSimulation.run``: serve every request; first-token and finish times, and the run's
    scalars (``STATE``; ``stalled`` 1 where nothing was runnable, which ``scheduler.check_runnable`` rules out).
    `px` (``compiled_prefix.prefix_arrays``) is the prefix cache's state, updated in place. The loop reads borrowed
    views (no reference counting, ``compiled_borrow``); the arrays they view live until the return."""
    owned = new_run(prompts, outputs, conf[C_BS])
    borrowed_cost, borrowed_px = borrowed_inputs(cost, px)
    _serve(borrowed(arrivals), borrowed(conf), drafted_per_step, borrowed_cost, borrowed_px, borrowed_run(owned))
    keep_alive(owned)
    return owned[2], owned[3], owned[0]


@cached_njit(error_model="numpy", inline="always")
def _serve(
    arrivals: np.ndarray, conf: np.ndarray, drafted_per_step: float, cost: CostArrays, px: Prefix, run: RunArrays
) -> None:  # pragma: no cover (compiled)
    """``run_loop``'s loop: admit the arrivals up to the clock, then a decode stretch where one qualifies, else a
    step, until every request is served (or nothing is runnable: ``S_STALLED``)."""
    st, req, first, finish, waiting, hist, heap, chunks, snapshot = run
    n_req = arrivals.shape[0]
    t = 0.0
    while True:
        nxt = st[S_NEXT]
        while nxt < n_req and arrivals[nxt] <= t:
            waiting[(st[S_W_HEAD] + st[S_W_LEN]) % n_req] = nxt
            st[S_W_LEN] += 1
            nxt += 1
        st[S_NEXT] = nxt
        if st[S_R_COUNT] == 0 and st[S_W_LEN] == 0:
            if nxt == n_req:
                break
            t = arrivals[nxt]
            continue
        stretched = decode_stretch(t, st, conf, drafted_per_step, req, waiting, hist, heap, finish, arrivals, cost, px)
        if stretched != t:
            t = stretched
            continue
        t, heap, ran = step(
            t, st, conf, drafted_per_step, req, waiting, hist, heap, first, finish, chunks, snapshot, cost, px
        )
        if not ran:
            st[S_STALLED] = 1
            break
