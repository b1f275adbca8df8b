"""The compiled scheduler's state layout: where each number of a run lives in its arrays (``compiled_loop.py``).

A request is one int64 row (columns ``R_*``), the run's scalars one int64 array (``S_*``), the scheduler config one
int64 array (``C_*``, in ``CONFIG_FIELDS`` order); the prefix cache travels as one tuple of arrays (``Prefix``,
``compiled_prefix.py``). Named here once, read by the compiled modules that mirror ``decoding.py``, ``admission.py``
and ``scheduler.py``.

Every compiled function takes numpy's error model (``@njit(..., error_model="numpy")``): Python's checks each integer
division and modulo for a zero divisor, which the loop never has (block sizes, request counts and decoder counts are
checked positive before any division); without the checks a step runs about 30 % faster. Every one but the entry
(``compiled_loop.run_loop``) is inlined into its callers (``inline="always"``, numba's own inliner): numba passes an
array as seven to nine machine words and a call boundary keeps LLVM from seeing through them, so a dozen arrays through
a dozen small functions a step cost more than the step's arithmetic. Inlined, and with the arrays borrowed
(``compiled_borrow``), a replay at load runs about 6x faster (``benchmarks/simulator_speed.py``); the price is a longer
first compile (about 50 s of CPU instead of 20, once per install: ``cache=True`` keeps it on disk).
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit

#: The prefix cache's arrays (``compiled_prefix.prefix_arrays``): the requests' rows, the keys' rows, the scalars.
Prefix = tuple[np.ndarray, np.ndarray, np.ndarray]

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
NONE = -1
#: How a step is handed to the cost: as scheduled; with each decoder's drafts verified (speculative decoding); or as
#: a decode worker prices it (prompts arrive as transferred KV: ``decode_only.DecodeOnlyStepCost``).
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


RunArrays = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]


@cached_njit(error_model="numpy", inline="always")
def new_run(prompts: np.ndarray, outputs: np.ndarray, bs: int) -> RunArrays:  # pragma: no cover (compiled)
    """A run's arrays, empty: the scalars, the requests' rows, the first-token and finish times, the queue, the
    decoders' offsets by block position, the completions heap, the step's chunks (row 0 the count, then (id, chunk)
    rows), the prefilling requests' computed tokens before a preemption."""
    n_req = prompts.shape[0]
    st = np.zeros(N_STATE, dtype=np.int64)
    for i in (S_R_HEAD, S_R_TAIL, S_P_HEAD, S_P_TAIL):
        st[i] = NONE
    req = np.zeros((n_req, N_COLUMNS), dtype=np.int64)
    req[:, R_PROMPT], req[:, R_OUTPUT], req[:, R_FINISH_STEP] = prompts, outputs, NONE
    first, finish = np.full(n_req, np.nan), np.full(n_req, np.nan)
    waiting, snapshot = np.zeros(n_req, dtype=np.int64), np.zeros(n_req, dtype=np.int64)
    hist, heap = np.zeros(bs, dtype=np.int64), np.zeros((max(16, n_req), 2), dtype=np.int64)
    return st, req, first, finish, waiting, hist, heap, np.zeros((n_req + 1, 2), dtype=np.int64), snapshot
