"""Which replica each request goes to: the load balancer's or inference router's policy in front of a fleet.

One replica's prefix cache sees every turn of every conversation; behind a router, turn j lands wherever the
policy sends it, and its history is cached only on the replica that served turn j-1. So the hit rate a plan
counts depends on the router, as the engines' routers expose it:

- ``round-robin``: the i-th request to replica i mod N (vLLM production-stack's ``RoundRobinRouter``, SGLang
  router's ``round_robin``; what a plain Kubernetes Service or load balancer does, near enough).
- ``random``: a seeded uniform draw per request (SGLang router's ``random``, Dynamo's ``--router-mode random``).
- ``sticky``: session affinity. A conversation's turns go to the replica its session key hashes to
  (production-stack's ``SessionRouter``: a consistent-hash ring over the replicas, here a seeded uniform hash per
  session, which a ring with virtual nodes approaches); a request without a session goes to the least loaded
  replica (the router's ``_qps_routing`` fallback).
- ``prefix-aware``: the replica with the longest cached prefix of the request, by the router's own approximate
  index of what it sent where (SGLang's cache-aware policy: an approximate radix tree per worker built from
  routed requests; llm-d's approximate prefix-cache producer: block hashes of routed prompts in an LRU per pod
  as large as the pod's KV cache; production-stack's ``PrefixAwareRouter``: a hash trie of routed prompts).
  Ties and a match rate at or below ``cache_threshold`` go to the least loaded; when the loads are imbalanced
  (max - min > ``balance_abs_threshold`` and max > ``balance_rel_threshold`` x min, SGLang's defaults 64 and
  1.5) the least loaded takes it whatever it matches, so a hot prefix spills onto other replicas.
- ``load-aware``: llm-d's default endpoint picker, weighted scorers summed and the highest picked (ties at random):
  ``queue-scorer`` weight 2 (1 for the replica with the shortest waiting queue, 0 for the longest, linear between;
  1 for all where all are equal), ``kv-cache-utilization-scorer`` weight 2 (1 - the replica's KV-cache usage) and
  ``prefix-cache-scorer`` weight 3 (matched over total blocks of the prompt, from the same approximate index as
  ``prefix-aware``). The queue and the KV usage are the replica's own (vLLM's ``num_requests_waiting`` and
  ``kv_cache_usage_perc``, which llm-d scrapes every 50 ms), so this policy is routed as the replicas run, in one
  pass (``fleet_live.py``); `route` refuses it.

The load the router reads is its own count of requests in flight per replica (SGLang's worker ``load()``,
llm-d's in-flight-load producer: incremented when it routes, decremented when the response completes), never a
replica's internal state. Routing is decided here before the replicas are simulated (``fleet.py``), so a
completion is known only from a previous pass's simulation (`finish_s`); on a first pass, with no completion
known, the count is of every request sent so far, which balances the same way over a long run.

Each prefix is the workload's prefix key, not token hashes: the index holds, per replica, the tokens routed
under each key (a request's shared prefix under its prefix key; its prompt under its conversation's history
key, which is what the next turn's prompt begins with: the router never sees the answer).

Sources (read at): vllm-project/production-stack@a6c01db0 ``src/vllm_router/routers/routing_logic.py``
(``RoundRobinRouter``, ``SessionRouter``, ``_qps_routing``, ``PrefixAwareRouter``); sgl-project/sglang@026f853b
``sgl-router/src/policies/cache_aware.rs`` (balance guard, ``cache_threshold``, a tree per worker of routed text);
llm-d/llm-d-inference-scheduler@520af478 ``pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/
indexer.go`` (an LRU of block hashes per pod, sized by its GPU blocks, filled when a request is routed),
``scheduling/scorer/prefix/plugin.go`` (score = matched / total blocks), ``scheduling/scorer/activerequest/`` and
``dataproducer/inflightload/`` (in-flight counts from the router's own lifecycle hooks); the load-aware defaults:
``pkg/epp/config/loader/defaults.go`` (``loadDefaultConfig``: queue 2, kv-cache-utilization 2, prefix-cache 3),
``scheduling/scorer/queuedepth/queue.go``, ``scheduling/scorer/kvcacheutilization/kvcache_utilization.go``,
``pkg/epp/scheduling/scheduler_profile.go`` (score x weight summed per endpoint), ``scheduling/picker/maxscore/
picker.go`` (shuffled, then the highest), ``pkg/epp/server/options.go`` (``RefreshMetricsInterval`` 50 ms).
ai-dynamo/dynamo@01690d42
``lib/kv-router/src/scheduling/selector.rs`` weighs the blocks left to prefill against the decode blocks in one
cost (lowest wins) instead of a guard; not modelled here.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable

    from recommender.perf.sim.workload import FloatArray, IntArray, Workload

__all__ = ["POLICIES", "Router", "RoutingPolicy"]

RoutingPolicy = Literal["round-robin", "random", "sticky", "prefix-aware", "load-aware"]
#: Every policy, in the order reports list them.
POLICIES: tuple[RoutingPolicy, ...] = get_args(RoutingPolicy)


@dataclass(frozen=True, slots=True, kw_only=True)
class Router:
    """A routing policy and its settings; :meth:`route` assigns a workload's requests to replicas.

    Args:
        policy: one of `POLICIES`.
        seed: the draws of ``random`` and the session hash of ``sticky``.
        cache_threshold: ``prefix-aware``: a best match rate (matched over prompt tokens) at or below this goes to
            the least loaded replica (SGLang's ``cache_threshold``, default 0.3 there; 0 here: any hit counts).
        balance_abs_threshold: ``prefix-aware``: loads are imbalanced when max - min exceeds this ...
        balance_rel_threshold: ... and max exceeds this times min (SGLang's defaults, 64 and 1.5).
        index_blocks: blocks the router's index keeps per replica, least recently routed evicted first (llm-d's
            LRU per pod); None: as many as the replica's KV cache holds (``route``'s `replica_blocks`).
        block_size: tokens per block, as the replicas' caches count them.
        queue_weight: ``load-aware``: the queue scorer's weight (llm-d's default 2) ...
        kv_cache_weight: ... the KV-cache-utilization scorer's (2) ...
        prefix_weight: ... and the prefix-cache scorer's (3).
    """

    policy: RoutingPolicy
    seed: int = 0
    cache_threshold: float = 0.0
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    index_blocks: int | None = None
    block_size: int = 16
    queue_weight: float = 2.0
    kv_cache_weight: float = 2.0
    prefix_weight: float = 3.0

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown routing policy {self.policy!r}; known: {', '.join(POLICIES)}")
        if not 0.0 <= self.cache_threshold < 1.0 or self.balance_rel_threshold < 1.0 or self.block_size < 1:
            raise ValueError(f"need 0 <= cache_threshold < 1, balance_rel_threshold >= 1, block_size >= 1: {self}")

    @property
    def reads_load(self) -> bool:
        """Whether a decision reads the replicas' loads (so depends on when the requests complete)."""
        return self.policy in ("sticky", "prefix-aware", "load-aware")

    @property
    def live(self) -> bool:
        """Whether a decision reads the replicas' own state at the arrival (routed as they run: ``fleet_live.py``)."""
        return self.policy == "load-aware"

    def prefix_index(self, replicas: int, replica_blocks: int | None) -> _PrefixIndex:
        """The router's index of what it sent where, as large as `index_blocks` or a replica's KV cache."""
        capacity = self.index_blocks if self.index_blocks is not None else replica_blocks
        return _PrefixIndex(replicas, capacity, self.block_size)

    def weighted_pick(
        self, queues: IntArray, usage: FloatArray, matched: dict[int, int], blocks: int, tie: FloatArray
    ) -> int:
        """``load-aware``'s replica: the highest weighted sum of the queue, KV-usage and prefix scores (llm-d's
        scorers as its ``scheduler_profile.go`` sums them), ties by `tie` (one draw per replica: the picker's
        shuffle). `matched`: blocks the index expects cached per replica; `blocks`: the prompt's blocks. Array
        arithmetic in the order a per-replica sum adds (queue, then KV, then prefix), so the same floats."""
        lo, hi = int(queues.min()), int(queues.max())
        score = self.queue_weight * (np.ones(len(queues)) if hi == lo else (hi - queues) / (hi - lo))
        score = score + self.kv_cache_weight * (1.0 - usage)
        if blocks:
            cached = np.zeros(len(queues))
            for r, found in matched.items():
                cached[r] = found
            score = score + self.prefix_weight * cached / blocks
        best = score == score.max()
        return int(np.argmax(np.where(best, tie, -np.inf)))

    def route(
        self,
        workload: Workload,
        replicas: int,
        *,
        finish_s: FloatArray | None = None,
        replica_blocks: int | None = None,
    ) -> IntArray:
        """Each request's replica (0 .. `replicas` - 1), in arrival order.

        `finish_s`: when each request completed (a previous pass's simulation), for the in-flight counts; None:
        none known (the count is of requests sent). `replica_blocks`: a replica's KV-cache blocks, the index's
        capacity when `index_blocks` is None (both None: unbounded).
        """
        if replicas < 1:
            raise ValueError(f"need at least one replica, got {replicas}")
        n = len(workload)
        if replicas == 1:
            return np.zeros(n, dtype=np.int64)
        if self.live:
            raise ValueError(f"{self.policy} routes on the replicas' state as they run: simulate_fleet routes it")
        if self.policy == "round-robin":
            return np.arange(n, dtype=np.int64) % replicas
        if self.policy == "random":
            return np.random.default_rng(self.seed).integers(0, replicas, n).astype(np.int64)
        load = _InFlight(replicas, workload.arrivals_s, finish_s)
        if self.policy == "sticky":
            return self._sticky(workload, replicas, load)
        return self._prefix_aware(workload, load, self.prefix_index(replicas, replica_blocks))

    def _sticky(self, workload: Workload, replicas: int, load: _InFlight) -> IntArray:
        sessions = workload.history_keys
        if sessions is None:
            sessions = np.full(len(workload), -1, dtype=np.int64)
        keys = np.unique(sessions[sessions >= 0])
        placed = dict(
            zip(keys.tolist(), np.random.default_rng(self.seed).integers(0, replicas, len(keys)).tolist(), strict=True)
        )
        out = np.empty(len(workload), dtype=np.int64)
        for i, session in enumerate(sessions.tolist()):
            load.advance(i)
            r = placed[session] if session >= 0 else load.least(range(replicas))
            load.send(i, r)
            out[i] = r
        return out

    def _prefix_aware(self, workload: Workload, load: _InFlight, index: _PrefixIndex) -> IntArray:
        n, every = len(workload), range(load.replicas)
        keys = workload.prefix_keys.tolist() if workload.prefix_keys is not None else [-1] * n
        shared = workload.prefix_tokens.tolist() if workload.prefix_tokens is not None else [0] * n
        history = workload.history_keys.tolist() if workload.history_keys is not None else [-1] * n
        prompts = workload.prompt_tokens.tolist()
        bs = self.block_size
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            load.advance(i)
            key = keys[i]
            if load.imbalanced(self.balance_abs_threshold, self.balance_rel_threshold):
                r = load.least(every)
            else:
                matches = index.matches(key, shared[i])
                best = max(matches.values(), default=0)
                if best and best * bs / prompts[i] > self.cache_threshold:
                    r = load.least(rep for rep, blocks in matches.items() if blocks == best)
                else:
                    r = load.least(every)
            load.send(i, r)
            if key >= 0:
                index.record(r, key, shared[i])
            if history[i] >= 0:
                index.record(r, history[i], prompts[i])
            out[i] = r
        return out


