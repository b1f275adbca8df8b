"""Expert load under expert parallelism: how much more than its share the busiest GPU gets, and what EPLB buys.

With experts sharded over ``ep`` GPUs, each MoE layer waits for the GPU whose experts drew the most
tokens: a step's expert time and the all-to-all into that GPU scale with its share, not with ``1/ep``.
Routers are not uniform: expert popularity is skewed. It is modelled here as Zipf-like, expert ``i`` (by
popularity rank) drawing a share proportional to ``(i + 1) ** -skew``; ``skew`` 0 is uniform, and the
caller states the value it assumes (it is a property of the model and the traffic, not of the GPU).

Two placements:

- static: experts land on GPUs in blocks of ``E / ep`` with no regard for popularity, so the busiest
  GPU's share is the expected maximum over random placements (a seeded, deterministic average);
- EPLB (deepseek-ai/EPLB ``eplb.py`` @ 57919718, its global policy): ``redundant`` extra replicas go,
  one at a time, to the expert with the highest load per replica (``replicate_experts``), and the
  ``E + redundant`` replicas are packed ``(E + redundant) / ep`` per GPU, heaviest first onto the
  least-loaded GPU with a free slot (``balanced_packing``). The loads it balances are the expected
  popularities here; a real deployment balances on measured statistics, which drift.

``imbalance`` is the busiest GPU's load over the mean (1.0 = perfectly even). Loads are expectations:
at small batches the sampling noise of a few hundred token-expert pairs adds to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.errors import BadInputError

#: Random placements averaged for the static placement's expected maximum.
PLACEMENT_SAMPLES = 256


def zipf_popularity(n_experts: int, skew: float) -> np.ndarray:
    """Each expert's share of routed token-expert pairs, most popular first: ``(i + 1) ** -skew``, normalised."""
    if n_experts < 1:
        raise BadInputError("n_experts", f"{n_experts} experts", "give at least one expert")
    if not 0.0 <= skew <= 10.0:
        raise BadInputError("expert_skew", f"{skew} is outside 0..10", "give 0 (uniform) to about 2 (very skewed)")
    weights = np.arange(1, n_experts + 1, dtype=float) ** -skew
    return np.asarray(weights / weights.sum(), dtype=float)


@dataclass(frozen=True, slots=True)
class ExpertLoad:
    """The busiest GPU's load against the mean, for one placement of one MoE layer's experts."""

    ep: int
    redundant: int
    imbalance: float
    placement: str

    @property
    def busiest_share(self) -> float:
        """Fraction of all routed token-expert pairs the busiest GPU computes."""
        return self.imbalance / self.ep


def check_expert_split(n_experts: int, ep: int, redundant: int = 0, *, field: str = "expert_parallel") -> None:
    """Refuse an expert-parallel degree that does not divide the experts (with their redundant replicas)."""
    if ep < 1:
        raise BadInputError(field, f"expert-parallel degree {ep}", "give a positive degree")
    slots = n_experts + redundant
    if slots % ep:
        fits = [d for d in (1, 2, 4, 8, 16, 32, 64, 128, 256) if slots % d == 0]
        raise BadInputError(
            field,
            f"{ep} GPUs do not split {slots} experts{f' ({redundant} redundant)' if redundant else ''} evenly",
            f"use a degree dividing {slots} (e.g. {', '.join(map(str, fits[-4:]))})",
        )


def static_load(popularity: np.ndarray, ep: int, *, seed: int = 0) -> ExpertLoad:
    """Experts placed in equal blocks with no regard for popularity: the expected busiest GPU over random placements."""
    n = len(popularity)
    check_expert_split(n, ep)
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((PLACEMENT_SAMPLES, n)), axis=1)  # a random permutation per sample
    per_gpu = popularity[order].reshape(PLACEMENT_SAMPLES, ep, n // ep).sum(axis=2)
    return ExpertLoad(ep=ep, redundant=0, imbalance=float(per_gpu.max(axis=1).mean() * ep), placement="static")


def _replicate(popularity: np.ndarray, redundant: int) -> np.ndarray:
    """Replica counts per expert: each redundant slot to the expert with the highest load per replica."""
    counts = np.ones(len(popularity), dtype=int)
    for _ in range(redundant):
        counts[int(np.argmax(popularity / counts))] += 1
    return counts


def _pack(replica_loads: np.ndarray, ep: int) -> float:
    """Balanced packing, ``len / ep`` replicas per GPU, heaviest first to the least-loaded GPU with room: max load."""
    per_gpu = len(replica_loads) // ep
    loads, items = np.zeros(ep), np.zeros(ep, dtype=int)
    for load in np.sort(replica_loads)[::-1]:
        room = np.flatnonzero(items < per_gpu)
        gpu = room[int(np.argmin(loads[room]))]
        loads[gpu] += load
        items[gpu] += 1
    return float(loads.max())


def eplb_load(popularity: np.ndarray, ep: int, redundant: int = 0) -> ExpertLoad:
    """EPLB's global policy: replicate the hottest experts into `redundant` extra slots, then pack evenly."""
    check_expert_split(len(popularity), ep, redundant)
    counts = _replicate(popularity, redundant)
    replica_loads = np.repeat(popularity / counts, counts)
    return ExpertLoad(ep=ep, redundant=redundant, imbalance=_pack(replica_loads, ep) * ep, placement="eplb")
