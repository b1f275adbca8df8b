"""Every check `recommender search` makes before it writes, in one function that `search --dry-run` calls too.

A dry run that skipped a check the real command makes would answer "fine" to a spec or a command line the
search then refuses (`--resume` of a study that does not exist, a study of another spec under the same name,
an output folder that cannot be written): so there is one list of checks, and both commands run all of it.
Each check only reads: the destinations are looked at, the servers asked to answer, the study's stored
attributes read without opening it through Optuna (which would create tables and the study).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recommender.config.destinations import check_search_destinations, tracking_uri_field
from recommender.config.spec import SearchSpec
from recommender.errors import BadInputError
from recommender.releases.tracking import probe_server
from recommender.study.prepare import Prepared, prepare
from recommender.study.storage import (
    SPEC_FINGERPRINT_ATTR,
    SPEC_JSON_ATTR,
    check_perf_model,
    probe_storage,
    stored_study_attrs,
    stored_study_names,
)

#: How many changed settings a refusal names before "and N more".
SHOWN_CHANGES = 3


def check_search(spec: SearchSpec, *, storage: str, tracking_uri: str, output_root: Path, resume: bool) -> Prepared:
    """Refuse anything `search` would refuse before its first row, file or progress line; the spec prepared."""
    check_search_destinations(
        storage=storage, tracking_uri=tracking_uri, output_root=output_root, study_name=spec.study_name, resume=resume
    )
    probe_storage(storage)
    probe_server(tracking_uri, field=tracking_uri_field(tracking_uri))
    check_continuable(stored_study_attrs(storage, spec.study_name), spec, storage, resume=resume)
    return prepare(spec)


def check_continuable(attrs: Mapping[str, Any] | None, spec: SearchSpec, storage: str, *, resume: bool) -> None:
    """The study under the spec's name may be continued by this spec (`attrs`: its user attributes; None or
    empty: there is no study yet, which `--resume` refuses)."""
    previous = (attrs or {}).get(SPEC_FINGERPRINT_ATTR)
    if resume and previous is None:
        raise BadInputError(
            "--resume",
            f"no study {spec.study_name!r} in {storage} to resume{_edited_since(spec, storage)}",
            "drop --resume to start it",
        )
    if previous is not None and previous != spec.fingerprint():
        changed = spec_changes((attrs or {}).get(SPEC_JSON_ATTR), spec)
        raise BadInputError(
            "search.study_name",
            f"study {spec.study_name!r} exists with a different spec" + (f" ({changed})" if changed else ""),
            "rename the study (search.study_name) or restore the spec it was started with",
        )
    check_perf_model(attrs or {}, spec.study_name, field="search.study_name")


def _edited_since(spec: SearchSpec, storage: str) -> str:
    """Where the study's default name (`<name>-<spec hash>-<fit>`) changed with the spec: which study of the
    same spec name the spec was edited since, and what changed (empty when there is none, or a name was set)."""
    if spec.search.study_name:
        return ""
    for name in sorted(n for n in stored_study_names(storage) if n.startswith(f"{spec.name}-")):
        changed = spec_changes((stored_study_attrs(storage, name) or {}).get(SPEC_JSON_ATTR), spec)
        if changed:
            return f"; the spec was edited since study {name!r} ({changed})"
    return ""


def spec_changes(stored: Any, spec: SearchSpec) -> str:
    """What differs between the spec a study stored (`SPEC_JSON_ATTR`) and `spec`, as `key: was -> now` for the
    first few settings that differ (`search`, which does not change a study's fingerprint, left out); empty when
    the study stored no spec to compare with."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("spec"), Mapping):
        return ""
    before = {k: v for k, v in stored["spec"].items() if k != "search"}
    now = {k: v for k, v in spec.model_dump(mode="json").items() if k != "search"}
    changes = list(_differences(before, now, ""))
    shown = "; ".join(f"{key}: {_short(a)} -> {_short(b)}" for key, a, b in changes[:SHOWN_CHANGES])
    more = len(changes) - SHOWN_CHANGES
    return shown + (f"; and {more} more" if more > 0 else "")


def _differences(before: Any, now: Any, key: str) -> Any:
    if isinstance(before, Mapping) and isinstance(now, Mapping):
        for name in sorted({*before, *now}, key=str):
            inner = f"{key}.{name}" if key else str(name)
            yield from _differences(before.get(name), now.get(name), inner)
    elif before != now:
        yield key, before, now


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
