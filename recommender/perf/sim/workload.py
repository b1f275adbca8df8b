"""Workloads for the scheduler: request arrival times and prompt and output lengths.

A workload is the whole trace up front (arrays in arrival order), so rates can be compared
on the same requests: :meth:`Workload.at_rate` rescales the arrival gaps and keeps the
lengths, and :func:`make_workload` draws arrivals and each length from independent streams
of one seed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from recommender.perf.sim.conversation import Conversation, conversation_requests, conversations_for

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "EmpiricalLengths",
    "FloatArray",
    "IntArray",
    "LengthDist",
    "Lengths",
    "NO_PREFIX",
    "SharedPrefix",
    "Workload",
    "make_workload",
    "workload_from_traffic",
]

#: Times in seconds, one per request or per step.
FloatArray = npt.NDArray[np.float64]
#: Token counts, one per request.
IntArray = npt.NDArray[np.int64]


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

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        if self.cv == 0:
            values = np.full(n, round(self.mean), dtype=np.int64)
        else:
            sigma2 = math.log1p(self.cv**2)
            draws = rng.lognormal(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2), n)
            values = np.rint(draws).astype(np.int64)
        return np.clip(values, 1, self.maximum if self.maximum is not None else None)


@dataclass(frozen=True, slots=True)
class EmpiricalLengths:
    """Token lengths drawn (with replacement) from recorded ones: a trace's own histogram, no fitted shape."""

    values: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.values or min(self.values) < 1:
            raise ValueError("need at least one recorded length, each >= 1")

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=n, replace=True)


#: What a workload's lengths are drawn from: a fixed count, a lognormal, or recorded lengths.
Lengths = int | LengthDist | EmpiricalLengths

#: A request's prefix key when it shares no prefix with any other.
NO_PREFIX = -1


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """Prompts that begin with a shared prefix: a system prompt or one of several prompt templates.

    A `fraction` of requests begins with one of `templates` prefixes of `tokens` tokens each (chosen
    uniformly); a prompt drawn shorter than its prefix is lengthened to the prefix plus one token. An engine
    with prefix caching (vLLM's automatic prefix caching, SGLang's radix cache) keeps the prefix's full KV
    blocks after the first request computes them, so later requests skip their prefill
    (``scheduler.py``). None of a spec's traffic: no request shares anything.
    """

    tokens: int
    fraction: float = 1.0
    templates: int = 1

    def __post_init__(self) -> None:
        if self.tokens < 1 or not 0.0 <= self.fraction <= 1.0 or self.templates < 1:
            raise ValueError(f"need tokens >= 1, 0 <= fraction <= 1 and templates >= 1, got {self}")

    def assign(self, prompts: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray, IntArray]:
        """Each request's prefix key (`NO_PREFIX`: none) and shared tokens, and the prompts lengthened to hold them."""
        n = len(prompts)
        shares = rng.random(n) < self.fraction
        keys = np.where(shares, rng.integers(0, self.templates, n), NO_PREFIX).astype(np.int64)
        tokens = np.where(shares, self.tokens, 0).astype(np.int64)
        return keys, tokens, np.where(shares, np.maximum(prompts, self.tokens + 1), prompts)


@dataclass(frozen=True)
class Workload:
    """Requests in arrival order: arrival times (s), prompt and output lengths (tokens), and what each prompt
    shares with others: its prefix key (`NO_PREFIX`: nothing) and how many of its first tokens that prefix
    holds (None: no request shares anything)."""

    arrivals_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    prefix_keys: IntArray | None = None
    prefix_tokens: IntArray | None = None
    #: The key each request's whole sequence is kept under when it finishes (a conversation's next turn reads it);
    #: None: nothing is kept for later turns.
    history_keys: IntArray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrivals_s)
        if n == 0 or len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise ValueError("a workload needs at least one request and one length of each kind per request")
        if np.any(np.diff(self.arrivals_s) < 0) or self.arrivals_s[0] < 0:
            raise ValueError("arrival times must be non-negative and sorted")
        if self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1:
            raise ValueError("prompt and output lengths must be >= 1")
        if (self.prefix_keys is None) != (self.prefix_tokens is None):
            raise ValueError("give both prefix keys and prefix tokens, or neither")
        if self.prefix_tokens is not None and np.any(self.prefix_tokens >= self.prompt_tokens):
            raise ValueError("a shared prefix must be shorter than its prompt")
        if self.history_keys is not None and self.prefix_keys is None:
            raise ValueError("a workload that keeps histories reads them as prefixes: give its prefix keys")

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
    prompt: Lengths,
    output: Lengths,
    n_requests: int | None = None,
    rate: float | None = None,
    arrivals: Sequence[float] | FloatArray | None = None,
    seed: int = 0,
    prefix: SharedPrefix | None = None,
    conversation: Conversation | None = None,
    cache_prefixes: bool = True,
) -> Workload:
    """Poisson arrivals at `rate` (requests/s), or the trace `arrivals`; lengths fixed or drawn; with `prefix`,
    the requests that share a prompt prefix.

    Arrival gaps, each length and the prefixes come from independent streams of one seed, so changing
    the rate leaves the lengths alone (the rate search compares like with like), and a workload without a
    shared prefix is the same requests it always was.
    """
    if (rate is None) == (arrivals is None):
        raise ValueError("give exactly one of rate (Poisson arrivals) or arrivals (a trace)")
    if conversation is None and arrivals is None:
        if n_requests is None or n_requests < 1 or rate is None or rate <= 0:
            raise ValueError("Poisson arrivals need n_requests >= 1 and rate > 0")
        draws = _poisson_draws(prompt, output, n_requests, seed, prefix)
        times = draws[0] / rate
        times -= times[0]
        # Copies: the draws are shared by every rate (and read-only); a workload's arrays are its own.
        lengths = [a.copy() for a in draws[1:]]
        if prefix is None or not cache_prefixes:
            return Workload(times, lengths[0], lengths[1])
        return Workload(times, lengths[0], lengths[1], lengths[2], lengths[3])
    arrival_rng, prompt_rng, output_rng, prefix_rng = np.random.default_rng(seed).spawn(4)
    if conversation is not None:
        made = _conversations(
            prompt, output, n_requests, rate, conversation, prefix, (arrival_rng, prompt_rng, output_rng, prefix_rng)
        )
        return made if cache_prefixes else replace(made, prefix_keys=None, prefix_tokens=None, history_keys=None)
    times = np.sort(np.asarray(arrivals, dtype=float))
    if n_requests is not None and n_requests != len(times):
        raise ValueError(f"n_requests={n_requests} but the trace has {len(times)} arrivals")
    n = len(times)
    prompts, outputs, keys, shared = _lengths(prompt, output, n, prefix, (prompt_rng, output_rng, prefix_rng))
    if prefix is None or not cache_prefixes:
        return Workload(times, prompts, outputs)
    return Workload(times, prompts, outputs, keys, shared)


