"""The config.json fields this tool reads, typed in one place: kinds, signs, ranges and how they fit together.

A config.json is user input (a file, a model directory, a checkpoint, a hub download), and the
shape and MoE models do arithmetic on it: ``"8"`` for an expert count compares a string with an
int, ``"0,1"`` for a layer list iterates characters, ``-1408`` for an expert width prices negative
memory. Every field any of them reads is declared here once, strictly typed (a JSON string or float
is not an integer, ``true`` is not a count) and bounded; the rules that tie fields together (heads and KV
groups, experts, top-k and expert groups, shared experts, MLA ranks, windows, layer types) are
``config_rules.RULES``, one set for shipped and user configs. Fields not listed are left to their readers (transformers,
the MoE module's refusal of layouts it does not model).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, model_validator

from recommender.errors import BadInputError, pydantic_location, pydantic_message
from recommender.perf.catalog.config_rules import EXPERT_COUNTS, first_contradiction

__all__ = ["EXPERT_COUNTS", "REQUIRED", "ConfigFields", "check_config_fields", "config_values"]

#: Bounds 100x past today's largest released models: a unit slip or a generated file is refused, not priced.
Layers = Annotated[StrictInt, Field(gt=0, le=10_000)]
Width = Annotated[StrictInt, Field(gt=0, le=10_000_000)]
Heads = Annotated[StrictInt, Field(gt=0, le=100_000)]
Count = Annotated[StrictInt, Field(ge=0, le=100_000)]

#: Fields a decoder config must carry for the shape model (the rest are optional).
REQUIRED = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")


class ConfigFields(BaseModel):
    """The read fields of a config.json; None where the file leaves one out (``REQUIRED`` is checked apart)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    num_hidden_layers: Layers | None = None
    hidden_size: Width | None = None
    intermediate_size: Width | None = None
    num_attention_heads: Heads | None = None
    vocab_size: Annotated[StrictInt, Field(gt=0, le=100_000_000)] | None = None
    num_key_value_heads: Heads | None = None
    head_dim: Heads | None = None
    max_position_embeddings: Annotated[StrictInt, Field(gt=0, le=1_000_000_000)] | None = None
    tie_word_embeddings: StrictBool | None = None
    num_local_experts: Count | None = None
    num_experts: Count | None = None
    n_routed_experts: Count | None = None
    num_experts_per_tok: Count | None = None
    moe_intermediate_size: Width | None = None
    shared_expert_intermediate_size: Annotated[StrictInt, Field(ge=0, le=10_000_000)] | None = None
    moe_shared_expert_intermediate_size: Annotated[StrictInt, Field(ge=0, le=10_000_000)] | None = None
    moe_latent_size: Width | None = None
    n_shared_experts: Count | None = None
    first_k_dense_replace: Annotated[StrictInt, Field(ge=0, le=10_000)] | None = None
    moe_layer_freq: Layers | None = None
    decoder_sparse_step: Layers | None = None
    mlp_only_layers: list[Annotated[StrictInt, Field(ge=0, le=10_000)]] | None = None
    # Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) and sliding-window layers (gpt-oss): perf/model/attention.py
    kv_lora_rank: Width | None = None
    q_lora_rank: Annotated[StrictInt, Field(ge=0, le=10_000_000)] | None = None
    qk_rope_head_dim: Heads | None = None
    qk_nope_head_dim: Heads | None = None
    v_head_dim: Heads | None = None
    sliding_window: Annotated[StrictInt, Field(gt=0, le=1_000_000_000)] | None = None
    layer_types: list[str] | None = None
    # Gemma-4: the full-attention layers' own widths, its MoE block beside the dense MLP (attention.py, moe.py)
    global_head_dim: Heads | None = None
    num_global_key_value_heads: Heads | None = None
    attention_k_eq_v: StrictBool | None = None
    top_k_experts: Count | None = None
    expert_intermediate_size: Width | None = None
    enable_moe_block: StrictBool | None = None
    num_kv_shared_layers: Annotated[StrictInt, Field(ge=0, le=10_000)] | None = None
    hidden_size_per_layer_input: Annotated[StrictInt, Field(ge=0, le=10_000_000)] | None = None

    # DeepSeek sparse attention (perf/model/sparse_attention.py); hybrids' patterns and recurrent widths
    # (perf/model/layer_pattern.py, linear_attention.py): a zero width or state is refused here by name.
    index_topk: Annotated[StrictInt, Field(gt=0, le=1_000_000_000)] | None = None
    index_n_heads: Heads | None = None
    index_head_dim: Heads | None = None
    full_attention_interval: Layers | None = None
    #: Nemotron-H's one character per layer (layer_pattern.py): anything else is a typo or another field's value.
    hybrid_override_pattern: Annotated[str, Field(min_length=1, max_length=10_000, pattern=r"^[M*\-E]+$")] | None = None
    layers_block_type: list[str] | None = None
    linear_num_key_heads: Heads | None = None
    linear_num_value_heads: Heads | None = None
    linear_key_head_dim: Heads | None = None
    linear_value_head_dim: Heads | None = None
    linear_conv_kernel_dim: Heads | None = None
    mamba_num_heads: Heads | None = None
    mamba_head_dim: Heads | None = None
    ssm_state_size: Heads | None = None
    n_groups: Heads | None = None
    conv_kernel: Heads | None = None

    n_group: Annotated[StrictInt, Field(gt=0, le=100_000)] | None = None
    topk_group: Annotated[StrictInt, Field(gt=0, le=100_000)] | None = None

    @model_validator(mode="after")
    def _fit_together(self) -> ConfigFields:
        why = first_contradiction(self)  # the rules tying fields together: config_rules.RULES
        if why is not None:
            raise ValueError(why)
        return self


