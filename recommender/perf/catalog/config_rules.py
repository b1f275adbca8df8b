"""The rules that tie a config.json's fields together: one set, for shipped architectures and user configs alike.

Each rule reads the typed fields (``config_fields.ConfigFields``: kinds and bounds are checked there) and says
why they contradict each other, or None. A contradiction is a config no real model has and the shape model
would price as something else: a top-k above the expert count (planned dense), experts in groups that do not
divide them, shared experts beside no routed ones, MLA widths without the rank that makes attention latent,
sliding layers with no window, a layer-type name transformers does not know. `RULES` lists them in the order
they are checked; `config_fields.check_config_fields` turns the first that fires into one line naming the
fields and the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: The first expert-count field present and > 1 makes the model a mixture of experts (as `moe.parse_moe` reads).
EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts")
#: ``layer_types`` names transformers accepts (``configuration_utils.ALLOWED_LAYER_TYPES`` and the legacy names of
#: ``_LEGACY_LAYER_TYPE_REMAP``, transformers 5.17.0; tests/perf/catalog checks the installed one knows no other).
#: Which of them the shape model prices is ``perf/model/attention.py``'s to say.
LAYER_TYPES = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "deepseek_sparse_attention",
    "qwen_sparse_attention",
    "linear_attention",
    "sparse",
    "dense",
    "mamba",  # legacy, read as linear_attention
    "attention",  # legacy, read as full_attention
)
#: Multi-head latent attention's widths besides ``kv_lora_rank`` (DeepSeek-V2/V3, Kimi-K2).
MLA_WIDTHS = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


class RuleFields(Protocol):
    """The typed fields the rules read (``config_fields.ConfigFields`` is one; None: not in the file)."""

    @property
    def num_hidden_layers(self) -> int | None: ...
    @property
    def hidden_size(self) -> int | None: ...
    @property
    def num_attention_heads(self) -> int | None: ...
    @property
    def num_key_value_heads(self) -> int | None: ...
    @property
    def max_position_embeddings(self) -> int | None: ...
    @property
    def num_experts_per_tok(self) -> int | None: ...
    @property
    def n_group(self) -> int | None: ...
    @property
    def topk_group(self) -> int | None: ...
    @property
    def first_k_dense_replace(self) -> int | None: ...
    @property
    def moe_layer_freq(self) -> int | None: ...
    @property
    def decoder_sparse_step(self) -> int | None: ...
    @property
    def mlp_only_layers(self) -> list[int] | None: ...
    @property
    def kv_lora_rank(self) -> int | None: ...
    @property
    def q_lora_rank(self) -> int | None: ...
    @property
    def qk_rope_head_dim(self) -> int | None: ...
    @property
    def sliding_window(self) -> int | None: ...
    @property
    def layer_types(self) -> list[str] | None: ...


#: A rule: why the fields contradict each other, or None. (Expert counts, shared experts and MLA widths are read by
#: name with getattr, from `EXPERT_COUNTS`, ``n_shared_experts``/``shared_expert_intermediate_size``, `MLA_WIDTHS`.)
Rule = Callable[[RuleFields], str | None]


def experts(c: RuleFields) -> int | None:
    """The routed experts per MoE layer, or None for a dense model."""
    return next((n for f in EXPERT_COUNTS if (n := getattr(c, f)) is not None and n > 1), None)


def heads_split_into_kv_groups(c: RuleFields) -> str | None:
    heads = c.num_attention_heads
    for name in ("num_key_value_heads", "num_global_key_value_heads"):  # Gemma-4's full layers have their own
        kv_heads = getattr(c, name, None)
        if heads is not None and kv_heads is not None and heads % kv_heads:
            return (
                f"num_attention_heads {heads} is not a multiple of {name} {kv_heads} "
                "(each KV head serves a whole group of query heads)"
            )
    return None


def heads_divide_hidden(c: RuleFields) -> str | None:
    heads, hidden = c.num_attention_heads, c.hidden_size
    if heads is not None and hidden is not None and hidden % heads:
        return (
            f"hidden_size {hidden} is not divisible by num_attention_heads {heads} "
            "(transformers refuses such a model, whatever head_dim says)"
        )
    return None


def top_k_within_experts(c: RuleFields) -> str | None:
    routed, per_token = experts(c), c.num_experts_per_tok
    written = [f"{f} {getattr(c, f)}" for f in EXPERT_COUNTS if getattr(c, f) is not None]
    if routed is None and written and per_token is not None and per_token > 1:  # was planned dense
        return (
            f"num_experts_per_tok {per_token} routes each token to more experts than {', '.join(written)} gives "
            "a layer (a dense model has no num_experts_per_tok above 1; a mixture of experts has more experts)"
        )
    if routed is not None and per_token is not None and not 1 <= per_token <= routed:
        return f"num_experts_per_tok {per_token} is outside 1..{routed}, the experts of a layer"
    return None


def expert_groups_fit(c: RuleFields) -> str | None:
    """Group-limited routing (DeepSeek's ``n_group``/``topk_group``): the experts split into equal groups, a token
    picks ``topk_group`` of them, then its top-k experts from those groups alone."""
    routed, groups, picked = experts(c), c.n_group, c.topk_group
    if groups is None and picked is None:
        return None
    if routed is None:
        if max(groups or 1, picked or 1) > 1:
            return f"n_group {groups} / topk_group {picked} group the routed experts of a model that has none"
        return None
    if groups is not None and routed % groups:
        return f"n_group {groups} does not divide the {routed} routed experts into equal groups"
    if groups is not None and picked is not None and picked > groups:
        return f"topk_group {picked} picks more groups than n_group {groups}"
    per_token = c.num_experts_per_tok
    if groups is not None and picked is not None and per_token is not None and per_token > picked * routed // groups:
        return (
            f"num_experts_per_tok {per_token} is more than the {picked * routed // groups} experts in the "
            f"topk_group {picked} groups a token may use ({routed} experts in n_group {groups})"
        )
    return None


def shared_experts_beside_routed(c: RuleFields) -> str | None:
    if experts(c) is not None:
        return None
    for name in ("n_shared_experts", "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"):
        value = getattr(c, name)
        if value:
            return f"{name} {value} adds shared experts beside routed ones, and the model has no routed experts"
    return None


def routed_layers_exist(c: RuleFields) -> str | None:
    """A mixture of experts keeps its experts in at least one layer (as `moe._moe_layer_count` places them)."""
    routed, layers = experts(c), c.num_hidden_layers
    if routed is None or layers is None:
        return None
    first, freq, step = c.first_k_dense_replace or 0, c.moe_layer_freq or 1, c.decoder_sparse_step or 1
    dense = set(c.mlp_only_layers or [])
    if any(i >= first and i % freq == 0 and (i + 1) % step == 0 and i not in dense for i in range(layers)):
        return None
    return (
        f"no layer of {layers} holds the {routed} routed experts (first_k_dense_replace {first}, moe_layer_freq "
        f"{freq}, decoder_sparse_step {step}, mlp_only_layers {sorted(dense)[:4]}...)"
    )


def dense_layers_exist(c: RuleFields) -> str | None:
    layers, dense = c.num_hidden_layers, c.mlp_only_layers or []
    if layers is not None and any(i >= layers for i in dense):
        return f"mlp_only_layers names layer {max(dense)}, past the last of {layers} layers"
    return None


def latent_attention_complete(c: RuleFields) -> str | None:
    """MLA is ``kv_lora_rank`` with its three head widths; any of them alone is a half-written config."""
    widths = [name for name in MLA_WIDTHS if getattr(c, name) is not None]
    if c.kv_lora_rank is None:
        if widths or c.q_lora_rank:
            first = widths[0] if widths else "q_lora_rank"
            return f"{first} is given without kv_lora_rank (multi-head latent attention needs its KV rank)"
        return None
    missing = [name for name in MLA_WIDTHS if getattr(c, name) is None]
    if missing:
        return (
            f"kv_lora_rank {c.kv_lora_rank} is given without {missing[0]} (all of {', '.join(MLA_WIDTHS)} define MLA)"
        )
    if c.qk_rope_head_dim is not None and c.qk_rope_head_dim % 2:
        return f"qk_rope_head_dim {c.qk_rope_head_dim} is odd (rotary embedding turns pairs of dimensions)"
    return None


def layer_types_named_and_counted(c: RuleFields) -> str | None:
    layers, types = c.num_hidden_layers, c.layer_types
    if types is None:
        return None
    if layers is not None and len(types) != layers:
        return f"layer_types has {len(types)} entries for {layers} layers (one per layer)"
    unknown = next((t for t in types if t not in LAYER_TYPES), None)
    if unknown is not None:
        return f"layer_types names {unknown[:40]!r}, which no transformers model has (known: {', '.join(LAYER_TYPES)})"
    return None


def windows_fit(c: RuleFields) -> str | None:
    """Sliding layers need a window, and one shorter than the positions the model has (else they are full)."""
    sliding = sum(1 for t in c.layer_types or [] if t == "sliding_attention")
    if not sliding:
        return None
    if c.sliding_window is None:
        return f"layer_types has {sliding} sliding_attention layers and sliding_window is not given"
    if c.max_position_embeddings is not None and c.sliding_window > c.max_position_embeddings:
        return (
            f"sliding_window {c.sliding_window} is longer than max_position_embeddings {c.max_position_embeddings}, "
            f"so the {sliding} sliding_attention layers would attend to everything"
        )
    return None


#: Every rule, in the order checked.
RULES: tuple[Rule, ...] = (
    heads_split_into_kv_groups,
    heads_divide_hidden,
    top_k_within_experts,
    expert_groups_fit,
    shared_experts_beside_routed,
    dense_layers_exist,
    routed_layers_exist,
    latent_attention_complete,
    layer_types_named_and_counted,
    windows_fit,
)


def first_contradiction(c: RuleFields) -> str | None:
    """Why `c`'s fields contradict each other (the first rule that fires), or None."""
    return next((why for rule in RULES if (why := rule(c)) is not None), None)
