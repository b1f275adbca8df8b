"""Whether a model config describes a transformer that can exist, checked before it is priced.

`ModelShape.from_config` trusts its config: zero heads divide by zero, a negative vocabulary
prices a negative lm_head, a hidden size the heads do not divide gives a fractional head
width. A config.json is user input (a file, a model directory, a hub download), so it is
checked here first, and each problem refused naming the config field. What the shape model
does not cover (mixture-of-experts and other forms) is for the shape model to refuse; this
module checks only the dense fields every decoder config carries.

Also the work bound: a request that cannot fit the model's positions, or whose KV cache
alone cannot fit the largest catalog node, is refused before any model is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape

#: Required positive integers and their sane maxima (100x past today's largest released models).
REQUIRED_FIELDS: dict[str, int] = {
    "num_hidden_layers": 10_000,
    "hidden_size": 1_000_000,
    "intermediate_size": 10_000_000,
    "num_attention_heads": 100_000,
    "vocab_size": 100_000_000,
}
#: Optional positive integers: checked when the config has them.
OPTIONAL_FIELDS: dict[str, int] = {
    "num_key_value_heads": 100_000,
    "head_dim": 100_000,
    "max_position_embeddings": 1_000_000_000,
}


def _positive_int(config: Any, name: str, limit: int, *, field: str, required: bool) -> int | None:
    value = getattr(config, name, None)
    if value is None:
        if required:
            raise BadInputError(field, f"the model config has no {name}",
                                "pass a decoder-only transformer config (Llama, Mistral, Qwen, ...)")  # fmt: skip
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInputError(field, f"config {name} is {value!r}, not a whole number", "fix the config")
    if not 0 < value <= limit:
        raise BadInputError(field, f"config {name} is {value}, outside 1..{limit}", "fix the config")
    return value


def check_architecture(config: Any, *, field: str) -> None:
    """Refuse a config whose counts are missing, non-positive, absurd, or inconsistent with each other."""
    dims = {name: _positive_int(config, name, limit, field=field, required=True)
            for name, limit in REQUIRED_FIELDS.items()}  # fmt: skip
    extra = {name: _positive_int(config, name, limit, field=field, required=False)
             for name, limit in OPTIONAL_FIELDS.items()}  # fmt: skip
    heads, hidden = dims["num_attention_heads"] or 1, dims["hidden_size"] or 1
    kv_heads = extra["num_key_value_heads"]
    if kv_heads is not None and heads % kv_heads:
        raise BadInputError(field, f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}",
                            "fix the config: each KV head serves a whole group of query heads")  # fmt: skip
    if extra["head_dim"] is None and hidden % heads:
        raise BadInputError(field, f"hidden_size {hidden} is not divisible by num_attention_heads {heads}",
                            "fix the config, or give head_dim explicitly")  # fmt: skip


def check_request_fits(
    config: Any, shape: ModelShape, catalog: Catalog, *, prompt_tokens: int, output_tokens: int, field: str
) -> None:
    """A request longer than the model's positions, or whose KV cache (at 1 byte per value) alone exceeds the
    largest catalog node, is refused naming the limit: no candidate could serve it."""
    tokens = prompt_tokens + output_tokens
    check_positions(config, tokens, field=field)
    largest = max((a.device_memory_gb * a.max_tensor_parallel for a in catalog.accelerators.values()), default=0.0)
    needed_gb = shape.kv_bytes_per_token(1.0) * tokens / 1e9
    if needed_gb > largest:
        raise BadInputError(field, f"one request's KV cache ({needed_gb:,.0f} GB at fp8) exceeds the largest catalog "
                            f"node ({largest:,.0f} GB)", "shorten the request")  # fmt: skip


def check_positions(config: Any, tokens: int, *, field: str) -> None:
    """A sequence longer than the model's positions (max_position_embeddings, where the config has it)."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and tokens > positions:
        raise BadInputError(field, f"prompt + output tokens ({tokens}) exceed the model's {positions} positions "
                            "(max_position_embeddings)", "shorten the request")  # fmt: skip
