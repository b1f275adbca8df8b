"""The Optuna study: one trial per candidate, thresholds as constraints, cost and quality loss as objectives.

Storage is any Optuna RDB storage URL (sqlite under mlruns/ by default, PostgreSQL for
several machines), so an interrupted search resumes where it stopped: finished trials
are read back and not re-run, and a candidate the sampler proposes twice is answered
from the earlier trial. The current deployment is enqueued first, since every saving is
measured against it.

`run_search` is the study's coordinator: it creates the study (storing the spec, with
absolute paths, and the budget in it), works on it like any worker, waits for the trials
other workers still run, refines around the winner and writes the one recommendation.
`run_worker` joins an existing study from another process or machine and only works.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.candidate import Candidate, CandidateResult
from recommender.claims import ClaimStore, worker_id
from recommender.decision import pick
from recommender.device import local_device
from recommender.emit.launch import launch_commands
from recommender.errors import BadInputError
from recommender.evaluator import CandidateEvaluator
from recommender.evidence import RECOMMENDATION_JSON, StudyEvidence, write_evidence
from recommender.model_cache import ModelCache
from recommender.model_source import ModelSource
from recommender.perf.catalog import load_catalog
from recommender.perf.serving import check_sla_reachable
from recommender.perf.shape import ModelShape
from recommender.performance import LocalMeasurement, PerformanceEvaluator
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import get_method
from recommender.recommendation import Recommendation, build
from recommender.search_space import grid, grid_size, neighbourhood, params_of, space_choices
from recommender.spec import LOCAL_DEVICE, SearchSpec, spec_from_mapping
from recommender.tracking import Tracker, absolute_store_uri, git_sha
from recommender.worker import BUDGET_ATTR, ProgressFn, StatusFn, StudyWorker

__all__ = ["grid", "grid_size", "neighbourhood", "prepare", "run_search", "run_worker", "space_choices"]

if TYPE_CHECKING:
    import optuna
    from lm_eval.tasks import TaskManager

    from recommender.perf.catalog import Catalog
    from recommender.quality.suite import UseCase

DEFAULT_STORAGE = "sqlite:///mlruns/optuna.db"
#: What the study minimises: the cost, and the quality loss (mean KL against bf16; see CandidateResult).
OBJECTIVES = {"usd_per_1m_tokens": "minimize", "quality_loss_mean_kl": "minimize"}
#: Rounds of neighbourhood refinement after the sampler's budget (each usually adds a few trials).
MAX_REFINEMENT_ROUNDS = 3
_SPEC_ATTR = "spec_fingerprint"
#: The spec itself (paths made absolute), so `recommender worker --study NAME` needs nothing else.
_SPEC_JSON_ATTR = "spec"
_PARENT_ATTR = "mlflow_parent_run_id"
#: The MLflow store the coordinator logs to; workers log there too unless told otherwise.
_TRACKING_ATTR = "mlflow_tracking_uri"


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


def _storage(url: str, heartbeat_s: float) -> optuna.storages.BaseStorage | str:
    """An RDB storage with heartbeats: a trial whose process was killed (SIGKILL, preemption)
    is failed once its heartbeat is older than 3 heartbeats, and re-enqueued with the same
    parameters by RetryHeartbeatStaleTrialCallback, so the next run (or another worker) evaluates it."""
    import optuna
    import sqlalchemy as sa

    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    for attempt in range(4):
        try:
            with warnings.catch_warnings():  # heartbeats are marked experimental in Optuna; the kill test covers them
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url,
                    heartbeat_interval=max(1, round(heartbeat_s)),
                    grace_period=max(3, round(3 * heartbeat_s)),
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2),
                )
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
            # Two processes creating Optuna's tables at once on an empty PostgreSQL database: one
            # loses with a duplicate key; the tables exist when it tries again.
            if attempt == 3:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _unusable_storage(storage: str, exc: BaseException, fix: str) -> BadInputError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return BadInputError("--storage", f"cannot open Optuna storage {storage!r}: {first[:200]}", fix)


def open_study(
    storage: str, study_name: str, seed: int, *, exhaustive: bool = False, heartbeat_s: float = 10.0
) -> optuna.Study:
    """Create or load the study; a storage URL that cannot be opened is bad input.

    TPE samples the space; when the trial budget covers the whole grid, Optuna's
    brute-force sampler visits every candidate once instead of sampling some twice.
    """
    import optuna

    with warnings.catch_warnings():  # BruteForceSampler is marked experimental; its behaviour here is tested
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler: optuna.samplers.BaseSampler = (
            optuna.samplers.BruteForceSampler(seed=seed)
            if exhaustive
            else optuna.samplers.TPESampler(seed=seed, n_startup_trials=8)
        )
    # Optuna logs each failed trial with its traceback; the search prints its own line per failed candidate.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        if storage.startswith("sqlite:///"):
            Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=study_name,
            storage=_storage(storage, heartbeat_s),
            directions=list(OBJECTIVES.values()),
            sampler=sampler,
            load_if_exists=True,
        )
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server (SQLAlchemy's errors)
        raise _unusable_storage(storage, exc, "pass sqlite:///path.db or a reachable postgresql:// URL") from None
    if len(study.directions) != len(OBJECTIVES):
        raise BadInputError(
            "search.study_name",
            f"study {study_name!r} in {storage} has {len(study.directions)} objective(s), this version optimises "
            f"{len(OBJECTIVES)} ({', '.join(OBJECTIVES)})",
            "give the search a new search.study_name",
        )
    return study


@dataclass
class Prepared:
    """What a search needs before its first trial, every part of it checked (bad input is refused here)."""

    spec: SearchSpec
    source: ModelSource
    use_case: UseCase
    manager: TaskManager
    catalog: Catalog
    shape: ModelShape

    def evaluator(self, claims: ClaimStore | None = None) -> CandidateEvaluator:
        models = ModelCache(self.source, local_device())
        quality = QualityEvaluator(
            self.use_case, models, cache=QualityCache.default(), manager=self.manager, claims=claims
        )
        local = None
        if self.spec.local_device is not None:
            local = LocalMeasurement(models, list(self.spec.space.batch_sizes), self.spec.local_device)
        performance = PerformanceEvaluator(self.catalog, self.shape, self.spec.traffic, self.spec.sla, local)
        return CandidateEvaluator(performance, quality)


def prepare(spec: SearchSpec) -> Prepared:
    """Check everything that can be refused before a model is loaded (the spec's paths are absolute already)."""
    use_case = load_use_case(spec.use_case, field=f"{spec.spec_path}: use_case")
    source = ModelSource.resolve(
        spec.model.source,
        base_dir=spec.spec_path.parent if spec.spec_path else Path.cwd(),  # only a hub id is still relative
        revision=spec.model.revision,
        allow_pickle=spec.model.allow_pickle,
        trust_remote_code=spec.model.trust_remote_code,
        field=f"{spec.spec_path}: model.source",
        name=spec.model.name,
    )
    manager = task_manager(use_case)
    check_tasks_known(use_case, manager)
    catalog = load_catalog(spec.hardware_catalog)
    shape = ModelShape.from_config(source.load_config())
    check_sla_reachable(
        shape,
        [
            (catalog.get(hw), get_method(m))
            for hw in {*spec.space.hardware, spec.current.hardware} - {LOCAL_DEVICE}
            for ms in spec.space.methods.values()
            for m in ms
        ],
        traffic=spec.traffic,
        sla=spec.sla,
        field_prefix=f"{spec.spec_path}: sla",
    )
    return Prepared(spec, source, use_case, manager, catalog, shape)


def _portable(spec: SearchSpec, study_name: str) -> dict[str, Any]:
    """The spec as JSON with the study named, for workers on other machines (its paths are absolute since
    load_spec; other machines see them through a shared filesystem or an identical checkout)."""
    data = spec.model_dump(mode="json")
    data["search"]["study_name"] = study_name
    return {"spec": data, "spec_path": str(spec.spec_path or "")}


def _spec_from_study(study: optuna.Study, study_name: str, storage: str) -> SearchSpec:
    """The spec the coordinator stored, built (validated) once like a spec file."""
    stored = study.user_attrs.get(_SPEC_JSON_ATTR)
    if stored is None:
        raise BadInputError(
            "--study", f"study {study_name!r} in {storage} was not started by this version (no spec stored)",
            "start it with `recommender search SPEC --storage URL`",
        )  # fmt: skip
    spec_path = Path(stored["spec_path"]) if stored["spec_path"] else None
    return spec_from_mapping(stored["spec"], spec_path=spec_path, label=f"study {study_name!r}: spec")


def _worker(
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
    claims = ClaimStore.open(storage, owner=me, heartbeat_s=spec.search.heartbeat_s, on_wait=on_status)
    return StudyWorker(
        study=study,
        evaluator=prepared.evaluator(claims),
        tracker=tracker,
        parent_run_id=parent_run_id,
        choices=space_choices(spec),  # type: ignore[arg-type]
        worker_id=me,
        timeout_s=spec.search.timeout_s,
        poll_s=min(1.0, spec.search.heartbeat_s),
        on_trial=on_trial,
        on_status=on_status,
        interrupted=interrupted,
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
    """Run (or continue) the study for `spec` and return the recommendation; `resume` demands that it exists."""
    status = on_status or (lambda _msg: None)
    prepared = prepared or prepare(spec)
    source, use_case = prepared.source, prepared.use_case
    tracker = Tracker.open(tracking_uri, experiment=f"recommender/{source.name}")
    planned = n_trials or spec.search.n_trials
    size = grid_size(spec)
    study = open_study(
        storage,
        spec.study_name,
        spec.search.seed,
        exhaustive=size <= planned,
        heartbeat_s=spec.search.heartbeat_s,
    )

    fingerprint = spec.fingerprint()
    previous = study.user_attrs.get(_SPEC_ATTR)
    if resume and previous is None:
        raise BadInputError(
            "--resume", f"no study {spec.study_name!r} in {storage} to resume", "drop --resume to start it"
        )
    if previous is not None and previous != fingerprint:
        raise BadInputError(
            "search.study_name",
            f"study {spec.study_name!r} exists with a different spec",
            "rename the study (search.study_name) or restore the spec it was started with",
        )
    parent_run_id = study.user_attrs.get(_PARENT_ATTR)
    if parent_run_id is None:
        status("weights fingerprint")
        parent_run_id = tracker.start_study(
            study_name=spec.study_name,
            tags={
                "recommender.model": source.name,
                "recommender.release": spec.model.release,
                "recommender.model_fingerprint": source.fingerprint(),
                "recommender.revision": spec.model.revision or "",
                "recommender.use_case": use_case.name,
                "recommender.study": spec.study_name,
                "recommender.storage": storage,
                "mlflow.source.git.commit": git_sha(),
            },
            params={"spec": spec.model_dump_json(exclude={"spec_path"})},
        )
        study.set_user_attr(_PARENT_ATTR, parent_run_id)
        if spec.spec_path is not None:
            tracker.log_artifacts(parent_run_id, [spec.spec_path])

    worker = _worker(study, prepared, tracker, parent_run_id, storage, on_trial=on_trial, on_status=on_status,
                     interrupted=interrupted)  # fmt: skip
    known = worker.refresh()
    finished = len(known)
    # The budget counts distinct candidates (a proposal answered from an earlier trial is free); it is
    # stored in the study, where every worker reads it. A larger --n-trials on a resume raises it.
    budget = max(min(planned, size), int(study.user_attrs.get(BUDGET_ATTR, 0)))
    study.set_user_attr(BUDGET_ATTR, budget)
    study.set_user_attr(_SPEC_JSON_ATTR, _portable(spec, spec.study_name))
    study.set_user_attr(_TRACKING_ATTR, absolute_store_uri(tracking_uri))
    study.set_user_attr(_SPEC_ATTR, fingerprint)  # last: a worker joins once everything above is stored
    current = Candidate.from_deployment(spec.current)
    if current.key not in known and budget > finished:
        study.enqueue_trial(params_of(current), skip_if_exists=True)

    try:
        worker.work()
        worker.drain()
        # The sampler's budget may end beside a better candidate: evaluate the winner's neighbourhood
        # (every other method, GPU, batch size, token budget, KV dtype, one at a time) until it stops
        # moving. Workers still running pull these trials too.
        for _ in range(MAX_REFINEMENT_ROUNDS):
            best = pick(worker.results())
            if best is None:
                break
            unseen = [c for c in neighbourhood(best.candidate, worker.choices) if c.key not in worker.known]  # type: ignore[arg-type]
            if not unseen:
                break
            status(f"refining around {best.candidate.key}: {len(unseen)} neighbours")
            for c in unseen:
                study.enqueue_trial(params_of(c), skip_if_exists=True)
            study.set_user_attr(BUDGET_ATTR, len(worker.known) + len(unseen))
            worker.optimize(len(unseen))
            worker.drain()
    except KeyboardInterrupt:
        # Finished trials are in the storage and evaluated documents in the cache; Optuna has
        # marked the trial in flight FAIL, and a rerun resumes. The study's run says so too.
        tracker.finish(parent_run_id, metrics={}, status="KILLED")
        raise

    results = worker.results()
    recommendation = build(
        results,
        current_key=current.key,
        study=spec.study_name,
        model=source.name,
        release=spec.model.release,
        use_case=use_case.name,
        sla=spec.sla,
    )
    evaluator = worker.evaluator
    winner = recommendation.winner
    load_curve = None
    if winner is not None:
        context = spec.traffic.prompt_tokens + spec.traffic.output_tokens
        recommendation.launch = launch_commands(winner.candidate, model=source.location, max_model_len=context)
        status("latency against load of the winner")
        load_curve = evaluator.load_curve(winner.candidate)
    evaluator.quality.models.release()
    output_dir = output_root / spec.study_name
    evidence = StudyEvidence(recommendation, results, load_curve)
    paths = write_evidence(output_dir, evidence)
    if write_documents is not None:
        paths += write_documents(output_dir, evidence)
    path = output_dir / RECOMMENDATION_JSON
    tracker.log_artifacts(parent_run_id, paths)
    tracker.finish(parent_run_id, metrics=_study_metrics(recommendation))
    return SearchOutcome(
        recommendation=recommendation,
        results=results,
        output_dir=output_dir,
        recommendation_path=path,
        study_name=spec.study_name,
        storage=storage,
        tracking_uri=tracking_uri,
        parent_run_id=parent_run_id,
        quality_evaluations=evaluator.quality.evaluations,
        docs_evaluated=evaluator.quality.docs_evaluated,
        probes=evaluator.probes_run,
        new_trials=len(results) - finished,
    )


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
        opened = _storage(storage, 10.0)
        summaries = optuna.study.get_all_study_summaries(opened)
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server
        fix = "pass the postgresql:// (or sqlite:///) URL the study was started with"
        raise _unusable_storage(storage, exc, fix) from None
    names = sorted(s.study_name for s in summaries)
    if study_name not in names:
        raise BadInputError(
            "--study",
            f"no study {study_name!r} in {storage} (studies there: {', '.join(names[:10]) or 'none'})",
            "start it with `recommender search SPEC --storage URL`, or pass one of those names",
        )
    probe = optuna.load_study(study_name=study_name, storage=opened)
    if _SPEC_ATTR not in probe.user_attrs:  # the coordinator stores it last
        raise BadInputError("--study", f"study {study_name!r} is still being set up by its coordinator",
                            "start the worker again in a few seconds")  # fmt: skip
    spec = _spec_from_study(probe, study_name, storage)
    prepared = prepare(spec)
    uri = tracking_uri or _stored_tracking_uri(probe) or ""
    tracker = Tracker.open(uri, experiment=f"recommender/{prepared.source.name}")
    study = open_study(
        storage, study_name, random.SystemRandom().randrange(2**31),  # workers sample apart, not in lockstep
        exhaustive=grid_size(spec) <= int(probe.user_attrs[BUDGET_ATTR]), heartbeat_s=spec.search.heartbeat_s,
    )  # fmt: skip
    worker = _worker(study, prepared, tracker, study.user_attrs[_PARENT_ATTR], storage,
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


def _stored_tracking_uri(study: optuna.Study) -> str | None:
    return study.user_attrs.get(_TRACKING_ATTR)


def _study_metrics(rec: Recommendation) -> dict[str, float]:
    metrics = {f"count_{k}": float(v) for k, v in asdict(rec.counts).items()}
    if rec.winner and rec.winner.cost:
        metrics["winner_usd_per_1m_tokens"] = rec.winner.cost.usd_per_1m_tokens
        metrics["winner_usd_per_month"] = rec.winner.cost.usd_per_month
    if rec.saving:
        metrics["saving_percent_per_month"] = rec.saving.percent_per_month
    return metrics
