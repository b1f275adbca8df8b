"""Architecture contradictions refused by one rule set, shipped and user configs alike (issue 57): an expert count
of 0 or 1 beside a top-k above 1 (a DeepSeek-style config with ``n_routed_experts: 0`` was planned as dense)."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.errors import BadInputError
from recommender.perf.catalog.config_fields import EXPERT_COUNTS, check_config_fields

DENSE = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32}
DENSE |= {"vocab_size": 32000}


@given(field=st.sampled_from(EXPERT_COUNTS), experts=st.integers(0, 1), top_k=st.integers(2, 64))
def test_a_top_k_above_one_with_no_experts_is_refused_for_every_expert_field(
    field: str, experts: int, top_k: int
) -> None:
    with pytest.raises(BadInputError, match=f"num_experts_per_tok {top_k} routes each token"):
        check_config_fields({**DENSE, field: experts, "num_experts_per_tok": top_k}, field="--model")


@given(field=st.sampled_from(EXPERT_COUNTS), experts=st.integers(0, 1), top_k=st.integers(0, 1))
def test_a_dense_config_spelled_with_zero_experts_and_top_k_at_most_one_stands(
    field: str, experts: int, top_k: int
) -> None:
    check_config_fields({**DENSE, field: experts, "num_experts_per_tok": top_k}, field="--model")


def test_every_shipped_architecture_passes_the_rules() -> None:
    shipped = files("recommender.perf.catalog").joinpath("architectures")
    names = [p for p in shipped.iterdir() if p.name.endswith(".json")]
    assert names
    for path in names:
        check_config_fields(json.loads(path.read_text(encoding="utf-8")), field=path.name)
