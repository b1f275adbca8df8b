"""llm-compressor's preset recipes (``quantize/llmcompressor.py``): each row is the preset llm-compressor expects.

Every ``PresetRow`` is parsed by llm-compressor itself and resolved by its modifier into config groups, which must
be compressed-tensors' ``PRESET_SCHEMES`` entry for that name with the row's targets; the scheme's memory model
(bits per weight, weight-only, precision) must agree with the preset's weight and activation arguments; and the
recipe text, which keys every checkpoint made so far, is pinned.
"""

from __future__ import annotations

import pytest
from compressed_tensors.quantization import QuantizationStrategy
from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES, preset_name_to_scheme
from llmcompressor.recipe import Recipe

from recommender.quantize import get_scheme
from recommender.quantize.checkpoint_metadata import CT_PRESETS, ct_preset
from recommender.quantize.llmcompressor import METHODS, PRESETS, LlmCompressorScheme, PresetRow, preset_recipe

#: What each scheme's description promises, as the preset's (weight strategy, group size, activations: strategy and
#: dynamic, or None for weight-only): a row pointing at another preset fails here.
PROMISED = {
    "fp8-dynamic": ("channel", None, ("token", True)),
    "w4a16-gptq-g128": ("group", 128, None),
    "w4a16-rtn-g128": ("group", 128, None),
    "fp8-tensor": ("tensor", None, ("tensor", False)),
    "fp8-block": ("block", None, ("group", True)),
    "nvfp4": ("tensor_group", 16, ("tensor_group", "local")),
    "nvfp4a16": ("tensor_group", 16, None),
    "mxfp4": ("group", 32, ("group", True)),
}


def _modifier(row: PresetRow):  # type: ignore[no-untyped-def]
    recipe = Recipe.create_instance(row.recipe())
    assert len(recipe.modifiers) == 1
    return recipe.modifiers[0]


@pytest.mark.parametrize("row", PRESETS, ids=lambda row: row.name)
def test_preset_row_is_the_preset_llm_compressor_expects(row: PresetRow) -> None:
    assert row.preset in PRESET_SCHEMES
    modifier = _modifier(row)
    assert type(modifier).__name__ == row.modifier
    assert (modifier.scheme, modifier.targets, modifier.ignore) == (row.preset, list(row.targets), list(row.ignore))
    promised = preset_name_to_scheme(row.preset, list(row.targets))
    assert promised.weights is not None
    activations = promised.input_activations
    assert PROMISED[row.name] == (
        promised.weights.strategy,
        promised.weights.group_size,
        None if activations is None else (activations.strategy, activations.dynamic),
    )
    groups = modifier.resolved_config.config_groups
    assert list(groups) == ["group_0"]
    resolved, preset = groups["group_0"].model_dump(), preset_name_to_scheme(row.preset, list(row.targets)).model_dump()
    assert resolved.keys() == preset.keys() and resolved["targets"] == preset["targets"]
    for part in ("weights", "input_activations", "output_activations"):
        assert (resolved[part] is None) == (preset[part] is None), part
        # The modifier fills what the preset leaves open (the weight observer; GPTQ's activation ordering).
        kept = {k: v for k, v in (resolved[part] or {}).items() if (preset[part] or {}).get(k) is not None}
        assert kept == {k: v for k, v in (preset[part] or {}).items() if v is not None}, part


@pytest.mark.parametrize("row", PRESETS, ids=lambda row: row.name)
def test_preset_row_scheme_is_registered_and_its_memory_model_matches_the_preset(row: PresetRow) -> None:
    scheme = get_scheme(row.name)
    assert scheme == row.scheme() and scheme.recipe == row.recipe()
    preset = preset_name_to_scheme(row.preset, list(row.targets))
    weights = preset.weights
    assert weights is not None and weights.num_bits is not None
    assert scheme.weight_only == (preset.input_activations is None)
    assert scheme.precision == f"{'fp' if weights.type == 'float' else 'int'}{weights.num_bits}"
    if weights.strategy in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        assert weights.group_size is not None
        scale_bits = 8.0 if weights.scale_dtype is not None else 16.0  # an fp8 or e8m0 scale where named, else bf16
        expected = weights.num_bits + scale_bits / weights.group_size
    elif weights.strategy == QuantizationStrategy.BLOCK:
        assert weights.block_structure is not None
        rows, cols = weights.block_structure
        expected = weights.num_bits + 32.0 / (rows * cols)
    else:  # one scale per output channel or per tensor: nothing per weight at real widths
        expected = float(weights.num_bits)
    assert scheme.bits_per_weight == expected


def test_preset_recipe_is_the_recipe_text_every_checkpoint_was_keyed_by() -> None:
    """The text keys the checkpoint store and is compared with recipe.yaml beside a saved one: it must not move."""
    assert preset_recipe("FP8_DYNAMIC") == (
        "quant_stage:\n"
        "  quant_modifiers:\n"
        "    QuantizationModifier:\n"
        "      targets: [Linear]\n"
        "      scheme: FP8_DYNAMIC\n"
        "      ignore: [lm_head]\n"
    )
    gptq = get_scheme("w4a16-gptq-g128")
    assert gptq.recipe == preset_recipe("W4A16", modifier="GPTQModifier")  # type: ignore[attr-defined]


def test_the_schemes_that_are_not_one_preset_stay_whole_and_the_registry_keeps_its_order() -> None:
    assert [m.name for m in METHODS] == [
        "fp8-dynamic",
        "int8-w8a8",
        "w4a16-gptq-g128",
        "w4a16-awq-g128",
        "w4a16-rtn-g128",
        "fp8-tensor",
        "fp8-block",
        "nvfp4",
        "nvfp4a16",
        "mxfp4",
        "fp8-online",
    ]
    assert {row.name for row in PRESETS} == {m.name for m in METHODS} - {"int8-w8a8", "w4a16-awq-g128", "fp8-online"}


@pytest.mark.parametrize("preset", sorted(CT_PRESETS))
def test_checkpoint_metadata_presets_are_compressed_tensors_own(preset: str) -> None:
    """`checkpoint_metadata.CT_PRESETS` (what a checkpoint's config_groups are checked against, without importing
    compressed-tensors) holds each preset's weight and activation arguments as compressed-tensors dumps them."""
    scheme = PRESET_SCHEMES[preset]
    weights, acts = CT_PRESETS[preset]
    dumped = scheme["weights"].model_dump(mode="json")
    assert {key: dumped[key] for key in weights} == weights
    assert dumped["group_size"] == weights.get("group_size")
    assert (acts is None) == (scheme.get("input_activations") is None)
    if acts is not None:
        dumped = scheme["input_activations"].model_dump(mode="json")
        assert {key: dumped[key] for key in acts} == acts
        assert dumped["group_size"] == acts.get("group_size")


def test_every_checkpoint_scheme_recipe_applies_one_preset_of_the_table() -> None:
    for method in METHODS:
        if isinstance(method, LlmCompressorScheme) and method.checkpoint_format is not None:
            assert ct_preset(method) in CT_PRESETS
