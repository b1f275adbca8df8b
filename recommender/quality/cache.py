"""A persistent cache of per-document quality results, so nothing is evaluated twice.

Keyed by everything that can change a document's score: the model's weights
fingerprint (sha256 of the safetensors, or hub id at a revision), the method and its
configuration, the task's name and data fingerprint (its config and documents), the
lm-eval version and the batch size. Values are per-document, so a larger limit, an
adaptive evaluation growing in chunks, a resumed study or a second study with the same
model reuse every document already scored and evaluate only the missing ones.

Files are JSON, one per key, sealed with their sha256 and written atomically (write then rename:
``recommender/integrity.py``), under ``$RECOMMENDER_CACHE_DIR/quality`` (default
``~/.cache/recommender/quality``). An entry that fails its checksum is never read back as a verdict.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recommender.integrity import read_sealed, write_sealed
from recommender.paths import cache_root


def cache_key(**parts: Any) -> str:
    """A stable hash of the named parts (order-independent)."""
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class QualityCache:
    """JSON documents by key under `root`."""

    root: Path

    @classmethod
    def default(cls) -> QualityCache:
        return cls(cache_root() / "quality")

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry for `key`; None when absent or corrupt (said in one line, set aside: it is computed again)."""
        entry = read_sealed(self._path(key), what="quality cache entry")
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """`value` under `key`, sealed with its checksum and written whole or not at all (`recommender.integrity`)."""
        write_sealed(self._path(key), value)
