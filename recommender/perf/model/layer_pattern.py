"""Which token mixer and which MLP each layer of a hybrid has, from the four ways configs write it.

- ``layer_types`` (transformers' own: gpt-oss, Gemma, Qwen3.5): one entry per layer, ``full_attention``,
  ``sliding_attention`` or ``linear_attention`` (Gated DeltaNet); every layer also has its MLP.
- ``full_attention_interval`` (Qwen3-Next without ``layer_types``): layer ``i`` is full attention when ``(i + 1)`` is a
  multiple of it, else linear attention (transformers ``Qwen3NextConfig``).
- ``hybrid_override_pattern`` (Nemotron-H): one character per layer, each layer ONE block: ``M`` Mamba2, ``*``
  attention, ``-`` MLP, ``E`` mixture-of-experts MLP (transformers ``NemotronHConfig``).
- ``layers_block_type`` (the same as words: ``mamba``, ``attention``, ``mlp``, ``moe``).

A kind this module does not know, a pattern of the wrong length, and a pattern with no attention layer are refused
naming the field: an unknown layer is never priced as full attention, and a model with no KV cache at all is not
one the simulator's KV-token admission can plan. Nemotron-3's ``E`` / ``moe`` layers are MLP layers whose MLP is
routed (``moe.py`` reads their experts, latent width and shared expert; `placed_moe_layers` says how many).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.errors import BadInputError
from recommender.perf.model.linear_attention import GatedDeltaNet, Mamba2, Mixer, RecurrentLayers

#: Nemotron-H's characters and ``layers_block_type``'s words, as the kinds below.
_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
#: Kinds a layer may be, and whether each has softmax attention / a recurrent mixer / an MLP.
_KINDS = {
    "full_attention": (True, False, True),
    "sliding_attention": (True, False, True),
    "chunked_attention": (True, False, True),
    "linear_attention": (False, True, True),
    "mamba": (False, True, False),
    "attention": (True, False, False),
    "mlp": (False, False, True),
    "moe": (False, False, True),
}
#: fp32 recurrent state where the config asks for it; 16 bits otherwise (``linear_attention.py``).
_STATE_DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "auto": 2.0}


@dataclass(frozen=True, slots=True)
class LayerPattern:
    """Each layer's kind (``_KINDS``), and the config field it was read from."""

    kinds: tuple[str, ...]
    field: str

    def count(self, *, attention: bool = False, recurrent: bool = False, mlp: bool = False) -> int:
        column = 0 if attention else 1 if recurrent else 2
        assert attention or recurrent or mlp
        return sum(1 for kind in self.kinds if _KINDS[kind][column])


def _kinds_from(config: Any) -> tuple[tuple[str, ...], str] | None:
    pattern = getattr(config, "hybrid_override_pattern", None)
    if pattern is not None:
        if not isinstance(pattern, str):
            raise BadInputError("hybrid_override_pattern", f"{pattern!r} is not a string", 'write it as "M-M*-..."')
        return tuple(_BLOCKS.get(ch, ch) for ch in pattern), "hybrid_override_pattern"
    blocks = getattr(config, "layers_block_type", None)
    if blocks is not None:
        return tuple(str(b) for b in blocks), "layers_block_type"
    types = getattr(config, "layer_types", None)
    if types is not None:
        return tuple(str(t) for t in types), "layer_types"
    interval = getattr(config, "full_attention_interval", None)
    if interval is not None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise BadInputError("full_attention_interval", f"{interval!r}", "give a positive whole number of layers")
        n = int(config.num_hidden_layers)
        kinds = tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n))
        return kinds, "full_attention_interval"
    return None


