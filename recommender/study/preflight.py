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
from recommender.study.storage import SPEC_FINGERPRINT_ATTR, check_perf_model, probe_storage, stored_study_attrs


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
            "--resume", f"no study {spec.study_name!r} in {storage} to resume", "drop --resume to start it"
        )
    if previous is not None and previous != spec.fingerprint():
        raise BadInputError(
            "search.study_name",
            f"study {spec.study_name!r} exists with a different spec",
            "rename the study (search.study_name) or restore the spec it was started with",
        )
    check_perf_model(attrs or {}, spec.study_name, field="search.study_name")
