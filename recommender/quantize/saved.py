"""A checkpoint directory written earlier (`recommender quantize`, or a study), scored as it is on disk.

`recommender eval --scheme S --checkpoint DIR` measures the very files an engine will load.
The directory must be the scheme's format (compressed-tensors, ModelOpt or Quark), recipe (when the tool's recipe
file is there) and what its own metadata says (`checkpoint_metadata`: algorithm, group size, KV dtype, whether or
not the recipe file is there): scoring an NVFP4 export under the name of FP8 would put one scheme's numbers on another.
Its identity is the scheme's plus the hash of its weights, so the quality cache never mixes two
checkpoints of one scheme (say, calibrated on different documents).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.device import DeviceInfo
from recommender.errors import BadInputError
from recommender.input_files import read_text, usable_path
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint_metadata import check_checkpoint_metadata
from recommender.quantize.checkpoint_scheme import CheckpointScheme

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


@dataclass(frozen=True, kw_only=True)
class SavedCheckpoint(QuantScheme):
    """`scheme` as saved in `path`; loads the directory, never quantizes."""

    scheme: QuantScheme
    path: Path
    weights_hash: str

    def identity(self) -> str:
        return f"{self.scheme.identity()}@{self.weights_hash}"

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        assert isinstance(self.scheme, CheckpointScheme)  # saved_checkpoint only makes these
        return self.scheme.load_saved(self.path, device)


def saved_checkpoint(scheme: QuantScheme, path: Path, *, field: str = "--checkpoint") -> SavedCheckpoint:
    """`path` checked to be `scheme`'s checkpoint (one BadInputError line otherwise)."""
    from recommender.models.source import ModelSource

    if not isinstance(scheme, CheckpointScheme) or scheme.checkpoint_format is None:
        raise BadInputError(field, f"{scheme.name} writes no checkpoint", "pass a checkpoint scheme")
    config_file = path / "config.json"
    if not usable_path(config_file, field=field).is_file():
        raise BadInputError(field, f"{path} has no config.json", "give a directory written by `recommender quantize`")
    recipe = path / scheme.recipe_file
    if recipe.is_file() and read_text(recipe, field=field, what="recipe") != scheme.recipe:
        raise BadInputError(
            field,
            f"{path} was made with another recipe than {scheme.name}'s",
            f"pass the scheme it was made with (its recipe is {recipe})",
        )
    check_checkpoint_metadata(scheme, path, field=field)  # with or without the recipe: what the files say
    fingerprint = ModelSource.resolve(str(path), base_dir=path, field=field).fingerprint()
    return SavedCheckpoint(
        name=scheme.name,
        precision=scheme.precision,
        library=scheme.library,
        bits_per_weight=scheme.bits_per_weight,
        weight_only=scheme.weight_only,
        devices=scheme.devices,
        kernel_family=scheme.kernel_family,
        checkpoint_format=scheme.checkpoint_format,
        description=f"{scheme.description}; saved at {path}",
        scheme=scheme,
        path=path,
        weights_hash=fingerprint,
    )
