"""Step-cost models: how long one forward pass takes, from what the scheduler put into it.

The continuous-batching scheduler (``scheduler.py``) asks a step-cost model for the duration
of every step it takes. On the search's path two models answer: the calibrated step cost of
``features.py`` (coefficients fitted on measured runs, ``calibrated.py``) for catalog GPUs, and
step times measured on the local device (``probe.py`` figures), interpolated between the measured
points (``TableStepCost``, here). The assumed-efficiency roofline of ``roofline.py``
(``RooflineStepCost``, here) is the uncalibrated baseline the fidelity benchmark compares against.
Each says, as a :class:`Provenance`, where its figures come from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from recommender.perf.step.kernels import linear_time_factor
from recommender.perf.step.rates import StepRates
from recommender.perf.step.roofline import Efficiency, allreduce_seconds, roofline_provenance
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme

__all__ = [
    "FastDecodeStepCostModel",
    "PrefillAwareStepCostModel",
    "PrefillChunks",
    "RooflineStepCost",
    "StepCostModel",
    "TableStepCost",
    "VectorStepCostModel",
]


@runtime_checkable
class StepCostModel(Protocol):
    """The duration of one forward pass, from what the scheduler put into it.

    Args:
        prefill_tokens: prompt tokens (chunks) computed in the step, all sequences together.
        decode_seqs: sequences generating one token each in the step.
        context_tokens: KV-cache tokens the step's sequences read: each decoding sequence's
            length, plus the tokens an earlier chunk of a prefilling sequence left in the cache.
    """

    @property
    def provenance(self) -> Provenance:
        """Where the step times come from (modeled physics, or measurements on a device)."""
        ...

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float: ...


@runtime_checkable
class VectorStepCostModel(StepCostModel, Protocol):
    """Optional: many pure-decode steps at once, so long decode stretches cost one numpy call."""

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class FastDecodeStepCostModel(StepCostModel, Protocol):
    """Optional: the pure-decode steps of one batch of `decode_seqs` sequences priced without the general step path.

    ``decode_line``: the step as ``intercept + slope x context_tokens`` exactly (datasheet features are linear in
    the KV read), so a decode stretch's time is an arithmetic series; None where it is not linear (measured kernel
    tables interpolate). ``decode_stepper``: the step as a function of the context alone, everything that depends
    on the batch alone computed once, equal to ``step_seconds(0, decode_seqs, context)`` to the last bit; None
    where the source has none.
    """

    def decode_line(self, decode_seqs: int) -> tuple[float, float] | None: ...

    def decode_stepper(self, decode_seqs: int) -> Callable[[int], float] | None: ...


@dataclass(frozen=True, slots=True)
class PrefillChunks:
    """The prompt chunks of one step, as the sums a step cost needs beyond their total.

    Several prompts in one step cost the sum of their squared lengths in attention, not the
    square of their sum, and each runs the lm_head once (vLLM computes logits at the last
    scheduled position of every request), so totals alone cannot price a step.

    Args:
        tokens: prompt tokens computed in the step, all chunks together.
        seqs: sequences prefilling in the step.
        sum_sq: sum over chunks of chunk length squared (each chunk attending to itself).
        sum_cross: sum over chunks of chunk length x tokens its earlier chunks left in the cache.
        prior_tokens: KV tokens earlier chunks left for this step's chunks (part of ``context_tokens``).
    """

    tokens: int = 0
    seqs: int = 0
    sum_sq: int = 0
    sum_cross: int = 0
    prior_tokens: int = 0

    @classmethod
    def of(cls, chunks: Iterable[tuple[int, int]]) -> PrefillChunks:
        """From (chunk length, tokens already computed for that sequence) pairs."""
        tokens = seqs = sum_sq = sum_cross = prior = 0
        for chunk, computed in chunks:
            tokens += chunk
            seqs += 1
            sum_sq += chunk * chunk
            sum_cross += chunk * computed
            prior += computed
        return cls(tokens, seqs, sum_sq, sum_cross, prior)

    @classmethod
    def single(cls, tokens: int) -> PrefillChunks:
        """One whole prompt of `tokens` (none: an empty step)."""
        return cls(tokens, 1, tokens * tokens, 0, 0) if tokens else _NO_PREFILL


#: A step without prefill chunks (pure decode).
_NO_PREFILL = PrefillChunks()


@runtime_checkable
class PrefillAwareStepCostModel(StepCostModel, Protocol):
    """Optional: a step priced from its prefill chunks one by one (:class:`PrefillChunks`).

    The scheduler calls this, where a model has it, for every step with prefill chunks, and
    ``step_seconds`` otherwise; a model without it keeps working and prices the step's
    prompt tokens as one prompt. ``context_tokens`` is as in ``step_seconds`` (it includes
    ``chunks.prior_tokens``).
    """

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float: ...


@dataclass(frozen=True, slots=True)
class RooflineStepCost:
    """Roofline step times on a catalog accelerator, with the physics of ``roofline.py``.

    A step streams the weights it touches and the KV it reads once (bytes over bandwidth)
    and does 2 x active params FLOPs per token, 2 x lm_head params per sequence, plus
    attention (FLOPs over peak); the larger bound (times the scheme's measured slowdown, for
    LLM.int8()), the per-step overhead and, for tensor parallelism, two all-reduces per
    layer. For a lone prompt or a pure decode batch this equals ``project_step_times``.
    Given the chunks (``prefill_step_seconds``), each chunk attends to itself and to the
    tokens its earlier chunks cached; given totals only (``step_seconds``), the prompt tokens
    are priced as one prompt and cached tokens as one query each.
    """

    shape: ModelShape
    method: Scheme
    accel: Accelerator
    tensor_parallel: int = 1
    kv_cache_dtype: str = "auto"
    efficiency: Efficiency = field(default_factory=Efficiency)
    rates: StepRates = field(init=False, repr=False)
    # The rates' bandwidth and peak at the assumed efficiencies, and allreduce_seconds' intercept and slope
    # (it is affine in the token count).
    _bandwidth: float = field(init=False, repr=False)
    _compute: float = field(init=False, repr=False)
    _slower: float = field(init=False, repr=False)
    _allreduce_fixed_s: float = field(init=False, repr=False)
    _allreduce_per_token_s: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tp, eff, shape = self.tensor_parallel, self.efficiency, self.shape
        rates = StepRates(shape, self.method, self.accel, tp, self.kv_cache_dtype)
        fixed = allreduce_seconds(shape, self.accel, 0, tp, eff)
        values = {
            "rates": rates,
            "_bandwidth": rates.bandwidth * eff.bandwidth,
            "_compute": rates.peak * eff.compute,
            "_slower": linear_time_factor(self.method),
            "_allreduce_fixed_s": fixed,
            "_allreduce_per_token_s": allreduce_seconds(shape, self.accel, 1, tp, eff) - fixed,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def provenance(self) -> Provenance:
        return roofline_provenance(self.accel, self.efficiency, self.method)

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        chunks = PrefillChunks(prefill_tokens, 1, prefill_tokens * prefill_tokens) if prefill_tokens else _NO_PREFILL
        return self.prefill_step_seconds(chunks, decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        r, tokens = self.rates, chunks.tokens + decode_seqs
        flops = (
            tokens * r.body_flops_per_token
            + (chunks.seqs + decode_seqs) * r.head_flops_per_seq
            + r.attention_flops * (chunks.sum_sq + chunks.sum_cross)
            + r.decode_attention_flops * (context_tokens - chunks.prior_tokens)
            + tokens * (r.query_attention_flops + r.recurrent_flops_per_token)
        )
        moved = r.weight_bytes_at(tokens) + context_tokens * r.kv_bytes_per_token
        moved += tokens * r.query_kv_bytes + 2.0 * (chunks.seqs + decode_seqs) * r.state_bytes_per_seq
        moved += (chunks.seqs + decode_seqs) * r.window_kv_bytes_per_seq
        seconds = self._slower * max(flops / self._compute, moved / self._bandwidth) + self.efficiency.step_overhead_s
        if self.tensor_parallel > 1:
            seconds += self._allreduce_fixed_s + self._allreduce_per_token_s * tokens
        return seconds

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        r = self.rates
        per_seq = r.body_flops_per_token + r.head_flops_per_seq
        per_seq += r.query_attention_flops + r.recurrent_flops_per_token
        flops = decode_seqs * per_seq + r.decode_attention_flops * context_tokens
        moved = r.weight_bytes_at(decode_seqs) + context_tokens * r.kv_bytes_per_token
        moved = moved + decode_seqs * (r.query_kv_bytes + 2.0 * r.state_bytes_per_seq)
        moved = moved + decode_seqs * r.window_kv_bytes_per_seq
        seconds: np.ndarray = (
            self._slower * np.maximum(flops / self._compute, moved / self._bandwidth) + self.efficiency.step_overhead_s
        )
        if self.tensor_parallel > 1:
            seconds += self._allreduce_fixed_s + self._allreduce_per_token_s * decode_seqs
        return seconds


def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    """Linear interpolation; clamped below the first point, proportional above the last."""
    if x > xs[-1]:
        return float(ys[-1] * x / xs[-1])
    return float(np.interp(x, xs, ys))


#: What a table says of itself when its maker names no device: measured step times, simulated latencies.
LOCAL_TABLE_PROVENANCE = Provenance(
    "calibrated", "step times measured on the local device, interpolated; latency simulated"
)


@dataclass(frozen=True)
class TableStepCost:
    """Step times interpolated from measurements on the local device (``probe.py`` figures).

    Prefill seconds are measured per prompt length, decode seconds per batch size, each at
    the probe's context, so ``context_tokens`` is ignored. A mixed step costs the larger of
    a prefill of all its tokens and the decode of its sequences. Below the smallest
    measured point the first value holds (fixed costs dominate); above the largest, time
    grows in proportion (conservative for decode, about right for compute-bound prefill).

    The step times are measurements, but latencies simulated from them are not: hence
    ``calibrated``, with the device and the interpolation named in the detail.
    """

    prefill: Mapping[int, float]
    decode: Mapping[int, float]
    provenance: Provenance = LOCAL_TABLE_PROVENANCE
    _prefill_x: np.ndarray = field(init=False, repr=False)
    _prefill_y: np.ndarray = field(init=False, repr=False)
    _decode_x: np.ndarray = field(init=False, repr=False)
    _decode_y: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for label, table in (("prefill", self.prefill), ("decode", self.decode)):
            if not table or min(table) < 1 or min(table.values()) <= 0:
                raise ValueError(f"{label} table needs positive token counts and seconds, got {dict(table)}")
            xs = np.array(sorted(table), dtype=float)
            object.__setattr__(self, f"_{label}_x", xs)
            object.__setattr__(self, f"_{label}_y", np.array([table[int(x)] for x in xs], dtype=float))

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        decode = _interp(decode_seqs, self._decode_x, self._decode_y) if decode_seqs else 0.0
        if not prefill_tokens:
            return decode
        return max(_interp(prefill_tokens + decode_seqs, self._prefill_x, self._prefill_y), decode)

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        return np.full(len(context_tokens), self.step_seconds(0, decode_seqs, 0))
