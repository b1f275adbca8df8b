"""The study's coordinator (`recommender search`): open the study, work, drain, refine, finish.

It creates the study (storing the spec, with absolute paths, and the budget in it), works on
it like any worker, waits for the trials other workers still run, refines around the winner
and writes the one recommendation. The current deployment is enqueued first, since every
saving is measured against it, then the unquantized scheme on every GPU
(`space.references`). An interrupted search resumes where it stopped: finished
trials are read back and not re-run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import SearchSpec
from recommender.decision.assumptions import assumptions_of
from recommender.decision.evidence import RECOMMENDATION_JSON, StudyEvidence, write_evidence
from recommender.decision.recommendation import Recommendation, build
from recommender.decision.rules import pick
from recommender.evaluation.candidate import CandidateResult
from recommender.perf.step.calibrated import fit_digest
from recommender.releases.tracking import (
    Tracker,
    absolute_storage_uri,
    absolute_store_uri,
    git_sha,
    tracking_errors,
    winner_tags,
)
from recommender.study.claims import ClaimStore, worker_id
from recommender.study.coordinator_lock import CoordinatorLock
from recommender.study.deferred_tracking import catch_up, finish_study_run
from recommender.study.preflight import check_continuable, check_search
from recommender.study.prepare import Prepared, portable_spec
from recommender.study.shown_rows import shown_rows
from recommender.study.space import grid_size, neighbourhood, references, space_choices, trial_params
from recommender.study.storage import (
    DEFAULT_STORAGE,
    PARENT_RUN_ATTR,
    PERF_MODEL_ATTR,
    SPEC_FINGERPRINT_ATTR,
    SPEC_JSON_ATTR,
    TRACKING_URI_ATTR,
    open_study,
)
from recommender.study.unwound import drop_interrupted_frames
from recommender.study.winner_answers import winner_answers
from recommender.study.worker import BUDGET_ATTR, ProgressFn, StatusFn, StudyWorker

if TYPE_CHECKING:
    import optuna

#: Rounds of neighbourhood refinement after the sampler's budget (each usually adds a few trials).
MAX_REFINEMENT_ROUNDS = 3


@dataclass
class SearchOutcome:
    recommendation: Recommendation
    results: list[CandidateResult]
    output_dir: Path
    recommendation_path: Path
    study_name: str
    storage: str
    tracking_uri: str
    parent_run_id: str
    quality_evaluations: int
    docs_evaluated: int
    probes: int
    new_trials: int


def make_worker(
    study: optuna.Study,
    prepared: Prepared,
    tracker: Tracker,
    parent_run_id: str,
    storage: str,
    *,
    on_trial: ProgressFn | None,
    on_status: StatusFn | None,
    interrupted: threading.Event | None,
) -> StudyWorker:
    spec = prepared.spec
    me = worker_id()
    from recommender.study.reconnecting import reconnect_of  # imports optuna, as the study already has

    # The study's retries shared with the claims (same database): one note per outage.
    claims = ClaimStore.open(
        storage, owner=me, heartbeat_s=spec.search.heartbeat_s, on_wait=on_status, reconnect=reconnect_of(study)
    )
    return StudyWorker(
        study=study,
        evaluator=prepared.evaluator(claims),
        tracker=tracker,
        parent_run_id=parent_run_id,
        choices=space_choices(spec),
        worker_id=me,
        claims=claims,
        timeout_s=spec.search.timeout_s,
        poll_s=min(1.0, spec.search.heartbeat_s),
        on_trial=on_trial,
        on_status=on_status,
        interrupted=interrupted,
    )


@dataclass
class _Opened:
    """A study ready to work on: the trials it already holds, its MLflow run, this process's worker."""

    study: optuna.Study
    tracker: Tracker
    parent_run_id: str
    worker: StudyWorker
    finished: int
    current: Candidate
    lock: CoordinatorLock


def _parent_run(study: optuna.Study, prepared: Prepared, tracker: Tracker, storage: str, status: StatusFn) -> str:
    """The study's MLflow run: the one it already has, or a new one tagged with what identifies it."""
    existing = study.user_attrs.get(PARENT_RUN_ATTR)
    if existing is not None:
        return str(existing)
    spec, source = prepared.spec, prepared.source
    status("weights fingerprint")
    parent_run_id = tracker.start_study(
        study_name=spec.study_name,
        tags={
            "recommender.model": source.name,
            "recommender.release": spec.model.release,
            "recommender.model_fingerprint": source.fingerprint(),
            "recommender.revision": spec.model.revision or "",
            "recommender.use_case": prepared.use_case.name,
            "recommender.study": spec.study_name,
            "recommender.storage": absolute_storage_uri(storage),
            "mlflow.source.git.commit": git_sha(),
        },
        params={"spec": spec.model_dump_json(exclude={"spec_path"})},
    )
    study.set_user_attr(PARENT_RUN_ATTR, parent_run_id)
    if spec.spec_path is not None:
        tracker.log_artifacts(parent_run_id, [spec.spec_path])
    return parent_run_id


