"""The prefix cache compiled: ``prefix_cache.py``'s ``PrefixCache`` and ``PrefixSharing`` over arrays (numba).

Read beside that module: each function here names the method it follows. Prefix and history keys are renumbered
densely in one key space (a conversation's next turn reads its history key as its prefix key); a key's row holds
its cached blocks, the running requests referencing it, and its links in the least-recently-used list of
unreferenced entries (evicted from the front; an entry released or first published joins the back). A request's
row holds its key, its shared tokens, its history key and the cached blocks it reads. With no key at all (a
workload that shares nothing) every answer is 0 and nothing is cached, as in Python.
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim.workload import Workload

__all__ = ["prefix_arrays"]

NONE = -1
# A request's row.
Q_KEY, Q_TOKENS, Q_HISTORY, Q_SHARED = 0, 1, 2, 3
# A key's row: cached blocks, references, LRU links, whether it is in the LRU list.
K_BLOCKS, K_REFS, K_PREV, K_NEXT, K_LISTED = 0, 1, 2, 3, 4
# Scalars: whether there is a cache, the cached and pinned blocks, the LRU list (count, head, tail), the decoders'
# shared blocks, the prompt tokens served from cache.
X_CACHE, X_BLOCKS, X_PINNED, X_LRU_COUNT, X_LRU_HEAD, X_LRU_TAIL, X_DECODING_SHARED, X_HIT_TOKENS = range(8)
N_SCALARS = 8


def prefix_arrays(workload: Workload) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The prefix state a run starts from: the requests' rows, the keys' rows (none cached), the scalars."""
    n = len(workload)
    requests = np.full((n, 4), NONE, dtype=np.int64)
    requests[:, Q_TOKENS] = 0
    requests[:, Q_SHARED] = 0
    scalars = np.zeros(N_SCALARS, dtype=np.int64)
    scalars[X_LRU_HEAD] = scalars[X_LRU_TAIL] = NONE
    keys, tokens, history = workload.prefix_keys, workload.prefix_tokens, workload.history_keys
    if keys is None or tokens is None:
        return requests, np.zeros((1, 5), dtype=np.int64), scalars
    scalars[X_CACHE] = 1
    every = [np.asarray(keys)[np.asarray(keys) >= 0]]
    if history is not None:
        every.append(np.asarray(history)[np.asarray(history) >= 0])
    names = np.unique(np.concatenate(every)) if every else np.zeros(0, dtype=np.int64)

    def dense(raw: np.ndarray) -> np.ndarray:
        out = np.full(len(raw), NONE, dtype=np.int64)
        listed = raw >= 0
        out[listed] = np.searchsorted(names, raw[listed])
        return out

    requests[:, Q_KEY] = dense(np.asarray(keys))
    requests[:, Q_TOKENS] = np.asarray(tokens)
    if history is not None:
        requests[:, Q_HISTORY] = dense(np.asarray(history))
    rows = np.zeros((max(1, len(names)), 5), dtype=np.int64)
    rows[:, K_PREV] = rows[:, K_NEXT] = NONE
    return requests, rows, scalars


# --- PrefixCache -----------------------------------------------------------------------------------------------------


@cached_njit(error_model="numpy", inline="always")
def _unlist(keys: np.ndarray, x: np.ndarray, key: int) -> None:  # pragma: no cover (compiled)
    """``_unreferenced.pop(key, None)``."""
    if not keys[key, K_LISTED]:
        return
    before, after = keys[key, K_PREV], keys[key, K_NEXT]
    if before == NONE:
        x[X_LRU_HEAD] = after
    else:
        keys[before, K_NEXT] = after
    if after == NONE:
        x[X_LRU_TAIL] = before
    else:
        keys[after, K_PREV] = before
    keys[key, K_LISTED] = 0
    x[X_LRU_COUNT] -= 1


@cached_njit(error_model="numpy", inline="always")
def _list_last(keys: np.ndarray, x: np.ndarray, key: int) -> None:  # pragma: no cover (compiled)
    """``_unreferenced[key] = None`` for a key not in it: most recently used, evicted last."""
    tail = x[X_LRU_TAIL]
    keys[key, K_PREV], keys[key, K_NEXT], keys[key, K_LISTED] = tail, NONE, 1
    if tail == NONE:
        x[X_LRU_HEAD] = key
    else:
        keys[tail, K_NEXT] = key
    x[X_LRU_TAIL] = key
    x[X_LRU_COUNT] += 1


@cached_njit(error_model="numpy", inline="always")
def _acquire(keys: np.ndarray, x: np.ndarray, key: int) -> None:  # pragma: no cover (compiled)
    """``PrefixCache.acquire``: a running request references `key`'s entry: pinned."""
    if keys[key, K_REFS] == 0:
        _unlist(keys, x, key)
        x[X_PINNED] += keys[key, K_BLOCKS]
    keys[key, K_REFS] += 1


@cached_njit(error_model="numpy", inline="always")
def _release(keys: np.ndarray, x: np.ndarray, key: int) -> None:  # pragma: no cover (compiled)
    """``PrefixCache.release``: unreferenced, the entry becomes evictable (most recently used)."""
    keys[key, K_REFS] -= 1
    if keys[key, K_REFS]:
        return
    x[X_PINNED] -= keys[key, K_BLOCKS]
    _list_last(keys, x, key)


