"""From step times to what a user sees: P99 TTFT, P99 TPOT and the capacity of one replica.

Two ways, each labelled in the figure's provenance:

- ``simulate_serving`` (catalog accelerators): the continuous-batching simulator replays
  Poisson traffic through a vLLM-like scheduler on the step-cost model; the capacity is
  the highest arrival rate whose P99 TTFT and TPOT meet the SLA, and the latencies are
  the P99s at the load each replica carries at the target traffic.
- ``steady_state`` (the measured local device, where only one batch size is probed): every
  step serves ``batch_size`` sequences; each finished sequence is replaced by a new one
  whose prefill stalls the batch once. Per output token a sequence waits one decode step
  plus its share of the others' prefills; a new request waits for its own prefill plus
  the step in flight. No queueing variance: P99 only at or below the capacity assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.perf.simulator import (
    SchedulerConfig,
    StepCostModel,
    make_workload,
    max_rate_within_sla,
    replicas_needed,
    simulate,
)
from recommender.spec import LatencySLA, Traffic

#: vLLM's default token budget per step with chunked prefill.
DEFAULT_MAX_BATCHED_TOKENS = 8192
#: Requests per simulation: enough for stable P99s (the first 10 % are warm-up).
SIMULATED_REQUESTS = 600


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


def simulate_serving(
    cost: StepCostModel, config: SchedulerConfig, *, traffic: Traffic, sla: LatencySLA, provenance: str = ""
) -> ServingEstimate:
    """Capacity within the SLA and the P99s at the target load per replica, from simulation."""
    label = (
        f"{provenance or getattr(cost, 'provenance', 'step-cost model')}; continuous-batching simulation "
        f"({SIMULATED_REQUESTS} Poisson requests, max_num_seqs {config.max_num_seqs}, "
        f"max_num_batched_tokens {config.max_num_batched_tokens}, chunked prefill)"
    )
    prompt, output = traffic.prompt_tokens, traffic.output_tokens
    search = max_rate_within_sla(
        cost, config, prompt=prompt, output=output, ttft_p99_ms=sla.ttft_p99_ms, tpot_p99_ms=sla.tpot_p99_ms,
        n_requests=SIMULATED_REQUESTS,
    )  # fmt: skip
    if search.rate_per_s <= 0:
        # Not even a lone request meets the SLA: report the latencies at a trickle of traffic.
        lone = simulate(cost, make_workload(prompt=prompt, output=output, n_requests=20, rate=1e-3), config)
        return ServingEstimate(lone.ttft_ms.p99, lone.tpot_ms.p99, 0.0, 0.0, label)
    replicas = replicas_needed(traffic.requests_per_second, search.rate_per_s)
    load = traffic.requests_per_second / replicas
    at_load = simulate(cost, make_workload(prompt=prompt, output=output, n_requests=SIMULATED_REQUESTS, rate=load),
                       config)  # fmt: skip
    return ServingEstimate(
        ttft_ms=at_load.ttft_ms.p99,
        tpot_ms=at_load.tpot_ms.p99,
        requests_per_s=search.rate_per_s,
        tokens_per_s=search.rate_per_s * (prompt + output),
        provenance=label,
    )
