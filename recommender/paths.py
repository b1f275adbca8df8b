"""Where the tool keeps files on this machine: one cache root, read in one place.

Everything cached across runs (per-document quality results, the demo tasks' generated
data, lm-eval's dataset cache) lives under this root, so one environment variable moves
or isolates all of it — tests point it at a temporary directory, CI at a persisted one.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable that overrides the cache root.
CACHE_DIR_ENV = "RECOMMENDER_CACHE_DIR"


def cache_root() -> Path:
    """``$RECOMMENDER_CACHE_DIR``, else ``~/.cache/recommender``; read on every call so tests can change it."""
    env = os.environ.get(CACHE_DIR_ENV)
    from recommender.input_files import expand_user

    return expand_user(Path(env), field=f"${CACHE_DIR_ENV}") if env else Path.home() / ".cache" / "recommender"