def _open(
    prepared: Prepared,
    *,
    storage: str,
    tracking_uri: str,
    n_trials: int | None,
    resume: bool,
    status: StatusFn,
    on_trial: ProgressFn | None,
    interrupted: threading.Event | None,
) -> _Opened:
    """Create or continue the study, store what workers need in it (the spec fingerprint last), enqueue today's."""
    spec = prepared.spec
    tracker = Tracker.open(tracking_uri, experiment=f"recommender/{prepared.source.name}")
    planned, size = n_trials or spec.search.n_trials, grid_size(spec)
    study = open_study(
        storage, spec.study_name, spec.search.seed, exhaustive=size <= planned, heartbeat_s=spec.search.heartbeat_s
    )
    check_continuable(study.user_attrs, spec, storage, resume=resume)  # again: another process may have started it
    # One `search` per study: a second one refuses in one line (more processes join as `recommender worker`).
    lock = CoordinatorLock(ClaimStore.open(storage, heartbeat_s=spec.search.heartbeat_s), spec.study_name, storage)
    lock.acquire()
    try:
        return _opened(
            study,
            prepared,
            tracker,
            lock,
            storage=storage,
            tracking_uri=tracking_uri,
            status=status,
            on_trial=on_trial,
            interrupted=interrupted,
            planned=planned,
            size=size,
        )
    except BaseException as exc:
        drop_interrupted_frames(exc)
        lock.release()
        raise


def _opened(
    study: optuna.Study,
    prepared: Prepared,
    tracker: Tracker,
    lock: CoordinatorLock,
    *,
    storage: str,
    tracking_uri: str,
    status: StatusFn,
    on_trial: ProgressFn | None,
    interrupted: threading.Event | None,
    planned: int,
    size: int,
) -> _Opened:
    spec = prepared.spec
    parent_run_id = _parent_run(study, prepared, tracker, storage, status)
    worker = make_worker(
        study, prepared, tracker, parent_run_id, storage, on_trial=on_trial, on_status=status, interrupted=interrupted
    )
    finished = len(worker.refresh())
    if finished:  # a resume: what an earlier run could not log (its MLflow store did not answer) is written now
        try:
            catch_up(study, worker.tracking, parent=False)  # the study run's end: this run writes it
        except tracking_errors() as exc:
            worker.tracking.tell(exc)
    # The budget counts distinct candidates (a proposal answered from an earlier trial is free); it is
    # stored in the study, where every worker reads it. A larger --n-trials on a resume raises it.
    budget = max(min(planned, size), int(study.user_attrs.get(BUDGET_ATTR, 0)))
    study.set_user_attr(BUDGET_ATTR, budget)
    study.set_user_attr(SPEC_JSON_ATTR, portable_spec(spec, spec.study_name))
    study.set_user_attr(TRACKING_URI_ATTR, absolute_store_uri(tracking_uri))
    study.set_user_attr(PERF_MODEL_ATTR, fit_digest())
    study.set_user_attr(SPEC_FINGERPRINT_ATTR, spec.fingerprint())  # last: a worker joins once all is stored
    current = spec.current
    first = [current, *references(spec)] if "auto" in spec.space.kv_cache_dtypes else [current]
    for c in first[: max(budget - finished, 0)]:
        if c.key not in worker.known:
            study.enqueue_trial(trial_params(c, worker.choices), skip_if_exists=True)
    return _Opened(study, tracker, parent_run_id, worker, finished, current, lock)


def _refine(opened: _Opened, status: StatusFn) -> None:
    """The sampler's budget may end beside a better candidate: evaluate the winner's neighbourhood (every
    other method, GPU, batch size, token budget, KV dtype, one at a time) until it stops moving. Workers
    still running pull these trials too."""
    worker, study = opened.worker, opened.study
    for _ in range(MAX_REFINEMENT_ROUNDS):
        best = pick(worker.results())
        if best is None:
            return
        unseen = [c for c in neighbourhood(best.candidate, worker.choices) if c.key not in worker.known]
        if not unseen:
            return
        status(f"refining around {best.candidate.key}: {len(unseen)} neighbours")
        for c in unseen:
            study.enqueue_trial(trial_params(c, worker.choices), skip_if_exists=True)
        study.set_user_attr(BUDGET_ATTR, len(worker.known) + len(unseen))
        worker.optimize(len(unseen))
        worker.drain()


