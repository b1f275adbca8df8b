"""The Optuna study: one trial per candidate, thresholds as constraints, cost as the objective.

Storage is any Optuna storage URL (sqlite under mlruns/ by default), so an interrupted
search resumes where it stopped: finished trials are read back and not re-run, and a
candidate the sampler proposes twice is answered from the earlier trial. The current
deployment is enqueued first, since every saving is measured against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.candidate import CONSTRAINT_KEYS, Candidate, CandidateEvaluator, CandidateResult
from recommender.errors import BadInputError
from recommender.model_cache import ModelCache, local_device
from recommender.model_source import ModelSource
from recommender.perf.catalog import load_catalog
from recommender.perf.shape import ModelShape
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import get_method
from recommender.report.recommendation import Recommendation, build
from recommender.spec import SearchSpec
from recommender.tracking import Tracker, git_sha

if TYPE_CHECKING:
    import optuna

DEFAULT_STORAGE = "sqlite:///mlruns/optuna.db"
_RESULT_ATTR = "result"
_SPEC_ATTR = "spec_fingerprint"
_PARENT_ATTR = "mlflow_parent_run_id"

#: Called after each trial with (trials done, trials planned, result, answered from cache).
ProgressFn = Callable[[int, int, CandidateResult, bool], None]
#: Called with a line saying what the search is doing now (loading, evaluating, probing).
StatusFn = Callable[[str], None]


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
    probes: int
    new_trials: int


def _method_choice(precision: str, method: str) -> str:
    return f"{precision}/{method}"


def open_study(storage: str, study_name: str, seed: int) -> optuna.Study:
    """Create or load the study; a storage URL that cannot be opened is bad input."""
    import optuna

    if storage.startswith("sqlite:///"):
        Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.create_study(
            study_name=study_name,
            storage=storage,
            direction="minimize",
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8),
            load_if_exists=True,
        )
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server (SQLAlchemy's errors)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BadInputError(
            "--storage",
            f"cannot open Optuna storage {storage!r}: {first[:200]}",
            "pass sqlite:///path.db or a reachable postgresql:// URL",
        ) from None


def run_search(
    spec: SearchSpec,
    *,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str,
    output_root: Path,
    n_trials: int | None = None,
    on_trial: ProgressFn | None = None,
    on_status: StatusFn | None = None,
) -> SearchOutcome:
    """Run (or resume) the study for `spec` and return the recommendation."""
    import optuna

    status = on_status or (lambda _msg: None)
    # Everything that can be refused is checked before a model is loaded.
    use_case = load_use_case(spec.resolve(spec.use_case), field=f"{spec.spec_path}: use_case")
    source = ModelSource.resolve(
        spec.model.source,
        base_dir=spec.resolve(Path(".")),
        revision=spec.model.revision,
        allow_pickle=spec.model.allow_pickle,
        trust_remote_code=spec.model.trust_remote_code,
        field=f"{spec.spec_path}: model.source",
        name=spec.model.name,
    )
    manager = task_manager(use_case)
    check_tasks_known(use_case, manager)
    catalog = load_catalog(spec.resolve(spec.hardware_catalog) if spec.hardware_catalog else None)
    shape = ModelShape.from_config(source.load_config())
    tracker = Tracker.open(tracking_uri, experiment=f"recommender/{source.name}")
    study = open_study(storage, spec.study_name, spec.search.seed)

    fingerprint = spec.fingerprint()
    previous = study.user_attrs.get(_SPEC_ATTR)
    if previous is not None and previous != fingerprint:
        raise BadInputError(
            "search.study_name",
            f"study {spec.study_name!r} exists with a different spec",
            "rename the study (search.study_name) or restore the spec it was started with",
        )
    study.set_user_attr(_SPEC_ATTR, fingerprint)
    parent_run_id = study.user_attrs.get(_PARENT_ATTR)
    if parent_run_id is None:
        status("weights fingerprint")
        parent_run_id = tracker.start_study(
            study_name=spec.study_name,
            tags={
                "recommender.model": source.name,
                "recommender.release": spec.model.release,
                "recommender.model_fingerprint": source.fingerprint(),
                "recommender.use_case": use_case.name,
                "recommender.study": spec.study_name,
                "recommender.storage": storage,
                "mlflow.source.git.commit": git_sha(),
            },
            params={"spec": spec.model_dump_json(exclude={"spec_path"})},
        )
        study.set_user_attr(_PARENT_ATTR, parent_run_id)

    models = ModelCache(source, local_device())
    quality = QualityEvaluator(use_case, models, cache=QualityCache.default(), manager=manager)
    evaluator = CandidateEvaluator(spec, catalog, shape, models, quality)

    methods = sorted(
        {_method_choice(p, m) for p, ms in spec.space.methods.items() for m in ms}
        | {_method_choice(spec.current.precision, spec.current.method)}
    )
    hardware = sorted(set(spec.space.hardware) | {spec.current.hardware})
    batch_sizes = sorted(set(spec.space.batch_sizes) | {spec.current.batch_size})
    tps = sorted(set(spec.space.tensor_parallel) | {spec.current.tensor_parallel})

    known: dict[str, tuple[int, CandidateResult]] = {}
    for t in study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ):
        if _RESULT_ATTR in t.user_attrs:
            result = CandidateResult.from_dict(t.user_attrs[_RESULT_ATTR])
            known.setdefault(result.candidate.key, (t.number, result))

    current = Candidate.from_deployment(spec.current)
    planned = n_trials or spec.search.n_trials
    finished = len(
        study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    )
    remaining = max(0, planned - finished)
    if current.key not in known and remaining > 0:
        study.enqueue_trial(
            {
                "method": _method_choice(current.precision, current.method),
                "hardware": current.hardware,
                "batch_size": current.batch_size,
                "tensor_parallel": current.tensor_parallel,
            },
            skip_if_exists=True,
        )
    done = [finished]

    def objective(trial: optuna.Trial) -> float:
        precision, method = trial.suggest_categorical("method", methods).split("/", 1)
        candidate = Candidate(
            precision=precision,
            method=method,
            hardware=trial.suggest_categorical("hardware", hardware),
            batch_size=trial.suggest_categorical("batch_size", batch_sizes),
            tensor_parallel=trial.suggest_categorical("tensor_parallel", tps),
        )
        cached = candidate.key in known
        if cached:
            trial.set_user_attr("duplicate_of", known[candidate.key][0])
            result = known[candidate.key][1]
        else:
            status(_describe_work(candidate, quality, evaluator))
            result = evaluator.evaluate(candidate)
            known[candidate.key] = (trial.number, result)
            tracker.log_trial(parent_run_id, trial.number, result)
        trial.set_user_attr(_RESULT_ATTR, result.to_dict())
        for key in CONSTRAINT_KEYS:
            trial.set_constraint(key, result.constraints.get(key, 0.0))
        done[0] += 1
        if on_trial:
            on_trial(done[0], planned, result, cached)
        if result.status == "pruned":
            raise optuna.TrialPruned("; ".join(result.broken))
        value = result.usd_per_1m_tokens
        return value if value is not None and math.isfinite(value) else float("inf")

    if remaining > 0:
        try:
            study.optimize(objective, n_trials=remaining, timeout=spec.search.timeout_s, catch=())
        except KeyboardInterrupt:
            # Finished trials are in the storage and evaluated documents in the cache; Optuna has
            # marked the trial in flight FAIL, and a rerun resumes. The study's run says so too.
            tracker.finish(parent_run_id, metrics={}, status="KILLED")
            raise
    models.release()

    results = [r for _, r in known.values()]
    recommendation = build(
        results,
        current_key=current.key,
        study=spec.study_name,
        model=source.name,
        release=spec.model.release,
        use_case=use_case.name,
    )
    output_dir = output_root / spec.study_name
    path = recommendation.write_json(output_dir / "recommendation.json")
    tracker.log_artifacts(parent_run_id, [path])
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
        quality_evaluations=quality.evaluations,
        probes=evaluator.probes_run,
        new_trials=done[0] - finished,
    )


def _describe_work(candidate: Candidate, quality: QualityEvaluator, evaluator: CandidateEvaluator) -> str:
    method = get_method(candidate.method)
    if not quality.has(method.name):
        return f"quality of {candidate.precision}/{candidate.method} (quantize + lm-eval + KL)"
    return f"{candidate.key}"


def _study_metrics(rec: Recommendation) -> dict[str, float]:
    metrics = {f"count_{k}": float(v) for k, v in rec.counts.items()}
    if rec.winner:
        metrics["winner_usd_per_1m_tokens"] = float(rec.winner["usd_per_1m_tokens"])
        metrics["winner_usd_per_month"] = float(rec.winner["usd_per_month"])
    if rec.saving:
        metrics["saving_percent_per_month"] = rec.saving["percent_per_month"]
    return metrics
