"""Requests split by prompt length: the buckets a GPU mix routes between.

The router sees a request's prompt before it runs, never its output, so buckets are prompt-length
ranges. Each bucket keeps the lengths that fell into it (drawn from the profile's distributions,
or the trace's own requests), so the simulator replays the bucket's own histogram, not its mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.config.traffic import TrafficProfile, length_models
from recommender.perf.sim.workload import EmpiricalLengths, LengthDist, Lengths

__all__ = ["BucketLengths", "LengthBucket", "length_buckets"]

#: Requests drawn from a lognormal profile to split into buckets (a trace uses its own requests).
SAMPLED_REQUESTS = 20_000


@dataclass(frozen=True, slots=True)
class LengthBucket:
    """One prompt-length range (``prompt_to`` None: no upper end), its share of requests and its mean lengths."""

    prompt_from: int
    prompt_to: int | None
    share: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    p99_prompt_tokens: int
    p99_output_tokens: int

    @property
    def label(self) -> str:
        if self.prompt_to is None:
            return f"prompt >= {self.prompt_from}"
        return f"prompt {self.prompt_from}-{self.prompt_to - 1}"


@dataclass(frozen=True)
class BucketLengths:
    """A bucket and the recorded lengths the simulator replays for it."""

    bucket: LengthBucket
    prompt: EmpiricalLengths
    output: EmpiricalLengths


def _draw(lengths: Lengths, n: int, rng: np.random.Generator) -> np.ndarray:
    dist = LengthDist(lengths) if isinstance(lengths, int) else lengths
    return np.asarray(dist.sample(n, rng), dtype=np.int64)


def length_buckets(
    profile: TrafficProfile | None, prompt_tokens: int, output_tokens: int, edges: list[int], *, seed: int = 0
) -> list[BucketLengths]:
    """The non-empty buckets the prompt-length `edges` cut the traffic into, shortest first."""
    if profile is not None and profile.requests is not None:
        prompts = np.asarray(profile.requests.prompt_tokens, dtype=np.int64)
        outputs = np.asarray(profile.requests.output_tokens, dtype=np.int64)
    else:
        prompt, output = length_models(profile, prompt_tokens, output_tokens)
        prompt_rng, output_rng = np.random.default_rng(seed).spawn(2)
        prompts, outputs = _draw(prompt, SAMPLED_REQUESTS, prompt_rng), _draw(output, SAMPLED_REQUESTS, output_rng)
    bounds = [1, *edges, None]
    buckets = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        assert lo is not None
        inside = (prompts >= lo) & (prompts < hi) if hi is not None else prompts >= lo
        if not inside.any():
            continue
        p, o = prompts[inside], outputs[inside]
        bucket = LengthBucket(
            lo,
            hi,
            float(inside.mean()),
            float(p.mean()),
            float(o.mean()),
            int(np.percentile(p, 99)),
            int(np.percentile(o, 99)),
        )
        buckets.append(
            BucketLengths(
                bucket, EmpiricalLengths(tuple(int(v) for v in p)), EmpiricalLengths(tuple(int(v) for v in o))
            )
        )
    return buckets