@cached_njit(error_model="numpy", inline="always")
def _publish_blocks(keys: np.ndarray, x: np.ndarray, key: int, blocks: int) -> None:  # pragma: no cover (compiled)
    """``PrefixCache.publish``: keep `blocks` blocks under `key` (a longer prefix replaces a shorter one)."""
    old = keys[key, K_BLOCKS]
    if blocks <= old:
        return
    keys[key, K_BLOCKS] = blocks
    x[X_BLOCKS] += blocks - old
    if keys[key, K_REFS]:
        x[X_PINNED] += blocks - old
    elif old == 0:
        _list_last(keys, x, key)


@cached_njit(error_model="numpy", inline="always")
def evict(keys: np.ndarray, x: np.ndarray, blocks: int) -> None:  # pragma: no cover (compiled)
    """``PrefixCache.evict``: drop unreferenced entries, least recently used first, until `blocks` are freed."""
    freed = 0
    while freed < blocks and x[X_LRU_COUNT] > 0:
        key = x[X_LRU_HEAD]
        _unlist(keys, x, key)
        freed += keys[key, K_BLOCKS]
        keys[key, K_BLOCKS] = 0
    x[X_BLOCKS] -= freed


# --- PrefixSharing ---------------------------------------------------------------------------------------------------


@cached_njit(error_model="numpy", inline="always")
def evictable(x: np.ndarray) -> int:  # pragma: no cover (compiled)
    return x[X_BLOCKS] - x[X_PINNED]


@cached_njit(error_model="numpy", inline="always")
def hit_blocks(
    q: np.ndarray, keys: np.ndarray, x: np.ndarray, bs: int, rid: int, length: int
) -> int:  # pragma: no cover
    """``PrefixSharing.hit_blocks``: full blocks of `rid`'s prompt the cache holds now, for `length` tokens."""
    key = q[rid, Q_KEY]
    if not x[X_CACHE] or key < 0:
        return 0
    cached = keys[key, K_BLOCKS]
    return min(cached, q[rid, Q_TOKENS] // bs, (length - 1) // bs) if cached else 0


@cached_njit(error_model="numpy", inline="always")
def pin_cost(q: np.ndarray, keys: np.ndarray, x: np.ndarray, rid: int, hit: int) -> int:  # pragma: no cover
    """``PrefixSharing.pin_cost``: free blocks reading `hit` cached blocks takes (the entry's, if unreferenced)."""
    if not x[X_CACHE] or not hit:
        return 0
    key = q[rid, Q_KEY]
    return 0 if keys[key, K_REFS] > 0 else keys[key, K_BLOCKS]


@cached_njit(error_model="numpy", inline="always")
def read(q: np.ndarray, keys: np.ndarray, x: np.ndarray, bs: int, rid: int, blocks: int) -> None:  # pragma: no cover
    """``PrefixSharing.read``: `rid` reads `blocks` cached blocks of its prefix instead of computing them."""
    _acquire(keys, x, q[rid, Q_KEY])
    q[rid, Q_SHARED] = blocks
    x[X_HIT_TOKENS] += blocks * bs


@cached_njit(error_model="numpy", inline="always")
def start_decoding(q: np.ndarray, x: np.ndarray, rid: int) -> None:  # pragma: no cover (compiled)
    x[X_DECODING_SHARED] += q[rid, Q_SHARED]


@cached_njit(error_model="numpy", inline="always")
def stop_reading(q: np.ndarray, keys: np.ndarray, x: np.ndarray, rid: int, decoding: bool) -> None:  # pragma: no cover
    """``PrefixSharing.stop_reading``: `rid` (finished or preempted) no longer reads its cached prefix."""
    shared = q[rid, Q_SHARED]
    if not shared:
        return
    _release(keys, x, q[rid, Q_KEY])
    q[rid, Q_SHARED] = 0
    if decoding:
        x[X_DECODING_SHARED] -= shared


@cached_njit(error_model="numpy", inline="always")
def publish(q: np.ndarray, keys: np.ndarray, x: np.ndarray, bs: int, rid: int) -> None:  # pragma: no cover (compiled)
    """``PrefixSharing.publish``: a request that computed its shared prefix keeps its full blocks cached."""
    key = q[rid, Q_KEY]
    if not x[X_CACHE] or key < 0 or q[rid, Q_SHARED] or keys[key, K_BLOCKS]:
        return
    blocks = q[rid, Q_TOKENS] // bs
    if blocks:
        _publish_blocks(keys, x, key, blocks)
        _acquire(keys, x, key)
        q[rid, Q_SHARED] = blocks


@cached_njit(error_model="numpy", inline="always")
def finish(q: np.ndarray, keys: np.ndarray, x: np.ndarray, bs: int, rid: int, length: int) -> None:  # pragma: no cover
    """``PrefixSharing.finish``: under its history key the cache keeps a finished request's full blocks."""
    history = q[rid, Q_HISTORY]
    if x[X_CACHE] and history >= 0:
        _publish_blocks(keys, x, history, (length - 1) // bs)
