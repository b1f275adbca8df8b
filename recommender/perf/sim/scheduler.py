"""A discrete-event simulator of continuous batching: P99 latencies under queueing.

The SLAs are P99s and traffic is bursty: whether a configuration holds its P99 TTFT at a rate depends on
how requests queue, how prefills interleave with decodes and when the KV cache runs out, which no
steady-state formula says. This module replays a workload through a scheduler modelled on vLLM v1.

Per scheduler step (one forward pass):

* running sequences first: every decoding sequence gets one token; partially prefilled ones the next
  chunk of their prompt; then, if nothing was preempted, waiting requests are admitted first come, first
  served while ``max_num_seqs`` and the token budget ``max_num_batched_tokens`` allow (``admission.py``);
* the KV cache is paged in blocks of 16 tokens; a sequence holds ``ceil((prompt + generated) / 16)``
  blocks, less the full blocks of a shared prefix it reads from the replica's prefix cache
  (``prefix_cache.py``); when a step's sequences do not fit, the newest running sequence is preempted
  (recompute: its blocks are freed, it goes back to the front of the queue);
* the step's duration comes from a :class:`StepCostModel` (calibrated features or the roofline for
  catalog GPUs, interpolated measurements for the local device); a ``PrefillAwareStepCostModel`` gets
  the prefill chunks one by one.

Decoding sequences are kept as aggregates (``decoding.py``), so a step costs O(1) in them, and stretches
of pure decode between events (an admissible arrival, a completion, a full cache) are advanced in one
vectorised jump: 10,000 requests take well under a second.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from recommender.perf.sim.admission import DECODE, DONE, Admission
from recommender.perf.sim.results import SimulationResult
from recommender.perf.sim.scheduler_config import BLOCK_SIZE, SchedulerConfig, fits_kv_cache
from recommender.perf.step.cost import (
    FastDecodeStepCostModel,
    PrefillAwareStepCostModel,
    PrefillChunks,
    VectorStepCostModel,
)

if TYPE_CHECKING:
    from recommender.perf.sim.workload import Workload
    from recommender.perf.step.cost import StepCostModel

__all__ = ["BLOCK_SIZE", "ContinuousBatchingSimulation", "SchedulerConfig", "check_runnable"]


def check_runnable(workload: Workload, config: SchedulerConfig) -> None:
    """Refuse a workload some request of which could never run on `config` (too long for its KV cache, or for its
    token budget without chunked prefill)."""
    longest = int((workload.prompt_tokens + workload.output_tokens - 1).max())
    if not fits_kv_cache(workload, config):
        raise ValueError(
            f"a request of {longest} tokens needs more KV cache than the {config.kv_blocks * config.block_size} "
            "tokens available; it could never run"
        )
    if not config.chunked_prefill and longest > config.max_num_batched_tokens:
        raise ValueError(
            f"without chunked prefill max_num_batched_tokens ({config.max_num_batched_tokens}) must cover the "
            f"longest sequence ({longest} tokens), as vLLM requires of max_model_len"
        )


class ContinuousBatchingSimulation(Admission):
    """One replay of a workload through the scheduler; the state of the run lives here.

    Requests move from waiting to running (prefilling, then decoding) to done, or back to
    the front of the queue when preempted; :class:`Admission` decides which, step by step.
    This class keeps time, prices each step with the cost model and records when tokens came.

    Args:
        fast_decode: advance stretches of pure decode in one jump. Off, every step is taken
            one by one; the results agree to rounding (the jump sums step times with numpy).
    """

    __slots__ = (
        "_arrivals",
        "_budget_max",
        "_cost",
        "_fast_decode",
        "_finish",
        "_first_token",
        "_max_step_tokens",
        "_mixed",
        "_next",
        "_prefill_cost",
        "_prefilled_tokens",
        "_steps",
        "_t",
        "_vector_cost",
        "_fast_decode_cost",
        "_workload",
    )

    def __init__(
        self, cost: StepCostModel, workload: Workload, config: SchedulerConfig, *, fast_decode: bool = True
    ) -> None:
        check_runnable(workload, config)
        super().__init__(workload, config)
        self._cost = cost
        self._vector_cost = cost if isinstance(cost, VectorStepCostModel) else None
        self._fast_decode_cost = cost if isinstance(cost, FastDecodeStepCostModel) else None
        self._prefill_cost = cost if isinstance(cost, PrefillAwareStepCostModel) else None
        self._workload = workload
        self._fast_decode = fast_decode
        self._budget_max = config.max_num_batched_tokens
        self._mixed = config.mixed_prefill

        self._arrivals: list[float] = workload.arrivals_s.tolist()
        n_req = len(self._arrivals)
        self._first_token = [math.nan] * n_req
        self._finish = [math.nan] * n_req
        self._t = 0.0  # simulated time, seconds
        self._next = 0  # next request to arrive
        self._steps = 0
        self._max_step_tokens = 0
        self._prefilled_tokens = 0  # prompt tokens computed

    def run(self, *, ttft_sla_ms: float | None = None, tpot_sla_ms: float | None = None) -> SimulationResult:
        """Serve every request; goodput is counted against the SLAs given."""
        n_req = len(self._arrivals)
        while True:
            self._enqueue_arrivals()
            if not self._running and not self._waiting:
                if self._next == n_req:
                    break
                self._t = self._arrivals[self._next]
                continue
            if self._fast_decode and self._decode_stretch():
                continue
            self._step()
        return SimulationResult.of_run(
            self._served_workload(),
            self._first_token,
            self._finish,
            preemptions=self._preemptions,
            steps=self._steps,
            max_step_tokens=self._max_step_tokens,
            ttft_sla_ms=ttft_sla_ms,
            tpot_sla_ms=tpot_sla_ms,
            prefix_hit_tokens=self._prefix.hit_tokens,
            prefill_tokens=self._prefilled_tokens,
        )

    def _served_workload(self) -> Workload:
        """The requests as served, with the arrival times they had (a closed loop sets them as it runs)."""
        return self._workload

    def _enqueue_arrivals(self) -> None:
        arrivals, t, nxt = self._arrivals, self._t, self._next
        while nxt < len(arrivals) and arrivals[nxt] <= t:
            self._waiting.append(nxt)
            nxt += 1
        self._next = nxt

    def _decode_stretch(self) -> bool:
        """Advance a stretch of pure decode steps in which nothing else can happen (no prompt prefilling, the
        queue's head not admissible): up to the next completion, the step whose blocks no longer fit, or the next
        arrival when it could be admitted; whether it did."""
        decoding, d = self._decoding, self._d
        if not decoding.count or self._prefilling:
            return False
        waiting = self._waiting
        budget_left = self._budget_max - decoding.count
        blocked = len(self._running) >= self._max_seqs or budget_left <= 0
        if not blocked and waiting:
            head = waiting[0]
            hit = self._prefix.hit_blocks(head, self._prompts[head] + self._generated[head])
            need = self._prompts[head] + self._generated[head] - hit * self._bs
            chunk = min(need, budget_left) if self._chunked else need
            if self._prefix.pin_cost(head, hit):
                return False  # its cached prefix is evictable: a step that evicts it may let the head in
            blocks = -(-(hit * self._bs + chunk) // self._bs) - hit
            blocked = chunk > budget_left or blocks > self._free_blocks()
            if not blocked:
                return False
        horizon = decoding.next_completion() - d + 1  # steps up to and including the next completion
        if horizon < 2:
            return False
        nxt, cap = self._next, self._cap + self._prefix.decoding_shared - self._prefix.pinned
        run = decoding.decode_run(
            self._cost,
            self._vector_cost,
            self._fast_decode_cost,
            t=self._t,
            d=d,
            horizon=horizon,
            cap=cap,
            next_arrival=self._arrivals[nxt] if (nxt < len(self._arrivals) and not blocked) else math.inf,
        )
        if run is None:
            return False
        k, elapsed = run
        self._t += elapsed
        self._d += k
        self._steps += k
        self._max_step_tokens = max(self._max_step_tokens, decoding.count)
        if k == horizon:
            # Before the last step the decoders held the most blocks: the step-by-step path evicted for them then.
            self._evict_overflow(self._d - 1)
            self._finish_decoders(self._d - 1)
        self._evict_overflow()
        return True

    def _step(self) -> None:
        """One scheduler step: make room, schedule prefill chunks, admit, run the forward pass, retire."""
        decoding = self._decoding
        self._preempted = False
        prefill_alone = not self._mixed and bool(self._prefilling or self._waiting)
        budget = self._preempt_until_decoders_fit(self._budget_max - (0 if prefill_alone else decoding.count))
        chunks: list[tuple[int, int]] = []
        prior_context = 0
        if self._prefilling:
            budget, prior_context = self._schedule_prefilling(budget, chunks)
        if not self._preempted:
            prior_context += self._admit_waiting(budget, chunks)
        prefill_alone = prefill_alone and bool(chunks)  # decoders wait only for a step that prefills
        n_dec = 0 if prefill_alone else decoding.count
        if not chunks and not n_dec:
            if self._preempted:
                return  # the preempted requests are admitted again next step
            raise RuntimeError("scheduler stalled: nothing runnable")  # check_runnable rules this out

        prefill_tokens = 0
        for _, chunk in chunks:
            prefill_tokens += chunk
        self._prefilled_tokens += prefill_tokens
        context = (0 if prefill_alone else decoding.context_at(self._d)) + prior_context
        if chunks and self._prefill_cost is not None:  # per-chunk attention and lm_head (PrefillChunks)
            computed = self._computed
            per_chunk = PrefillChunks.of((chunk, computed[rid]) for rid, chunk in chunks)
            self._t += self._prefill_cost.prefill_step_seconds(per_chunk, n_dec, context)
        else:
            self._t += self._cost.step_seconds(prefill_tokens, n_dec, context)
        self._steps += 1
        self._max_step_tokens = max(self._max_step_tokens, prefill_tokens + n_dec)

        if not prefill_alone:  # the decoders' step counter advances only when they ran
            self._finish_decoders(self._d)  # decoders that sampled their last token in this step
            self._d += 1
        self._finish_chunks(chunks)
        self._evict_overflow()

    def _evict_overflow(self, step: int | None = None) -> None:
        """Evict unreferenced cached prefixes until the running requests' blocks and the cache's fit the capacity."""
        over = self._prefix.evictable - self._free_blocks(step)
        if over > 0:
            self._prefix.evict(over)

    def _finish_chunks(self, chunks: list[tuple[int, int]]) -> None:
        """Prefills that reached the end of their tokens sample one, then decode from the next step or finish."""
        prompts, generated, outputs, computed, held, state = (
            self._prompts,
            self._generated,
            self._outputs,
            self._computed,
            self._held,
            self._state,
        )
        t, d = self._t, self._d
        for rid, chunk in chunks:
            computed[rid] += chunk
            length = prompts[rid] + generated[rid]
            if computed[rid] < length:
                continue
            generated[rid] += 1
            if generated[rid] == 1:
                self._first_token[rid] = t
            del self._prefilling[rid]
            self._held_prefill -= held[rid]
            held[rid] = 0
            self._prefix.publish(rid)
            if generated[rid] == outputs[rid]:
                state[rid] = DONE
                self._finish[rid] = t
                self._reserved -= self._whole(rid) if self._reserve else 0
                self._prefix.finish(rid, length + 1)
                self._prefix.stop_reading(rid, decoding=False)
                del self._running[rid]
                continue
            offset = length + 1 - d  # the next step (counter d) reads length + 1 tokens
            state[rid] = DECODE
            self._prefix.start_decoding(rid)
            self._decoding.add(rid, offset, outputs[rid] + prompts[rid] - 1 - offset)

    def _finish_decoders(self, step: int) -> None:
        """Retire the decoders whose last token was sampled by the step with counter `step`, at the current time."""
        for rid in self._decoding.pop_finished(step):
            self._state[rid] = DONE
            self._finish[rid] = self._t
            self._reserved -= self._whole(rid) if self._reserve else 0
            self._prefix.finish(rid, self._prompts[rid] + self._outputs[rid])
            self._prefix.stop_reading(rid, decoding=True)
            del self._running[rid]
