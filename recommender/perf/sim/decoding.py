"""The decoding sequences of a continuous batch, kept as aggregates so a step costs O(1) in them.

A decoding sequence's length grows by one token per step, so with the scheduler's step
counter ``d`` its length is ``offset + d`` for a fixed ``offset``. The scheduler needs only
sums over the decoders: the KV-cache tokens they read (``offset_sum + count * d``) and the
KV blocks they hold, ``sum_i ceil((offset_i + d) / block_size)``. Writing
``offset_i = q_i * block_size + r_i``, that is ``q_sum`` plus a term that depends only on the
histogram of the ``r_i``. Completions wait in a heap keyed by the step that samples each
sequence's last token, so stretches of pure decode can be advanced in one jump.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from recommender.perf.step.cost import FastDecodeStepCostModel, StepCostModel, VectorStepCostModel

__all__ = ["DecodingSequences"]

#: Below this many steps, a Python loop over scalar step costs beats numpy's call overhead.
_VECTOR_MIN_STEPS = 32
#: ``finish_step`` of a request that is not decoding; every real step counter is >= 0.
_NOT_DECODING = -1


class DecodingSequences:
    """The sequences generating one token per step: how many, their contexts and KV blocks, their completions.

    Args:
        n_requests: requests in the workload (ids run from 0 to n_requests - 1).
        block_size: tokens per KV-cache block.
    """

    __slots__ = ("_completions", "block_size", "count", "finish_step", "hist", "offset", "offset_sum", "q_sum")

    def __init__(self, n_requests: int, block_size: int) -> None:
        self.block_size = block_size
        self.count = 0
        self.offset_sum = 0
        self.q_sum = 0
        self.hist = [0] * block_size  # decoders per offset % block_size
        self.offset = [0] * n_requests  # a decoder's length at step counter d is offset + d
        self.finish_step = [_NOT_DECODING] * n_requests  # the step counter of the step sampling its last token
        self._completions: list[tuple[int, int]] = []  # heap of (finish_step, id), lazily invalidated

    def add(self, rid: int, offset: int, finish_step: int) -> None:
        """Request `rid` decodes from now on, `offset` + d tokens long at step d, done after step `finish_step`."""
        self.offset[rid] = offset
        self.finish_step[rid] = finish_step
        heapq.heappush(self._completions, (finish_step, rid))
        self.count += 1
        self.offset_sum += offset
        self.q_sum += offset // self.block_size
        self.hist[offset % self.block_size] += 1

    def remove(self, rid: int) -> int:
        """Request `rid` stops decoding (finished or preempted); returns its offset."""
        o = self.offset[rid]
        self.count -= 1
        self.offset_sum -= o
        self.q_sum -= o // self.block_size
        self.hist[o % self.block_size] -= 1
        self.finish_step[rid] = _NOT_DECODING
        return o

    def context_at(self, step: int) -> int:
        """KV-cache tokens the decoders read in the step with counter `step`."""
        return self.offset_sum + self.count * step

    def blocks_at(self, step: int) -> int:
        """KV blocks the decoders need at step counter `step`: sum_i ceil((offset_i + step) / bs).

        With offset_i = q_i * bs + r_i and step = a * bs + m, each term is q_i + a + ceil((r_i + m) / bs),
        and for r, m < bs that ceiling is 0 when r + m == 0, 2 when r + m > bs, else 1.
        """
        n_dec = self.count
        if not n_dec:
            return 0
        bs, hist = self.block_size, self.hist
        a, m = divmod(step, bs)
        extra = n_dec - (hist[0] if m == 0 else 0) + (sum(hist[bs + 1 - m :]) if m >= 2 else 0)
        return self.q_sum + n_dec * a + extra

    def next_completion(self) -> int:
        """The step counter of the next step that samples some decoder's last token (there must be a decoder)."""
        completions, finish_step = self._completions, self.finish_step
        while finish_step[completions[0][1]] != completions[0][0]:
            heapq.heappop(completions)
        return completions[0][0]

    def pop_finished(self, step: int) -> list[int]:
        """Remove the decoders whose last token the step with counter `step` sampled; their ids, in heap order."""
        completions, finish_step = self._completions, self.finish_step
        finished = []
        while completions and completions[0][0] <= step:
            _, rid = heapq.heappop(completions)
            if finish_step[rid] == step:
                self.remove(rid)
                finished.append(rid)
        return finished

    def decode_run(
        self,
        cost: StepCostModel,
        vector_cost: VectorStepCostModel | None,
        fast_cost: FastDecodeStepCostModel | None,
        *,
        t: float,
        d: int,
        horizon: int,
        cap: int,
        next_arrival: float,
    ) -> tuple[int, float] | None:
        """How many pure decode steps (at most `horizon`) run before the cache fills or `next_arrival`, and their time.

        None when fewer than two steps qualify (the caller takes one ordinary step instead).
        """
        n_dec, offset_sum = self.count, self.offset_sum
        stepper = fast_cost.decode_stepper(n_dec) if fast_cost is not None else None
        if stepper is None:

            def stepper(context_tokens: int) -> float:
                return cost.step_seconds(0, n_dec, context_tokens)

        first = stepper(offset_sum + n_dec * d)
        if next_arrival < math.inf:
            # Steps grow with context, so at most this many start before the arrival.
            horizon = min(horizon, int((next_arrival - t) / first) + 1)
        if horizon < 2:
            return None
        # Blocks needed never decrease as the decoders grow: bisect for the last step that fits.
        if self.blocks_at(d + horizon - 1) > cap:
            lo, hi = 0, horizon - 1  # step d + lo fits, step d + hi does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.blocks_at(d + mid) <= cap:
                    lo = mid
                else:
                    hi = mid
            horizon = hi
            if horizon < 2:
                return None
        if vector_cost is not None and horizon >= _VECTOR_MIN_STEPS:
            contexts = offset_sum + n_dec * np.arange(d, d + horizon, dtype=np.int64)
            ends = t + np.cumsum(vector_cost.decode_steps_seconds(n_dec, contexts))
            k = horizon
            if next_arrival < math.inf:
                # step j starts at ends[j - 1]; it may run only while the arrival is still in the future
                k = min(k, 1 + int(np.searchsorted(ends[:-1], next_arrival, side="left")))
            return (k, float(ends[k - 1] - t)) if k >= 2 else None
        line = fast_cost.decode_line(n_dec) if fast_cost is not None else None
        if line is not None:  # the loop below in closed form
            return _series_run(first, line[1] * n_dec, t=t, horizon=horizon, next_arrival=next_arrival)
        elapsed = first
        k = 1
        while k < horizon and t + elapsed < next_arrival:
            elapsed += stepper(offset_sum + n_dec * (d + k))
            k += 1
        return (k, elapsed) if k >= 2 else None


def _series_run(first: float, delta: float, *, t: float, horizon: int, next_arrival: float) -> tuple[int, float] | None:
    """``decode_run``'s step-by-step loop for steps that grow by `delta` each (step j takes ``first + j x delta``):
    k steps take ``E(k) = k x first + delta x k (k - 1) / 2``, and a step starts only while the arrival is in the
    future, so k is the smallest m with ``t + E(m) >= next_arrival``, at most `horizon`."""

    def elapsed(k: int) -> float:
        return k * first + delta * k * (k - 1) / 2

    k = horizon
    if next_arrival < math.inf:
        budget = next_arrival - t
        if delta > 0:  # the positive root of delta/2 m^2 + (first - delta/2) m - budget = 0
            b = first - delta / 2
            m = math.ceil((-b + math.sqrt(b * b + 2 * delta * budget)) / delta)
        else:
            m = math.ceil(budget / first)
        m = min(max(m, 1), horizon)
        while m > 1 and t + elapsed(m - 1) >= next_arrival:  # the root's rounding, corrected on the sums
            m -= 1
        while m < horizon and t + elapsed(m) < next_arrival:
            m += 1
        k = m
    return (k, elapsed(k)) if k >= 2 else None
