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
from numba import njit

from recommender.perf.sim import compiled_prefix as prefix
from recommender.perf.sim.compiled_prefix import X_DECODING_SHARED, X_PINNED
from recommender.perf.step.compiled_cost import CostArrays, compiled_step_seconds, decode_run_seconds

#: The prefix cache's arrays (``compiled_prefix.prefix_arrays``): the requests' rows, the keys' rows, the scalars.
Prefix = tuple[np.ndarray, np.ndarray, np.ndarray]

__all__ = ["CONFIG_FIELDS", "DECODE_ONLY", "PLAIN", "SPECULATIVE", "STATE", "run_loop"]

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
#: Whether the queue's head may be admitted while the decoders run alone (``_head_blocked``).
OPEN, BLOCKED, NO_STRETCH = 0, 1, 2
NONE = -1
#: How a step is handed to the cost: as scheduled; with each decoder's drafts verified (speculative decoding); or as
#: a decode worker prices it (prompts arrive as transferred KV: ``disaggregated.DecodeOnlyStepCost``).
PLAIN, SPECULATIVE, DECODE_ONLY = 0, 1, 2

# Columns of a request's row.
R_PROMPT, R_OUTPUT, R_STATE, R_GENERATED, R_COMPUTED, R_HELD = 0, 1, 2, 3, 4, 5
R_RPREV, R_RNEXT, R_PPREV, R_PNEXT, R_OFFSET, R_FINISH_STEP = 6, 7, 8, 9, 10, 11
N_COLUMNS = 12
# The run's scalars. A list's count, head and tail sit at three consecutive indices.
S_D, S_DCOUNT, S_OFFSET_SUM, S_QSUM, S_HELD_PREFILL, S_RESERVED = 0, 1, 2, 3, 4, 5
S_R_COUNT, S_R_HEAD, S_R_TAIL, S_P_COUNT, S_P_HEAD, S_P_TAIL = 6, 7, 8, 9, 10, 11
S_W_HEAD, S_W_LEN, S_HEAP_N, S_PREEMPTIONS, S_PREEMPTED, S_NEXT = 12, 13, 14, 15, 16, 17
S_STEPS, S_MAX_STEP_TOKENS, S_PREFILLED, S_STALLED = 18, 19, 20, 21
N_STATE = 22
#: The scalars a caller reads back, by name.
STATE = {
    "preemptions": S_PREEMPTIONS,
    "steps": S_STEPS,
    "max_step_tokens": S_MAX_STEP_TOKENS,
    "prefill_tokens": S_PREFILLED,
    "stalled": S_STALLED,
}
# The config, in one int64 array.
C_BS, C_CAP, C_MAX_SEQS, C_BUDGET, C_CHUNKED, C_MIXED, C_RESERVE, C_MODE = 0, 1, 2, 3, 4, 5, 6, 7
CONFIG_FIELDS = (
    "block_size",
    "kv_blocks",
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "mixed_prefill",
    "reserve_whole_request",
)


# --- the decoders' aggregates (DecodingSequences) -------------------------------------------------------------------


@njit(cache=True)
def _blocks_at(st: np.ndarray, hist: np.ndarray, bs: int, step: int) -> int:  # pragma: no cover (compiled)
    """``DecodingSequences.blocks_at``: the KV blocks the decoders hold at step counter `step`."""
    n_dec = st[S_DCOUNT]
    if n_dec == 0:
        return 0
    a, m = divmod(step, bs)
    extra = n_dec - (hist[0] if m == 0 else 0)
    if m >= 2:
        for r in range(bs + 1 - m, bs):
            extra += hist[r]
    return st[S_QSUM] + n_dec * a + extra


@njit(cache=True)
def _less(heap: np.ndarray, i: int, j: int) -> bool:  # pragma: no cover (compiled)
    return heap[i, 0] < heap[j, 0] or (heap[i, 0] == heap[j, 0] and heap[i, 1] < heap[j, 1])


@njit(cache=True)
def _swap(heap: np.ndarray, i: int, j: int) -> None:  # pragma: no cover (compiled)
    a0, a1 = heap[i, 0], heap[i, 1]
    heap[i, 0], heap[i, 1] = heap[j, 0], heap[j, 1]
    heap[j, 0], heap[j, 1] = a0, a1


