"""A step's duration as a weighted sum of what it does, each part in datasheet seconds.

The roofline of ``roofline.py`` assumes how close real kernels come to a GPU's datasheet: 70 %
of its bandwidth, 50 % of its compute, 1 ms per step. Here each of those is a coefficient,
fitted to measured serving runs (``step_fit.py``): a step's features are the seconds each
part would take at the datasheet rate of the GPU it runs on, and its duration is their
dot product with the coefficients::

    t = c_step                                  per-step overhead (scheduler, launches, sampling), s
      + c_prefill_step                          extra overhead of a step that starts prompts, s
      + c_layers    x layers                    per-layer launch overhead, s
      + c_weights   x weight bytes / bandwidth  streaming the weights the step touches
      + c_linear    x linear FLOPs / peak       the linear layers' matrix work, at the peak of the dtype
                                                the scheme computes in (additive: the fit finds how much
                                                of it the weight streaming does not hide)
      + c_attention x prefill attention FLOPs / peak (16-bit)
      + c_kv        x KV bytes read / bandwidth (at the width the engine release reads; below)
      + c_tokens    x tokens x layers x hidden x 2 FLOPs / peak (16-bit)   per-token work that scales with
                                                the width, not the parameters (see below)
      + c_ar_bytes  x all-reduce bytes / one-direction link bandwidth
      + c_ar_calls  x all-reduces (2 per layer with tensor parallelism), s each
      + c_kernels   x measured kernel seconds (0 here; ``kernel_features.py`` puts the kernel tables' time
                                                there in place of the datasheet terms weights..tokens)

The ``tokens`` term is what prefill costs beyond ``linear``: the fit sets it to ~27,000 (pooled), which
with ``linear`` puts a prefill step's linear layers at 65 % (Llama-3.1-8B) to 76 % (Qwen3-32B, TP2) of
the H100's 16-bit peak, usual prefill utilisations, and far more than the norms, rotary and residual
traffic it was first modelled as (80x those bytes at full bandwidth). So it moves to another GPU with
its 16-bit compute, not its bandwidth: an H200 prefills like an H100 (moved by bandwidth it would
prefill 30 % faster). On the H100s of the calibration the two are the same feature up to a constant,
so the cross-validation cannot tell them apart and is unchanged by the choice; fp8 runs do not want it
at the fp8 peak (CV TTFT 22.9 -> 24.7 %, TPOT 7.8 -> 8.6 % when it was).

KV reads are counted at the cache's own width where the engine release's decode attention reads it
so (``kv_read_at_cache_width``, from ``engine_profiles.EngineProfile.reads_kv_at_cache_width``), and at
16-bit width otherwise: an fp8 cache always doubles capacity (``memory.kv_cache_tokens``), but
TensorRT-LLM 1.0rc3's decode-attention kernels did not run twice as fast on it (counted per byte, its
held-out FP8 group's TPOT error was 17 % against 10 %), while vLLM 0.12's and TensorRT-LLM 1.2's runs
measured at or below the 16-bit bound.

Decode attention is one kernel per layer that reads the cache and multiplies it by the step's queries, so its
time is the larger of the two (``decode_attention_extra_s``). Grouped-query attention's decode multiplies a few
FLOPs per byte read (2 x the group size) and is always bandwidth-bound: the KV read alone. Multi-head latent
attention decodes absorbed: every head attends over the shared latent, ``2 x heads x (kv_lora_rank + rope +
kv_lora_rank)`` FLOPs per cached token and layer against ``kv_lora_rank + rope`` elements read, ~2 x heads FLOPs
per element, so with all 128 of DeepSeek-V3's heads on one GPU (attention data parallelism) it is compute-bound
(deepseek-ai/FlashMLA ``docs/20250422-new-kernel-deep-dive.md`` @ 12cfd32b: "when h_q s_q >= 128 the kernel is
compute-bound", and 660 TFLOPS reached on H800 SXM5, whose 16-bit peak is 990). Those FLOPs are counted at the
16-bit peak times that published efficiency (:data:`DECODE_ATTENTION_EFFICIENCY`) and the excess over the KV
read is added to the ``kv`` feature. With tensor-parallel attention each GPU has ``heads / tp`` heads, but the
kernel's tensor-core tile is 64 query rows (the heads sharing the latent; ``rates.MLA_DECODE_TILE_ROWS``), so a
GPU with fewer than 64 heads computes 64 rows all the same: DeepSeek-V3 at TP 8 (16 heads) pays 4x its heads'
FLOPs, compute-bound again on an H200 (1.8x the FP8 latent's read). Not fitted: no measured MLA run sets it.

The fit keeps every coefficient at or above its physical floor (``step_fit.PHYSICAL_FLOORS``): the
bandwidth and compute terms at 1 (no kernel beats its datasheet), attention at 0.5 (the causal half of
the square its FLOPs count).

Coefficients are dimensionless (1 / achieved fraction of peak) except those in seconds,
so a fit made on H100s moves to another GPU through that GPU's own datasheet figures —
an assumption the provenance states. Because the duration is linear in the coefficients,
a closed-loop benchmark's mean latencies are too (``closed_loop.py``), which makes the fit a
non-negative least-squares problem.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.rates import StepRates
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme

__all__ = [
    "DECODE_ATTENTION_EFFICIENCY",
    "FEATURES",
    "FeatureStepCost",
    "StepFeatureSource",
    "StepFeatures",
    "decode_attention_extra_s",
    "link_bandwidth_one_direction",
]

#: The features, in coefficient order.
FEATURES = (
    "step",
    "prefill_step",
    "layers",
    "weights",
    "linear",
    "attention",
    "kv",
    "tokens",
    "allreduce_bytes",
    "allreduce_calls",
    "kernels",
)
N_FEATURES = len(FEATURES)
_KV = FEATURES.index("kv")
#: Datasheet features leave the measured-kernel feature empty.
_DATASHEET_ZERO = frozenset({FEATURES.index("kernels")})
#: All-reduce features: zero without tensor parallelism.
_ALLREDUCE = frozenset({FEATURES.index("allreduce_bytes"), FEATURES.index("allreduce_calls")})


#: The fraction of the 16-bit tensor-core peak a compute-bound decode attention kernel reaches: FlashMLA's
#: 660 TFLOPS on H800 SXM5 (990 dense bf16) (module docstring).
DECODE_ATTENTION_EFFICIENCY = 660.0 / 990.0


def decode_attention_extra_s(rates: StepRates, kv_read_s_per_token: float) -> float:
    """Seconds per decoded context token by which decode attention's FLOPs outlast its KV read (0 when the read
    binds, as for every grouped-query model): the kernel's time is the larger of the two (module docstring)."""
    compute = rates.decode_attention_flops / (rates.peak16 * DECODE_ATTENTION_EFFICIENCY)
    return max(0.0, compute - kv_read_s_per_token)


