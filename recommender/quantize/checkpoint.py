"""Quantized checkpoints as content-addressed work: made once, found again by what decides them.

A checkpoint scheme (llm-compressor) writes a directory that a serving engine loads and that
quality is scored on. Making one costs seconds (FP8, round-to-nearest) to minutes (GPTQ,
SmoothQuant, AWQ run calibration forward passes layer by layer), so the directory is keyed
by everything that decides its bytes — the model's weights, the scheme's recipe, the
calibration tokens and the library versions — and a repeated or resumed study, or another
worker on the same machine, finds it instead of quantizing again. A directory appears under
its key only complete: it is written beside it and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recommender.quantize.file_modes import apply_umask_modes


@dataclass(frozen=True)
class CalibrationSet:
    """Token rows a calibrating scheme (GPTQ, AWQ, SmoothQuant) runs through the model.

    Args:
        rows: token ids, one list per sample, each at most the sample length.
        source: where the rows came from, for the report ("demo_code_ppl train split, 16 x 256 tokens").
        document_ids: identities of the documents the rows were cut from (to prove they are not scored).
    """

    rows: tuple[tuple[int, ...], ...]
    source: str
    document_ids: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(json.dumps(self.rows).encode())
        return digest.hexdigest()[:16]


@dataclass
class QuantizeContext:
    """What making a checkpoint needs beyond the model: where checkpoints live and calibration data.

    `calibration` is called at most once, and only by a scheme that calibrates: reading and
    tokenizing documents is skipped for FP8 and round-to-nearest.
    """

    store: CheckpointStore
    calibration: Callable[[], CalibrationSet] | None = None
    _calibration: CalibrationSet | None = field(default=None, repr=False)

    def calibration_set(self) -> CalibrationSet | None:
        if self._calibration is None and self.calibration is not None:
            self._calibration = self.calibration()
        return self._calibration


@dataclass(frozen=True)
class CheckpointStore:
    """A directory of finished checkpoints, one subdirectory per key."""

    root: Path

    def path(self, key: str) -> Path:
        return self.root / key

    def find(self, key: str) -> Path | None:
        """The finished checkpoint for `key`, or None."""
        path = self.path(key)
        return path if (path / "config.json").is_file() else None

    def make(self, key: str, write: Callable[[Path], None]) -> Path:
        """The checkpoint for `key`: found, or written by `write(directory)` and renamed into place."""
        found = self.find(key)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        try:
            write(staging)
            apply_umask_modes(staging)  # mkdtemp's 0700 and the weights' 0600 would lock other users out
            try:
                os.rename(staging, self.path(key))
            except OSError:  # another process finished the same key first: keep theirs
                if self.find(key) is None:
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.path(key)


def default_store() -> CheckpointStore:
    """Checkpoints under the cache root, shared by every study and command on this machine."""
    from recommender.paths import cache_root

    return CheckpointStore(cache_root() / "checkpoints")


def checkpoint_key(**parts: object) -> str:
    """A short stable key from named parts (sorted, JSON), for `CheckpointStore`."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]
