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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import SearchSpec
from recommender.decision.assumptions import assumptions_of
from recommender.decision.evidence import RECOMMENDATION_JSON, StudyEvidence, write_evidence
from recommender.decision.recommendation import Recommendation, build
from recommender.decision.rules import pick
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.levers import LeverEffect, lever_effects
from recommender.fleet.daily import daily_answers
from recommender.fleet.launch import launch_commands
from recommender.perf.step.calibrated import fit_digest
from recommender.quality.calibration_docs import quantize_context
from recommender.quantize import get_method, with_kv_cache
from recommender.quantize.checkpoint import QuantizeContext
from recommender.releases.tracking import (
    Tracker,
    absolute_storage_uri,
    absolute_store_uri,
    git_sha,
    tracking_errors,
    winner_tags,
)
from recommender.study.claims import ClaimStore, worker_id
from recommender.study.deferred_tracking import catch_up, finish_study_run
from recommender.study.preflight import check_continuable, check_search
from recommender.study.prepare import Prepared, portable_spec
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
from recommender.study.winner_checkpoint import WinnerCheckpoint, place_checkpoint
from recommender.study.worker import BUDGET_ATTR, ProgressFn, StatusFn, StudyWorker

if TYPE_CHECKING:
    import optuna

    from recommender.engines import EmittedConfig
    from recommender.evaluation.load_curve import LoadCurve
    from recommender.fleet.autoscale import AutoscaleSchedule
    from recommender.fleet.mix_plan import GpuMix

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
    claims = ClaimStore.open(storage, owner=me, heartbeat_s=spec.search.heartbeat_s, on_wait=on_status,
                             reconnect=reconnect_of(study))  # fmt: skip
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
    prepared: Prepared, *, storage: str, tracking_uri: str, n_trials: int | None, resume: bool, status: StatusFn,
    on_trial: ProgressFn | None, interrupted: threading.Event | None,
) -> _Opened:  # fmt: skip
    """Create or continue the study, store what workers need in it (the spec fingerprint last), enqueue today's."""
    spec = prepared.spec
    tracker = Tracker.open(tracking_uri, experiment=f"recommender/{prepared.source.name}")
    planned, size = n_trials or spec.search.n_trials, grid_size(spec)
    study = open_study(storage, spec.study_name, spec.search.seed, exhaustive=size <= planned,
                       heartbeat_s=spec.search.heartbeat_s)  # fmt: skip
    check_continuable(study.user_attrs, spec, storage, resume=resume)  # again: another process may have started it
    parent_run_id = _parent_run(study, prepared, tracker, storage, status)
    worker = make_worker(study, prepared, tracker, parent_run_id, storage, on_trial=on_trial, on_status=status,
                         interrupted=interrupted)  # fmt: skip
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
    return _Opened(study, tracker, parent_run_id, worker, finished, current)


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
    opened: _Opened, prepared: Prepared, *, storage: str, tracking_uri: str, output_root: Path, status: StatusFn,
    write_documents: Callable[[Path, StudyEvidence], list[Path]] | None,
) -> SearchOutcome:  # fmt: skip
    """The one recommendation, its launch commands and load curve, written and logged; the study's run finished."""
    spec, worker = prepared.spec, opened.worker
    results = worker.results()
    output_dir = output_root / spec.study_name
    answer = _winner_answers(prepared, worker, results, output_dir, status)
    evaluator = worker.evaluator
    current = next((r for r in results if r.key == opened.current.key), None)
    recommendation = build(
        results, current_key=opened.current.key, study=spec.study_name, model=prepared.source.name,
        release=spec.model.release, use_case=prepared.use_case.name, sla=spec.sla,
        assumptions=assumptions_of(spec, evaluator.performance.catalog, winner=pick(results), current=current),
        launch=answer.launch, autoscale=answer.autoscale, gpu_mix=answer.gpu_mix, levers=answer.levers,
    )  # fmt: skip
    evaluator.quality.models.release()
    evidence = StudyEvidence(recommendation, results, answer.load_curve)
    paths = write_evidence(output_dir, evidence) + answer.placed
    if write_documents is not None:
        paths += write_documents(output_dir, evidence)
    # The study's waiting trial runs first, then its own; a store that does not answer keeps them for later.
    finish_study_run(opened.study, worker.tracking, paths=paths, metrics=_study_metrics(recommendation),
                     tags=winner_tags(recommendation))  # fmt: skip
    return SearchOutcome(
        recommendation=recommendation, results=results, output_dir=output_dir,
        recommendation_path=output_dir / RECOMMENDATION_JSON, study_name=spec.study_name, storage=storage,
        tracking_uri=tracking_uri, parent_run_id=opened.parent_run_id,
        quality_evaluations=evaluator.quality.evaluations, docs_evaluated=evaluator.quality.docs_evaluated,
        probes=evaluator.probes_run, new_trials=len(results) - opened.finished,
    )  # fmt: skip


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
        prepared = check_search(spec, storage=storage, tracking_uri=tracking_uri, output_root=output_root,
                                resume=resume)  # fmt: skip
    opened = _open(prepared, storage=storage, tracking_uri=tracking_uri, n_trials=n_trials, resume=resume,
                   status=status, on_trial=on_trial, interrupted=interrupted)  # fmt: skip
    try:
        opened.worker.work()
        opened.worker.drain()
        _refine(opened, status)
    except KeyboardInterrupt:
        # Finished trials are in the storage and evaluated documents in the cache; Optuna has
        # marked the trial in flight FAIL, and a rerun resumes. The study's run says so too.
        try:
            opened.tracker.finish(opened.parent_run_id, metrics={}, status="KILLED")
        except tracking_errors():
            pass  # the study holds every finished trial; the run's status is the only thing not written
        raise
    return _finish(opened, prepared, storage=storage, tracking_uri=tracking_uri, output_root=output_root,
                   status=status, write_documents=write_documents)  # fmt: skip


