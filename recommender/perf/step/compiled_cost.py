"""A step cost as numbers a compiled loop reads: the calibrated step, tabulated once per configuration.

The simulator prices millions of steps per plan; a Python call per step (a dataclass, its feature source, a
kernel-table lookup) costs more than the scheduling around it. The calibrated step costs the search uses are
all of one form, so they are turned into arrays once and priced inside the compiled scheduler
(``perf/sim/compiled.py``):

    point = by_tokens[T] + [prefilling] x prefill_step + head x S + attention x (sum_sq + sum_cross)
            + kv x context + kv_extra x (context - prior) + kernels x (prefill_attention(sum_sq / 2 + sum_cross)
            + decode_attention(n, context - prior))

with T the step's tokens (prompt chunks and one per decoder), S its sequences, n its decoders. ``by_tokens``
holds everything that depends on the token count alone (the per-step and per-layer host time, the weights a
step streams, its GEMMs, the all-reduces; a measured table's non-attention kernels), read from the source at
every integer T up to the engine's token budget, so it is exact where the source is not linear (MoE experts
touched, measured GEMMs). The attention kernels keep the measured table's log-log interpolation, on the same
logarithms the Python path reads. At the upper end of an interval (``upper.py``) the decode part is scaled by
one factor and the rest of the step by the other.

``compile_step_cost`` returns None for any other step cost (a measured probe table, the roofline, an
expert-parallel rank): the Python scheduler prices those. Every compiled cost is checked against its source at
sample steps when it is built, so a source that changes shape falls back rather than drifts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import FEATURES, FeatureStepCost, StepFeatures
from recommender.perf.step.kernel_features import KernelStepFeatures
from recommender.perf.step.upper import UpperStepCost

if TYPE_CHECKING:
    from recommender.perf.step.cost import StepCostModel

#: A compiled cost's arrays, in the order the compiled functions read them (``CompiledStepCost.arrays``).
CostArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]

__all__ = [
    "CostArrays",
    "CompiledStepCost",
    "compile_step_cost",
    "compiled_step_seconds",
    "decode_run_seconds",
    "point_seconds",
]

# Indices into CompiledStepCost.params.
P_PREFILL_STEP, P_HEAD, P_ATTENTION, P_KV, P_KV_EXTRA, P_KERNELS = 0, 1, 2, 3, 4, 5
P_UPPER, P_PREFILL_FACTOR, P_DECODE_FACTOR = 6, 7, 8
P_HAS_KERNELS, P_PROMPT_LAST, P_CONTEXT_FIRST, P_CONTEXT_LAST, P_BATCH_LAST = 9, 10, 11, 12, 13
N_PARAMS = 14

#: Relative difference allowed between a compiled step and its source (the order of the sums only).
MATCH_TOLERANCE = 1e-9
#: Sample steps a compiled cost is checked at when it is built.
CHECKS = 24


@dataclass(frozen=True)
class CompiledStepCost:
    """One configuration's step cost as arrays (module docstring); ``by_tokens`` and ``decode_rows`` bound the steps
    it prices (the token budget and the seats, with room for speculative drafts)."""

    params: np.ndarray
    by_tokens: np.ndarray
    prompt_logs: np.ndarray
    attention_logs: np.ndarray
    context_logs: np.ndarray
    decode_rows: np.ndarray  # [max_seqs + 1, len(context_logs)]: the log decode row at each batch size

    @property
    def arrays(self) -> CostArrays:
        """The arrays as the compiled functions take them."""
        return (self.params, self.by_tokens, self.prompt_logs, self.attention_logs, self.context_logs, self.decode_rows)

    def seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        """One step, priced by the compiled function (for checks; the scheduler calls it in its own loop)."""
        return float(
            compiled_step_seconds(
                self.arrays,
                1 if chunks.seqs else 0,
                chunks.tokens,
                chunks.seqs,
                chunks.sum_sq,
                chunks.sum_cross,
                decode_seqs,
                context_tokens,
                chunks.prior_tokens,
            )
        )


def compile_step_cost(cost: StepCostModel, *, max_tokens: int, max_seqs: int) -> CompiledStepCost | None:
    """`cost` as a :class:`CompiledStepCost` for steps of at most `max_tokens` tokens and `max_seqs` decoders, or
    None where its form is not the calibrated one (module docstring) or the arrays do not reproduce it."""
    if type(cost) is not UpperStepCost and type(cost) is not FeatureStepCost:
        return None
    key = (max_tokens, max_seqs)
    if key not in cost.compiled_forms:
        cost.compiled_forms[key] = _compiled(cost, max_tokens, max_seqs)
    found = cost.compiled_forms[key]
    return found if isinstance(found, CompiledStepCost) else None


def _compiled(cost: FeatureStepCost | UpperStepCost, max_tokens: int, max_seqs: int) -> CompiledStepCost | None:
    """The arrays of `cost` (an upper end shares its point's, with its factors), checked against `cost`."""
    if isinstance(cost, UpperStepCost):
        point = compile_step_cost(cost.point, max_tokens=max_tokens, max_seqs=max_seqs)
        if point is None:
            return None
        params = point.params.copy()
        params[P_UPPER] = 1.0
        params[P_PREFILL_FACTOR], params[P_DECODE_FACTOR] = cost.factors.prefill, cost.factors.decode
        compiled: CompiledStepCost | None = replace(point, params=params)
    else:
        compiled = _point(cost, max_tokens, max_seqs)
    return compiled if compiled is not None and _reproduces(compiled, cost, max_tokens, max_seqs) else None


def _point(point: FeatureStepCost, max_tokens: int, max_seqs: int) -> CompiledStepCost | None:
    """A point estimate's arrays, by its feature source (None: a source of another form)."""
    params = np.zeros(N_PARAMS)
    source = point.features
    if type(source) is StepFeatures:
        by_tokens = _datasheet(point, source, params, max_tokens)
        empty = np.zeros(1)
        return CompiledStepCost(params, by_tokens, empty, empty, empty, np.zeros((1, 1)))
    if type(source) is KernelStepFeatures:
        return _kernels(point, source, params, max_tokens, max_seqs)
    return None


def _datasheet(point: FeatureStepCost, source: StepFeatures, params: np.ndarray, max_tokens: int) -> np.ndarray:
    """``StepFeatures.step_seconds`` split into its token-count part (returned) and its linear terms (`params`)."""
    c, r, layers = point._floats, source.rates, source.shape.n_layers
    tokens = np.arange(max_tokens + 1, dtype=np.float64)
    if r.weights_vary:  # MoE: the experts a step touches grow with its tokens
        weights = np.array([r.weight_bytes_at(int(t)) for t in range(max_tokens + 1)]) / r.bandwidth
    else:
        weights = np.full(max_tokens + 1, r.weight_bytes / r.bandwidth)
    by_tokens: np.ndarray = (
        c[0]
        + c[2] * layers
        + c[3] * weights
        + c[4] * (tokens * r.body_flops_per_token / r.peak)
        + c[7] * (source._token_s * tokens)
        + c[8] * (source.allreduce_per_token_s * tokens)
        + c[9] * source.allreduce_calls
        + point.floor_s
    )
    if source._recurrent_token_s or source._query_token_s:  # hybrids' state FLOPs, DSA's top-k: per token
        by_tokens += (c[5] * source._recurrent_token_s + c[6] * source._query_token_s) * tokens
    params[P_PREFILL_STEP] = c[1]
    params[P_HEAD] = c[4] * r.head_flops_per_seq / r.peak
    if source._state_seq_s:  # a hybrid's recurrent state, read and written once per sequence in the step
        params[P_HEAD] += c[6] * source._state_seq_s
    params[P_ATTENTION] = c[5] * (r.attention_flops / r.peak16)
    params[P_KV] = c[6] * source._kv_token_s
    params[P_KV_EXTRA] = c[6] * source._decode_extra_s
    return by_tokens


def _kernels(
    point: FeatureStepCost, source: KernelStepFeatures, params: np.ndarray, max_tokens: int, max_seqs: int
) -> CompiledStepCost:
    """``KernelStepFeatures.step_seconds``: host time and all-reduces by token count, the measured kernels' grid."""
    c, topology, table = point._floats, source.topology, source.table
    kernels = c[FEATURES.index("kernels")]
    host = (
        c[FEATURES.index("step")]
        + c[FEATURES.index("layers")] * topology.shape.n_layers
        + c[FEATURES.index("allreduce_calls")] * topology.allreduce_calls
    )
    per_token = c[FEATURES.index("allreduce_bytes")] * topology.allreduce_per_token_s
    grid = table._scalar
    linear = _log_interp_many(np.arange(max_tokens + 1, dtype=np.float64), grid.tokens, grid.linear_s, grid.ends[0])
    linear[0] = 0.0  # an empty step runs no kernel (KernelTable.linear)
    by_tokens = host + per_token * np.arange(max_tokens + 1, dtype=np.float64) + kernels * linear + point.floor_s
    params[P_PREFILL_STEP] = c[FEATURES.index("prefill_step")]
    params[P_KERNELS] = kernels
    params[P_HAS_KERNELS] = 1.0
    params[P_PROMPT_LAST], params[P_CONTEXT_LAST] = grid.ends[1], grid.ends[4]
    params[P_CONTEXT_FIRST], params[P_BATCH_LAST] = math.exp(grid.contexts[0]), grid.ends[3]
    # The log decode row at each batch size, mixed in log b between the two nearest measured rows (_ScalarGrid._row).
    seq_logs, measured = np.array(grid.seqs), np.array(grid.decode_rows)
    lb = np.log(np.clip(np.arange(max_seqs + 1, dtype=np.float64), grid.ends[2], grid.ends[3]))
    i = np.clip(np.searchsorted(seq_logs, lb, side="right") - 1, 0, len(seq_logs) - 2)
    w = ((lb - seq_logs[i]) / (seq_logs[i + 1] - seq_logs[i]))[:, None]
    rows = (1 - w) * measured[i] + w * measured[i + 1]
    rows[0] = 0.0  # no decoder, no decode attention
    return CompiledStepCost(
        params,
        by_tokens,
        np.array(grid.prompts),
        np.array(grid.attention_s),
        np.array(grid.contexts),
        rows,
    )


def _log_interp_many(x: np.ndarray, lxs: list[float], lys: list[float], xs_last: float) -> np.ndarray:
    """``kernel_grid._log_interp`` over many points at once (the same arithmetic, element by element)."""
    logs, values = np.array(lxs), np.array(lys)
    lx = np.log(np.maximum(x, math.exp(lxs[0])))
    i = np.clip(np.searchsorted(logs, lx, side="right") - 1, 0, len(logs) - 2)
    w = (lx - logs[i]) / (logs[i + 1] - logs[i])
    inside = np.exp(values[i] + w * (values[i + 1] - values[i]))
    out: np.ndarray = np.where(x > xs_last, math.exp(lys[-1]) * x / xs_last, inside)
    return out


def _reproduces(compiled: CompiledStepCost, cost: StepCostModel, max_tokens: int, max_seqs: int) -> bool:
    """Whether `compiled` prices sample steps as `cost` does (pure decode, prefill alone, mixed, chunked)."""
    rng = np.random.default_rng(0)
    price = getattr(cost, "prefill_step_seconds", None)
    if price is None:
        return False
    for i in range(CHECKS):
        n = int(rng.integers(0, max_seqs + 1)) if i % 3 else 0
        left = max_tokens - n
        seqs = int(rng.integers(0, 4)) if left > 0 and i % 4 else 0
        tokens = int(rng.integers(seqs, left + 1)) if seqs else 0
        computed = int(rng.integers(0, 50_000)) if seqs else 0
        chunks = (
            PrefillChunks(tokens, seqs, tokens * tokens // max(seqs, 1), tokens * computed, computed)
            if seqs
            else PrefillChunks()
        )
        context = computed + n * int(rng.integers(1, 20_000))
        if n == 0 and seqs == 0:
            continue
        want = float(price(chunks, n, context))
        got = compiled.seconds(chunks, n, context)
        if not abs(got - want) <= MATCH_TOLERANCE * abs(want):
            return False
    return True


@cached_njit(error_model="numpy", inline="always")
def _log_interp(x: float, lxs: np.ndarray, lys: np.ndarray, xs_last: float) -> float:  # pragma: no cover (compiled)
    """``kernel_grid._log_interp``: log-log between grid points, the first value below, proportional above."""
    lx = math.log(max(x, math.exp(lxs[0])))
    if x > xs_last:
        return math.exp(lys[-1]) * x / xs_last
    i = min(max(int(np.searchsorted(lxs, lx, side="right")) - 1, 0), len(lxs) - 2)
    w = (lx - lxs[i]) / (lxs[i + 1] - lxs[i])
    return math.exp(lys[i] + w * (lys[i + 1] - lys[i]))


@cached_njit(error_model="numpy", inline="always")
def point_seconds(
    arrays: CostArrays,
    prefilling: int,
    tokens: int,
    seqs: int,
    sum_sq: int,
    sum_cross: int,
    decode_seqs: int,
    context: int,
    prior: int,
) -> float:  # pragma: no cover (compiled)
    """The point estimate of one step (module docstring's formula)."""
    params, by_tokens, prompt_logs, attention_logs, context_logs, decode_rows = arrays
    total = tokens + decode_seqs
    seconds = by_tokens[total] + params[P_HEAD] * (seqs + decode_seqs)
    if prefilling:
        seconds += params[P_PREFILL_STEP]
    seconds += params[P_ATTENTION] * (sum_sq + sum_cross)
    seconds += params[P_KV] * context + params[P_KV_EXTRA] * (context - prior)
    if params[P_HAS_KERNELS] > 0:
        attention = 0.0
        work = sum_sq / 2 + sum_cross
        if work > 0:
            attention = _log_interp(math.sqrt(2 * work), prompt_logs, attention_logs, params[P_PROMPT_LAST])
        if decode_seqs > 0:
            kv = float(max(context - prior, 0))
            last = params[P_CONTEXT_LAST]
            per_seq = max(kv / decode_seqs, params[P_CONTEXT_FIRST])
            row = decode_rows[decode_seqs]
            decode = _log_interp(min(per_seq, last), context_logs, row, last)
            attention += decode * max(per_seq / last, 1.0) * max(decode_seqs / params[P_BATCH_LAST], 1.0)
        seconds += params[P_KERNELS] * attention
    return seconds


@cached_njit(error_model="numpy", inline="always")
def compiled_step_seconds(
    arrays: CostArrays,
    prefilling: int,
    tokens: int,
    seqs: int,
    sum_sq: int,
    sum_cross: int,
    decode_seqs: int,
    context: int,
    prior: int,
) -> float:  # pragma: no cover (compiled)
    """One step at the point estimate, or at the upper end of its interval (``upper.py``'s split)."""
    whole = point_seconds(arrays, prefilling, tokens, seqs, sum_sq, sum_cross, decode_seqs, context, prior)
    params = arrays[0]
    if params[P_UPPER] == 0:
        return whole
    if not prefilling:
        return whole * params[P_DECODE_FACTOR]
    decode = point_seconds(arrays, 0, 0, 0, 0, 0, decode_seqs, context - prior, 0)
    return decode * params[P_DECODE_FACTOR] + max(whole - decode, 0.0) * params[P_PREFILL_FACTOR]


@cached_njit(error_model="numpy", inline="always")
def decode_run_seconds(
    arrays: CostArrays,
    decode_seqs: int,
    first_context: int,
    horizon: int,
    t: float,
    next_arrival: float,
) -> tuple[int, float]:  # pragma: no cover (compiled)
    """Pure-decode steps of one batch of `decode_seqs`, the first reading `first_context` KV tokens and each next
    one `decode_seqs` more: how many run (at most `horizon`; a step after the first starts only while `t` plus the
    time so far is before `next_arrival`) and their time. The same step as ``compiled_step_seconds`` with no prompt
    chunk, its batch terms computed once (a decode stretch's steps differ in their context alone)."""
    params, by_tokens, _, _, context_logs, decode_rows = arrays
    n = decode_seqs
    fixed = by_tokens[n] + params[P_HEAD] * n
    per_token = params[P_KV] + params[P_KV_EXTRA]
    factor = params[P_DECODE_FACTOR] if params[P_UPPER] > 0 else 1.0
    kernels = params[P_HAS_KERNELS] > 0
    if kernels:
        row = decode_rows[n]
        shortest, last = params[P_CONTEXT_FIRST], params[P_CONTEXT_LAST]
        batch_scale = max(n / params[P_BATCH_LAST], 1.0)
        segment = 0
    elapsed, k = 0.0, 0
    while k < horizon and (k == 0 or t + elapsed < next_arrival):
        context = first_context + n * k
        seconds = fixed + per_token * context
        if kernels:  # _log_interp over the batch's decode row, its segment found once per stretch and advanced
            per_seq = max(float(context) / n, shortest)
            lx = math.log(min(per_seq, last))
            while segment < len(context_logs) - 2 and context_logs[segment + 1] <= lx:
                segment += 1
            w = (lx - context_logs[segment]) / (context_logs[segment + 1] - context_logs[segment])
            attention = math.exp(row[segment] + w * (row[segment + 1] - row[segment]))
            seconds += params[P_KERNELS] * attention * max(per_seq / last, 1.0) * batch_scale
        elapsed += seconds * factor
        k += 1
    return k, elapsed
