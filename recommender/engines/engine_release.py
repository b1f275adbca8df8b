"""Which release of an engine a prediction is for: `--engine-release` and a spec's ``engine_releases``.

A release changes what the step costs rest on: the host time per step the fit learned for that release line
(``release_line`` in ``perf/step/calibrated.py``: a line is used only where the shipped fit calibrated it, else the
engine's host time over all its measured releases, and the provenance says which) and how its decode attention reads
an fp8 KV cache (``EngineProfile.reads_kv_at_cache_width`` in ``perf/sim/engine_profiles.py``: TensorRT-LLM before
1.2 read it at 16-bit cost). Without one, the current release is predicted, as before.

A release is written as the engine prints it: ``0.12``, ``0.12.0``, ``1.2.0rc3`` (``vllm --version``,
``python -c "import sglang; print(sglang.__version__)"``, ``trtllm-serve --version``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from recommender.engines import ENGINE_NAMES
from recommender.errors import BadInputError

__all__ = ["check_release", "engine_releases", "releases_of_listed"]

#: major.minor, then optional patch and a pre-release or local suffix (rc3, .post1, +cu128, .dev12+g1a2b).
_RELEASE = re.compile(r"^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)?$")


def check_release(release: str, *, field: str, engine: str = "") -> str:
    """`release` as given when it reads as a version, else one line naming `field` and the fix."""
    text = release.strip()
    if not _RELEASE.match(text):
        whose = f"{engine} " if engine else ""
        raise BadInputError(
            field, f"{whose}release {release!r} is not a version", "write it as the engine prints it, e.g. 0.12.0"
        )
    return text


def engine_releases(pairs: Iterable[str], *, field: str = "--engine-release") -> dict[str, str]:
    """``ENGINE=RELEASE`` pairs (``vllm=0.12.0``) as a mapping, each engine known and named once."""
    out: dict[str, str] = {}
    for pair in pairs:
        engine, sep, release = pair.partition("=")
        engine = engine.strip()
        if not sep or not engine:
            raise BadInputError(field, f"{pair!r} names no engine", "write ENGINE=RELEASE, e.g. vllm=0.12.0")
        if engine not in ENGINE_NAMES:
            raise BadInputError(field, f"unknown engine {engine!r}", f"one of {', '.join(ENGINE_NAMES)}")
        if engine in out:
            raise BadInputError(field, f"{engine} given twice", "give each engine's release once")
        out[engine] = check_release(release, field=field, engine=engine)
    return out


def releases_of_listed(releases: dict[str, str], engines: list[str]) -> None:
    """A spec's ``engine_releases``: each names an engine its ``engines`` lists and reads as a version; else a
    ValueError, which the spec's loader says with the file and the key (as every spec field's error)."""
    for engine, release in releases.items():
        if engine not in engines:
            raise ValueError(f"engine_releases names {engine!r}, which engines does not list ({engines})")
        try:
            check_release(release, field=f"engine_releases.{engine}", engine=engine)
        except BadInputError as exc:
            raise ValueError(f"{exc.problem} ({exc.fix})") from None
