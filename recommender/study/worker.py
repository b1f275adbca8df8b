"""The trial loop every process of a study runs: `recommender search` and each `recommender worker`.

Optuna's RDB storage is the scheduler: each worker asks it for a trial (a waiting retry
first, else the sampler's proposal), evaluates the candidate and stores the result on
the trial. Before each evaluation the worker re-reads what every worker has stored, so a
candidate another machine evaluated is answered from its trial, for free; a method's
quality is claimed in the same database (`claims.py`) so it is evaluated once. The
budget (distinct candidates) lives in the study, so every worker stops at the same count.

A trial whose evaluation fails (out of memory, a kernel error) is recorded as FAIL with
its reason, in Optuna, MLflow and results.json, and the study goes on. A trial's result is
stored in the study before it is logged to MLflow: a store that stops answering defers the
log (`deferred_tracking.py`), never the result.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.evaluator import CandidateEvaluator
from recommender.serialization import from_data, to_data
from recommender.study.claims import ClaimStore
from recommender.study.deferred_tracking import DeferredTracking
from recommender.study.space import candidate_of, suggest
from recommender.study.storage import RESULT_ATTR as RESULT_ATTR  # read from here by tests and benchmarks

if TYPE_CHECKING:
    import optuna

    from recommender.releases.tracking import Tracker

BUDGET_ATTR = "budget"
WORKER_ATTR = "worker"
#: Proposals allowed per distinct candidate still to evaluate (the rest are duplicates, answered for free).
PROPOSALS_PER_CANDIDATE = 5
#: Errors of one evaluation that fail its trial but not the study: torch's out-of-memory errors and
#: kernel errors (CUDA errors, shape mismatches, missing kernels) are RuntimeErrors.
TRIAL_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, MemoryError)

#: Called after each trial with (candidates evaluated, candidates planned, result, answered from cache).
ProgressFn = Callable[[int, int, CandidateResult, bool], None]
#: Called with a line saying what the search is doing now (loading, evaluating, probing, waiting).
StatusFn = Callable[[str], None]


class TrialFailed(Exception):
    """The candidate's evaluation raised; the trial is FAIL with this reason, the study goes on."""


def load_known(
    study: optuna.Study, parsed: dict[int, CandidateResult | None] | None = None
) -> dict[str, tuple[int, CandidateResult]]:
    """Every candidate any worker has answered, by key: (first trial number, result).

    `parsed` keeps each finished trial's answer (None: not one the study counts) across calls: a finished
    trial's attributes never change, so a worker parses each stored result once, not once per trial.
    """
    import optuna

    parsed = {} if parsed is None else parsed
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    for t in study.get_trials(deepcopy=False, states=states):
        if t.number in parsed:
            continue
        result = from_data(CandidateResult, t.user_attrs[RESULT_ATTR]) if RESULT_ATTR in t.user_attrs else None
        # A killed trial has no result (its retry evaluates it); one interrupted (Ctrl-C) after its evaluation
        # is not an answer the study counts.
        counted = result is not None and (t.state != optuna.trial.TrialState.FAIL or result.status == "failed")
        parsed[t.number] = result if counted else None
    known: dict[str, tuple[int, CandidateResult]] = {}
    for number in sorted(parsed):
        answer = parsed[number]
        if answer is not None:
            known.setdefault(answer.candidate.key, (number, answer))
    return known


def failed_result(candidate: Candidate, exc: BaseException) -> CandidateResult:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    reason = f"error: {type(exc).__name__}: {first}" if first else f"error: {type(exc).__name__}"
    return CandidateResult(candidate, "failed", Constraints.refused("runnable"), [reason])


def record_on_trial(trial: optuna.Trial, result: CandidateResult) -> None:
    """`result` on its trial: whole as a user attribute (what every worker reads back, `load_known`), and each
    limit as Optuna's constraint by its name (> 0: broken), so the study's feasible trials are those the
    decision could recommend on speed and quality."""
    trial.set_user_attr(RESULT_ATTR, to_data(result))
    for key, value in result.constraints.items():
        trial.set_constraint(key, value)


