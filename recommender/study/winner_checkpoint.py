"""The winner's checkpoint, placed under the study's directory so its launch command points at files.

For a checkpoint scheme whose quality was measured here, the store already holds the very
directory that was scored: it is copied to ``<study>/checkpoint``. Where it is not (a hub model
too large for this machine, quality a labelled prior), the study gets the recipe (llm-compressor's or ModelOpt's)
and the exact command that writes that directory on a GPU machine. Schemes the engine applies
in flight (bitsandbytes, vLLM's online fp8) and unquantized ones serve the original weights.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from recommender.models.source import ModelSource
from recommender.quantize import QuantScheme
from recommender.quantize.checkpoint import QuantizeContext
from recommender.quantize.checkpoint_scheme import CheckpointScheme
from recommender.quantize.kv_cache import FP8KVCache

CHECKPOINT_DIR = "checkpoint"
COMMAND_FILE = "quantize.sh"


@dataclass(frozen=True)
class WinnerCheckpoint:
    """What the launch commands load and how it got there.

    Args:
        model: the path or hub id the engines serve.
        written: files written under the study (the checkpoint directory, or the recipe and command).
        note: one line for the report and the terminal.
    """

    model: str
    written: list[Path]
    note: str


def weights_scheme(method: QuantScheme) -> QuantScheme:
    """The scheme that decides the weights (an fp8 KV cache changes none)."""
    return weights_scheme(method.base) if isinstance(method, FP8KVCache) else method


def place_checkpoint(
    scored: QuantScheme,
    source: ModelSource,
    context: QuantizeContext,
    output_dir: Path,
    *,
    use_case: Path,
    calibration_samples: int,
) -> WinnerCheckpoint:
    """Copy the checkpoint `scored` (the scheme quality was scored on) under `output_dir`, or write the recipe and
    the command that makes it."""
    scheme = weights_scheme(scored)
    if not isinstance(scheme, CheckpointScheme) or scheme.checkpoint_format is None:
        return WinnerCheckpoint(source.location, [], f"{scheme.name} serves the original weights")
    target = output_dir / CHECKPOINT_DIR
    calibration = scheme.calibration_for(context) if source.is_local else None
    found = context.store.find(scheme.checkpoint_key(source.fingerprint(), calibration)) if source.is_local else None
    if found is not None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(found, target)
        return WinnerCheckpoint(str(target), [target], f"the {scheme.name} checkpoint quality was scored on: {target}")
    output_dir.mkdir(parents=True, exist_ok=True)
    recipe, command = output_dir / scheme.recipe_file, output_dir / COMMAND_FILE
    recipe.write_text(scheme.recipe, encoding="utf-8")
    argv = [
        "recommender",
        "quantize",
        "--model",
        source.location,
        "--scheme",
        scheme.name,
        "--out",
        str(target),
        "--use-case",
        str(use_case),
        "--calibration-docs",
        str(calibration_samples),
    ]
    command.write_text(
        f"#!/bin/sh\n# Run on a machine with a GPU large enough for the model.\n{shlex.join(argv)}\n", encoding="utf-8"
    )
    return WinnerCheckpoint(
        str(target), [recipe, command], f"no {scheme.name} checkpoint was made here: run {command} on a GPU machine"
    )
