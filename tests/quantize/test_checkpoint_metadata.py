"""A checkpoint is scored only under the scheme its own metadata names, for every backend, recipe file or not.

Each checkpoint here is a small real directory holding the files the engines read (config.json's
``quantization_config``, ModelOpt's ``hf_quant_config.json``) as each library writes them: compressed-tensors'
``config_groups`` from its presets (the table is checked against ``PRESET_SCHEMES`` in test_llmcompressor.py),
ModelOpt 0.47's export (both files), Quark's ``global_quant_config``, and the hub's other quantizers (GPTQ,
AWQ, bitsandbytes, torchao, ...). No weights are needed: the refusal comes before any is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recommender.errors import BadInputError
from recommender.quantize import all_schemes
from recommender.quantize.checkpoint_metadata import (
    CT_PRESETS,
    MODELOPT_ALGOS,
    READERS,
    check_checkpoint_metadata,
    ct_preset,
    describe_checkpoint,
    expected,
)
from recommender.quantize.checkpoint_scheme import CheckpointScheme
from recommender.quantize.llmcompressor import LlmCompressorScheme
from recommender.quantize.modelopt import ModelOptScheme
from recommender.quantize.quark import QuarkScheme
from recommender.quantize.saved import saved_checkpoint


def _checkpoint_schemes() -> list[CheckpointScheme]:
    """Every registered scheme that writes a checkpoint, and its FP8-KV variant where that is a checkpoint too."""
    schemes = [s for s in all_schemes().values() if isinstance(s, CheckpointScheme) and s.checkpoint_format]
    variants = [v for s in schemes if isinstance(v := s.fp8_kv_variant(), CheckpointScheme) and v is not s]
    return schemes + variants


SCHEMES = _checkpoint_schemes()
BY_NAME = {s.name: s for s in SCHEMES}


def _modelopt_files(scheme: ModelOptScheme) -> dict[str, Any]:
    """config.json's quantization_config and hf_quant_config.json as ModelOpt 0.47's export_hf_checkpoint writes."""
    algo, group = MODELOPT_ALGOS[scheme.config_name]
    bits = {"FP8": (8, "float"), "NVFP4": (4, "float"), "W4A16_AWQ": (4, "int")}[algo]
    weights = {"dynamic": False, "num_bits": bits[0], "type": bits[1], **({"group_size": group} if group else {})}
    quant: dict[str, Any] = {
        "config_groups": {"group_0": {"weights": weights, "targets": ["Linear"]}},
        "ignore": ["lm_head"],
        "quant_algo": algo,
        "producer": {"name": "modelopt", "version": "0.47.0"},
        "quant_method": "modelopt",
    }
    hf: dict[str, Any] = {"quant_algo": algo, "kv_cache_quant_algo": "FP8" if scheme.kv_fp8 else None}
    if group:
        hf["group_size"] = group
    if scheme.kv_fp8:
        quant["kv_cache_scheme"] = {"dynamic": False, "num_bits": 8, "type": "float"}
    if algo == "W4A16_AWQ":  # ModelOpt 0.47 writes AWQ's group size only to hf_quant_config.json
        weights.pop("group_size")
    return {"quantization_config": quant, "hf_quant_config.json": {"producer": quant["producer"], "quantization": hf}}


def _quantization(scheme: CheckpointScheme) -> dict[str, Any]:
    """What a checkpoint of `scheme` carries, per file (``quantization_config`` goes into config.json)."""
    if isinstance(scheme, ModelOptScheme):
        return _modelopt_files(scheme)
    if isinstance(scheme, QuarkScheme):
        args = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False, "ch_axis": None}
        glob = {"weight": args, "input_tensors": args, "output_tensors": None, "bias": None}
        config = {"quant_method": "quark", "global_quant_config": glob, "layer_quant_config": {}}
        return {"quantization_config": {**config, "exclude": ["lm_head"]}}
    assert isinstance(scheme, LlmCompressorScheme)
    weights, acts = CT_PRESETS[ct_preset(scheme)]
    group = {"targets": ["Linear"], "weights": weights, "input_activations": acts, "output_activations": None}
    return {
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {"group_0": group},
            "ignore": ["lm_head"],
            "kv_cache_scheme": None,
        }
    }


def _write(root: Path, files: dict[str, Any]) -> Path:
    root.mkdir(parents=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256}
    config["quantization_config"] = files.get("quantization_config")
    (root / "config.json").write_text(json.dumps(config))
    for name, content in files.items():
        if name != "quantization_config":
            (root / name).write_text(json.dumps(content))
    return root


def test_every_backend_has_a_description_and_every_scheme_an_expected_one() -> None:
    assert {type(s) for s in SCHEMES} == {LlmCompressorScheme, ModelOptScheme, QuarkScheme}
    assert {"compressed-tensors", "modelopt", "quark"} <= set(READERS)
    assert all(expected(s).quant_method == s.quant_method for s in SCHEMES)


def test_every_checkpoint_is_accepted_as_itself_and_refused_as_any_other_scheme(tmp_path: Path) -> None:
    """All pairs: the checkpoint of each scheme (no recipe file beside it) under every scheme's name."""
    for made in SCHEMES:
        path = _write(tmp_path / made.name, _quantization(made))
        check_checkpoint_metadata(made, path)  # itself: accepted
        same = {s.name for s in SCHEMES if expected(s) == expected(made)}  # GPTQ and RTN checkpoints look alike
        for scored in SCHEMES:
            if scored.name in same:
                check_checkpoint_metadata(scored, path)
                continue
            with pytest.raises(BadInputError) as refused:
                check_checkpoint_metadata(scored, path)
            line = str(refused.value)
            assert line.startswith(f"--checkpoint: {path}'s ") and "\n" not in line, line
            fix = line.partition("(fix: score it as --scheme ")[2].removesuffix(")")
            assert f"; {scored.name} is " in line and made.name in fix.split(" or "), line