def design_seconds(rates: StepRates) -> dict[str, float]:
    """Datasheet seconds of what hybrids and DSA add to a step, all 0 for softmax attention over the whole context:

    - ``_recurrent_token_s`` (attention feature, per token): the recurrent layers' state FLOPs at the 16-bit peak;
    - ``_query_token_s`` (KV feature, per token): DSA's sparse MLA over its top-k keys, the larger of gathering their
      latents and its absorbed FLOPs (``decode_attention_extra_s``'s rule: one kernel, bound by one of the two);
    - ``_state_seq_s`` (KV feature, per sequence in the step): reading and writing its recurrent state once, and
      reading the window layers' ``window`` cached tokens (``rates.StepRates.window_kv_bytes_per_seq``), whose FLOPs
      are per query in ``_query_token_s``.
    """
    query_read = rates.query_kv_bytes / rates.bandwidth
    query_compute = rates.query_attention_flops / (rates.peak16 * DECODE_ATTENTION_EFFICIENCY)
    return {
        "_recurrent_token_s": rates.recurrent_flops_per_token / rates.peak16,
        "_query_token_s": max(query_read, query_compute),
        "_state_seq_s": (2.0 * rates.state_bytes_per_seq + rates.window_kv_bytes_per_seq) / rates.bandwidth,
    }


def link_bandwidth_one_direction(accel: Accelerator) -> float:
    """Bytes/s one GPU sends over its link: the catalog's figure is bidirectional (NVLink 4: 900 GB/s = 2 x 450)."""
    return accel.interconnect.bandwidth_gbps * 1e9 / 2


