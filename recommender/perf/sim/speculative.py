"""Speculative decoding in the simulator: fewer, wider decode steps, at a measured acceptance.

With speculation each decoding sequence's step verifies its draft tokens and the next token in one
forward pass (vLLM V1's n-gram proposer drafts up to ``k`` tokens from the sequence's own earlier tokens;
a sequence whose suffix matches nothing drafts none), and keeps the accepted prefix of the draft plus one
token. What the use case's text accepts is measured on the model (``recommender.speculation``): the mean
tokens a sequence gains per step (``tokens_per_step``, >= 1) and the mean draft tokens it verifies per step
(``drafted_per_step``, <= k).

Modelled here, on the same step-cost model as every other step (calibrated per engine on catalog GPUs):

* a request of ``L`` output tokens decodes in ``1 + ceil((L - 1) / tokens_per_step)`` steps (its first token
  comes from the prefill, as without speculation);
* every decode step carries, beside one token per decoding sequence, ``drafted_per_step`` draft tokens
  per sequence: priced as extra tokens through the linear layers (weights are streamed once either way,
  so at a small batch they cost little and at a large, compute-bound batch they cost their FLOPs) and
  as attention of each draft token over its sequence's context; the KV cache is read once per step, as
  without drafts;
* the drafter's own time: none for n-gram matching (it runs on the CPU, overlapped with the GPU step in
  vLLM V1 — an assumption: a busy CPU can delay steps).

Not modelled, said where figures are shown: the KV the accepted tokens add grows the context once per step
(not once per token), so attention reads and KV blocks of the generated part are understated by the
accepted tokens — prompts dominate both in the workloads speculation suits; the acceptance is its mean,
not drawn per step, so P99 TPOT carries no acceptance variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.step.cost import PrefillAwareStepCostModel, PrefillChunks

if TYPE_CHECKING:
    from recommender.perf.sim.results import SimulationResult
    from recommender.perf.sim.workload import Workload
    from recommender.perf.step.cost import StepCostModel
    from recommender.provenance import Provenance

__all__ = ["SpeculativeDecoding", "SpeculativeStepCost", "decode_steps_workload", "per_token_result"]


@dataclass(frozen=True, slots=True)
class SpeculativeDecoding:
    """A speculative method at its measured acceptance.

    Args:
        method: how drafts are made ("ngram").
        num_speculative_tokens: most draft tokens per step (``k``).
        tokens_per_step: mean tokens a decoding sequence gains per step, accepted drafts plus one.
        drafted_per_step: mean draft tokens a decoding sequence verifies per step.
        evidence: where the acceptance was measured (model, scheme, documents, device).
    """

    method: str
    num_speculative_tokens: int
    tokens_per_step: float
    drafted_per_step: float
    evidence: str = ""

    def __post_init__(self) -> None:
        k = self.num_speculative_tokens
        if k < 1 or not 1.0 <= self.tokens_per_step <= k + 1 or not 0.0 <= self.drafted_per_step <= k:
            raise ValueError(f"need k >= 1, 1 <= tokens_per_step <= k + 1 and 0 <= drafted_per_step <= k: {self}")

    def decode_steps(self, output_tokens: int) -> int:
        """Steps a request of `output_tokens` tokens takes: its first token from the prefill, then the rest."""
        return 1 + math.ceil((output_tokens - 1) / self.tokens_per_step) if output_tokens > 1 else 1


@dataclass(frozen=True)
class SpeculativeStepCost:
    """`base`'s step cost with every decoding sequence verifying `speculation.drafted_per_step` draft tokens."""

    base: StepCostModel
    speculation: SpeculativeDecoding
    #: `base` where it prices chunked prefills, else None: checked once, since a runtime-Protocol isinstance
    #: in the simulator's per-step path cost seconds per search (profiled on `make demo`).
    _prefill_base: PrefillAwareStepCostModel | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        aware = self.base if isinstance(self.base, PrefillAwareStepCostModel) else None
        object.__setattr__(self, "_prefill_base", aware)

    @property
    def provenance(self) -> Provenance:
        s = self.speculation
        return self.base.provenance.extended(
            f"{s.method} speculation, k={s.num_speculative_tokens}: {s.tokens_per_step:.2f} tokens and "
            f"{s.drafted_per_step:.2f} drafts verified per sequence per step ({s.evidence or 'acceptance given'})"
        )

    def _with_drafts(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> PrefillChunks:
        drafts = round(decode_seqs * self.speculation.drafted_per_step)
        if not drafts:
            return chunks
        per_draft_context = (context_tokens - chunks.prior_tokens) / decode_seqs  # a decoding sequence's KV
        return replace(
            chunks, tokens=chunks.tokens + drafts, sum_cross=chunks.sum_cross + round(drafts * per_draft_context)
        )

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        with_drafts = self._with_drafts(chunks, decode_seqs, context_tokens)
        if self._prefill_base is not None:
            return self._prefill_base.prefill_step_seconds(with_drafts, decode_seqs, context_tokens)
        return self.base.step_seconds(with_drafts.tokens, decode_seqs, context_tokens)

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        """Many pure-decode steps: exact for step costs linear in the context (the calibrated ones); the
        roofline's max() is followed at both ends of the stretch and interpolated between."""
        if len(context_tokens) == 0:
            return np.zeros(0)
        first, last = int(context_tokens[0]), int(context_tokens[-1])
        at_first = self.step_seconds(0, decode_seqs, first)
        if last == first:
            return np.full(len(context_tokens), at_first)
        slope = (self.step_seconds(0, decode_seqs, last) - at_first) / (last - first)
        seconds: np.ndarray = at_first + slope * (context_tokens - first)
        return seconds


def decode_steps_workload(workload: Workload, speculation: SpeculativeDecoding) -> Workload:
    """`workload` with each request's output counted in decode steps, as the scheduler runs them."""
    steps = np.array([speculation.decode_steps(int(n)) for n in workload.output_tokens], dtype=np.int64)
    return replace(workload, output_tokens=steps)


def per_token_result(
    result: SimulationResult, workload: Workload, *, ttft_sla_ms: float | None, tpot_sla_ms: float | None
) -> SimulationResult:
    """A simulation of `decode_steps_workload(workload, ...)` read back per output token of `workload`."""
    from recommender.perf.sim.results import SimulationResult

    return SimulationResult.of_run(
        workload,
        workload.arrivals_s + result.ttft_s,
        workload.arrivals_s + result.e2e_s,
        preemptions=result.preemptions,
        steps=result.steps,
        max_step_tokens=result.max_step_tokens,
        ttft_sla_ms=ttft_sla_ms,
        tpot_sla_ms=tpot_sla_ms,
        prefix_hit_tokens=result.prefix_hit_tokens,
        prefill_tokens=result.prefill_tokens,
    )