class _InFlight:
    """The router's count of requests in flight per replica: up when it routes one, down when one completes
    (completions from `finish_s`; without them nothing completes and the count is of requests sent)."""

    __slots__ = ("_arrivals", "_finish", "_pending", "counts", "replicas", "sent")

    def __init__(self, replicas: int, arrivals: FloatArray, finish_s: FloatArray | None) -> None:
        self.replicas = replicas
        self._arrivals = arrivals.tolist()
        self._finish = None if finish_s is None else finish_s.tolist()
        self._pending: list[tuple[float, int]] = []  # (finish, replica) of the requests in flight, a heap
        self.counts = [0] * replicas
        self.sent = [0] * replicas

    def advance(self, i: int) -> None:
        """Count out every request that completed by request `i`'s arrival."""
        now, pending = self._arrivals[i], self._pending
        while pending and pending[0][0] <= now:
            self.counts[heapq.heappop(pending)[1]] -= 1

    def send(self, i: int, r: int) -> None:
        self.counts[r] += 1
        self.sent[r] += 1
        if self._finish is not None:
            heapq.heappush(self._pending, (self._finish[i], r))

    def least(self, candidates: Iterable[int]) -> int:
        """The least loaded of `candidates`; ties to the fewest sent, then the first."""
        return min(candidates, key=lambda r: (self.counts[r], self.sent[r], r))

    def imbalanced(self, absolute: int, relative: float) -> bool:
        hi, lo = max(self.counts), min(self.counts)
        return hi - lo > absolute and hi > lo * relative


