"""From step times to what a user sees: P99 TTFT, P99 TPOT and the capacity of one replica.

The continuous-batching simulator replays Poisson traffic through a vLLM-like scheduler on
a step-cost model — roofline for catalog accelerators, measured probe tables for the local
device; the capacity is the highest arrival rate whose P99 TTFT and TPOT meet the SLA,
and the latencies are the P99s at the load each replica carries at the target traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.perf.simulator import (
    SchedulerConfig,
    StepCostModel,
    make_workload,
    max_rate_within_sla,
    replicas_needed,
    simulate,
)
from recommender.spec import LatencySLA, Traffic

if TYPE_CHECKING:
    from recommender.perf.catalog import Accelerator
    from recommender.perf.shape import ModelShape
    from recommender.quantize import QuantMethod

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


def check_sla_reachable(
    shape: ModelShape,
    options: list[tuple[Accelerator, QuantMethod]],
    *,
    traffic: Traffic,
    sla: LatencySLA,
    field_prefix: str = "sla",
) -> None:
    """Refuse an SLA that no searched (GPU, method) pair meets even with one request and no queue.

    A limit below one roofline step on every option is a typo or a unit slip (seconds for
    milliseconds), not a search result: it is bad input, said before any model is loaded.
    """
    from recommender.errors import BadInputError
    from recommender.perf.roofline import project_step_times

    runnable = [(a, m) for a, m in options if m.unavailable_reason(a.device) is None]
    if not runnable:
        return
    steps = {
        (a.key, m.name): project_step_times(
            shape, m, a, prompt_tokens=traffic.prompt_tokens, batch_size=1, context_tokens=traffic.prompt_tokens
        )
        for a, m in runnable
    }
    for limit_name, limit_ms, attr, what in (
        ("tpot_p99_ms", sla.tpot_p99_ms, "decode_step_s", "one decode step"),
        ("ttft_p99_ms", sla.ttft_p99_ms, "prefill_s", f"the prefill of one {traffic.prompt_tokens}-token prompt"),
    ):
        (hw, method), fastest = min(steps.items(), key=lambda kv: getattr(kv[1], attr))
        best_ms = getattr(fastest, attr) * 1e3
        if limit_ms < best_ms:
            raise BadInputError(
                f"{field_prefix}.{limit_name}",
                f"{limit_ms:g} ms is below {what} on every searched GPU (fastest: {best_ms:.2f} ms on {hw} "
                f"with {method}, roofline)",
                "check the unit (milliseconds) or add faster hardware / a lower precision to the space",
            )