def parse_pattern(config: Any, *, n_layers: int) -> LayerPattern | None:
    """The layer pattern of `config`, or None when it writes none (every layer full attention and an MLP)."""
    found = _kinds_from(config)
    if found is None:
        return None
    kinds, field = found
    if len(kinds) != n_layers:
        raise BadInputError(field, f"{len(kinds)} layers for num_hidden_layers {n_layers}", "give one entry per layer")
    unknown = next((k for k in kinds if k not in _KINDS), None)
    if unknown is not None:
        raise BadInputError(
            field,
            f"layer {unknown[:40]!r} not modeled",
            f"plan a model whose layers are {', '.join(_KINDS)} (others are refused, never priced as attention)",
        )
    pattern = LayerPattern(kinds, field)
    if pattern.count(attention=True) == 0:
        raise BadInputError(
            field,
            "names no attention layer (a model without a KV cache is not planned)",
            "give the model's real pattern, with its attention layers",
        )
    return pattern


def placed_moe_layers(pattern: LayerPattern | None) -> int | None:
    """Layers a block pattern (Nemotron's ``hybrid_override_pattern`` / ``layers_block_type``) makes
    mixture-of-experts layers (``E`` / ``moe``); None where the pattern does not place them (``layer_types``, or no
    pattern: the MoE fields do, ``moe.py``)."""
    if pattern is None or pattern.field not in ("hybrid_override_pattern", "layers_block_type"):
        return None
    return pattern.kinds.count("moe")


def _positive(config: Any, name: str, family: str, default: int | None = None) -> int:
    value = getattr(config, name, None)
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInputError(name, f"{value!r} in a {family} config", f"give {name} as a positive whole number")
    return value


def _mixer(config: Any, pattern: LayerPattern) -> Mixer:
    if "linear_attention" in pattern.kinds:
        if "mamba" in pattern.kinds:
            raise BadInputError(pattern.field, "mixes linear attention and Mamba layers", "plan one hybrid at a time")
        family = "Gated DeltaNet (linear_attention)"
        return GatedDeltaNet(
            key_heads=_positive(config, "linear_num_key_heads", family),
            value_heads=_positive(config, "linear_num_value_heads", family),
            key_head_dim=_positive(config, "linear_key_head_dim", family),
            value_head_dim=_positive(config, "linear_value_head_dim", family),
            conv_kernel=_positive(config, "linear_conv_kernel_dim", family),
        )
    family = "Mamba2"
    return Mamba2(
        heads=_positive(config, "mamba_num_heads", family),
        head_dim=_positive(config, "mamba_head_dim", family),
        state_size=_positive(config, "ssm_state_size", family),
        groups=_positive(config, "n_groups", family, 1),
        conv_kernel=_positive(config, "conv_kernel", family, 4),
    )


def _state_bytes(config: Any) -> float:
    for name in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        value = getattr(config, name, None)
        if value is None:
            continue
        if value not in _STATE_DTYPE_BYTES:
            raise BadInputError(name, f"{value!r} is not a state dtype", f"give one of {', '.join(_STATE_DTYPE_BYTES)}")
        return _STATE_DTYPE_BYTES[str(value)]
    return 2.0


def parse_recurrent(config: Any, pattern: LayerPattern | None) -> RecurrentLayers | None:
    """The recurrent layers of `config` (None when its pattern has none): their widths, how the layers split, and the
    state dtype."""
    if pattern is None or pattern.count(recurrent=True) == 0:
        if pattern is not None and pattern.count(mlp=True) < len(pattern.kinds):  # Nemotron attention/MLP split
            return RecurrentLayers(_no_mixer(), 0, pattern.count(attention=True), pattern.count(mlp=True))
        return None
    return RecurrentLayers(
        mixer=_mixer(config, pattern),
        n_recurrent=pattern.count(recurrent=True),
        n_attention=pattern.count(attention=True),
        n_mlp=pattern.count(mlp=True),
        ssm_state_bytes=_state_bytes(config),
    )


def _no_mixer() -> Mixer:
    """A placeholder mixer for a split pattern with no recurrent layer (zero of them: it adds nothing)."""
    return Mamba2(heads=1, head_dim=1, state_size=1, groups=1, conv_kernel=1)