@dataclass(frozen=True)
class _WinnerAnswers:
    """What is worked out for the winner before the recommendation is built: its checkpoint's files, launch
    commands and load curve, and with a daily profile the autoscaling schedule and the GPU mix."""

    placed: list[Path] = field(default_factory=list)
    launch: list[EmittedConfig] = field(default_factory=list)
    load_curve: LoadCurve | None = None
    autoscale: AutoscaleSchedule | None = None
    gpu_mix: GpuMix | None = None
    levers: list[LeverEffect] = field(default_factory=list)


def _winner_answers(
    prepared: Prepared, worker: StudyWorker, results: list[CandidateResult], output_dir: Path, status: StatusFn
) -> _WinnerAnswers:
    winner = pick(results)
    if winner is None:
        return _WinnerAnswers()
    spec, evaluator = prepared.spec, worker.evaluator
    checkpoint = _place_checkpoint(prepared, evaluator.quality.models.context, winner.candidate, output_dir)
    status(checkpoint.note)
    launch = launch_commands(
        winner.candidate, model=checkpoint.model, max_model_len=spec.traffic.max_model_len,
        device=evaluator.performance.device_of(winner.candidate),
        engine=winner.serving.engine if winner.serving is not None else "",
    )  # fmt: skip
    status("latency against load of the winner")
    load_curve = evaluator.load_curve(winner.candidate)
    autoscale, gpu_mix = None, None
    if spec.traffic.profile is not None:
        status("the daily profile: autoscaling and the GPU mix")
        autoscale, gpu_mix = daily_answers(spec, evaluator.performance, results, winner)
    levers = lever_effects(evaluator.performance, spec, winner)
    return _WinnerAnswers([p for p in checkpoint.written if p.is_file()], launch, load_curve, autoscale, gpu_mix,
                          levers)  # fmt: skip


def _place_checkpoint(
    prepared: Prepared, context: QuantizeContext | None, candidate: Candidate, output_dir: Path
) -> WinnerCheckpoint:
    """The winner's checkpoint under the study (or the recipe and command that make it)."""
    source = prepared.source
    context = context or quantize_context(prepared.use_case, prepared.manager, source)
    # The scheme as scored: a ModelOpt scheme with an FP8 KV cache is its own checkpoint (it carries the KV scales).
    scored = with_kv_cache(get_method(candidate.method), candidate.kv_cache_dtype).name
    return place_checkpoint(scored, source, context, output_dir, use_case=prepared.spec.use_case,
                            calibration_samples=prepared.use_case.calibration.samples)  # fmt: skip


def _study_metrics(rec: Recommendation) -> dict[str, float]:
    metrics = {f"count_{k}": float(v) for k, v in asdict(rec.counts).items()}
    if rec.winner and rec.winner.cost:
        metrics["winner_usd_per_1m_tokens"] = rec.winner.cost.usd_per_1m_tokens
        metrics["winner_usd_per_month"] = rec.winner.cost.usd_per_month
    if rec.saving:
        metrics["saving_percent_per_month"] = rec.saving.percent_per_month
    return metrics
