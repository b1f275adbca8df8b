"""At over a thousand requests in flight, the P99s a plan reports hold within 5 % when the simulated requests double.

The configuration is one the engines run at high load (issue 40): Llama 3.1 8B in FP8 on an H100 SXM under vLLM,
a batch cap of 2048 and an FP8 KV cache, on the shipped calibrated step cost, at 120 req/s of short chat turns,
where a replica holds about 1,050 requests at once and its batch takes ~10,000 requests to fill.
"""

from __future__ import annotations

import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving import TrafficLoad, settled_at
from recommender.perf.sim.settle import TOLERANCE, _judged, in_flight
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import LengthDist, make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.quantize import get_scheme

RATE = 120.0


def test_p99s_at_over_a_thousand_in_flight_hold_within_5_percent_when_the_requests_double() -> None:
    _, shape = load_architecture("llama-3.1-8b")
    method, accel = get_scheme("fp8-dynamic"), load_catalog().get("h100-sxm")
    cost = CalibratedModel(load_fit(), None).step_cost(shape, method, accel, "vllm", kv_cache_dtype="fp8")
    kv = kv_cache_tokens(shape, method, accel, max_num_seqs=2048, kv_cache_dtype="fp8")
    config = PROFILES["vllm"].batching(SchedulerConfig(kv_cache_tokens=kv, max_num_seqs=2048))
    prompt, output = LengthDist(128, 0.5), LengthDist(256, 0.5)
    traffic = TrafficLoad(RATE, 128, 256, prompt, output)

    reported = settled_at(cost, config, traffic, RATE, None)  # what plan reports at this load per replica
    assert reported.settled and not reported.overloaded
    assert in_flight(reported.result, RATE) > 1000
    n = 2 * reported.requests
    doubled = _judged(
        simulate(cost, make_workload(prompt=prompt, output=output, n_requests=n, rate=RATE), config), n, RATE
    )
    assert not doubled.overloaded
    for a, b in (
        (reported.result.ttft_ms.p99, doubled.result.ttft_ms.p99),
        (reported.result.tpot_ms.p99, doubled.result.tpot_ms.p99),
    ):
        assert b == pytest.approx(a, rel=TOLERANCE)
    # The first 600 requests, the old fixed count, end while the batch still fills: their P99 TPOT is far lower.
    short = simulate(cost, make_workload(prompt=prompt, output=output, n_requests=600, rate=RATE), config)
    assert short.tpot_ms.p99 < 0.8 * reported.result.tpot_ms.p99
