"""A pure-decode stretch priced in closed form equals the step-by-step loop it replaces.

Datasheet step costs are linear in the KV read, so a stretch's steps grow by the same amount each and their sum is
an arithmetic series (``decoding._series_run``); the stretch must stop at the same step, before the same arrival.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.sim.decoding import DecodingSequences
from recommender.perf.step.features import FEATURES, FeatureStepCost, StepFeatures
from recommender.perf.step.upper import StepFactors, UpperStepCost
from recommender.provenance import Provenance
from recommender.quantize import get_scheme

PROVENANCE = Provenance("calibrated", "test coefficients")


def _cost(model: str) -> UpperStepCost:
    features = StepFeatures(load_architecture(model)[1], get_scheme("fp8-dynamic"), load_catalog().get("h100-sxm"))
    coefficients = np.random.default_rng(1).uniform(0.5, 3.0, len(FEATURES))
    return UpperStepCost(FeatureStepCost(features, coefficients, PROVENANCE), StepFactors(1.3, 1.1), PROVENANCE)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_the_closed_form_stretch_stops_where_the_loop_does(model: str) -> None:
    cost = _cost(model)
    rng = np.random.default_rng(7)
    for _ in range(200):
        decoding = DecodingSequences(64, 16)
        for rid in range(int(rng.integers(1, 64))):
            decoding.add(rid, int(rng.integers(10, 4000)), int(rng.integers(40, 400)))
        first = cost.step_seconds(0, decoding.count, decoding.context_at(3))
        horizon = int(rng.integers(2, 31))
        arrival = float(rng.choice([math.inf, 5.0 + first * rng.uniform(0.0, horizon + 2)]))
        kwargs = {"t": 5.0, "d": 3, "horizon": horizon, "cap": 10**9, "next_arrival": arrival}
        closed = decoding.decode_run(cost, None, cost, **kwargs)  # type: ignore[arg-type]
        looped = decoding.decode_run(cost, None, None, **kwargs)  # type: ignore[arg-type]
        assert (closed is None) == (looped is None)
        if closed is not None and looped is not None:
            assert closed[0] == looped[0]
            assert closed[1] == pytest.approx(looped[1], rel=1e-12)
