"""load-aware's pick as array arithmetic is llm-d's per-endpoint weighted sum, endpoint by endpoint: the same
replica for the same queues, KV usage, cached blocks and tie draws, exact ties included."""

from __future__ import annotations

import numpy as np

from recommender.perf.sim.routing import Router


def _one_by_one(
    router: Router, queues: list[int], usage: list[float], matched: dict[int, int], blocks: int, tie: np.ndarray
) -> int:
    """The scorers summed per endpoint as llm-d's ``scheduler_profile.go`` does, the max-score picker's shuffle
    breaking ties (the loop the array form replaced)."""
    lo, hi = min(queues), max(queues)
    best, best_key = 0, (-1.0, -1.0)
    for r, (queue, used) in enumerate(zip(queues, usage, strict=True)):
        score = router.queue_weight * (1.0 if hi == lo else (hi - queue) / (hi - lo))
        score += router.kv_cache_weight * (1.0 - used)
        if blocks:
            score += router.prefix_weight * matched.get(r, 0) / blocks
        key = (score, float(tie[r]))
        if key > best_key:
            best, best_key = r, key
    return best


def test_the_array_pick_is_the_endpoint_by_endpoint_weighted_sum() -> None:
    router = Router(policy="load-aware")
    rng = np.random.default_rng(7)
    for _ in range(3_000):
        n = int(rng.integers(1, 17))
        queues = rng.integers(0, 4, n)  # few distinct queues: equal scores are common
        usage = rng.choice([0.0, 0.25, 0.5], n)
        blocks = int(rng.integers(0, 5))
        matched = {
            int(r): int(rng.integers(0, blocks + 1)) for r in rng.choice(n, int(rng.integers(0, n + 1)), replace=False)
        }
        tie = rng.random(n)
        expected = _one_by_one(router, queues.tolist(), usage.tolist(), matched, blocks, tie)
        assert router.weighted_pick(queues, usage, matched, blocks, tie) == expected
