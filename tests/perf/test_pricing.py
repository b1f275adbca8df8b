"""The cost of serving a rate with known answers: replicas rounded up, dollars per million tokens."""

from __future__ import annotations

import pytest

from recommender.perf.pricing import estimate_cost


def test_cost_known_answer() -> None:
    # A replica serving 4 requests/s of 200 tokens: 800 tokens/s; 10 requests/s need 3 replicas.
    cost = estimate_cost(
        price_per_hour_usd=2.0,
        price_source="t",
        tensor_parallel=1,
        replica_tokens_per_s=800.0,
        replica_requests_per_s=4.0,
        target_requests_per_s=10,
    )
    assert cost.replicas == 3
    assert cost.usd_per_1m_tokens == pytest.approx(2.0 / (800.0 * 3600) * 1e6)
