"""A compiled step's duration: its prompt chunks summed as ``PrefillChunks`` sums them, handed to the compiled step
cost (``perf/step/compiled_cost.py``) as the simulation's mode says: as scheduled, with each decoder's speculative
drafts verified (``speculative.SpeculativeStepCost``), or as a decode worker prices it (``decode_only``).
"""

from __future__ import annotations

import numpy as np

from recommender.perf.jit import cached_njit
from recommender.perf.sim.compiled_state import DECODE_ONLY, R_COMPUTED, SPECULATIVE
from recommender.perf.step.compiled_cost import CostArrays, compiled_step_seconds

__all__ = ["price", "price_chunks"]


@cached_njit(error_model="numpy", inline="always")
def price(
    cost: CostArrays,
    mode: int,
    drafted_per_step: float,
    tokens: int,
    seqs: int,
    sum_sq: int,
    sum_cross: int,
    prior: int,
    n_dec: int,
    context: int,
) -> float:  # pragma: no cover (compiled)
    """A step's duration from its chunks' sums (``PrefillChunks``), handed to the cost as `mode` says."""
    if mode == DECODE_ONLY:  # DecodeOnlyStepCost: the admitted sequences decode over their transferred prompts
        return compiled_step_seconds(cost, 0, 0, 0, 0, 0, n_dec + seqs, context + tokens, 0)
    if mode == SPECULATIVE and n_dec > 0:  # SpeculativeStepCost._with_drafts
        drafts = round(n_dec * drafted_per_step)
        if drafts:
            tokens += drafts
            sum_cross += round(drafts * ((context - prior) / n_dec))
    prefilling = 1 if seqs else 0
    return compiled_step_seconds(cost, prefilling, tokens, seqs, sum_sq, sum_cross, n_dec, context, prior)


@cached_njit(error_model="numpy", inline="always")
def price_chunks(
    cost: CostArrays,
    mode: int,
    drafted_per_step: float,
    req: np.ndarray,
    chunks: np.ndarray,
    n_dec: int,
    context: int,
) -> float:  # pragma: no cover (compiled)
    """The step's duration: its chunks' sums (``PrefillChunks.of``) priced."""
    tokens = seqs = sum_sq = sum_cross = prior = 0
    for i in range(chunks[0, 0]):
        chunk, done = chunks[i + 1, 1], req[chunks[i + 1, 0], R_COMPUTED]
        tokens += chunk
        seqs += 1
        sum_sq += chunk * chunk
        sum_cross += chunk * done
        prior += done
    return price(cost, mode, drafted_per_step, tokens, seqs, sum_sq, sum_cross, prior, n_dec, context)
