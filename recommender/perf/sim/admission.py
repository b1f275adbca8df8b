"""Admission and preemption: which requests a scheduler step runs, decided the way vLLM v1's scheduler does.

Apart from the event loop (``scheduler.py``), which advances time, prices steps and retires requests, so the
policy reads on its own: running sequences first (each partly prefilled request's next chunk, oldest first),
then waiting requests first come, first served while seats, the token budget and KV blocks allow; when blocks
run short the newest running request is preempted (recompute: it goes back to the front of the queue).
This class holds the requests' places (waiting, prefilling, decoding, done) and the blocks they hold.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from recommender.perf.sim.decoding import DecodingSequences
from recommender.perf.sim.prefix_cache import PrefixSharing

if TYPE_CHECKING:
    from recommender.perf.sim.scheduler_config import SchedulerConfig
    from recommender.perf.sim.workload import Workload

#: Where a request is: in the queue, prefilling its prompt, decoding, finished.
WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3


class Admission:
    """The requests' places and KV blocks, and the policy that admits and preempts them.

    ``running`` keeps admission order (its last key is the newest, the first to be preempted). Decoders are held
    as aggregates in :class:`DecodingSequences`; prefilling requests hold their KV blocks one by one.
    """

    __slots__ = (
        "_bs",
        "_cap",
        "_chunked",
        "_computed",
        "_d",
        "_decoding",
        "_generated",
        "_held",
        "_held_prefill",
        "_max_seqs",
        "_outputs",
        "_preempted",
        "_preemptions",
        "_prefilling",
        "_prefix",
        "_prompts",
        "_reserve",
        "_reserved",
        "_running",
        "_state",
        "_waiting",
    )

    def __init__(self, workload: Workload, config: SchedulerConfig) -> None:
        self._bs = config.block_size
        self._cap = config.kv_blocks
        self._max_seqs = config.max_num_seqs
        self._chunked = config.chunked_prefill
        self._reserve = config.reserve_whole_request
        self._reserved = 0  # blocks reserved for the running requests' whole lengths (reserve_whole_request)

        self._prompts: list[int] = workload.prompt_tokens.tolist()
        self._outputs: list[int] = workload.output_tokens.tolist()
        n_req = len(self._prompts)
        self._state = [WAITING] * n_req
        self._generated = [0] * n_req  # tokens sampled so far (valid while not decoding)
        self._computed = [0] * n_req  # prefill progress (prefilling only)
        self._held = [0] * n_req  # blocks held (prefilling only; decoders are in the aggregate)

        self._running: dict[int, None] = {}  # admission order: the last key is the newest
        self._prefilling: dict[int, None] = {}
        self._waiting: deque[int] = deque()
        self._decoding = DecodingSequences(n_req, self._bs)
        self._held_prefill = 0  # blocks held by prefilling requests
        self._d = 0  # the decoders' step counter
        self._preempted = False  # whether the step being scheduled preempted anything
        self._preemptions = 0
        self._prefix = PrefixSharing.of(workload, self._bs)  # shared prompt prefixes; inert when nothing is shared

    def _free_blocks(self, step: int | None = None) -> int:
        """Blocks a request may still take at step counter `step` (default: now): the prefix cache's unreferenced
        blocks count as free (they are evicted on need)."""
        blocks = self._decoding.blocks_at(self._d if step is None else step)
        return self._cap - blocks + self._prefix.decoding_shared - self._held_prefill - self._prefix.pinned

    def _preempt_until_decoders_fit(self, budget: int) -> int:
        """Preempt the newest requests until every decoder's next token fits; the token budget left."""
        while self._free_blocks() < 0:
            victim_was_decoding = self._state[next(reversed(self._running))] == DECODE
            self._preempt_newest()
            if victim_was_decoding:
                budget += 1
        return budget

    def _schedule_prefilling(self, budget: int, chunks: list[tuple[int, int]]) -> tuple[int, int]:
        """The next chunk of each partially prefilled request, oldest first, while budget and blocks last.

        Appends the (request, chunk) pairs to `chunks`; returns the token budget left and the
        KV tokens earlier chunks left for these chunks to read.
        """
        prompts, generated, computed, held = self._prompts, self._generated, self._computed, self._held
        prior_context = 0
        for rid in list(self._prefilling):
            if budget <= 0:
                break
            if rid not in self._prefilling:
                continue  # preempted to make room for an older one
            remaining = prompts[rid] + generated[rid] - computed[rid]
            chunk = min(remaining, budget)
            if not self._chunked and chunk < remaining:
                continue
            need = -(-(computed[rid] + chunk) // self._bs) - held[rid] - self._prefix.shared[rid]
            room = self._make_room(rid, need, budget)
            if room is None:
                break  # as in vLLM, a request preempting itself ends this step's scheduling
            held[rid] += need
            self._held_prefill += need
            budget = room - chunk
            chunks.append((rid, chunk))
            prior_context += computed[rid]
        return budget, prior_context

    def _make_room(self, rid: int, need: int, budget: int) -> int | None:
        """Preempt the newest requests until `need` more blocks fit for `rid`; the budget then, None if `rid` went."""
        while need > self._free_blocks():
            victim_was_decoding = self._state[next(reversed(self._running))] == DECODE
            if self._preempt_newest() == rid:
                return None
            if victim_was_decoding:
                budget += 1
        return budget

    def _admit_waiting(self, budget: int, chunks: list[tuple[int, int]]) -> int:
        """Admit waiting requests first come, first served, while seats, budget and blocks allow; the KV tokens
        their chunks read from the prefix cache (part of the step's context)."""
        waiting, running, prefilling = self._waiting, self._running, self._prefilling
        prompts, generated, state, computed, held = (
            self._prompts,
            self._generated,
            self._state,
            self._computed,
            self._held,
        )
        chunked, bs, max_seqs = self._chunked, self._bs, self._max_seqs
        prior_context = 0
        while waiting and budget > 0 and len(running) < max_seqs:
            rid = waiting[0]
            hit = self._prefix.hit_blocks(rid, prompts[rid] + generated[rid])
            need_tokens = prompts[rid] + generated[rid] - hit * bs
            chunk = min(need_tokens, budget)
            if not chunked and chunk < need_tokens:
                break
            blocks = -(-(hit * bs + chunk) // bs) - hit
            if blocks + self._prefix.pin_cost(rid, hit) > self._free_blocks() or (
                self._reserve and self._reserved + self._whole(rid) > self._cap
            ):
                break
            if self._reserve:
                self._reserved += self._whole(rid)
            if hit:
                self._prefix.read(rid, hit)
                prior_context += hit * bs
            waiting.popleft()
            state[rid] = PREFILL
            running[rid] = None
            prefilling[rid] = None
            computed[rid] = hit * bs
            held[rid] = blocks
            self._held_prefill += blocks
            budget -= chunk
            chunks.append((rid, chunk))
            if not chunked:
                break
        return prior_context

    def _whole(self, rid: int) -> int:
        """KV blocks of request `rid` at its full length (its last token is never stored)."""
        return -(-(self._prompts[rid] + self._outputs[rid] - 1) // self._bs)

    def _preempt_newest(self) -> int:
        """Recompute preemption of the newest running request; returns its id."""
        rid = next(reversed(self._running))
        del self._running[rid]
        self._prefix.stop_reading(rid, decoding=self._state[rid] == DECODE)
        if self._state[rid] == DECODE:
            self._generated[rid] = self._decoding.remove(rid) + self._d - self._prompts[rid]
        else:
            del self._prefilling[rid]
            self._held_prefill -= self._held[rid]
            self._held[rid] = 0
            self._computed[rid] = 0
        self._state[rid] = WAITING
        self._reserved -= self._whole(rid) if self._reserve else 0
        self._waiting.appendleft(rid)
        self._preemptions += 1
        self._preempted = True
        return rid
