"""From step times to what a user sees: TTFT, TPOT and capacity under continuous batching.

A first steady-state estimate at saturation (the continuous-batching simulator of issue 4
replaces it): every step serves ``batch_size`` sequences; each finished sequence is
replaced by a new one whose prefill stalls the batch once. So per output token a
sequence waits one decode step plus its share of the others' prefills, and a new
request waits for its own prefill plus the step in flight. No queueing variance is
modeled, so these are the P99 figures only at or below the capacity they assume.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.spec import Traffic


@dataclass(frozen=True, slots=True)
class ServingEstimate:
    """Latency and capacity of one replica at a batch size."""

    ttft_ms: float
    tpot_ms: float
    requests_per_s: float
    tokens_per_s: float
    provenance: str


def steady_state(
    *, prefill_s: float, decode_step_s: float, batch_size: int, traffic: Traffic, provenance: str
) -> ServingEstimate:
    """Estimate one replica's latencies and capacity from its step times (see module docstring)."""
    prefills_per_token = batch_size / traffic.output_tokens
    tpot_s = decode_step_s + prefills_per_token * prefill_s
    ttft_s = prefill_s + decode_step_s
    seconds_per_request = prefill_s + traffic.output_tokens * decode_step_s / batch_size
    requests_per_s = 1.0 / seconds_per_request
    return ServingEstimate(
        ttft_ms=ttft_s * 1e3,
        tpot_ms=tpot_s * 1e3,
        requests_per_s=requests_per_s,
        tokens_per_s=requests_per_s * (traffic.prompt_tokens + traffic.output_tokens),
        provenance=f"{provenance}; steady-state estimate at saturation, no queueing variance",
    )
