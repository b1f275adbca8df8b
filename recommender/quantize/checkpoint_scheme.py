"""A scheme that writes a quantized checkpoint an engine loads, and is scored on that checkpoint loaded back.

Two libraries write such checkpoints: llm-compressor (compressed-tensors, which vLLM and SGLang load)
and NVIDIA ModelOpt (``hf_quant_config.json``, which TensorRT-LLM, vLLM and SGLang load). What they
share lives here once: the checkpoint is content-addressed by what decides its bytes (the model, the
recipe text, the calibration tokens, the library versions), calibrating schemes take the use case's
unscored documents, and quality is measured on the directory as written, loaded back — never on the
in-process model the library quantized, which is not what an engine serves.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from recommender.device import DeviceInfo
from recommender.errors import SchemeUnavailableError
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint import CalibrationSet, QuantizeContext, checkpoint_key

if TYPE_CHECKING:
    from torch import nn

    from recommender.models.source import ModelSource


@dataclass(frozen=True, kw_only=True)
class CheckpointScheme(QuantScheme):
    """A recipe a library applies and saves; the saved directory is what is served and scored.

    Args:
        recipe: the recipe as text in the library's own terms (it decides the weights: the checkpoint key
            and the file written beside the checkpoint, `recipe_file`).
        calibrates: True when the recipe runs calibration data through the model.
    """

    recipe: str
    calibrates: bool
    #: The file the recipe is written to inside the checkpoint and beside a study's winner.
    recipe_file: ClassVar[str] = "recipe.yaml"
    #: ``quantization_config.quant_method`` in the config.json the library writes (how a saved one is recognised).
    quant_method: ClassVar[str]

    def missing_library(self) -> tuple[str, str] | None:
        """The library this scheme needs that is not installed and the command that installs it, or None (its
        libraries are dependencies). An optional extra's scheme is refused with that line, never half-run."""
        return None

    def unavailable_reason(self, device: DeviceInfo) -> str | None:
        missing = self.missing_library()
        if missing is not None:
            return f"{self.name} needs {missing[0]}, which is not installed: {missing[1]}"
        return super().unavailable_reason(device)

    @abstractmethod
    def library_versions(self) -> dict[str, str]:
        """The versions of the libraries that decide the checkpoint's bytes."""

    @abstractmethod
    def write_checkpoint(self, source: ModelSource, out: Path, calibration: CalibrationSet | None) -> None:
        """Quantize `source` and save the checkpoint (weights, config, tokenizer, recipe) to `out`."""

    @abstractmethod
    def load_saved(self, path: Path, device: DeviceInfo) -> nn.Module:
        """The checkpoint at `path` loaded for scoring, with the numerics an engine serves it with."""

    def checkpoint_key(self, model_fingerprint: str, calibration: CalibrationSet | None) -> str:
        """What decides the checkpoint's bytes: model, recipe, calibration tokens, library versions."""
        return checkpoint_key(
            model=model_fingerprint,
            recipe=self.recipe,
            calibration=calibration.fingerprint if calibration is not None else None,
            **self.library_versions(),
        )

    def calibration_for(self, context: QuantizeContext) -> CalibrationSet | None:
        """The calibration set this recipe runs, or None for a data-free recipe."""
        if not self.calibrates:
            return None
        calibration = context.calibration_set()
        if calibration is None or not calibration.rows:
            raise SchemeUnavailableError(f"{self.name} calibrates on documents, and none were given")
        return calibration

    def checkpoint(self, source: ModelSource, context: QuantizeContext) -> Path:
        """The saved checkpoint directory for `source`: found in the store or made now."""
        calibration = self.calibration_for(context)
        key = self.checkpoint_key(source.fingerprint(), calibration)
        return context.store.make(
            key,
            lambda out: self.write_checkpoint(source, out, calibration),
            expected_bytes=self._expected_bytes(source),
        )

    def _expected_bytes(self, source: ModelSource) -> int:
        """About what the checkpoint takes: the source's 16-bit weights at this scheme's bits (0: not local)."""
        from pathlib import Path

        root = Path(source.location)
        weights = sum(p.stat().st_size for p in root.glob("*.safetensors")) if root.is_dir() else 0
        return int(weights * self.bits_per_weight / 16)

    def serve_hint(self, out: Path) -> str:
        """The command that serves the checkpoint written to `out` (for `recommender quantize`)."""
        return f"vllm serve {out}"

    def _load(self, source: ModelSource, device: DeviceInfo, context: QuantizeContext | None) -> nn.Module:
        if context is None:
            raise SchemeUnavailableError(f"{self.name} is scored on its saved checkpoint: no checkpoint store given")
        return self.load_saved(self.checkpoint(source, context), device)
