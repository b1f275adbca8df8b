"""`current` checked by the checks `space` gets, before any work (issue 57): a degree wider than its GPU's node, a GPU
the price set does not price, an expert-parallel degree on a dense model; each key of `current` a space check reads."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from recommender.perf.catalog.gpus import load_catalog
from tests.conftest import write_spec

CATALOG = load_catalog(None)
PRICED = sorted(k for k, a in CATALOG.accelerators.items() if a.price_per_hour_usd is not None)
UNPRICED = sorted(set(CATALOG.accelerators) - set(PRICED))
DISAGGREGATED = {"space.layout": ["aggregated", "disaggregated"], "current.layout": "disaggregated"}


def _refusal(changes: dict[str, object]) -> BadInputError | None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            load_spec(write_spec(Path(tmp) / "spec.yaml", changes))
        except BadInputError as exc:
            return exc
    return None


@settings(max_examples=30, deadline=None)
@given(
    key=st.sampled_from(["tensor_parallel", "decode_tensor_parallel"]),
    gpu=st.sampled_from(PRICED),
    degree=st.integers(1, 16),
)
def test_a_current_degree_is_refused_exactly_when_wider_than_its_gpus_node(key: str, gpu: str, degree: int) -> None:
    changes: dict[str, object] = {"current.hardware": gpu, f"current.{key}": degree}
    if key == "decode_tensor_parallel":
        changes |= DISAGGREGATED
    refused = _refusal(changes)
    if degree > CATALOG.get(gpu).max_tensor_parallel:
        assert refused is not None and refused.field.endswith(f"current.{key}"), refused
        assert f"TP{degree} is wider than a {gpu} node" in refused.problem
    else:
        assert refused is None or f"current.{key}" not in refused.field, refused


@pytest.mark.parametrize("key", ["hardware", "decode_hardware"])
@pytest.mark.parametrize("gpu", UNPRICED)
def test_every_current_gpu_must_be_priced(key: str, gpu: str) -> None:
    changes: dict[str, object] = {f"current.{key}": gpu} | (DISAGGREGATED if key == "decode_hardware" else {})
    refused = _refusal(changes)
    assert refused is not None and refused.field.endswith(f"current.{key}") and "has no price" in refused.problem
