"""A discrete-event simulator of continuous batching: P99 latencies under queueing.

A steady-state formula gives averages at saturation and no queueing variance, but the
SLAs are P99s and traffic is bursty: whether a configuration holds its
P99 TTFT at a given rate depends on how requests queue, how prefills interleave with
decodes, and when the KV cache runs out. This module replays a workload through a
scheduler modelled on vLLM v1 and reads the percentiles off the simulated requests.

What is modelled, per scheduler step (one forward pass):

* running sequences first: every decoding sequence gets one token; partially prefilled
  ones get the next chunk of their prompt; then, if nothing was preempted this step,
  waiting requests are admitted first-come-first-served while ``max_num_seqs`` and the
  token budget ``max_num_batched_tokens`` allow;
* the KV cache is paged in blocks of 16 tokens; a sequence holds
  ``ceil((prompt + generated) / 16)`` blocks; when a step's sequences do not fit, the
  newest running sequence is preempted (recompute: its blocks are freed, it goes back to
  the front of the queue and later prefills its prompt and generated tokens again);
* the step's duration comes from a :class:`StepCostModel`: the roofline physics of
  ``roofline.py`` for catalog GPUs, or interpolated measurements for the local device.

Decoding sequences are kept as aggregates (a step counter, the sum of their contexts and
a histogram of their lengths modulo the block size), so a step costs O(1) in the number
of running sequences, and stretches of pure decode between events (an arrival that could
be admitted, a completion, a full cache) are advanced in one vectorised jump. That keeps
10,000 requests well under a second.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from recommender.perf.memory import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    kv_bytes_per_token_per_device,
    plan_memory,
    weight_bytes,
)
from recommender.perf.roofline import Efficiency, _allreduce_s, _compute_dtype

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from recommender.perf.catalog import Accelerator
    from recommender.perf.shape import ModelShape
    from recommender.quantize import QuantMethod
    from recommender.spec import Traffic

__all__ = [
    "LengthDist",
    "Percentiles",
    "RateSearch",
    "RooflineStepCost",
    "SchedulerConfig",
    "SimulationResult",
    "StepCostModel",
    "TableStepCost",
    "VectorStepCostModel",
    "Workload",
    "kv_cache_tokens",
    "make_workload",
    "max_rate_within_sla",
    "replicas_needed",
    "simulate",
    "workload_from_traffic",
]

BLOCK_SIZE = 16
WARMUP_FRACTION = 0.1


# --------------------------------------------------------------------------- step costs


@runtime_checkable
class StepCostModel(Protocol):
    """The duration of one forward pass, from what the scheduler put into it.

    Args:
        prefill_tokens: prompt tokens (chunks) computed in the step, all sequences together.
        decode_seqs: sequences generating one token each in the step.
        context_tokens: KV-cache tokens the step's sequences read: each decoding sequence's
            length, plus the tokens an earlier chunk of a prefilling sequence left in the cache.
    """

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float: ...


@runtime_checkable
class VectorStepCostModel(StepCostModel, Protocol):
    """Optional: many pure-decode steps at once, so long decode stretches cost one numpy call."""

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class RooflineStepCost:
    """Roofline step times on a catalog accelerator, with the physics of ``roofline.py``.

    A step streams the weights and the KV it reads once (bytes over bandwidth) and does
    2 x params FLOPs per token plus attention (FLOPs over peak); the larger bound, the
    per-step overhead and, for tensor parallelism, two all-reduces per layer. For a lone
    prompt or a pure decode batch this equals ``project_step_times``. In a mixed step a
    chunk's attention to its own tokens is counted as in ``roofline.py``; its attention to
    earlier chunks is counted as KV bytes read and as one query per cached token, which
    undercounts attention FLOPs for prompts longer than the token budget.
    """

    shape: ModelShape
    method: QuantMethod
    accel: Accelerator
    tensor_parallel: int = 1
    kv_cache_dtype: str = "auto"
    efficiency: Efficiency = field(default_factory=Efficiency)
    _bandwidth: float = field(init=False, repr=False)
    _compute: float = field(init=False, repr=False)
    _weights: float = field(init=False, repr=False)
    _linear_flops_per_token: float = field(init=False, repr=False)
    _attn_flops: float = field(init=False, repr=False)
    _kv_bytes_per_token: float = field(init=False, repr=False)
    _allreduce_fixed_s: float = field(init=False, repr=False)
    _allreduce_per_token_s: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tp, eff, shape = self.tensor_parallel, self.efficiency, self.shape
        if tp < 1:
            raise ValueError(f"tensor_parallel must be >= 1, got {tp}")
        fixed = _allreduce_s(shape, self.accel, 0, tp, eff)
        values = {
            "_bandwidth": self.accel.memory_bandwidth_gbps * 1e9 * eff.bandwidth,
            "_compute": self.accel.peak_flops(_compute_dtype(self.method, self.accel)) * eff.compute,
            "_weights": weight_bytes(shape, self.method) / tp,
            "_linear_flops_per_token": 2.0 * (shape.body_params + shape.lm_head_params) / tp,
            "_attn_flops": shape.attention_flops(1, 1) / tp,
            "_kv_bytes_per_token": kv_bytes_per_token_per_device(shape, self.kv_cache_dtype, tp),
            # _allreduce_s is affine in the token count: keep its intercept and slope.
            "_allreduce_fixed_s": fixed,
            "_allreduce_per_token_s": _allreduce_s(shape, self.accel, 1, tp, eff) - fixed,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def provenance(self) -> str:
        return f"modeled: roofline on catalog entry {self.accel.key}, {self.efficiency.label()}"

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        tokens = prefill_tokens + decode_seqs
        flops = tokens * self._linear_flops_per_token + self._attn_flops * (
            prefill_tokens * prefill_tokens + context_tokens
        )
        moved = self._weights + context_tokens * self._kv_bytes_per_token
        seconds = max(flops / self._compute, moved / self._bandwidth) + self.efficiency.step_overhead_s
        if self.tensor_parallel > 1:
            seconds += self._allreduce_fixed_s + self._allreduce_per_token_s * tokens
        return seconds

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        flops = decode_seqs * self._linear_flops_per_token + self._attn_flops * context_tokens
        moved = self._weights + context_tokens * self._kv_bytes_per_token
        seconds = np.maximum(flops / self._compute, moved / self._bandwidth) + self.efficiency.step_overhead_s
        if self.tensor_parallel > 1:
            seconds += self._allreduce_fixed_s + self._allreduce_per_token_s * decode_seqs
        return seconds


def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    """Linear interpolation; clamped below the first point, proportional above the last."""
    if x > xs[-1]:
        return float(ys[-1] * x / xs[-1])
    return float(np.interp(x, xs, ys))


@dataclass(frozen=True)
class TableStepCost:
    """Step times interpolated from measurements on the local device (``probe.py`` figures).

    Prefill seconds are measured per prompt length, decode seconds per batch size, each at
    the probe's context, so ``context_tokens`` is ignored. A mixed step costs the larger of
    a prefill of all its tokens and the decode of its sequences. Below the smallest
    measured point the first value holds (fixed costs dominate); above the largest, time
    grows in proportion (conservative for decode, about right for compute-bound prefill).
    """

    prefill: Mapping[int, float]
    decode: Mapping[int, float]
    provenance: str = "measured: local device"
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


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class LengthDist:
    """Token lengths: fixed at ``mean`` when ``cv`` is 0, else lognormal with that mean and CV.

    Real prompt and output lengths are right-skewed; a lognormal with a coefficient of
    variation is the usual two-number description. Draws are rounded and clipped to
    ``[1, maximum]``.
    """

    mean: float
    cv: float = 0.0
    maximum: int | None = None

    def __post_init__(self) -> None:
        if self.mean < 1 or self.cv < 0 or (self.maximum is not None and self.maximum < 1):
            raise ValueError(f"need mean >= 1, cv >= 0 and maximum >= 1, got {self}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.cv == 0:
            values = np.full(n, round(self.mean), dtype=np.int64)
        else:
            sigma2 = math.log1p(self.cv**2)
            draws = rng.lognormal(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2), n)
            values = np.rint(draws).astype(np.int64)
        return np.clip(values, 1, self.maximum if self.maximum is not None else None)


@dataclass(frozen=True)
class Workload:
    """Requests in arrival order: arrival times (s) and prompt and output lengths (tokens)."""

    arrivals_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.arrivals_s)
        if n == 0 or len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise ValueError("a workload needs at least one request and one length of each kind per request")
        if np.any(np.diff(self.arrivals_s) < 0) or self.arrivals_s[0] < 0:
            raise ValueError("arrival times must be non-negative and sorted")
        if self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1:
            raise ValueError("prompt and output lengths must be >= 1")

    def __len__(self) -> int:
        return len(self.arrivals_s)

    def at_rate(self, rate: float) -> Workload:
        """The same requests with inter-arrival times scaled so the mean rate is `rate` (common random numbers)."""
        span = self.arrivals_s[-1]
        if span <= 0:
            raise ValueError("cannot rescale a workload whose requests all arrive at once")
        current = (len(self) - 1) / span
        return replace(self, arrivals_s=self.arrivals_s * (current / rate))


def make_workload(
    *,
    prompt: int | LengthDist,
    output: int | LengthDist,
    n_requests: int | None = None,
    rate: float | None = None,
    arrivals: Sequence[float] | np.ndarray | None = None,
    seed: int = 0,
) -> Workload:
    """Poisson arrivals at `rate` (requests/s), or the trace `arrivals`; lengths fixed or drawn.

    Arrival gaps and each length come from independent streams of one seed, so changing
    the rate leaves the lengths alone (the rate search compares like with like).
    """
    if (rate is None) == (arrivals is None):
        raise ValueError("give exactly one of rate (Poisson arrivals) or arrivals (a trace)")
    arrival_rng, prompt_rng, output_rng = np.random.default_rng(seed).spawn(3)
    if arrivals is not None:
        times = np.sort(np.asarray(arrivals, dtype=float))
        if n_requests is not None and n_requests != len(times):
            raise ValueError(f"n_requests={n_requests} but the trace has {len(times)} arrivals")
    else:
        if n_requests is None or n_requests < 1 or rate is None or rate <= 0:
            raise ValueError("Poisson arrivals need n_requests >= 1 and rate > 0")
        times = np.cumsum(arrival_rng.standard_exponential(n_requests)) / rate
        times -= times[0]
    n = len(times)
    prompt_dist = prompt if isinstance(prompt, LengthDist) else LengthDist(prompt)
    output_dist = output if isinstance(output, LengthDist) else LengthDist(output)
    return Workload(times, prompt_dist.sample(n, prompt_rng), output_dist.sample(n, output_rng))


def workload_from_traffic(traffic: Traffic, *, n_requests: int, length_cv: float = 0.0, seed: int = 0) -> Workload:
    """Poisson arrivals at the spec's rate, lengths around its prompt and output means."""
    return make_workload(
        prompt=LengthDist(traffic.prompt_tokens, length_cv),
        output=LengthDist(traffic.output_tokens, length_cv),
        n_requests=n_requests,
        rate=traffic.requests_per_second,
        seed=seed,
    )