def config_values(config: Any) -> dict[str, Any]:
    """The read fields of `config` (a parsed config.json mapping, a namespace or a transformers config)."""
    names = ConfigFields.model_fields
    found = config if isinstance(config, dict) else {name: getattr(config, name, None) for name in names}
    return {name: value for name in names if (value := found.get(name)) is not None}


def check_config_fields(config: Any, *, field: str, required: bool = True) -> ConfigFields:
    """`config`'s read fields, typed and consistent, or one `BadInputError` naming the config field and the fix.
    `required`: the shape model's fields must be there (any other architecture is left to transformers)."""
    values = config_values(config)
    _refuse_non_finite(values, field=field)
    try:
        fields = ConfigFields.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        if not first["loc"]:  # a rule tying fields together
            raise BadInputError(
                field,
                f"config {pydantic_message(dict(first))}",
                "give the real model's values (its published config.json)",
            ) from None
        name = pydantic_location(tuple(first["loc"]))
        raise BadInputError(field, f"config {name} is {first['input']!r}, {_problem(first)}", _fix(first)) from None
    if required:
        routed_only = fields.moe_intermediate_size is not None and any(
            (getattr(fields, name) or 0) > 1 for name in EXPERT_COUNTS
        )  # every MLP routed (Qwen3.5 MoE): no dense intermediate_size to give
        missing = [
            name
            for name in REQUIRED
            if getattr(fields, name) is None and not (name == "intermediate_size" and routed_only)
        ]
        if missing:
            raise BadInputError(
                field,
                f"the model config has no {missing[0]} (neither at its top level nor under text_config)",
                "pass a decoder-only transformer config (Llama, Mistral, Qwen, ...) or a wrapper with its "
                "language model under text_config",
            )
    return fields


def _refuse_non_finite(values: dict[str, Any], *, field: str) -> None:
    """A read field written ``Infinity``, ``-Infinity`` or ``NaN`` (transformers writes them; config.json is read
    with them as floats): every field read here is a count or a width, and a count must be finite."""
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                written = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
                raise BadInputError(
                    field,
                    f"config {name} is {written}, and a count must be finite",
                    "give the real model's value (its published config.json)",
                )


def _problem(error: Any) -> str:
    """What is wrong, in the words of a config author: the kind expected, or the range allowed."""
    kind = str(error.get("type", ""))
    if kind.endswith("_type") and "int" in kind:
        return "not a whole number"
    if kind.startswith(("greater", "less")):
        low, high = _bounds(str(error["loc"][0]))
        return f"outside {low}..{high}"
    message = pydantic_message(dict(error))
    return message[:1].lower() + message[1:]


def _bounds(name: str) -> tuple[int, int]:
    """The smallest and largest whole number field `name` (or its items) takes."""
    low, high = 0, 0
    for arg in get_args(ConfigFields.model_fields[name].annotation):
        while get_origin(arg) is list:
            arg = get_args(arg)[0]
        for meta in getattr(arg, "__metadata__", ()):
            for bound in getattr(meta, "metadata", ()):
                low = bound.gt + 1 if hasattr(bound, "gt") else getattr(bound, "ge", low)
                high = getattr(bound, "le", high)
    return low, high


def _fix(error: Any) -> str:
    """What to write instead, by the kind of mistake."""
    kind = str(error.get("type", ""))
    if kind.endswith("_type") and "int" in kind:
        return 'write it as a JSON whole number (8, not "8" or 8.0)'
    if kind.startswith("list"):
        return "write it as a JSON list of layer numbers, e.g. [0, 1]"
    if kind.startswith("bool"):
        return "write it as true or false"
    if kind.startswith(("greater", "less")):
        return "give the real model's value (its published config.json)"
    if kind == "string_pattern_mismatch":  # hybrid_override_pattern, the one patterned field
        return "write one character per layer: M Mamba2, * attention, - MLP, E mixture of experts"
    return "fix the config"