@dataclass(frozen=True)
class StepFeatures:
    """The per-step features of one configuration (model, scheme, GPU, TP degree, KV dtype), as rates.

    Everything a step's features need beyond its token counts is precomputed here once.
    """

    shape: ModelShape
    method: Scheme
    accel: Accelerator
    tensor_parallel: int = 1
    kv_cache_dtype: str = "auto"
    kv_read_at_cache_width: bool = True
    rates: StepRates = field(init=False, repr=False)
    # The per-token work that scales with the width, and the all-reduces' link bytes and calls (module docstring).
    _token_s: float = field(init=False, repr=False)
    allreduce_per_token_s: float = field(init=False, repr=False)
    allreduce_calls: float = field(init=False, repr=False)
    _kv_token_s: float = field(init=False, repr=False)
    _decode_extra_s: float = field(init=False, repr=False)
    # Designs beyond softmax attention over the whole context (``design_seconds``): 0 for every other model.
    _recurrent_token_s: float = field(init=False, repr=False)
    _query_token_s: float = field(init=False, repr=False)
    _state_seq_s: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tp, shape = self.tensor_parallel, self.shape
        rates = StepRates(shape, self.method, self.accel, tp, self._kv_read_dtype())
        ring, link = 2.0 * (tp - 1) / tp, link_bandwidth_one_direction(self.accel)
        values = {
            "rates": rates,
            "_token_s": shape.n_layers * shape.hidden * 2.0 / tp / rates.peak16,
            # ring bytes over the link's one-direction rate, s per token of a step
            "allreduce_per_token_s": 2 * shape.n_layers * shape.hidden * 2.0 * ring / link,
            # 2 per layer with tensor parallelism, else 0
            "allreduce_calls": 2.0 * shape.n_layers if tp > 1 else 0.0,
            "_kv_token_s": rates.kv_bytes_per_token / rates.bandwidth,
            "_decode_extra_s": decode_attention_extra_s(rates, rates.kv_bytes_per_token / rates.bandwidth),
            **design_seconds(rates),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def always_zero(self) -> frozenset[int]:
        return _DATASHEET_ZERO | (_ALLREDUCE if self.tensor_parallel == 1 else frozenset())

    def _kv_read_dtype(self) -> str:
        """The width decode attention pays per KV element read (module docstring)."""
        return self.kv_cache_dtype if self.kv_read_at_cache_width else "auto"

    def of_step(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> np.ndarray:
        """The features of one step (see the module docstring), seconds at datasheet rates."""
        r, tokens = self.rates, chunks.tokens + decode_seqs
        linear = (tokens * r.body_flops_per_token + (chunks.seqs + decode_seqs) * r.head_flops_per_seq) / r.peak
        return np.array(
            [
                1.0,
                1.0 if chunks.seqs else 0.0,
                float(self.shape.n_layers),
                r.weight_bytes_at(tokens) / r.bandwidth,
                linear,
                r.attention_flops / r.peak16 * (chunks.sum_sq + chunks.sum_cross) + self._recurrent_token_s * tokens,
                self._kv_token_s * context_tokens
                + self._decode_extra_s * (context_tokens - chunks.prior_tokens)
                + self._query_token_s * tokens
                + self._state_seq_s * (chunks.seqs + decode_seqs),
                self._token_s * tokens,
                self.allreduce_per_token_s * tokens,
                self.allreduce_calls,
                0.0,  # measured kernel seconds: ``kernel_features.KernelStepFeatures`` fills it, the datasheet does not
            ]
        )

    def step_seconds(
        self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int, coefficients: Sequence[float]
    ) -> float:
        """``of_step(...) @ coefficients`` in plain floats: the simulator prices millions of steps, and a feature
        row as a NumPy array costs more than the arithmetic (equal to it up to the order of the sums)."""
        c, r, tokens = coefficients, self.rates, chunks.tokens + decode_seqs
        linear = (tokens * r.body_flops_per_token + (chunks.seqs + decode_seqs) * r.head_flops_per_seq) / r.peak
        return (
            c[0]
            + (c[1] if chunks.seqs else 0.0)
            + c[2] * self.shape.n_layers
            + c[3] * (r.weight_bytes_at(tokens) / r.bandwidth)
            + c[4] * linear
            + c[5]
            * (r.attention_flops / r.peak16 * (chunks.sum_sq + chunks.sum_cross) + self._recurrent_token_s * tokens)
            + c[6]
            * (
                self._kv_token_s * context_tokens
                + self._decode_extra_s * (context_tokens - chunks.prior_tokens)
                + self._query_token_s * tokens
                + self._state_seq_s * (chunks.seqs + decode_seqs)
            )
            + c[7] * (self._token_s * tokens)
            + c[8] * (self.allreduce_per_token_s * tokens)
            + c[9] * self.allreduce_calls
        )

    def decode_line(self, decode_seqs: int, coefficients: Sequence[float]) -> tuple[float, float]:
        """A pure-decode step of `decode_seqs` sequences as (intercept, slope per context token): ``step_seconds``
        with no prefill chunk, which is linear in the context."""
        c, r, n = coefficients, self.rates, decode_seqs
        linear = (n * r.body_flops_per_token + n * r.head_flops_per_seq) / r.peak
        intercept = (
            c[0]
            + c[2] * self.shape.n_layers
            + c[3] * (r.weight_bytes_at(n) / r.bandwidth)
            + c[4] * linear
            + c[7] * (self._token_s * n)
            + c[8] * (self.allreduce_per_token_s * n)
            + c[9] * self.allreduce_calls
        )
        if self._per_seq_design_s:  # a hybrid's state or DSA's top-k: seconds per decoder, whatever its context
            intercept += c[5] * self._recurrent_token_s * n + c[6] * (self._query_token_s + self._state_seq_s) * n
        return intercept, c[6] * (self._kv_token_s + self._decode_extra_s)

    @property
    def _per_seq_design_s(self) -> bool:
        return bool(self._recurrent_token_s or self._query_token_s or self._state_seq_s)

    def of_decode_steps(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        """Features of many pure-decode steps (one row each)."""
        rows = np.tile(self.of_step(PrefillChunks(), decode_seqs, 0), (len(context_tokens), 1))
        rows[:, _KV] = (self._kv_token_s + self._decode_extra_s) * context_tokens
        if self._per_seq_design_s:
            rows[:, _KV] += (self._query_token_s + self._state_seq_s) * decode_seqs
        return rows


class StepFeatureSource(Protocol):
    """What a calibrated step cost reads: a configuration's features per step (datasheet ``StepFeatures`` or
    measured kernels, ``kernel_features.KernelStepFeatures``) and the configuration itself."""

    @property
    def shape(self) -> ModelShape: ...
    @property
    def method(self) -> Scheme: ...
    @property
    def accel(self) -> Accelerator: ...
    @property
    def tensor_parallel(self) -> int: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def kv_read_at_cache_width(self) -> bool: ...
    @property
    def always_zero(self) -> frozenset[int]:
        """Indices of features this source never fills (the fit skips their replays)."""
        ...

    def of_step(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> np.ndarray: ...
    def of_decode_steps(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class FeatureStepCost:
    """Step times as coefficients x features: the calibrated step-cost model (and, with unit coefficients, a probe).

    Implements the scheduler's ``StepCostModel``, ``PrefillAwareStepCostModel``, ``VectorStepCostModel`` and
    ``FastDecodeStepCostModel``. ``floor_s`` keeps every step strictly positive (the scheduler
    divides by step times); the fit passes a negligible one when it isolates one feature.
    """

    features: StepFeatureSource
    coefficients: np.ndarray
    provenance: Provenance
    floor_s: float = 0.0

    #: The coefficients as plain floats, for the per-step path (``step_seconds`` of a feature source).
    _floats: tuple[float, ...] = field(init=False, repr=False, compare=False)
    #: ``decode_stepper``'s answers by (decode_seqs, factor): the simulator asks for the same few batch sizes often.
    #: The compiled forms of this cost by (max tokens, max seqs) (``compiled_cost.compile_step_cost``): built once
    #: per configuration, read by every simulation of it.
    compiled_forms: dict[tuple[int, int], object] = field(default_factory=dict, init=False, repr=False, compare=False)
    _steppers: dict[tuple[int, float], Callable[[int], float] | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.coefficients.shape != (N_FEATURES,) or np.any(self.coefficients < 0):
            raise ValueError(f"need {N_FEATURES} non-negative coefficients, got {self.coefficients}")
        object.__setattr__(self, "_floats", tuple(float(x) for x in self.coefficients))

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        fast = getattr(self.features, "step_seconds", None)  # a source that prices a step without a feature row
        if fast is not None:
            return float(fast(chunks, decode_seqs, context_tokens, self._floats)) + self.floor_s
        return float(self.features.of_step(chunks, decode_seqs, context_tokens) @ self.coefficients) + self.floor_s

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        seconds: np.ndarray = self.features.of_decode_steps(decode_seqs, context_tokens) @ self.coefficients
        return seconds + self.floor_s

    def decode_line(self, decode_seqs: int) -> tuple[float, float] | None:
        line = getattr(self.features, "decode_line", None)  # datasheet features; measured kernels interpolate
        if line is None:
            return None
        intercept, slope = line(decode_seqs, self._floats)
        return float(intercept) + self.floor_s, float(slope)

    def decode_stepper(self, decode_seqs: int, factor: float = 1.0) -> Callable[[int], float] | None:
        """A pure-decode step of `decode_seqs` sequences as a function of its context, x `factor` (the upper
        step's), equal to ``step_seconds(0, decode_seqs, context) x factor``; measured kernels only (the datasheet's
        step is a ``decode_line``)."""
        key = (decode_seqs, factor)
        if key not in self._steppers:
            stepper = getattr(self.features, "decode_stepper", None)
            found: Callable[[int], float] | None = None
            if stepper is not None and decode_seqs > 0:
                found = stepper(decode_seqs, self._floats, self.floor_s, factor)
            self._steppers[key] = found
        return self._steppers[key]