# --------------------------------------------------------------------------- scheduler


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """The serving engine's batching knobs, named as vLLM names them.

    Args:
        kv_cache_tokens: KV-cache capacity in tokens (see :func:`kv_cache_tokens`).
        max_num_seqs: most sequences running at once.
        max_num_batched_tokens: tokens per step, decodes (one each) and prefill chunks together.
        chunked_prefill: split prompts across steps; off, a prompt runs whole, one per step.
        block_size: tokens per KV-cache block.
    """

    kv_cache_tokens: int
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    block_size: int = BLOCK_SIZE

    def __post_init__(self) -> None:
        if min(self.max_num_seqs, self.max_num_batched_tokens, self.block_size) < 1:
            raise ValueError(f"scheduler limits must be >= 1: {self}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= max_num_seqs "
                f"({self.max_num_seqs}), as vLLM requires"
            )
        if self.kv_blocks < 1:
            raise ValueError(f"KV cache of {self.kv_cache_tokens} tokens holds no {self.block_size}-token block")

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size


def kv_cache_tokens(
    shape: ModelShape,
    method: QuantMethod,
    accel: Accelerator,
    *,
    tensor_parallel: int = 1,
    memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    kv_cache_dtype: str = "auto",
) -> int:
    """Tokens of KV cache that fit per replica beside weights, activations and runtime (``memory.py``)."""
    return plan_memory(
        shape,
        method,
        device_gb=accel.memory_gb,
        memory_utilization=memory_utilization,
        tensor_parallel=tensor_parallel,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        kv_cache_dtype=kv_cache_dtype,
    ).kv_cache_tokens


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Percentiles:
    """P50, P95 and P99 of one latency, in milliseconds."""

    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, seconds: np.ndarray) -> Percentiles:
        finite = seconds[~np.isnan(seconds)]
        if finite.size == 0:
            return cls(math.nan, math.nan, math.nan)
        p50, p95, p99 = np.percentile(finite, [50, 95, 99]) * 1e3
        return cls(float(p50), float(p95), float(p99))


