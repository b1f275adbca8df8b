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
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recommender.integrity import directory_bytes, out_of_space, read_sealed, space_errno, write_sealed
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
        """The finished checkpoint for `key`, or None: also when a file no longer matches the manifest written
        with it (truncated, overwritten, a safetensors header that lies about its size), which is said in one
        line and the directory set aside, so it is made again rather than scored."""
        path = self.path(key)
        if not (path / "config.json").is_file():
            return None
        why = manifest_mismatch(path)
        if why is None:
            return path
        sys.stderr.write(f"note: checkpoint {path} is corrupt ({why}); it is set aside and quantized again\n")
        aside = Path(tempfile.mkdtemp(prefix=f".corrupt-{key}.", dir=self.root))
        os.replace(path, aside / key)
        shutil.rmtree(aside, ignore_errors=True)
        return None

    def make(self, key: str, write: Callable[[Path], None], *, expected_bytes: int = 0) -> Path:
        """The checkpoint for `key`: found, or written by `write(directory)` with its manifest and renamed into
        place; a full disk is one line naming the checkpoint and the space it needs (`expected_bytes`, or what
        was written before the disk ran out), with no debris."""
        found = self.find(key)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        try:
            write(staging)
            write_manifest(staging)
            apply_umask_modes(staging)  # mkdtemp's 0700 and the weights' 0600 would lock other users out
            try:
                os.rename(staging, self.path(key))
            except OSError:  # another process finished the same key first: keep theirs
                if self.find(key) is None:
                    raise
        except Exception as exc:  # OSError, or a writer's own error around one (safetensors' SafetensorError)
            if space_errno(exc) is not None:
                written = directory_bytes(staging)
                raise out_of_space(
                    self.path(key), exc, max(written, expected_bytes), at_least=written >= expected_bytes
                ) from None
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.path(key)


#: Written into each checkpoint directory: every file's size and sha256, checked whenever the store finds it.
MANIFEST = ".recommender-manifest.json"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory: Path) -> None:
    """Each file's size and sha256, sealed (`recommender.integrity`), beside the files."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)
    entries = {str(p.relative_to(directory)): {"bytes": p.stat().st_size, "sha256": _file_digest(p)} for p in files}
    write_sealed(directory / MANIFEST, entries)


def manifest_mismatch(directory: Path) -> str | None:
    """Why `directory` is not what its manifest says (None: it is, or it predates manifests)."""
    if not (directory / MANIFEST).exists():
        return None  # made before manifests: renamed into place whole, as before
    entries = read_sealed(directory / MANIFEST, what="checkpoint manifest")
    if not isinstance(entries, dict):
        return "its manifest is unreadable"
    for name, expected in entries.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected.get("bytes"):
            return f"{name} holds {path.stat().st_size:,} bytes, {expected.get('bytes'):,} were written"
        if _file_digest(path) != expected.get("sha256"):
            return f"{name} does not match its sha256"
    return None


def default_store() -> CheckpointStore:
    """Checkpoints under the cache root, shared by every study and command on this machine."""
    from recommender.paths import cache_root

    return CheckpointStore(cache_root() / "checkpoints")


def checkpoint_key(**parts: object) -> str:
    """A short stable key from named parts (sorted, JSON), for `CheckpointStore`."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]
