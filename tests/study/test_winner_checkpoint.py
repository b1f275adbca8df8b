"""The winner's checkpoint lands under the study; for a hub model it becomes a recipe and a command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from recommender.models.source import ModelSource
from recommender.quantize import get_scheme
from recommender.quantize.checkpoint import CheckpointStore, QuantizeContext
from recommender.quantize.llmcompressor import LlmCompressorScheme
from recommender.study.winner_checkpoint import CHECKPOINT_DIR, place_checkpoint
from tests.conftest import REPO

SUITE = REPO / "recommender" / "demo" / "use_case.yaml"


def test_scored_checkpoint_is_copied_under_the_study(tmp_path: Path, demo_model_dir: Path) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    context = QuantizeContext(CheckpointStore(tmp_path / "store"))
    scheme = get_scheme("fp8-dynamic")
    assert isinstance(scheme, LlmCompressorScheme)
    scored = scheme.checkpoint(source, context)
    placed = place_checkpoint(
        get_scheme("fp8-dynamic+kv-fp8"), source, context, tmp_path / "study", use_case=SUITE, calibration_samples=16
    )
    target = tmp_path / "study" / CHECKPOINT_DIR
    assert placed.model == str(target) and placed.written == [target]
    quant = json.loads((target / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors" and quant["config_groups"]
    assert (target / "model.safetensors").read_bytes() == (scored / "model.safetensors").read_bytes()


def test_hub_model_gets_the_recipe_and_the_command(tmp_path: Path) -> None:
    source = ModelSource.resolve("meta-llama/Llama-3.1-8B-Instruct", base_dir=tmp_path)
    context = QuantizeContext(CheckpointStore(tmp_path / "store"))
    placed = place_checkpoint(
        get_scheme("w4a16-gptq-g128"), source, context, tmp_path / "study", use_case=SUITE, calibration_samples=128
    )
    recipe, command = (tmp_path / "study" / "recipe.yaml"), (tmp_path / "study" / "quantize.sh")
    assert placed.written == [recipe, command] and "GPU machine" in placed.note
    assert yaml.safe_load(recipe.read_text())["quant_stage"]["quant_modifiers"]["GPTQModifier"]["scheme"] == "W4A16"
    argv = shlex.split(command.read_text().splitlines()[-1])
    assert argv[:3] == ["recommender", "quantize", "--model"] and "meta-llama/Llama-3.1-8B-Instruct" in argv
    assert argv[argv.index("--calibration-docs") + 1] == "128" and argv[argv.index("--scheme") + 1] == "w4a16-gptq-g128"
    assert not (tmp_path / "store").exists()  # nothing was downloaded or quantized


def test_in_flight_schemes_serve_the_original_weights(tmp_path: Path, demo_model_dir: Path) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    for name in ("bnb-nf4", "fp8-online", "baseline"):
        placed = place_checkpoint(
            get_scheme(name),
            source,
            QuantizeContext(CheckpointStore(tmp_path)),
            tmp_path / name,
            use_case=SUITE,
            calibration_samples=16,
        )
        assert placed.model == source.location and placed.written == []