def _finish(
    opened: _Opened,
    prepared: Prepared,
    *,
    storage: str,
    tracking_uri: str,
    output_root: Path,
    status: StatusFn,
    write_documents: Callable[[Path, StudyEvidence], list[Path]] | None,
) -> SearchOutcome:
    """The one recommendation, its launch commands and load curve, written and logged; the study's run finished."""
    spec, worker, evaluator = prepared.spec, opened.worker, opened.worker.evaluator
    output_dir = output_root / spec.study_name
    # Picked once, the rows shown settled further (``shown_rows``): the answers and the recommendation speak of these.
    shown = shown_rows(worker.results(), opened.current.key, evaluator.performance)
    results, winner, current = shown.results, shown.winner, shown.current
    answer = winner_answers(prepared, evaluator, results, winner, output_dir, status)
    recommendation = build(
        results,
        winner=winner,
        current=current,
        study=spec.study_name,
        model=prepared.source.name,
        release=spec.model.release,
        use_case=prepared.use_case.name,
        sla=spec.sla,
        assumptions=assumptions_of(spec, evaluator.performance.catalog, winner=winner, current=current),
        launch=answer.launch,
        autoscale=answer.autoscale,
        gpu_mix=answer.gpu_mix,
        levers=answer.levers,
        layouts=answer.layouts,
    )
    evaluator.quality.models.release()
    evidence = StudyEvidence(recommendation, results, answer.load_curve)
    paths = write_evidence(output_dir, evidence) + answer.placed
    if write_documents is not None:
        paths += write_documents(output_dir, evidence)
    # The study's waiting trial runs first, then its own; a store that does not answer keeps them for later.
    finish_study_run(
        opened.study,
        worker.tracking,
        paths=paths,
        metrics=_study_metrics(recommendation),
        tags=winner_tags(recommendation),
    )
    return SearchOutcome(
        recommendation=recommendation,
        results=results,
        output_dir=output_dir,
        recommendation_path=output_dir / RECOMMENDATION_JSON,
        study_name=spec.study_name,
        storage=storage,
        tracking_uri=tracking_uri,
        parent_run_id=opened.parent_run_id,
        quality_evaluations=evaluator.quality.evaluations,
        docs_evaluated=evaluator.quality.docs_evaluated,
        probes=evaluator.probes_run,
        new_trials=len(results) - opened.finished,
    )


def run_search(
    spec: SearchSpec,
    *,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str,
    output_root: Path,
    n_trials: int | None = None,
    resume: bool = False,
    prepared: Prepared | None = None,
    on_trial: ProgressFn | None = None,
    on_status: StatusFn | None = None,
    interrupted: threading.Event | None = None,
    write_documents: Callable[[Path, StudyEvidence], list[Path]] | None = None,
) -> SearchOutcome:
    """Run (or continue) the study for `spec` and return the recommendation; `resume` demands that it exists.

    `write_documents` renders the report beside the evidence (the command line passes the report's
    writer; the study itself knows nothing of presentation).
    """
    status: StatusFn = on_status or (lambda _msg: None)
    if prepared is None:  # the command line ran these checks already, before its progress display
        prepared = check_search(
            spec, storage=storage, tracking_uri=tracking_uri, output_root=output_root, resume=resume
        )
    opened = _open(
        prepared,
        storage=storage,
        tracking_uri=tracking_uri,
        n_trials=n_trials,
        resume=resume,
        status=status,
        on_trial=on_trial,
        interrupted=interrupted,
    )
    try:
        try:
            opened.worker.work()
            opened.worker.drain()
            _refine(opened, status)
        except KeyboardInterrupt as interrupt:
            drop_interrupted_frames(interrupt)  # before the lock's release writes (unwound.py)
            # Finished trials are in the storage and evaluated documents in the cache; Optuna has
            # marked the trial in flight FAIL, and a rerun resumes. The study's run says so too.
            try:
                opened.tracker.finish(opened.parent_run_id, metrics={}, status="KILLED")
            except tracking_errors():
                pass  # the study holds every finished trial; the run's status is the only thing not written
            raise
        return _finish(
            opened,
            prepared,
            storage=storage,
            tracking_uri=tracking_uri,
            output_root=output_root,
            status=status,
            write_documents=write_documents,
        )
    finally:
        opened.lock.release()


def _study_metrics(rec: Recommendation) -> dict[str, float]:
    metrics = {f"count_{k}": float(v) for k, v in asdict(rec.counts).items()}
    if rec.winner and rec.winner.cost:
        metrics["winner_usd_per_1m_tokens"] = rec.winner.cost.usd_per_1m_tokens
        metrics["winner_usd_per_month"] = rec.winner.cost.usd_per_month
    if rec.saving:
        metrics["saving_percent_per_month"] = rec.saving.percent_per_month
    return metrics
