"""Architecture contradictions refused by one rule set (``config_rules.RULES``), shipped and user configs alike
(issue 57): experts vs top-k (a DeepSeek-style config with ``n_routed_experts: 0`` was planned as dense), expert
groups, shared experts, MLA ranks, sliding windows, layer-type patterns. Every rule has a config it refuses; every
shipped architecture meets every rule; where a property is what holds, hypothesis checks it."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.errors import BadInputError
from recommender.perf.catalog.config_fields import EXPERT_COUNTS, ConfigFields, check_config_fields, config_values
from recommender.perf.catalog.config_rules import LAYER_TYPES, RULES
from recommender.perf.catalog.hf_config import language_model

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
        config = language_model(json.loads(path.read_text(encoding="utf-8")), field=path.name).fields  # text_config
        check_config_fields(config, field=path.name)


# -- the whole rule set (config_rules.RULES), each rule with a config it refuses -------------------------------
MOE = DENSE | {"n_routed_experts": 64, "num_experts_per_tok": 6, "moe_intermediate_size": 1408}
MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
SLIDING = {"layer_types": ["sliding_attention", "full_attention"] * 16, "sliding_window": 128}
SLIDING |= {"max_position_embeddings": 131072}

#: Per rule, a config that breaks only it and the words its refusal says.
VIOLATIONS: dict[str, tuple[dict[str, object], str]] = {
    "heads_split_into_kv_groups": (DENSE | {"num_key_value_heads": 5}, "not a multiple of num_key_value_heads 5"),
    "heads_divide_hidden": (DENSE | {"hidden_size": 4100}, "hidden_size 4100 is not divisible"),
    "top_k_within_experts": (MOE | {"num_experts_per_tok": 65}, "num_experts_per_tok 65 is outside 1..64"),
    "expert_groups_fit": (MOE | {"n_group": 5, "topk_group": 2}, "n_group 5 does not divide the 64 routed experts"),
    "shared_experts_beside_routed": (DENSE | {"n_shared_experts": 2}, "n_shared_experts 2 adds shared experts"),
    "dense_layers_exist": (DENSE | {"mlp_only_layers": [0, 40]}, "mlp_only_layers names layer 40, past the last"),
    "routed_layers_exist": (MOE | {"first_k_dense_replace": 32}, "no layer of 32 holds the 64 routed experts"),
    "latent_attention_complete": (DENSE | MLA | {"kv_lora_rank": None}, "qk_rope_head_dim is given without kv_lora"),
    "layer_types_named_and_counted": (DENSE | {"layer_types": ["full"] * 32}, "layer_types names 'full'"),
    "windows_fit": (
        DENSE | SLIDING | {"sliding_window": None},
        "16 sliding_attention layers and sliding_window is not",
    ),
}


def _refusal(config: dict[str, object]) -> str:
    with pytest.raises(BadInputError) as refused:
        check_config_fields({k: v for k, v in config.items() if v is not None}, field="--model")
    return str(refused.value)


def test_every_rule_has_a_config_it_refuses_in_one_line_naming_the_fields() -> None:
    assert set(VIOLATIONS) == {rule.__name__ for rule in RULES}
    for name, (config, words) in VIOLATIONS.items():
        line = _refusal(config)
        assert line.startswith("--model: config ") and words in line and "\n" not in line, (name, line)


def test_the_bases_stand_so_each_violation_is_its_own_rule() -> None:
    for base in (DENSE, MOE, DENSE | MLA, DENSE | SLIDING, MOE | MLA | {"n_group": 8, "topk_group": 4}):
        check_config_fields(base, field="--model")


def test_every_shipped_architecture_meets_every_rule() -> None:
    shipped = files("recommender.perf.catalog").joinpath("architectures")
    for path in [p for p in shipped.iterdir() if p.name.endswith(".json")]:
        fields = ConfigFields.model_validate(config_values(json.loads(path.read_text(encoding="utf-8"))))
        assert [rule.__name__ for rule in RULES if rule(fields) is not None] == [], path.name


@given(
    groups=st.integers(1, 16),
    per_group=st.integers(1, 16),
    picked=st.integers(1, 20),
    top_k=st.integers(1, 64),
)
def test_expert_groups_stand_exactly_when_top_k_fits_the_picked_groups(
    groups: int, per_group: int, picked: int, top_k: int
) -> None:
    routed = groups * per_group
    config = DENSE | {"n_routed_experts": routed, "n_group": groups, "topk_group": picked, "num_experts_per_tok": top_k}
    if routed < 2:
        return  # a dense model: its own rule
    fits = top_k <= routed and picked <= groups and top_k <= picked * per_group
    if fits:
        check_config_fields(config, field="--model")
    else:
        assert "num_experts_per_tok" in _refusal(config) or "topk_group" in _refusal(config)


@given(routed=st.integers(2, 256), groups=st.integers(1, 64))
def test_groups_that_do_not_divide_the_experts_are_refused(routed: int, groups: int) -> None:
    config = MOE | {"n_routed_experts": routed, "num_experts_per_tok": 1, "n_group": groups, "topk_group": 1}
    if routed % groups:
        assert f"n_group {groups} does not divide the {routed} routed experts" in _refusal(config)
    else:
        check_config_fields(config, field="--model")


@given(types=st.lists(st.sampled_from(LAYER_TYPES), min_size=1, max_size=64), extra=st.integers(-3, 3))
def test_layer_types_stand_exactly_when_one_known_name_per_layer(types: list[str], extra: int) -> None:
    layers = max(1, len(types) + extra)
    config = DENSE | {"num_hidden_layers": layers, "layer_types": types, "sliding_window": 128}
    config |= {"max_position_embeddings": 4096}
    if len(types) == layers:
        check_config_fields(config, field="--model")
    else:
        assert f"layer_types has {len(types)} entries for {layers} layers" in _refusal(config)


@given(window=st.integers(1, 10**6), positions=st.integers(1, 10**6))
def test_a_sliding_window_stands_exactly_when_it_fits_the_positions(window: int, positions: int) -> None:
    config = DENSE | SLIDING | {"sliding_window": window, "max_position_embeddings": positions}
    if window <= positions:
        check_config_fields(config, field="--model")
    else:
        assert f"sliding_window {window} is longer than max_position_embeddings {positions}" in _refusal(config)


def test_a_window_beyond_the_positions_on_full_attention_layers_stands() -> None:
    """Qwen2.5's config: sliding_window 131072 over 32768 positions, every layer full attention (no contradiction)."""
    config = DENSE | {"sliding_window": 131072, "max_position_embeddings": 32768}
    check_config_fields(config | {"layer_types": ["full_attention"] * 32}, field="--model")


