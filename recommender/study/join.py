"""`recommender worker`: join a study another process started and pull its trials until its budget is met."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from recommender.errors import BadInputError
from recommender.study.coordinator import make_worker
from recommender.study.prepare import prepare, spec_from_study
from recommender.study.space import grid_size
from recommender.study.storage import (
    PARENT_RUN_ATTR,
    SPEC_FINGERPRINT_ATTR,
    open_study,
    rdb_storage,
    stored_tracking_uri,
    unusable_storage,
)
from recommender.study.worker import BUDGET_ATTR, ProgressFn, StatusFn
from recommender.tracking import Tracker


@dataclass
class WorkerOutcome:
    study_name: str
    storage: str
    worker_id: str
    candidates_evaluated: int
    quality_computed: int
    candidates_in_study: int
    budget: int


def run_worker(
    study_name: str,
    *,
    storage: str,
    tracking_uri: str | None = None,
    on_trial: ProgressFn | None = None,
    on_status: StatusFn | None = None,
    interrupted: threading.Event | None = None,
) -> WorkerOutcome:
    """Join the study `study_name` (started by `recommender search`) and pull its trials until its budget is met.

    The spec comes from the study; the MLflow store is the one the study was started with unless
    `tracking_uri` names another (a server every machine reaches). The coordinator writes the recommendation.
    """
    import optuna

    try:
        opened = rdb_storage(storage, 10.0)
        summaries = optuna.study.get_all_study_summaries(opened)
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server
        fix = "pass the postgresql:// (or sqlite:///) URL the study was started with"
        raise unusable_storage(storage, exc, fix) from None
    names = sorted(s.study_name for s in summaries)
    if study_name not in names:
        raise BadInputError(
            "--study",
            f"no study {study_name!r} in {storage} (studies there: {', '.join(names[:10]) or 'none'})",
            "start it with `recommender search SPEC --storage URL`, or pass one of those names",
        )
    probe = optuna.load_study(study_name=study_name, storage=opened)
    if SPEC_FINGERPRINT_ATTR not in probe.user_attrs:  # the coordinator stores it last
        raise BadInputError("--study", f"study {study_name!r} is still being set up by its coordinator",
                            "start the worker again in a few seconds")  # fmt: skip
    spec = spec_from_study(probe, study_name, storage)
    prepared = prepare(spec)
    uri = tracking_uri or stored_tracking_uri(probe) or ""
    tracker = Tracker.open(uri, experiment=f"recommender/{prepared.source.name}")
    study = open_study(
        storage, study_name, random.SystemRandom().randrange(2**31),  # workers sample apart, not in lockstep
        exhaustive=grid_size(spec) <= int(probe.user_attrs[BUDGET_ATTR]), heartbeat_s=spec.search.heartbeat_s,
    )  # fmt: skip
    worker = make_worker(study, prepared, tracker, study.user_attrs[PARENT_RUN_ATTR], storage,
                     on_trial=on_trial, on_status=on_status, interrupted=interrupted)  # fmt: skip
    worker.work()
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