@dataclass(frozen=True)
class SimulationResult:
    """Per-request latencies (seconds, arrival order), their percentiles (ms), and throughput.

    Percentiles skip the first 10 % of requests (warm-up, while the batch fills). TPOT is
    NaN for one-token outputs. Goodput counts every request meeting both SLAs, over the
    simulated duration, and is None when no SLA was given.
    """

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    output_tokens_per_s: float
    total_tokens_per_s: float
    goodput_rps: float | None
    preemptions: int
    duration_s: float
    steps: int
    max_step_tokens: int

    @property
    def n_requests(self) -> int:
        return len(self.ttft_s)

    def meets(self, *, ttft_p99_ms: float, tpot_p99_ms: float) -> bool:
        """Whether P99 TTFT and P99 TPOT are within the SLA (a NaN TPOT, all one-token outputs, passes)."""
        return self.ttft_ms.p99 <= ttft_p99_ms and not self.tpot_ms.p99 > tpot_p99_ms


# --------------------------------------------------------------------------- the simulator

_WAITING, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3


def _validate(workload: Workload, config: SchedulerConfig) -> None:
    longest = int((workload.prompt_tokens + workload.output_tokens - 1).max())
    if -(-longest // config.block_size) > config.kv_blocks:
        raise ValueError(
            f"a request of {longest} tokens needs more KV cache than the {config.kv_blocks * config.block_size} "
            "tokens available; it could never run"
        )
    if not config.chunked_prefill and longest > config.max_num_batched_tokens:
        raise ValueError(
            f"without chunked prefill max_num_batched_tokens ({config.max_num_batched_tokens}) must cover the "
            f"longest sequence ({longest} tokens), as vLLM requires of max_model_len"
        )


def simulate(
    cost: StepCostModel,
    workload: Workload,
    config: SchedulerConfig,
    *,
    ttft_sla_ms: float | None = None,
    tpot_sla_ms: float | None = None,
) -> SimulationResult:
    """Serve `workload` with `config`'s scheduler, step durations from `cost`; every request completes."""
    _validate(workload, config)
    bs = config.block_size
    cap = config.kv_blocks
    max_seqs = config.max_num_seqs
    budget_max = config.max_num_batched_tokens
    chunked = config.chunked_prefill
    vector_cost = cost if isinstance(cost, VectorStepCostModel) else None

    arrivals = workload.arrivals_s.tolist()
    prompts = workload.prompt_tokens.tolist()
    outputs = workload.output_tokens.tolist()
    n_req = len(arrivals)
    first_token = [math.nan] * n_req
    finish = [math.nan] * n_req
    state = [_WAITING] * n_req
    generated = [0] * n_req  # tokens sampled so far (valid while not decoding)
    computed = [0] * n_req  # prefill progress (prefilling only)
    held = [0] * n_req  # blocks held (prefilling only; decoders are in the aggregate)
    offset = [0] * n_req  # decoding: length at step counter d is offset + d
    finish_step = [0] * n_req  # decoding: the step counter of the step that samples the last token

    running: dict[int, None] = {}  # admission order: the last key is the newest
    prefilling: dict[int, None] = {}
    waiting: deque[int] = deque()
    completions: list[tuple[int, int]] = []  # heap of (finish_step, rid) for decoders, lazily invalidated

    # Decoders as aggregates: with length L_i = offset_i + d at step d, blocks needed are
    # sum ceil(L_i / bs) = q_sum + sum_r hist[r] * ceil((r + d) / bs), offset_i = q_i * bs + r_i.
    n_dec = 0
    offset_sum = 0
    q_sum = 0
    hist = [0] * bs
    held_prefill = 0
    d = 0  # step counter

    def decode_blocks(step: int) -> int:
        return _blocks_at(step, n_dec, q_sum, hist, bs)

    def drop_decoder(rid: int) -> None:
        nonlocal n_dec, offset_sum, q_sum
        o = offset[rid]
        n_dec -= 1
        offset_sum -= o
        q_sum -= o // bs
        hist[o % bs] -= 1
        del running[rid]

    def finish_decoders(step: int) -> None:
        """Retire the decoders whose last token was sampled by the step with counter `step`, at time t."""
        while completions and completions[0][0] <= step:
            _, rid = heapq.heappop(completions)
            if state[rid] == _DECODE and finish_step[rid] == step:
                state[rid] = _DONE
                finish[rid] = t
                drop_decoder(rid)

    preempted = False

    def preempt_newest() -> int:
        """Recompute preemption of the newest running request; returns its id."""
        nonlocal held_prefill, preemptions, preempted
        rid = next(reversed(running))
        if state[rid] == _DECODE:
            generated[rid] = offset[rid] + d - prompts[rid]
            drop_decoder(rid)
        else:
            del running[rid]
            del prefilling[rid]
            held_prefill -= held[rid]
            held[rid] = 0
            computed[rid] = 0
        state[rid] = _WAITING
        waiting.appendleft(rid)
        preemptions += 1
        preempted = True
        return rid

    t = 0.0
    nxt = 0  # next request to arrive
    preemptions = 0
    steps = 0
    max_step_tokens = 0

    while True:
        while nxt < n_req and arrivals[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not running and not waiting:
            if nxt == n_req:
                break
            t = arrivals[nxt]
            continue

        # ---- fast path: a stretch of pure decode steps in which nothing else can happen
        if n_dec and not prefilling:
            budget_left = budget_max - n_dec
            blocked = len(running) >= max_seqs or budget_left <= 0
            if not blocked and waiting:
                head = waiting[0]
                need = prompts[head] + generated[head]
                chunk = min(need, budget_left) if chunked else need
                blocked = chunk > budget_left or -(-chunk // bs) > cap - decode_blocks(d)
            if blocked or not waiting:
                while completions and (
                    state[completions[0][1]] != _DECODE or finish_step[completions[0][1]] != completions[0][0]
                ):
                    heapq.heappop(completions)
                horizon = completions[0][0] - d + 1  # steps up to and including the next completion
                if horizon >= 2:
                    run = _decode_run(
                        cost, vector_cost, t, d, horizon, n_dec, offset_sum, q_sum, hist, bs, cap,
                        arrivals[nxt] if (nxt < n_req and not blocked) else math.inf,
                    )  # fmt: skip
                    if run is not None:
                        k, elapsed = run
                        t += elapsed
                        d += k
                        steps += k
                        max_step_tokens = max(max_step_tokens, n_dec)
                        if k == horizon:
                            finish_decoders(d - 1)
                        continue

        # ---- one scheduler step
        budget = budget_max - n_dec
        preempted = False

        while decode_blocks(d) + held_prefill > cap:
            victim_was_decoding = state[next(reversed(running))] == _DECODE
            preempt_newest()
            if victim_was_decoding:
                budget += 1

        chunks: list[tuple[int, int]] = []
        prefill_tokens = 0
        prior_context = 0
        preempted_self = False  # as in vLLM, a request preempting itself ends this step's scheduling
        for rid in list(prefilling):
            if budget <= 0 or preempted_self:
                break
            if rid not in prefilling:
                continue
            remaining = prompts[rid] + generated[rid] - computed[rid]
            chunk = min(remaining, budget)
            if not chunked and chunk < remaining:
                continue
            need = -(-(computed[rid] + chunk) // bs) - held[rid]
            while need > cap - decode_blocks(d) - held_prefill:
                victim_was_decoding = state[next(reversed(running))] == _DECODE
                if preempt_newest() == rid:
                    preempted_self = True
                    break
                if victim_was_decoding:
                    budget += 1
            else:
                held[rid] += need
                held_prefill += need
                budget -= chunk
                chunks.append((rid, chunk))
                prefill_tokens += chunk
                prior_context += computed[rid]

        if not preempted:
            while waiting and budget > 0 and len(running) < max_seqs:
                rid = waiting[0]
                need_tokens = prompts[rid] + generated[rid]
                chunk = min(need_tokens, budget)
                if not chunked and chunk < need_tokens:
                    break
                blocks = -(-chunk // bs)
                if blocks > cap - decode_blocks(d) - held_prefill:
                    break
                waiting.popleft()
                state[rid] = _PREFILL
                running[rid] = None
                prefilling[rid] = None
                computed[rid] = 0
                held[rid] = blocks
                held_prefill += blocks
                budget -= chunk
                chunks.append((rid, chunk))
                prefill_tokens += chunk
                if not chunked:
                    break

        if not chunks and not n_dec:
            if preempted:
                continue  # the preempted requests are admitted again next step
            raise RuntimeError("scheduler stalled: nothing runnable")  # _validate rules this out

        context = offset_sum + n_dec * d + prior_context
        t += cost.step_seconds(prefill_tokens, n_dec, context)
        steps += 1
        max_step_tokens = max(max_step_tokens, prefill_tokens + n_dec)

        # decoders that sampled their last token in this step
        finish_decoders(d)
        d += 1

        # prefills that reached the end of their tokens sample one
        for rid, chunk in chunks:
            computed[rid] += chunk
            length = prompts[rid] + generated[rid]
            if computed[rid] < length:
                continue
            generated[rid] += 1
            if generated[rid] == 1:
                first_token[rid] = t
            del prefilling[rid]
            held_prefill -= held[rid]
            held[rid] = 0
            if generated[rid] == outputs[rid]:
                state[rid] = _DONE
                finish[rid] = t
                del running[rid]
                continue
            # next step (counter d) reads length + 1 tokens
            o = length + 1 - d
            state[rid] = _DECODE
            offset[rid] = o
            finish_step[rid] = outputs[rid] + prompts[rid] - 1 - o
            heapq.heappush(completions, (finish_step[rid], rid))
            n_dec += 1
            offset_sum += o
            q_sum += o // bs
            hist[o % bs] += 1

    return _result(workload, first_token, finish, preemptions, steps, max_step_tokens, ttft_sla_ms, tpot_sla_ms)


def _blocks_at(step: int, n_dec: int, q_sum: int, hist: list[int], bs: int) -> int:
    """KV blocks the decoders need at step counter `step`: sum_i ceil((offset_i + step) / bs).

    With offset_i = q_i * bs + r_i and step = a * bs + m, each term is q_i + a + ceil((r_i + m) / bs),
    and for r, m < bs that ceiling is 0 when r + m == 0, 2 when r + m > bs, else 1.
    """
    if not n_dec:
        return 0
    a, m = divmod(step, bs)
    extra = n_dec - (hist[0] if m == 0 else 0) + (sum(hist[bs + 1 - m :]) if m >= 2 else 0)
    return q_sum + n_dec * a + extra


_VECTOR_MIN_STEPS = 32  # below this, a Python loop over scalar step costs beats numpy's call overhead


def _decode_run(
    cost: StepCostModel,
    vector_cost: VectorStepCostModel | None,
    t: float,
    d: int,
    horizon: int,
    n_dec: int,
    offset_sum: int,
    q_sum: int,
    hist: list[int],
    bs: int,
    cap: int,
    next_arrival: float,
) -> tuple[int, float] | None:
    """How many pure decode steps (at most `horizon`) run before the cache fills or `next_arrival`, and their time.

    None when fewer than two steps qualify (the caller takes one ordinary step instead).
    """
    first = cost.step_seconds(0, n_dec, offset_sum + n_dec * d)
    if next_arrival < math.inf:
        # Steps grow with context, so at most this many start before the arrival.
        horizon = min(horizon, int((next_arrival - t) / first) + 1)
    if horizon < 2:
        return None
    # Blocks needed never decrease as the decoders grow: bisect for the last step that fits.
    if _blocks_at(d + horizon - 1, n_dec, q_sum, hist, bs) > cap:
        lo, hi = 0, horizon - 1  # step d + lo fits, step d + hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _blocks_at(d + mid, n_dec, q_sum, hist, bs) <= cap:
                lo = mid
            else:
                hi = mid
        horizon = hi
        if horizon < 2:
            return None
    if vector_cost is not None and horizon >= _VECTOR_MIN_STEPS:
        contexts = offset_sum + n_dec * np.arange(d, d + horizon, dtype=np.int64)
        ends = t + np.cumsum(vector_cost.decode_steps_seconds(n_dec, contexts))
        k = horizon
        if next_arrival < math.inf:
            # step j starts at ends[j - 1]; it may run only while the arrival is still in the future
            k = min(k, 1 + int(np.searchsorted(ends[:-1], next_arrival, side="left")))
        return (k, float(ends[k - 1] - t)) if k >= 2 else None
    elapsed = first
    k = 1
    while k < horizon and t + elapsed < next_arrival:
        elapsed += cost.step_seconds(0, n_dec, offset_sum + n_dec * (d + k))
        k += 1
    return (k, elapsed) if k >= 2 else None


def _result(
    workload: Workload,
    first_token: list[float],
    finish: list[float],
    preemptions: int,
    steps: int,
    max_step_tokens: int,
    ttft_sla_ms: float | None,
    tpot_sla_ms: float | None,
) -> SimulationResult:
    arrivals = workload.arrivals_s
    first = np.asarray(first_token)
    done = np.asarray(finish)
    ttft = first - arrivals
    e2e = done - arrivals
    outputs = workload.output_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outputs > 1, (done - first) / (outputs - 1), math.nan)
    measured = slice(int(len(arrivals) * WARMUP_FRACTION), None)
    duration = float(done.max() - arrivals[0])
    out_total = float(outputs.sum())
    goodput = None
    if ttft_sla_ms is not None or tpot_sla_ms is not None:
        ok = np.ones(len(arrivals), dtype=bool)
        if ttft_sla_ms is not None:
            ok &= ttft * 1e3 <= ttft_sla_ms
        if tpot_sla_ms is not None:
            ok &= np.isnan(tpot) | (tpot * 1e3 <= tpot_sla_ms)
        goodput = float(ok.sum() / duration) if duration > 0 else math.nan
    return SimulationResult(
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        ttft_ms=Percentiles.of(ttft[measured]),
        tpot_ms=Percentiles.of(tpot[measured]),
        e2e_ms=Percentiles.of(e2e[measured]),
        output_tokens_per_s=out_total / duration if duration > 0 else math.nan,
        total_tokens_per_s=(out_total + float(workload.prompt_tokens.sum())) / duration if duration > 0 else math.nan,
        goodput_rps=goodput,
        preemptions=preemptions,
        duration_s=duration,
        steps=steps,
        max_step_tokens=max_step_tokens,
    )


# --------------------------------------------------------------------------- capacity


@dataclass(frozen=True)
class RateSearch:
    """The highest arrival rate found within the SLA, the simulation there, and how many runs it took.

    ``rate_per_s`` is 0.0 (and ``result`` None) when even a lone request misses the SLA.
    """

    rate_per_s: float
    result: SimulationResult | None
    evaluations: int


def max_rate_within_sla(
    cost: StepCostModel,
    config: SchedulerConfig,
    *,
    prompt: int | LengthDist,
    output: int | LengthDist,
    ttft_p99_ms: float,
    tpot_p99_ms: float,
    n_requests: int = 2000,
    seed: int = 0,
    rel_tol: float = 0.02,
) -> RateSearch:
    """Bisect the Poisson arrival rate for the highest one whose P99 TTFT and P99 TPOT meet the SLA.

    Every rate replays the same requests (``make_workload`` with the same seed: same lengths,
    the same arrival gaps rescaled), so the comparison between rates is not blurred by
    sampling noise, and ``make_workload(rate=search.rate_per_s, ...)`` reproduces ``result``.
    The search brackets the rate between a trickle and the batch's decode-only throughput
    (an upper bound on any sustainable rate), then narrows the bracket until it is within
    `rel_tol` of its upper end.
    P99s near capacity rise steeply (queueing), so a rate a few percent above the answer
    can already miss the SLA.
    """
    evaluations = 0

    def workload(rate: float) -> Workload:
        return make_workload(prompt=prompt, output=output, n_requests=n_requests, rate=rate, seed=seed)

    def run(rate: float) -> SimulationResult:
        nonlocal evaluations
        evaluations += 1
        return simulate(cost, workload(rate), config)

    def ok(result: SimulationResult) -> bool:
        return result.meets(ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=tpot_p99_ms)

    unit = workload(1.0)
    mean_prompt = float(unit.prompt_tokens.mean())
    mean_output = float(unit.output_tokens.mean())
    batch = config.max_num_seqs
    step = cost.step_seconds(0, batch, int(batch * (mean_prompt + mean_output / 2)))
    guess = batch / (mean_output * step)

    probe = run(guess / 1000)
    if not ok(probe):
        return RateSearch(0.0, None, evaluations)
    lo, lo_result = guess / 1000, probe
    # `guess` is the decode-only throughput of a full batch: no rate above it is sustainable,
    # however loose the SLA (a finite simulation of an overloaded queue can still look fine).
    hi = guess
    ceiling = run(hi)
    if ok(ceiling):
        return RateSearch(hi, ceiling, evaluations)
    while hi - lo > rel_tol * hi:
        # Geometric steps while the bracket spans more than 2x, arithmetic after.
        mid = math.sqrt(lo * hi) if hi > 2 * lo else (lo + hi) / 2
        result = run(mid)
        if ok(result):
            lo, lo_result = mid, result
        else:
            hi = mid
    return RateSearch(lo, lo_result, evaluations)


def replicas_needed(target_rate: float, max_rate: float) -> int:
    """Replicas that together serve `target_rate` when each serves at most `max_rate` within the SLA."""
    if max_rate <= 0:
        raise ValueError("no arrival rate meets the SLA on one replica; more replicas will not help")
    return max(1, math.ceil(target_rate / max_rate - 1e-9))