@pytest.mark.parametrize("missing", ["qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"])
def test_an_mla_rank_without_its_widths_is_refused_by_name(missing: str) -> None:
    assert f"kv_lora_rank 512 is given without {missing}" in _refusal(DENSE | MLA | {missing: None})


def test_an_odd_rope_width_is_refused() -> None:
    assert "qk_rope_head_dim 63 is odd" in _refusal(DENSE | MLA | {"qk_rope_head_dim": 63})


@pytest.mark.parametrize("value", [-1, 1.5, "2", True])
def test_shared_experts_that_are_not_a_count_are_refused(value: object) -> None:
    assert "n_shared_experts" in _refusal(MOE | {"n_shared_experts": value})


def test_layer_type_names_are_transformers_own() -> None:
    """Read from transformers' source (importing it takes seconds): it knows no layer type the rule set does not."""
    import ast
    from importlib.util import find_spec

    spec = find_spec("transformers")  # the package's location, not imported
    assert spec is not None and spec.origin is not None
    tree = ast.parse((Path(spec.origin).parent / "configuration_utils.py").read_text(encoding="utf-8"))
    names = ("ALLOWED_ATTN_LAYER_TYPES", "ALLOWED_MLP_LAYER_TYPES", "_LEGACY_LAYER_TYPE_REMAP")
    known: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in names for t in node.targets):
            known |= set(ast.literal_eval(node.value))  # a tuple of names, or the legacy names' mapping
    assert {"full_attention", "sliding_attention", "mamba"} <= known <= set(LAYER_TYPES)