@dataclass
class StudyWorker:
    """One process's share of a study: pull trials, evaluate, store, until the study's budget is met."""

    study: optuna.Study
    evaluator: CandidateEvaluator
    tracker: Tracker
    parent_run_id: str
    choices: dict[str, list[object]]
    worker_id: str
    #: The quality claims in the study's database (the same table the evaluator's quality runs through), cleared
    #: of killed workers' claims when the study is done.
    claims: ClaimStore | None = None
    timeout_s: float | None = None
    poll_s: float = 1.0
    on_trial: ProgressFn | None = None
    on_status: StatusFn | None = None
    #: Set by the command line's Ctrl-C handler. The KeyboardInterrupt it raises can be swallowed by
    #: library code (torch, importing a module, catches it); the flag stops the loop at the next trial anyway.
    interrupted: threading.Event | None = None
    known: dict[str, tuple[int, CandidateResult]] = field(default_factory=dict)
    evaluated_here: int = 0
    _parsed: dict[int, CandidateResult | None] = field(default_factory=dict, repr=False)
    #: MLflow logging that waits for the store when it does not answer (the study holds the results meanwhile).
    tracking: DeferredTracking = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tracking = DeferredTracking(self.tracker, self.parent_run_id)

    def _status(self, line: str) -> None:
        if self.on_status is not None:
            self.on_status(line)

    def budget(self) -> int:
        return int(self.study.user_attrs[BUDGET_ATTR])

    def refresh(self) -> dict[str, tuple[int, CandidateResult]]:
        self.known = load_known(self.study, self._parsed)
        return self.known

    def results(self) -> list[CandidateResult]:
        return [r for _, r in self.refresh().values()]

    # -- one trial -------------------------------------------------------------------------
    def _first_beat(self, trial: optuna.Trial) -> None:
        """The trial's first heartbeat, recorded before any work. Optuna's heartbeat thread records it moments after
        the trial starts, in a thread that may wait on the database's lock; a worker killed before that write leaves a
        RUNNING trial with no heartbeat, which ``fail_stale_trials`` never fails, and the coordinator's ``drain`` then
        waits for it forever (seen in ``test_three_workers_on_sqlite_one_killed`` on a loaded machine)."""
        storage = self.study._storage
        record = getattr(storage, "record_heartbeat", None)
        if record is not None and storage.get_heartbeat_interval() is not None:  # type: ignore[attr-defined]
            record(trial._trial_id)

    def objective(self, trial: optuna.Trial) -> tuple[float, float]:
        import optuna

        candidate = candidate_of(suggest(trial, self.choices))
        self._stop_if_interrupted()
        self._first_beat(trial)
        trial.set_user_attr(WORKER_ATTR, self.worker_id)
        known = self.refresh()  # what every worker has stored so far
        cached = candidate.key in known
        if cached:
            trial.set_user_attr("duplicate_of", known[candidate.key][0])
            result = known[candidate.key][1]
        else:
            self._status(self._describe(candidate))
            result, cached = self._evaluate_once(candidate, known)
            self._stop_if_interrupted()
            if cached:  # another worker drew the same candidate at the same moment and evaluated it
                trial.set_user_attr("duplicate_of", self.refresh().get(candidate.key, (-1,))[0])
            else:
                self.known[candidate.key] = (trial.number, result)
                self.evaluated_here += 1
        # The study first: it is the record. MLflow's copy after, deferred if the store does not answer.
        record_on_trial(trial, result)
        if not cached:
            self.tracking.log_trial(trial, result)
        if self.on_trial:
            self.on_trial(len(self.known), self.budget(), result, cached)
        if result.status == "failed":
            raise TrialFailed("; ".join(result.broken))
        if result.status == "pruned":
            raise optuna.TrialPruned("; ".join(result.broken))
        cost = result.usd_per_month  # what the decision ranks by (``storage.OBJECTIVES``)
        return (cost if cost is not None and math.isfinite(cost) else math.inf), result.quality_loss

    def _evaluate_once(
        self, candidate: Candidate, known: dict[str, tuple[int, CandidateResult]]
    ) -> tuple[CandidateResult, bool]:
        """The candidate's result, and whether another worker computed it (claimed in the study's database).

        Workers asking at the same moment can draw the same candidate (Optuna's samplers do not lock): the claim
        lets one evaluate it; the other waits and answers from its result, as from a stored trial.
        """

        def evaluate() -> dict[str, object]:
            try:
                result = self.evaluator.evaluate(candidate, known=[r for _, r in known.values()])
            except TRIAL_ERRORS as exc:
                result = failed_result(candidate, exc)
            data: dict[str, object] = to_data(result)
            return data

        claims = self.evaluator.quality.claims
        if claims is None:
            return from_data(CandidateResult, evaluate()), False
        key = hashlib.sha256(f"{self.study.study_name}\n{candidate.key}".encode()).hexdigest()[:40]
        data, here = claims.run_once(f"candidate-{key}", f"candidate {candidate.key}", evaluate)
        return from_data(CandidateResult, data), not here

    def _stop_if_interrupted(self) -> None:
        if self.interrupted is not None and self.interrupted.is_set():
            raise KeyboardInterrupt

    def _describe(self, candidate: Candidate) -> str:
        method = candidate.scheme
        if not self.evaluator.quality.has(method.name):
            return f"quality of {candidate.precision}/{method.name} (quantize + lm-eval + KL, or another worker's)"
        return candidate.key

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, trials: int) -> None:
        """Up to `trials` distinct candidates (duplicates are free), stopping once the study's budget is met."""

        def stop_at_budget(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
            if len(self.known) >= self.budget():
                study.stop()

        self.study.optimize(
            self.objective,
            n_trials=max(1, trials) * PROPOSALS_PER_CANDIDATE,
            timeout=self.timeout_s,
            catch=(TrialFailed,),
            callbacks=[stop_at_budget],
        )

    def _waiting(self) -> list[optuna.trial.FrozenTrial]:
        import optuna

        return self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))

    def work(self) -> None:
        """Pull trials until the study holds its budget of distinct candidates and no retry waits."""
        while True:
            before = len(self.refresh())
            missing, waiting = self.budget() - before, len(self._waiting())
            if missing <= 0 and waiting == 0:
                return
            self.optimize(max(missing, waiting))
            if self.timeout_s is not None:
                return  # a time-boxed run ends with its one optimize call
            if len(self.refresh()) == before and not self._waiting():
                return  # every proposal was a candidate already answered: the sampler has nothing new

    def drain(self) -> None:
        """Wait until no trial runs on another worker; retry (here) those whose worker died.

        A killed worker's trial is RUNNING until its heartbeat is 3 heartbeats old; then it is
        failed and re-enqueued with the same parameters, and this worker evaluates the retry.
        """
        import optuna

        while True:
            with warnings.catch_warnings():  # marked experimental in Optuna; the fault tests cover it
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(self.study)
            waiting = len(self._waiting())
            if waiting:
                self.optimize(waiting)
                continue
            running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
            if not running:
                if self.claims is not None and self.claims.running():
                    self._status("clearing quality claims left by killed workers")
                    self.claims.reap_abandoned()
                return
            owners = sorted({str(t.user_attrs.get(WORKER_ATTR, "?")) for t in running})
            self._status(f"waiting for {len(running)} trial(s) running on {', '.join(owners)}")
            time.sleep(self.poll_s)