def test_the_issue_case_an_nvfp4_export_without_its_recipe_is_not_modelopt_fp8(tmp_path: Path) -> None:
    path = _write(tmp_path / "nvfp4", _quantization(BY_NAME["modelopt-nvfp4"]))
    with pytest.raises(BadInputError) as refused:
        check_checkpoint_metadata(BY_NAME["modelopt-fp8"], path)
    assert "quantization_config.quant_algo says NVFP4; modelopt-fp8 is FP8" in str(refused.value)
    assert "(fix: score it as --scheme modelopt-nvfp4)" in str(refused.value)


@pytest.mark.parametrize("kv", [True, False])
def test_a_kv_cache_that_differs_is_named_whichever_way(tmp_path: Path, kv: bool) -> None:
    made, scored = ("modelopt-fp8+kv-fp8", "modelopt-fp8") if kv else ("modelopt-fp8", "modelopt-fp8+kv-fp8")
    path = _write(tmp_path / "ck", _quantization(BY_NAME[made]))
    with pytest.raises(BadInputError, match=r"kv_cache_scheme says (fp8|auto); modelopt-fp8"):
        check_checkpoint_metadata(BY_NAME[scored], path)


def test_an_export_with_only_hf_quant_config_is_read_from_it(tmp_path: Path) -> None:
    """Older ModelOpt exports leave config.json without quantization_config: hf_quant_config.json describes them."""
    files = _quantization(BY_NAME["modelopt-w4a16-awq"])
    path = _write(tmp_path / "ck", {"hf_quant_config.json": files["hf_quant_config.json"]})
    check_checkpoint_metadata(BY_NAME["modelopt-w4a16-awq"], path)
    with pytest.raises(BadInputError, match=r"hf_quant_config.json quantization.quant_algo says W4A16_AWQ"):
        check_checkpoint_metadata(BY_NAME["modelopt-nvfp4"], path)


def test_config_and_hf_quant_config_that_disagree_are_refused(tmp_path: Path) -> None:
    files = _quantization(BY_NAME["modelopt-fp8"])
    files["hf_quant_config.json"]["quantization"]["quant_algo"] = "NVFP4"
    path = _write(tmp_path / "ck", files)
    with pytest.raises(BadInputError, match=r"quant_algo is FP8, hf_quant_config.json's is NVFP4"):
        check_checkpoint_metadata(BY_NAME["modelopt-fp8"], path)


#: A config.json quantization_config per other quantizer, as its library writes it (one per `READERS` entry).
FOREIGN: dict[str, dict[str, Any]] = {
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    "bitsandbytes": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    "torchao": {"quant_method": "torchao", "quant_type": {"default": {"_type": "Int4WeightOnlyConfig"}}},
    "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
    "mxfp4": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
    "hqq": {"quant_method": "hqq", "quant_config": {"weight_quant_params": {"nbits": 4, "group_size": 64}}},
    "eetq": {"quant_method": "eetq", "weights": "int8"},
    "aqlm": {"quant_method": "aqlm", "in_group_size": 8},
    "gguf": {"quant_method": "gguf"},
}


def test_every_reader_has_a_sample() -> None:
    assert set(READERS) == set(FOREIGN) | {"compressed-tensors", "modelopt", "quark"}


@pytest.mark.parametrize("method", sorted(FOREIGN))
def test_another_quantizers_checkpoint_is_refused_under_every_scheme_naming_its_method(
    tmp_path: Path, method: str
) -> None:
    path = _write(tmp_path / method, {"quantization_config": FOREIGN[method]})
    assert describe_checkpoint(path).quant_method == method
    for scored in SCHEMES:
        with pytest.raises(BadInputError) as refused:
            check_checkpoint_metadata(scored, path)
        assert f"quantization_config.quant_method says {method}; {scored.name} is {scored.quant_method}" in str(
            refused.value
        )
        assert f"recommender quantize --scheme {scored.name}" in str(refused.value)


def test_a_16_bit_directory_is_no_checkpoint_of_any_scheme(tmp_path: Path) -> None:
    path = _write(tmp_path / "plain", {})
    for scored in SCHEMES:
        with pytest.raises(BadInputError, match=r"config.json \(no quantization_config\) says none"):
            check_checkpoint_metadata(scored, path)


def test_the_recipe_file_does_not_stand_in_for_the_metadata(tmp_path: Path) -> None:
    """modelopt-fp8's own recipe beside an NVFP4 export: the files the engines read still decide."""
    fp8 = BY_NAME["modelopt-fp8"]
    path = _write(tmp_path / "ck", _quantization(BY_NAME["modelopt-nvfp4"]))
    (path / fp8.recipe_file).write_text(fp8.recipe)
    with pytest.raises(BadInputError, match="quant_algo says NVFP4; modelopt-fp8 is FP8"):
        saved_checkpoint(fp8, path)