def _lengths(
    prompt: Lengths,
    output: Lengths,
    n: int,
    prefix: SharedPrefix | None,
    rngs: tuple[np.random.Generator, np.random.Generator, np.random.Generator],
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """`n` prompt and output lengths from their streams, and with `prefix` each request's prefix key and shared
    tokens (the prompts lengthened to hold them); without one, no key and no shared token."""
    prompt_rng, output_rng, prefix_rng = rngs
    prompt_dist = LengthDist(prompt) if isinstance(prompt, int) else prompt
    output_dist = LengthDist(output) if isinstance(output, int) else output
    prompts, outputs = prompt_dist.sample(n, prompt_rng), output_dist.sample(n, output_rng)
    if prefix is None:
        return prompts, outputs, np.full(n, NO_PREFIX, dtype=np.int64), np.zeros(n, dtype=np.int64)
    keys, shared, prompts = prefix.assign(prompts, prefix_rng)
    return prompts, outputs, keys, shared


@functools.lru_cache(maxsize=256)
def _poisson_draws(
    prompt: Lengths, output: Lengths, n: int, seed: int, prefix: SharedPrefix | None
) -> tuple[FloatArray, IntArray, IntArray, IntArray, IntArray]:
    """The rate-free part of `n` Poisson requests from `seed`: the arrival gaps' running sum (divided by the rate,
    less its first, it is the arrival times: the same arithmetic at any rate), the lengths and prefixes
    (``_lengths``). A capacity search asks for the same requests at a dozen rates and counts: drawn once each.
    Read-only arrays (the cache shares them)."""
    arrival_rng, prompt_rng, output_rng, prefix_rng = np.random.default_rng(seed).spawn(4)
    drawn = (np.cumsum(arrival_rng.standard_exponential(n)),) + _lengths(
        prompt, output, n, prefix, (prompt_rng, output_rng, prefix_rng)
    )
    for a in drawn:
        a.flags.writeable = False
    return drawn


def _conversations(
    prompt: Lengths,
    output: Lengths,
    n_requests: int | None,
    rate: float | None,
    conversation: Conversation,
    prefix: SharedPrefix | None,
    rngs: tuple[np.random.Generator, ...],
) -> Workload:
    """Poisson conversation starts at `rate` / turns; the first prompts and every answer drawn (``conversation.py``)."""
    if n_requests is None or n_requests < 1 or rate is None or rate <= 0:
        raise ValueError("conversations need n_requests >= 1 and a Poisson rate > 0")
    arrival_rng, prompt_rng, output_rng, prefix_rng = rngs
    n_conv = conversations_for(n_requests, conversation.turns)
    starts = np.cumsum(arrival_rng.standard_exponential(n_conv)) / (rate / conversation.turns)
    prompt_dist = LengthDist(prompt) if isinstance(prompt, int) else prompt
    output_dist = LengthDist(output) if isinstance(output, int) else output
    first = prompt_dist.sample(n_conv, prompt_rng)
    keys, shared = np.full(n_conv, NO_PREFIX, dtype=np.int64), np.zeros(n_conv, dtype=np.int64)
    if prefix is not None:
        keys, shared, first = prefix.assign(first, prefix_rng)
    r = conversation_requests(
        first=first,
        outputs=output_dist.sample(n_conv * conversation.turns, output_rng),
        starts=starts,
        conversation=conversation,
        first_keys=keys,
        first_shared=shared,
        n_requests=n_requests,
        own_key0=prefix.templates if prefix is not None else 0,  # conversations' keys after the templates'
    )
    return Workload(r.arrivals_s, r.prompt_tokens, r.output_tokens, r.prefix_keys, r.prefix_tokens, r.history_keys)


class TrafficRate(Protocol):
    """What a workload needs of the spec's traffic (`config.spec.Traffic`, not imported: perf sits below it)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def requests_per_second(self) -> float: ...


def workload_from_traffic(traffic: TrafficRate, *, n_requests: int, length_cv: float = 0.0, seed: int = 0) -> Workload:
    """Poisson arrivals at the spec's rate, lengths around its prompt and output means."""
    return make_workload(
        prompt=LengthDist(traffic.prompt_tokens, length_cv),
        output=LengthDist(traffic.output_tokens, length_cv),
        n_requests=n_requests,
        rate=traffic.requests_per_second,
        seed=seed,
    )
