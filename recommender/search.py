"""The Optuna study: one trial per candidate, thresholds as constraints, cost and quality loss as objectives.

Storage is any Optuna storage URL (sqlite under mlruns/ by default), so an interrupted
search resumes where it stopped: finished trials are read back and not re-run, and a
candidate the sampler proposes twice is answered from the earlier trial. The current
deployment is enqueued first, since every saving is measured against it.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.candidate import CONSTRAINT_KEYS, Candidate, CandidateEvaluator, CandidateResult
from recommender.errors import BadInputError
from recommender.model_cache import ModelCache, local_device
from recommender.model_source import ModelSource
from recommender.perf.catalog import load_catalog
from recommender.perf.serving import check_sla_reachable
from recommender.perf.shape import ModelShape
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import get_method, with_kv_cache
from recommender.report.artifacts import RECOMMENDATION_JSON, write_study_artifacts
from recommender.report.launch import launch_commands
from recommender.report.recommendation import COST_TOLERANCE, Recommendation, build, pick
from recommender.spec import LOCAL_DEVICE, SearchSpec
from recommender.tracking import Tracker, git_sha

if TYPE_CHECKING:
    import optuna
    from lm_eval.tasks import TaskManager

    from recommender.perf.catalog import Catalog
    from recommender.quality.suite import UseCase

DEFAULT_STORAGE = "sqlite:///mlruns/optuna.db"
#: What the study minimises: the cost, and the quality loss (mean KL against bf16; see CandidateResult).
OBJECTIVES = {"usd_per_1m_tokens": "minimize", "quality_loss_mean_kl": "minimize"}
#: Proposals allowed per distinct candidate still to evaluate (the rest are duplicates, answered for free).
PROPOSALS_PER_CANDIDATE = 5
#: Rounds of neighbourhood refinement after the sampler's budget (each usually adds a few trials).
MAX_REFINEMENT_ROUNDS = 3
_RESULT_ATTR = "result"
_SPEC_ATTR = "spec_fingerprint"
_PARENT_ATTR = "mlflow_parent_run_id"

#: Called after each trial with (candidates evaluated, candidates planned, result, answered from cache).
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
    docs_evaluated: int
    probes: int
    new_trials: int


def _method_choice(precision: str, method: str) -> str:
    return f"{precision}/{method}"


def _storage(url: str, heartbeat_s: float) -> optuna.storages.BaseStorage | str:
    """An RDB storage with heartbeats: a trial whose process was killed (SIGKILL, preemption)
    is failed once its heartbeat is older than 3 heartbeats, and re-enqueued with the same
    parameters by RetryHeartbeatStaleTrialCallback, so the next run (or another worker) evaluates it."""
    import optuna

    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    with warnings.catch_warnings():  # heartbeats are marked experimental in Optuna; the kill test covers them
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url,
            heartbeat_interval=max(1, round(heartbeat_s)),
            grace_period=max(3, round(3 * heartbeat_s)),
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2),
        )


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
    optuna.logging.set_verbosity(optuna.logging.WARNING)
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
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BadInputError(
            "--storage",
            f"cannot open Optuna storage {storage!r}: {first[:200]}",
            "pass sqlite:///path.db or a reachable postgresql:// URL",
        ) from None
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

    def evaluator(self) -> CandidateEvaluator:
        models = ModelCache(self.source, local_device())
        quality = QualityEvaluator(self.use_case, models, cache=QualityCache.default(), manager=self.manager)
        return CandidateEvaluator(self.spec, self.catalog, self.shape, models, quality)


def prepare(spec: SearchSpec) -> Prepared:
    """Check everything that can be refused before a model is loaded."""
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


def space_choices(spec: SearchSpec) -> dict[str, list[Any]]:
    """Each Optuna parameter and its categorical values (the current deployment's always among them)."""
    current = spec.current
    return {
        "method": sorted(
            {_method_choice(p, m) for p, ms in spec.space.methods.items() for m in ms}
            | {_method_choice(current.precision, current.method)}
        ),
        "hardware": sorted(set(spec.space.hardware) | {current.hardware}),
        "batch_size": sorted(set(spec.space.batch_sizes) | {current.batch_size}),
        "tensor_parallel": sorted(set(spec.space.tensor_parallel) | {current.tensor_parallel}),
        "max_num_batched_tokens": sorted(set(spec.space.max_num_batched_tokens) | {current.max_num_batched_tokens}),
        "kv_cache_dtype": sorted(set(spec.space.kv_cache_dtypes) | {current.kv_cache_dtype}),
    }


def _candidate_of(params: dict[str, Any]) -> Candidate:
    precision, method = str(params["method"]).split("/", 1)
    return Candidate(
        precision=precision,
        method=method,
        hardware=params["hardware"],
        batch_size=params["batch_size"],
        tensor_parallel=params["tensor_parallel"],
        max_num_batched_tokens=params["max_num_batched_tokens"],
        kv_cache_dtype=params["kv_cache_dtype"],
    )


def _params_of(c: Candidate) -> dict[str, Any]:
    return {
        "method": _method_choice(c.precision, c.method),
        "hardware": c.hardware,
        "batch_size": c.batch_size,
        "tensor_parallel": c.tensor_parallel,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "kv_cache_dtype": c.kv_cache_dtype,
    }


def neighbourhood(c: Candidate, choices: dict[str, list[Any]]) -> list[Candidate]:
    """Candidates one setting away from `c` (tensor-parallel degree kept)."""
    here = _params_of(c)
    return [
        _candidate_of(here | {name: value})
        for name in ("method", "hardware", "batch_size", "max_num_batched_tokens", "kv_cache_dtype")
        for value in choices[name]
        if value != here[name]
    ]


def grid(spec: SearchSpec) -> list[Candidate]:
    """Every candidate of the space: what an exhaustive search would evaluate."""
    choices = space_choices(spec)
    return [_candidate_of(dict(zip(choices, values, strict=True))) for values in itertools.product(*choices.values())]


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
) -> SearchOutcome:
    """Run (or continue) the study for `spec` and return the recommendation; `resume` demands that it exists."""
    import optuna

    status = on_status or (lambda _msg: None)
    prepared = prepared or prepare(spec)
    source, use_case = prepared.source, prepared.use_case
    tracker = Tracker.open(tracking_uri, experiment=f"recommender/{source.name}")
    planned = n_trials or spec.search.n_trials
    study = open_study(
        storage,
        spec.study_name,
        spec.search.seed,
        exhaustive=len(grid(spec)) <= planned,
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

    evaluator = prepared.evaluator()
    models, quality = evaluator.models, evaluator.quality
    choices = space_choices(spec)

    known: dict[str, tuple[int, CandidateResult]] = {}
    for t in study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ):
        if _RESULT_ATTR in t.user_attrs:
            result = CandidateResult.from_dict(t.user_attrs[_RESULT_ATTR])
            known.setdefault(result.candidate.key, (t.number, result))

    current = Candidate.from_deployment(spec.current)
    # The budget counts distinct candidates: a proposal answered from an earlier trial is free.
    finished = len(known)
    target = [min(planned, len(grid(spec)))]
    remaining = max(0, target[0] - finished)
    if current.key not in known and remaining > 0:
        study.enqueue_trial(_params_of(current), skip_if_exists=True)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        candidate = _candidate_of({name: trial.suggest_categorical(name, values) for name, values in choices.items()})
        cached = candidate.key in known
        if cached:
            trial.set_user_attr("duplicate_of", known[candidate.key][0])
            result = known[candidate.key][1]
        else:
            status(_describe_work(candidate, quality, evaluator))
            result = evaluator.evaluate(candidate, cost_bound=_cost_bound(r for _, r in known.values()))
            known[candidate.key] = (trial.number, result)
            tracker.log_trial(parent_run_id, trial.number, result)
        trial.set_user_attr(_RESULT_ATTR, result.to_dict())
        for key in CONSTRAINT_KEYS:
            trial.set_constraint(key, result.constraints.get(key, 0.0))
        if on_trial:
            on_trial(len(known), target[0], result, cached)
        if result.status == "pruned":
            raise optuna.TrialPruned("; ".join(result.broken))
        cost = result.usd_per_1m_tokens
        return (cost if cost is not None and math.isfinite(cost) else math.inf), result.quality_loss

    def stop_at_target(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if len(known) >= target[0]:
            study.stop()

    def optimize(trials: int) -> None:
        try:
            study.optimize(
                objective,
                n_trials=trials * PROPOSALS_PER_CANDIDATE,
                timeout=spec.search.timeout_s,
                catch=(),
                callbacks=[stop_at_target],
            )
        except KeyboardInterrupt:
            # Finished trials are in the storage and evaluated documents in the cache; Optuna has
            # marked the trial in flight FAIL, and a rerun resumes. The study's run says so too.
            tracker.finish(parent_run_id, metrics={}, status="KILLED")
            raise

    if remaining > 0:
        optimize(remaining)
    # The sampler's budget may end beside a better candidate: evaluate the winner's neighbourhood
    # (every other method, GPU, batch size, token budget, KV dtype, one at a time) until it stops moving.
    for _ in range(MAX_REFINEMENT_ROUNDS):
        best = pick([r for _, r in known.values()])
        if best is None:
            break
        unseen = [c for c in neighbourhood(best.candidate, choices) if c.key not in known]
        if not unseen:
            break
        status(f"refining around {best.candidate.key}: {len(unseen)} neighbours")
        for c in unseen:
            study.enqueue_trial(_params_of(c), skip_if_exists=True)
        target[0] = len(known) + len(unseen)
        optimize(len(unseen))

    results = [r for _, r in known.values()]
    recommendation = build(
        results,
        current_key=current.key,
        study=spec.study_name,
        model=source.name,
        release=spec.model.release,
        use_case=use_case.name,
        sla=spec.sla.model_dump(),
    )
    winner = next(
        (r for r in results if recommendation.winner and r.candidate.key == recommendation.winner["key"]), None
    )
    load_curve = None
    if winner is not None:
        context = spec.traffic.prompt_tokens + spec.traffic.output_tokens
        recommendation.launch = launch_commands(winner.candidate, model=source.location, max_model_len=context)
        status("latency against load of the winner")
        load_curve = evaluator.load_curve(winner.candidate)
    models.release()
    output_dir = output_root / spec.study_name
    paths = write_study_artifacts(output_dir, recommendation.to_dict(), [r.to_dict() for r in results], load_curve)
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
        quality_evaluations=quality.evaluations,
        docs_evaluated=quality.docs_evaluated,
        probes=evaluator.probes_run,
        new_trials=len(known) - finished,
    )


def _cost_bound(results: Iterable[CandidateResult]) -> float | None:
    """Above this price a candidate cannot be recommended: the cheapest feasible one's, plus the tie tolerance."""
    prices = [r.usd_per_1m_tokens for r in results if r.feasible and r.usd_per_1m_tokens is not None]
    return min(prices) * (1 + COST_TOLERANCE) if prices else None


def _describe_work(candidate: Candidate, quality: QualityEvaluator, evaluator: CandidateEvaluator) -> str:
    method = with_kv_cache(get_method(candidate.method), candidate.kv_cache_dtype)
    if not quality.has(method.name):
        return f"quality of {candidate.precision}/{method.name} (quantize + lm-eval + KL)"
    return f"{candidate.key}"


def _study_metrics(rec: Recommendation) -> dict[str, float]:
    metrics = {f"count_{k}": float(v) for k, v in rec.counts.items()}
    if rec.winner:
        metrics["winner_usd_per_1m_tokens"] = float(rec.winner["usd_per_1m_tokens"])
        metrics["winner_usd_per_month"] = float(rec.winner["usd_per_month"])
    if rec.saving:
        metrics["saving_percent_per_month"] = rec.saving["percent_per_month"]
    return metrics
