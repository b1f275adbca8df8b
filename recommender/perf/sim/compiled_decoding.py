"""The decoding sequences compiled: ``decoding.py``'s aggregates, its completions heap, and the ordered request lists.

The decoders are aggregates (their count, offset sum, block quotients and a histogram of offsets mod the block size),
so a step costs O(1) in them; their completions are a binary heap of (step, id) rows, lazily invalidated. The running
and prefilling requests (Python dicts in admission order) are doubly linked lists through the requests' rows.
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim.compiled_state import NONE, R_FINISH_STEP, R_OFFSET, S_DCOUNT, S_HEAP_N, S_OFFSET_SUM, S_QSUM

__all__ = ["append", "blocks_at", "decode_add", "decode_remove", "heap_pop", "heap_push", "remove"]


@cached_njit(error_model="numpy", inline="always")
def blocks_at(st: np.ndarray, hist: np.ndarray, bs: int, step: int) -> int:  # pragma: no cover (compiled)
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


@cached_njit(error_model="numpy", inline="always")
def _less(heap: np.ndarray, i: int, j: int) -> bool:  # pragma: no cover (compiled)
    return heap[i, 0] < heap[j, 0] or (heap[i, 0] == heap[j, 0] and heap[i, 1] < heap[j, 1])


@cached_njit(error_model="numpy", inline="always")
def _swap(heap: np.ndarray, i: int, j: int) -> None:  # pragma: no cover (compiled)
    a0, a1 = heap[i, 0], heap[i, 1]
    heap[i, 0], heap[i, 1] = heap[j, 0], heap[j, 1]
    heap[j, 0], heap[j, 1] = a0, a1


@cached_njit(error_model="numpy", inline="always")
def heap_push(heap: np.ndarray, st: np.ndarray, key: int, rid: int) -> np.ndarray:  # pragma: no cover (compiled)
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


@cached_njit(error_model="numpy", inline="always")
def heap_pop(heap: np.ndarray, st: np.ndarray) -> None:  # pragma: no cover (compiled)
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


@cached_njit(error_model="numpy", inline="always")
def decode_add(
    st: np.ndarray, hist: np.ndarray, req: np.ndarray, heap: np.ndarray, bs: int, rid: int, offset: int, fin: int
) -> np.ndarray:  # pragma: no cover (compiled)
    """``DecodingSequences.add``; the heap."""
    req[rid, R_OFFSET], req[rid, R_FINISH_STEP] = offset, fin
    st[S_DCOUNT] += 1
    st[S_OFFSET_SUM] += offset
    st[S_QSUM] += offset // bs
    hist[offset % bs] += 1
    return heap_push(heap, st, fin, rid)


@cached_njit(error_model="numpy", inline="always")
def decode_remove(st: np.ndarray, hist: np.ndarray, req: np.ndarray, bs: int, rid: int) -> int:  # pragma: no cover
    """``DecodingSequences.remove``: the decoder's offset."""
    offset = req[rid, R_OFFSET]
    st[S_DCOUNT] -= 1
    st[S_OFFSET_SUM] -= offset
    st[S_QSUM] -= offset // bs
    hist[offset % bs] -= 1
    req[rid, R_FINISH_STEP] = NONE
    return offset


# --- ordered sets of requests (dicts in admission order) -------------------------------------------------------------


@cached_njit(error_model="numpy", inline="always")
def append(req: np.ndarray, st: np.ndarray, count: int, prev: int, rid: int) -> None:  # pragma: no cover
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


@cached_njit(error_model="numpy", inline="always")
def remove(req: np.ndarray, st: np.ndarray, count: int, prev: int, rid: int) -> None:  # pragma: no cover
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
