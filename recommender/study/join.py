"""`recommender worker`: join a study another process started and pull its trials until its budget is met."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.config.destinations import check_cache_root, check_name, check_storage_url, check_tracking_uri
from recommender.errors import BadInputError
from recommender.releases.tracking import Tracker
from recommender.study.coordinator import make_worker
from recommender.study.prepare import Prepared, prepare, spec_from_study
from recommender.study.space import grid_size
from recommender.study.storage import (
    PARENT_RUN_ATTR,
    SPEC_FINGERPRINT_ATTR,
    check_perf_model,
    open_study,
    rdb_storage,
    stored_tracking_uri,
    unusable_storage,
)
from recommender.study.worker import BUDGET_ATTR, ProgressFn, StatusFn

if TYPE_CHECKING:
    import optuna


@dataclass
class WorkerOutcome:
    study_name: str
    storage: str
    worker_id: str
    candidates_evaluated: int
    quality_computed: int
    candidates_in_study: int
    budget: int


@dataclass
class Joined:
    """A study found and its spec prepared: everything a worker checks before it draws or writes anything."""

    probe: optuna.Study
    prepared: Prepared
    tracking_uri: str


def _no_study(study_name: str, storage: str, names: list[str]) -> BadInputError:
    return BadInputError(
        "--study",
        f"no study {study_name!r} in {storage} (studies there: {', '.join(names[:10]) or 'none'})",
        "start it with `recommender search SPEC --storage URL`, or pass one of those names",
    )


def join_study(study_name: str, *, storage: str, tracking_uri: str | None = None) -> Joined:
    """Find the study and prepare its spec; every refusal comes here, before any row or progress line."""
    import optuna

    check_name(study_name, field="--study", what="study name")
    check_storage_url(storage)
    if tracking_uri is not None:
        check_tracking_uri(tracking_uri)
    check_cache_root()
    if storage.startswith("sqlite:///") and not Path(storage.removeprefix("sqlite:///")).is_file():
        raise _no_study(study_name, storage, [])  # opening it would create an empty database
    try:
        opened = rdb_storage(storage, 10.0)
        summaries = optuna.study.get_all_study_summaries(opened)
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server
        fix = "pass the postgresql:// (or sqlite:///) URL the study was started with"
        raise unusable_storage(storage, exc, fix) from None
    names = sorted(s.study_name for s in summaries)
    if study_name not in names:
        raise _no_study(study_name, storage, names)
    probe = optuna.load_study(study_name=study_name, storage=opened)
    if SPEC_FINGERPRINT_ATTR not in probe.user_attrs:  # the coordinator stores it last
        raise BadInputError(
            "--study",
            f"study {study_name!r} is still being set up by its coordinator",
            "start the worker again in a few seconds",
        )
    check_perf_model(probe, study_name, field="--study")
    prepared = prepare(spec_from_study(probe, study_name, storage))
    uri = tracking_uri or stored_tracking_uri(probe) or ""
    check_tracking_uri(uri)
    return Joined(probe, prepared, uri)


def run_worker(
    study_name: str,
    *,
    storage: str,
    tracking_uri: str | None = None,
    on_trial: ProgressFn | None = None,
    on_status: StatusFn | None = None,
    interrupted: threading.Event | None = None,
    joined: Joined | None = None,
) -> WorkerOutcome:
    """Join the study `study_name` (started by `recommender search`) and pull its trials until its budget is met.

    The spec comes from the study; the MLflow store is the one the study was started with unless
    `tracking_uri` names another (a server every machine reaches). The coordinator writes the recommendation.
    `joined` is `join_study`'s answer when the caller checked first (the command line does, before its
    progress display).
    """
    joined = joined or join_study(study_name, storage=storage, tracking_uri=tracking_uri)
    probe, prepared, spec = joined.probe, joined.prepared, joined.prepared.spec
    tracker = Tracker.open(joined.tracking_uri, experiment=f"recommender/{prepared.source.name}")
    study = open_study(
        storage,
        study_name,
        random.SystemRandom().randrange(2**31),  # workers sample apart, not in lockstep
        exhaustive=grid_size(spec) <= int(probe.user_attrs[BUDGET_ATTR]),
        heartbeat_s=spec.search.heartbeat_s,
    )
    worker = make_worker(
        study,
        prepared,
        tracker,
        study.user_attrs[PARENT_RUN_ATTR],
        storage,
        on_trial=on_trial,
        on_status=on_status,
        interrupted=interrupted,
    )
    worker.work()
    worker.tracking.flush_waiting()
    worker.evaluator.quality.models.release()
    return WorkerOutcome(
        study_name=study_name,
        storage=storage,
        worker_id=worker.worker_id,
        candidates_evaluated=worker.evaluated_here,
        quality_computed=worker.evaluator.quality.computed_here,
        candidates_in_study=len(worker.refresh()),
        budget=worker.budget(),
    )
