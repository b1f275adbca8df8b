"""What `plan` tries on one GPU at one precision: degrees, KV cache dtypes, batch caps, and the scheme.

By default everything an engine would run: every tensor-parallel degree of the node, the 16-bit and (where
the engines and GPU run it, ``engines/batch_limits.py``) the FP8 KV cache, and batch caps from 64 up to the
engines' own maxima, the caps the KV cache cannot hold pruned and the largest cap it holds tried instead.
The ladder is climbed in order and stops once doubling the cap adds under ``LADDER_GAIN`` capacity: a
replica past its knee only queues longer. `plan --engine/--precision/--scheme/--tensor-parallel/
--kv-cache-dtype/--batch-size` narrow it, as `estimate`'s flags pick one configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS, Candidate, KVCacheDtype
from recommender.engines.batch_limits import batch_ladder
from recommender.evaluation.batch_caps import prompts_held
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.refusal import Refused

__all__ = ["LADDER_GAIN", "PlanScope", "caps_evaluated"]

#: The ladder stops when a doubled cap carries less than this much more than the best so far.
LADDER_GAIN = 1.02


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanScope:
    """What each (GPU, precision) pair tries; an empty tuple means everything the engines run."""

    batch_sizes: tuple[int, ...] = ()
    tensor_parallel: tuple[int, ...] = ()
    kv_cache_dtypes: tuple[KVCacheDtype, ...] = ("auto", "fp8")
    #: Precision -> the one scheme to plan for it (`--scheme`); others take `plan`'s own scheme per precision.
    schemes: Mapping[str, str] = field(default_factory=dict)
    #: Engine -> the release each pair is priced for (`--engine-release`, a spec's ``engine_releases``); an engine
    #: not named: its current release (``engines/engine_release.py``).
    engine_releases: Mapping[str, str] = field(default_factory=dict)

    def degrees(self, node: int) -> list[int]:
        """The degrees to try on a node of `node` GPUs: the scope's, or every power of two up to it."""
        if self.tensor_parallel:
            return [d for d in self.tensor_parallel if d <= node]
        degrees, tp = [], 1
        while tp <= node:
            degrees.append(tp)
            tp *= 2
        return degrees


def _held(performance: PerformanceEvaluator, c: Candidate) -> int | None:
    """How many prompts the KV cache of `c`'s replica holds (None: `c` does not run, or its prompts share)."""
    if performance.load.shares_prompts:
        return None
    try:
        setup = performance.setup(c)  # the memory plan, no simulation
    except Refused:
        return None
    return prompts_held(setup.scheduler.kv_cache_tokens, performance.traffic.prompt_tokens)


def _ladder(
    performance: PerformanceEvaluator, make: Callable[[int], Candidate], given: tuple[int, ...]
) -> tuple[list[int], str]:
    """The caps to try — `given`, or the engines' ladder — up to what the KV cache holds, and that number itself
    in place of the caps above it; and which caps were pruned, with the reason ('' when none was)."""
    ladder = list(given) or batch_ladder(performance.engines, DEFAULT_MAX_BATCHED_TOKENS)
    held = _held(performance, make(min(ladder))) or _held(performance, make(1))
    if held is None:
        return ladder, ""
    caps = [c for c in ladder if c <= held]
    over = [c for c in ladder if c > held]
    if over and held not in caps and held >= 1:
        caps.append(held)
    why = (
        ""
        if not over
        else (
            f"batch caps {', '.join(map(str, over))} pruned: the KV cache holds {held} prompts "
            f"of {performance.traffic.prompt_tokens} tokens"
        )
    )
    return caps, why


def caps_evaluated(
    performance: PerformanceEvaluator, scope: PlanScope, make: Callable[[int], Candidate]
) -> tuple[list[CandidateResult], str]:
    """Every cap's result at one (degree, KV dtype) — the scope's caps, or the ladder climbed until a doubled cap
    stops paying — and which caps the KV cache pruned (its largest cap tried in their place)."""
    caps, pruned = _ladder(performance, make, scope.batch_sizes)
    if scope.batch_sizes:
        return [performance.evaluate(make(b)) for b in caps], pruned
    results: list[CandidateResult] = []
    best = 0.0
    for cap in caps:
        result = performance.evaluate(make(cap))
        results.append(result)
        rate = result.serving.requests_per_s if result.serving is not None else 0.0
        if best > 0 and rate < best * LADDER_GAIN:
            break
        best = max(best, rate)
    return results, pruned
