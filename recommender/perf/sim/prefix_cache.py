"""A replica's prefix cache: KV blocks kept after the requests that computed them, for later prompts to reuse.

Modelled on vLLM's automatic prefix caching (and SGLang's radix cache, which behaves the same for whole
shared prefixes): only full blocks are cached; a block stays in the KV cache after its request finishes
and is reused by any later request whose prompt starts with the same tokens; the blocks running requests
reference are pinned; unreferenced ones are evicted least recently used first, and only when the running
requests need the room. The cache and the running requests share one KV capacity, so a cache full of
prefixes costs nothing until the batch needs its blocks.

Entries are keyed by the workload's prefix key (a system prompt or template; a conversation's history),
not by token hashes: the simulator knows which requests share what, and one key per prefix keeps a step
O(1). An entry grows when a longer prefix under its key is published (a conversation's next turn).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.perf.sim.workload import Workload

__all__ = ["PrefixCache"]


class PrefixCache:
    """Cached blocks per prefix key, with reference counts and least-recently-used eviction of the unreferenced.

    ``blocks`` is every cached block; ``pinned`` those of entries a running request references (never
    evicted). The scheduler counts ``blocks - pinned`` as free for allocation and calls :meth:`evict` when
    the running requests' blocks and the cache's together exceed the capacity.
    """

    __slots__ = ("_entries", "_refs", "_unreferenced", "blocks", "pinned")

    def __init__(self) -> None:
        self._entries: dict[int, int] = {}  # key -> blocks cached
        self._refs: dict[int, int] = {}  # key -> running requests referencing it
        self._unreferenced: OrderedDict[int, None] = OrderedDict()  # least recently used first
        self.blocks = 0
        self.pinned = 0

    @property
    def referenced(self) -> dict[int, int]:
        """The keys running requests reference, with how many reference each (read only)."""
        return self._refs

    def cached(self, key: int) -> int:
        """Blocks cached under `key` (0: none)."""
        return self._entries.get(key, 0)

    def acquire(self, key: int) -> None:
        """A running request references the entry under `key` (which must be cached): it is pinned."""
        refs = self._refs.get(key, 0)
        if refs == 0:
            self._unreferenced.pop(key, None)
            self.pinned += self._entries[key]
        self._refs[key] = refs + 1

    def release(self, key: int) -> None:
        """A request stops referencing `key` (finished or preempted); unreferenced, the entry becomes evictable."""
        refs = self._refs[key] - 1
        if refs:
            self._refs[key] = refs
            return
        del self._refs[key]
        self.pinned -= self._entries[key]
        self._unreferenced[key] = None  # most recently used: evicted last

    def publish(self, key: int, blocks: int) -> int:
        """Keep `blocks` blocks under `key` (a longer prefix replaces a shorter one); the blocks added."""
        old = self._entries.get(key, 0)
        if blocks <= old:
            return 0
        self._entries[key] = blocks
        self.blocks += blocks - old
        if self._refs.get(key, 0):
            self.pinned += blocks - old
        elif old == 0:
            self._unreferenced[key] = None
        return blocks - old

    def evict(self, blocks: int) -> None:
        """Drop unreferenced entries, least recently used first, until `blocks` blocks are freed (or none is left)."""
        freed = 0
        while freed < blocks and self._unreferenced:
            key, _ = self._unreferenced.popitem(last=False)
            freed += self._entries.pop(key)
        self.blocks -= freed


class PrefixSharing:
    """What the scheduler tracks of shared prefixes: the replica's cache, each request's prefix key and shared
    tokens, the cached blocks each running request reads instead of holding, and the tokens served from cache.

    With no prefix keys (a workload that shares nothing) every answer is 0 and nothing is cached.
    """

    __slots__ = ("_bs", "_history", "_keys", "_tokens", "cache", "decoding_shared", "hit_tokens", "shared")

    def __init__(
        self,
        keys: list[int] | None,
        tokens: list[int] | None,
        n_requests: int,
        block_size: int,
        history: list[int] | None = None,
    ) -> None:
        self.cache = PrefixCache() if keys is not None else None
        self._keys = keys or []
        self._tokens = tokens or []
        self._history = history  # the key each request's whole sequence is kept under when it finishes
        self._bs = block_size
        self.shared = [0] * n_requests  # cached blocks a running request reads instead of holding
        self.decoding_shared = 0  # the decoders' shared blocks together
        self.hit_tokens = 0  # prompt tokens served from the cache

    @classmethod
    def of(cls, workload: Workload, block_size: int) -> PrefixSharing:
        """The sharing `workload` declares (its prefix and history keys; none: inert)."""
        keys, tokens, history = workload.prefix_keys, workload.prefix_tokens, workload.history_keys
        return cls(
            None if keys is None else keys.tolist(),
            None if tokens is None else tokens.tolist(),
            len(workload),
            block_size,
            None if history is None else history.tolist(),
        )

    @property
    def pinned(self) -> int:
        return self.cache.pinned if self.cache is not None else 0

    @property
    def evictable(self) -> int:
        return self.cache.blocks - self.cache.pinned if self.cache is not None else 0

    def hit_blocks(self, rid: int, length: int) -> int:
        """Full blocks of `rid`'s prompt the cache holds now, for a sequence of `length` tokens (at least its last
        token is computed)."""
        if self.cache is None or self._keys[rid] < 0:
            return 0
        cached = self.cache.cached(self._keys[rid])
        return min(cached, self._tokens[rid] // self._bs, (length - 1) // self._bs) if cached else 0

    def pin_cost(self, rid: int, hit: int) -> int:
        """Free blocks that reading `hit` cached blocks takes: the whole entry's, when nothing references it yet."""
        if self.cache is None or not hit:
            return 0
        key = self._keys[rid]
        return 0 if key in self.cache.referenced else self.cache.cached(key)

    def read(self, rid: int, blocks: int) -> None:
        """Request `rid` reads `blocks` cached blocks of its prefix instead of computing and holding them."""
        assert self.cache is not None  # a hit needs a cache
        self.cache.acquire(self._keys[rid])
        self.shared[rid] = blocks
        self.hit_tokens += blocks * self._bs

    def start_decoding(self, rid: int) -> None:
        self.decoding_shared += self.shared[rid]

    def stop_reading(self, rid: int, *, decoding: bool) -> None:
        """Request `rid` (finished or preempted) no longer reads its cached prefix."""
        shared = self.shared[rid]
        if not shared:
            return
        assert self.cache is not None
        self.cache.release(self._keys[rid])
        self.shared[rid] = 0
        if decoding:
            self.decoding_shared -= shared

    def publish(self, rid: int) -> None:
        """A request that computed its shared prefix keeps the prefix's full blocks in the cache and reads them
        there (an entry another request published first is left alone: this one holds its own copy)."""
        cache = self.cache
        if cache is None:
            return
        key = self._keys[rid]
        if key < 0 or self.shared[rid] or cache.cached(key):
            return
        blocks = self._tokens[rid] // self._bs
        if blocks:
            cache.publish(key, blocks)
            cache.acquire(key)
            self.shared[rid] = blocks

    def finish(self, rid: int, length: int) -> None:
        """Request `rid` finished with `length` tokens: under its history key (a conversation's next turn reads it)
        the cache keeps its full blocks (its last token is never stored)."""
        if self._history is not None and self._history[rid] >= 0:
            assert self.cache is not None
            self.cache.publish(self._history[rid], (length - 1) // self._bs)

    def evict(self, blocks: int) -> None:
        if self.cache is not None:
            self.cache.evict(blocks)
