"""A step cost at the upper end of its interval: prefill and decode work each slower by their own factor.

The calibrated step cost is a point estimate; its error, measured on held-out runs, differs between
the two kinds of work a step does (``calibrated.StepResiduals``): decode steps stream weights and KV
and the fit predicts them within a few per cent, prefill is compute the fit moves less surely. The
SLA check does not inflate a simulated P99 by a factor; it simulates the user's own traffic (Poisson,
daily or trace) with every step at the upper end of its interval, so queueing answers to the slower
steps as it would on a slower GPU, and the P99 it checks is that simulation's.

A step that prefills and decodes splits as: its pure-decode part (the same decoders and context, no
prompt chunks) at the decode factor, and the rest (what the chunks add) at the prefill factor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.perf.step.cost import PrefillChunks

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from recommender.perf.step.features import FeatureStepCost
    from recommender.provenance import Provenance

__all__ = ["StepFactors", "UpperStepCost"]

_NO_PREFILL = PrefillChunks()


@dataclass(frozen=True, slots=True)
class StepFactors:
    """How much slower than the point estimate prefill and decode work run at an interval's end (>= 1 upper)."""

    prefill: float
    decode: float

    def __post_init__(self) -> None:
        if min(self.prefill, self.decode) <= 0:
            raise ValueError(f"step factors must be positive: {self}")


@dataclass(frozen=True, slots=True)
class UpperStepCost:
    """`point`'s steps with prefill work x ``factors.prefill`` and decode work x ``factors.decode``.

    Implements the scheduler's ``StepCostModel``, ``PrefillAwareStepCostModel``, ``VectorStepCostModel`` and
    ``FastDecodeStepCostModel``.
    """

    point: FeatureStepCost
    factors: StepFactors
    provenance: Provenance
    #: The compiled forms of this cost (``FeatureStepCost.compiled_forms``).
    compiled_forms: dict[tuple[int, int], object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        whole = self.point.prefill_step_seconds(chunks, decode_seqs, context_tokens)
        if not chunks.seqs:
            return whole * self.factors.decode
        decoding = self.point.decode_stepper(decode_seqs)  # equal to the general path, faster (measured kernels)
        if decoding is not None:
            decode = decoding(context_tokens - chunks.prior_tokens)
        else:
            decode = self.point.prefill_step_seconds(_NO_PREFILL, decode_seqs, context_tokens - chunks.prior_tokens)
        return decode * self.factors.decode + max(whole - decode, 0.0) * self.factors.prefill

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        return self.point.decode_steps_seconds(decode_seqs, context_tokens) * self.factors.decode

    def decode_line(self, decode_seqs: int) -> tuple[float, float] | None:
        line = self.point.decode_line(decode_seqs)
        return None if line is None else (line[0] * self.factors.decode, line[1] * self.factors.decode)

    def decode_stepper(self, decode_seqs: int) -> Callable[[int], float] | None:
        return self.point.decode_stepper(decode_seqs, self.factors.decode)
