"""`check_traffic_fits` with a trace: each row is checked by its line, and the longest row's KV cache against the
largest catalog node, naming ``traffic.profile.trace`` (the field the user wrote), never the rows' means."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import AutoConfig

from recommender.config.traffic import TraceRequests
from recommender.errors import BadInputError
from recommender.perf.catalog.architecture_check import check_traffic_fits
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.shape import ModelShape
from tests.conftest import DEMO_MODEL


def _traffic(rows: list[tuple[int, int]]) -> SimpleNamespace:
    requests = TraceRequests(
        arrivals_s=[float(i) for i in range(len(rows))],
        prompt_tokens=[p for p, _ in rows],
        output_tokens=[o for _, o in rows],
    )
    profile = SimpleNamespace(requests=requests, trace=Path("day.csv"))
    mean = sum(p for p, _ in rows) // len(rows)
    return SimpleNamespace(profile=profile, conversation=None, prompt_tokens=mean, output_tokens=1)


def _check(rows: list[tuple[int, int]], positions: int) -> None:
    config = AutoConfig.from_pretrained(DEMO_MODEL)
    config.max_position_embeddings = positions
    check_traffic_fits(config, ModelShape.from_config(config), load_catalog(), _traffic(rows), field_prefix="")


def test_a_row_past_the_positions_is_named_by_its_line() -> None:
    with pytest.raises(BadInputError) as refused:
        _check([(946, 1), (1100, 2)], positions=1024)
    assert str(refused.value).startswith("traffic.profile.trace: day.csv line 2:")


def test_the_longest_rows_kv_cache_is_checked_against_the_largest_node() -> None:
    with pytest.raises(BadInputError) as refused:
        _check([(1000, 10), (10**14, 10)], positions=10**15)
    assert str(refused.value).startswith("traffic.profile.trace:")
    assert "exceeds the largest catalog node" in str(refused.value)


def test_rows_within_the_positions_pass() -> None:
    _check([(500, 10), (1000, 24)], positions=1024)