@njit(cache=True)
def _heap_push(heap: np.ndarray, st: np.ndarray, key: int, rid: int) -> np.ndarray:  # pragma: no cover (compiled)
    """``heapq.heappush`` of (key, rid), the heap grown when full; the heap."""
    n = st[S_HEAP_N]
    if n == heap.shape[0]:
        grown = np.empty((2 * n, 2), dtype=np.int64)
        grown[:n] = heap
        heap = grown
    heap[n, 0], heap[n, 1] = key, rid
    i = n
    while i > 0 and _less(heap, i, (i - 1) // 2):
        _swap(heap, i, (i - 1) // 2)
        i = (i - 1) // 2
    st[S_HEAP_N] = n + 1
    return heap


@njit(cache=True)
def _heap_pop(heap: np.ndarray, st: np.ndarray) -> None:  # pragma: no cover (compiled)
    """``heapq.heappop``, the entry dropped."""
    n = st[S_HEAP_N] - 1
    st[S_HEAP_N] = n
    heap[0, 0], heap[0, 1] = heap[n, 0], heap[n, 1]
    i = 0
    while True:
        smallest = i
        for child in (2 * i + 1, 2 * i + 2):
            if child < n and _less(heap, child, smallest):
                smallest = child
        if smallest == i:
            return
        _swap(heap, i, smallest)
        i = smallest


@njit(cache=True)
def _decode_add(
    st: np.ndarray, hist: np.ndarray, req: np.ndarray, heap: np.ndarray, bs: int, rid: int, offset: int, fin: int
) -> np.ndarray:  # pragma: no cover (compiled)
    """``DecodingSequences.add``; the heap."""
    req[rid, R_OFFSET], req[rid, R_FINISH_STEP] = offset, fin
    st[S_DCOUNT] += 1
    st[S_OFFSET_SUM] += offset
    st[S_QSUM] += offset // bs
    hist[offset % bs] += 1
    return _heap_push(heap, st, fin, rid)


@njit(cache=True)
def _decode_remove(st: np.ndarray, hist: np.ndarray, req: np.ndarray, bs: int, rid: int) -> int:  # pragma: no cover
    """``DecodingSequences.remove``: the decoder's offset."""
    offset = req[rid, R_OFFSET]
    st[S_DCOUNT] -= 1
    st[S_OFFSET_SUM] -= offset
    st[S_QSUM] -= offset // bs
    hist[offset % bs] -= 1
    req[rid, R_FINISH_STEP] = NONE
    return offset


# --- ordered sets of requests (dicts in admission order) -------------------------------------------------------------


@njit(cache=True)
def _append(req: np.ndarray, st: np.ndarray, count: int, prev: int, rid: int) -> None:  # pragma: no cover
    """Append `rid` to the list whose count, head and tail are st[count], st[count + 1], st[count + 2]; its links
    are the row's columns `prev` and `prev + 1`."""
    tail = st[count + 2]
    req[rid, prev], req[rid, prev + 1] = tail, NONE
    if tail == NONE:
        st[count + 1] = rid
    else:
        req[tail, prev + 1] = rid
    st[count + 2] = rid
    st[count] += 1


@njit(cache=True)
def _remove(req: np.ndarray, st: np.ndarray, count: int, prev: int, rid: int) -> None:  # pragma: no cover
    before, after = req[rid, prev], req[rid, prev + 1]
    if before == NONE:
        st[count + 1] = after
    else:
        req[before, prev + 1] = after
    if after == NONE:
        st[count + 2] = before
    else:
        req[after, prev] = before
    st[count] -= 1


# --- admission and preemption (Admission) ----------------------------------------------------------------------------


@njit(cache=True)
def _free_blocks(st: np.ndarray, conf: np.ndarray, hist: np.ndarray, px: Prefix, step: int) -> int:  # pragma: no cover
    """``Admission._free_blocks`` at step counter `step`: the prefix cache's unreferenced blocks count as free."""
    x = px[2]
    blocks = _blocks_at(st, hist, conf[C_BS], step)
    return conf[C_CAP] - blocks + x[X_DECODING_SHARED] - st[S_HELD_PREFILL] - x[X_PINNED]


@njit(cache=True)
def _evict_overflow(
    st: np.ndarray, conf: np.ndarray, hist: np.ndarray, px: Prefix, step: int
) -> None:  # pragma: no cover
    """``_evict_overflow``: evict unreferenced prefixes until the running requests' blocks and the cache's fit."""
    over = prefix.evictable(px[2]) - _free_blocks(st, conf, hist, px, step)
    if over > 0:
        prefix.evict(px[1], px[2], over)


@njit(cache=True)
def _whole(req: np.ndarray, bs: int, rid: int) -> int:  # pragma: no cover (compiled)
    return -(-(req[rid, R_PROMPT] + req[rid, R_OUTPUT] - 1) // bs)


@njit(cache=True)
def _preempt_newest(
    st: np.ndarray, conf: np.ndarray, req: np.ndarray, hist: np.ndarray, waiting: np.ndarray, px: Prefix
) -> int:  # pragma: no cover (compiled)
    """``Admission._preempt_newest``: recompute preemption of the newest running request; its id."""
    rid = st[S_R_TAIL]
    _remove(req, st, S_R_COUNT, R_RPREV, rid)
    prefix.stop_reading(px[0], px[1], px[2], rid, req[rid, R_STATE] == DECODE)
    if req[rid, R_STATE] == DECODE:
        req[rid, R_GENERATED] = _decode_remove(st, hist, req, conf[C_BS], rid) + st[S_D] - req[rid, R_PROMPT]
    else:
        _remove(req, st, S_P_COUNT, R_PPREV, rid)
        st[S_HELD_PREFILL] -= req[rid, R_HELD]
        req[rid, R_HELD] = 0
        req[rid, R_COMPUTED] = 0
    req[rid, R_STATE] = WAITING
    if conf[C_RESERVE]:
        st[S_RESERVED] -= _whole(req, conf[C_BS], rid)
    n = waiting.shape[0]
    st[S_W_HEAD] = (st[S_W_HEAD] - 1) % n
    waiting[st[S_W_HEAD]] = rid
    st[S_W_LEN] += 1
    st[S_PREEMPTIONS] += 1
    st[S_PREEMPTED] = 1
    return rid


@njit(cache=True)
def _make_room(
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
    while need > _free_blocks(st, conf, hist, px, st[S_D]):
        was_decoding = req[st[S_R_TAIL], R_STATE] == DECODE
        if _preempt_newest(st, conf, req, hist, waiting, px) == rid:
            return NONE
        if was_decoding:
            budget += 1
    return budget


@njit(cache=True)
def _schedule_prefilling(
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
        room = _make_room(st, conf, req, hist, waiting, px, rid, need, budget)
        if room == NONE:
            break  # as in vLLM, a request preempting itself ends this step's scheduling
        req[rid, R_HELD] += need
        st[S_HELD_PREFILL] += need
        budget = room - chunk
        chunks[chunks[0, 0] + 1, 0], chunks[chunks[0, 0] + 1, 1] = rid, chunk
        chunks[0, 0] += 1
        prior += computed
    return budget, prior


@njit(cache=True)
def _admit_waiting(
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
        whole = _whole(req, bs, rid)
        if blocks + prefix.pin_cost(q, keys, x, rid, hit) > _free_blocks(st, conf, hist, px, st[S_D]) or (
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
        _append(req, st, S_R_COUNT, R_RPREV, rid)
        _append(req, st, S_P_COUNT, R_PPREV, rid)
        req[rid, R_COMPUTED] = hit * bs
        req[rid, R_HELD] = blocks
        st[S_HELD_PREFILL] += blocks
        budget -= chunk
        chunks[chunks[0, 0] + 1, 0], chunks[chunks[0, 0] + 1, 1] = rid, chunk
        chunks[0, 0] += 1
        if not conf[C_CHUNKED]:
            break
    return prior


# --- the step (ContinuousBatchingSimulation) -------------------------------------------------------------------------


@njit(cache=True)
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
        _heap_pop(heap, st)
        if req[rid, R_FINISH_STEP] == step:
            _decode_remove(st, hist, req, conf[C_BS], rid)
            req[rid, R_STATE] = DONE
            finish[rid] = t
            if conf[C_RESERVE]:
                st[S_RESERVED] -= _whole(req, conf[C_BS], rid)
            prefix.finish(q, keys, x, conf[C_BS], rid, req[rid, R_PROMPT] + req[rid, R_OUTPUT])
            prefix.stop_reading(q, keys, x, rid, True)
            _remove(req, st, S_R_COUNT, R_RPREV, rid)


@njit(cache=True)
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
        _remove(req, st, S_P_COUNT, R_PPREV, rid)
        st[S_HELD_PREFILL] -= req[rid, R_HELD]
        req[rid, R_HELD] = 0
        prefix.publish(q, keys, x, bs, rid)
        if req[rid, R_GENERATED] == req[rid, R_OUTPUT]:
            req[rid, R_STATE] = DONE
            finish[rid] = t
            if conf[C_RESERVE]:
                st[S_RESERVED] -= _whole(req, bs, rid)
            prefix.finish(q, keys, x, bs, rid, length + 1)
            prefix.stop_reading(q, keys, x, rid, False)
            _remove(req, st, S_R_COUNT, R_RPREV, rid)
            continue
        offset = length + 1 - d  # the next step (counter d) reads length + 1 tokens
        req[rid, R_STATE] = DECODE
        prefix.start_decoding(q, x, rid)
        heap = _decode_add(st, hist, req, heap, bs, rid, offset, req[rid, R_OUTPUT] + req[rid, R_PROMPT] - 1 - offset)
    return heap


@njit(cache=True)
def _price(
    cost: CostArrays,
    mode: int,
    drafted_per_step: float,
    tokens: int,
    seqs: int,
    sum_sq: int,
    sum_cross: int,
    prior: int,
    n_dec: int,
    context: int,
) -> float:  # pragma: no cover (compiled)
    """A step's duration from its chunks' sums (``PrefillChunks``), handed to the cost as `mode` says."""
    if mode == DECODE_ONLY:  # DecodeOnlyStepCost: the admitted sequences decode over their transferred prompts
        return compiled_step_seconds(cost, 0, 0, 0, 0, 0, n_dec + seqs, context + tokens, 0)
    if mode == SPECULATIVE and n_dec > 0:  # SpeculativeStepCost._with_drafts
        drafts = round(n_dec * drafted_per_step)
        if drafts:
            tokens += drafts
            sum_cross += round(drafts * ((context - prior) / n_dec))
    prefilling = 1 if seqs else 0
    return compiled_step_seconds(cost, prefilling, tokens, seqs, sum_sq, sum_cross, n_dec, context, prior)


@njit(cache=True)
def _price_chunks(
    cost: CostArrays,
    mode: int,
    drafted_per_step: float,
    req: np.ndarray,
    chunks: np.ndarray,
    n_dec: int,
    context: int,
) -> float:  # pragma: no cover (compiled)
    """The step's duration: its chunks' sums (``PrefillChunks.of``) priced."""
    tokens = seqs = sum_sq = sum_cross = prior = 0
    for i in range(chunks[0, 0]):
        chunk, done = chunks[i + 1, 1], req[chunks[i + 1, 0], R_COMPUTED]
        tokens += chunk
        seqs += 1
        sum_sq += chunk * chunk
        sum_cross += chunk * done
        prior += done
    return _price(cost, mode, drafted_per_step, tokens, seqs, sum_sq, sum_cross, prior, n_dec, context)


@njit(cache=True)
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
    return BLOCKED if chunk > budget_left or blocks > _free_blocks(st, conf, hist, px, st[S_D]) else OPEN


@njit(cache=True)
def _decode_stretch(
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
        _heap_pop(heap, st)
    horizon = heap[0, 0] - d + 1  # steps up to and including the next completion
    if horizon < 2:
        return t
    nxt = st[S_NEXT]
    next_arrival = arrivals[nxt] if nxt < arrivals.shape[0] and not blocked else np.inf
    bs, cap = conf[C_BS], conf[C_CAP] + px[2][X_DECODING_SHARED] - px[2][X_PINNED]
    if _blocks_at(st, hist, bs, d + horizon - 1) > cap:  # blocks never shrink as decoders grow: bisect the last fit
        lo, hi = 0, horizon - 1  # step d + lo fits, step d + hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _blocks_at(st, hist, bs, d + mid) <= cap:
                lo = mid
            else:
                hi = mid
        horizon = hi
        if horizon < 2:
            return t
    first_context = st[S_OFFSET_SUM] + n_dec * d
    if conf[C_MODE] == PLAIN:
        k, elapsed = decode_run_seconds(cost, n_dec, first_context, horizon, t, next_arrival)
    else:
        elapsed, k = 0.0, 0
        while k < horizon and (k == 0 or t + elapsed < next_arrival):
            elapsed += _price(cost, conf[C_MODE], drafted_per_step, 0, 0, 0, 0, 0, n_dec, first_context + n_dec * k)
            k += 1
    if k < 2:
        return t
    t += elapsed
    st[S_D] = d + k
    st[S_STEPS] += k
    st[S_MAX_STEP_TOKENS] = max(st[S_MAX_STEP_TOKENS], n_dec)
    if k == horizon:
        # Before the last step the decoders held the most blocks: the step-by-step path evicted for them then.
        _evict_overflow(st, conf, hist, px, d + k - 1)
        _finish_decoders(st, conf, req, hist, heap, finish, px, t, d + k - 1)
    _evict_overflow(st, conf, hist, px, st[S_D])
    return t


@njit(cache=True)
def _step(
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
    while _free_blocks(st, conf, hist, px, st[S_D]) < 0:  # _preempt_until_decoders_fit
        was_decoding = req[st[S_R_TAIL], R_STATE] == DECODE
        _preempt_newest(st, conf, req, hist, waiting, px)
        if was_decoding:
            budget += 1
    prior_context = 0
    if st[S_P_COUNT] > 0:
        budget, prior_context = _schedule_prefilling(st, conf, req, hist, waiting, chunks, snapshot, px, budget)
    if not st[S_PREEMPTED]:
        prior_context += _admit_waiting(st, conf, req, hist, waiting, chunks, px, budget)
    prefill_alone = prefill_alone and chunks[0, 0] > 0  # decoders wait only for a step that prefills
    n_dec = 0 if prefill_alone else st[S_DCOUNT]
    if chunks[0, 0] == 0 and n_dec == 0:
        return t, heap, st[S_PREEMPTED] == 1  # preempted requests are admitted again next step
    prefill_tokens = 0
    for i in range(chunks[0, 0]):
        prefill_tokens += chunks[i + 1, 1]
    st[S_PREFILLED] += prefill_tokens
    context = (0 if prefill_alone else st[S_OFFSET_SUM] + st[S_DCOUNT] * st[S_D]) + prior_context
    t += _price_chunks(cost, conf[C_MODE], drafted_per_step, req, chunks, n_dec, context)
    st[S_STEPS] += 1
    st[S_MAX_STEP_TOKENS] = max(st[S_MAX_STEP_TOKENS], prefill_tokens + n_dec)
    if not prefill_alone:  # the decoders' step counter advances only when they ran
        _finish_decoders(st, conf, req, hist, heap, finish, px, t, st[S_D])
        st[S_D] += 1
    heap = _finish_chunks(st, conf, req, hist, heap, chunks, first, finish, px, t)
    _evict_overflow(st, conf, hist, px, st[S_D])
    return t, heap, True


@njit(cache=True)
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
    `px` (``compiled_prefix.prefix_arrays``) is the prefix cache's state, updated in place."""
    n_req = arrivals.shape[0]
    st = np.zeros(N_STATE, dtype=np.int64)
    for i in (S_R_HEAD, S_R_TAIL, S_P_HEAD, S_P_TAIL):
        st[i] = NONE
    req = np.zeros((n_req, N_COLUMNS), dtype=np.int64)
    req[:, R_PROMPT], req[:, R_OUTPUT], req[:, R_FINISH_STEP] = prompts, outputs, NONE
    waiting = np.zeros(n_req, dtype=np.int64)
    hist = np.zeros(conf[C_BS], dtype=np.int64)
    heap = np.zeros((max(16, n_req), 2), dtype=np.int64)
    first, finish = np.full(n_req, np.nan), np.full(n_req, np.nan)
    chunks = np.zeros((n_req + 1, 2), dtype=np.int64)  # row 0: the count; then (id, chunk) rows
    snapshot = np.zeros(n_req, dtype=np.int64)
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
        stretched = _decode_stretch(t, st, conf, drafted_per_step, req, waiting, hist, heap, finish, arrivals, cost, px)
        if stretched != t:
            t = stretched
            continue
        t, heap, ran = _step(
            t, st, conf, drafted_per_step, req, waiting, hist, heap, first, finish, chunks, snapshot, cost, px
        )
        if not ran:
            st[S_STALLED] = 1
            break
    return first, finish, st
