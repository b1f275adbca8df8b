"""A decode worker's step cost: prompts arrive as transferred KV, so admitting one costs a decode step, not a prefill.

Its own module so the simulation core (``compiled.py``, which prices it in the compiled loop) reads it without
importing the disaggregated pools built on that core (``disaggregated.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.step.cost import PrefillChunks

if TYPE_CHECKING:
    from recommender.perf.step.cost import StepCostModel
    from recommender.provenance import Provenance

__all__ = ["DecodeOnlyStepCost"]


@dataclass(frozen=True, slots=True)
class DecodeOnlyStepCost:
    """A decode worker's steps: a request's prompt arrives as KV (transferred), so admitting it costs no prefill.

    A step with prompt chunks costs the decode step of its decoders and the admitted sequences together, each
    new one reading its whole transferred prompt. Implements ``StepCostModel``, ``PrefillAwareStepCostModel``
    and ``VectorStepCostModel`` over any step cost.
    """

    inner: StepCostModel

    @property
    def provenance(self) -> Provenance:
        return self.inner.provenance.extended("decode pool: prompts arrive as transferred KV, no prefill computed")

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        return self.inner.step_seconds(0, decode_seqs + chunks.seqs, context_tokens + chunks.tokens)

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        vector = getattr(self.inner, "decode_steps_seconds", None)
        if vector is not None:
            return np.asarray(vector(decode_seqs, context_tokens), dtype=float)
        return np.array([self.inner.step_seconds(0, decode_seqs, int(c)) for c in context_tokens])