class _PrefixIndex:
    """What the router has sent where: per replica, the blocks routed under each prefix key, least recently
    routed evicted first beyond `capacity` blocks (None: never)."""

    __slots__ = ("_bs", "_capacity", "_holders", "_lru", "_used")

    def __init__(self, replicas: int, capacity: int | None, block_size: int) -> None:
        self._bs = block_size
        self._capacity = capacity
        self._holders: dict[int, dict[int, int]] = {}  # key -> replica -> blocks
        self._lru: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(replicas)]
        self._used = [0] * replicas

    def matches(self, key: int, tokens: int) -> dict[int, int]:
        """Per replica holding `key`, the blocks of a `tokens`-token prefix under it the router expects cached."""
        if key < 0 or tokens < self._bs:
            return {}
        want = tokens // self._bs
        return {r: min(blocks, want) for r, blocks in self._holders.get(key, {}).items()}

    def record(self, r: int, key: int, tokens: int) -> None:
        blocks = tokens // self._bs
        if not blocks:
            return
        lru = self._lru[r]
        old = lru.get(key, 0)
        if blocks > old:
            lru[key] = blocks
            self._used[r] += blocks - old
            self._holders.setdefault(key, {})[r] = blocks
        lru.move_to_end(key)
        while self._capacity is not None and self._used[r] > self._capacity and len(lru) > 1:
            gone, freed = lru.popitem(last=False)
            self._used[r] -= freed
            holders = self._holders[gone]
            del holders[r]
            if not holders:
                del self._holders[gone]
