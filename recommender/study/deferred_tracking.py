"""MLflow logging that waits for the store: a search never loses a trial because MLflow stopped answering.

The study (Optuna's storage) is the record; MLflow is a copy of it for people to browse. So a trial's result is
stored in the study first and logged to MLflow after; when the log fails (the tracking server down, its
database gone), the trial keeps its result, carries `PENDING_ATTR`, the search goes on and says so once. The
waiting runs are written when the store answers again: before the next trial's log, at the end of the search,
on a resume, or by `recommender report`. Each is written exactly once: before writing, the store's own child
runs are read (each carries its trial number from creation, `TRIAL_TAG`); a trial already there is skipped, and a
run an interrupted log left half-written (still RUNNING) is deleted and written again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.evaluation.candidate import CandidateResult
from recommender.serialization import from_data
from recommender.study.storage import RESULT_ATTR

if TYPE_CHECKING:
    import optuna

    from recommender.releases.tracking import Tracker

#: On a trial: its MLflow run was not written when it finished (the store did not answer).
PENDING_ATTR = "mlflow_pending"
#: On the study: the parent run's artifacts, summary metrics and tags, still to be written (None: written).
PARENT_PENDING_ATTR = "mlflow_parent_pending"


def note(line: str) -> None:
    """One line on stderr, like every other `note:` (the progress display owns stdout's last line)."""
    sys.stderr.write(f"note: {line}\n")


def _why(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first[:160]


@dataclass
class DeferredTracking:
    """One process's MLflow logging for a study: its trials whose runs wait for the store, and whether it told."""

    tracker: Tracker
    parent_run_id: str
    waiting: dict[int, CandidateResult] = field(default_factory=dict)
    told: bool = False

    def tell(self, exc: BaseException) -> None:
        if not self.told:
            self.told = True
            note(
                f"MLflow store {self.tracker.uri} does not answer ({_why(exc)}); the search goes on and its "
                f"results stay in the study; the trials' runs are logged there when it answers again (or by "
                f"`recommender report {self.parent_run_id}`)"
            )

    def log_trial(self, trial: optuna.Trial, result: CandidateResult) -> None:
        """Log a running trial whose result the study already holds; a store that does not answer defers it."""
        from recommender.releases.tracking import tracking_errors

        try:
            if self.waiting:  # the store failed before: catch up first (a store still down fails here, once)
                self.flush(self.waiting)
                self.waiting.clear()
            self.flush({trial.number: result})
        except tracking_errors() as exc:
            trial.set_user_attr(PENDING_ATTR, True)
            self.waiting[trial.number] = result
            self.tell(exc)

    def flush_waiting(self) -> None:
        """At a worker's end: write this process's waiting runs, or say who writes them once the store answers."""
        from recommender.releases.tracking import tracking_errors

        try:
            self.flush(self.waiting)
            self.waiting.clear()
        except tracking_errors() as exc:
            self.tell(exc)
            note(
                f"{len(self.waiting)} trial run(s) of this worker are not in MLflow yet ({self.tracker.uri}): "
                "the search that started the study writes them at its end, or `recommender report "
                f"{self.parent_run_id}` once the store answers"
            )

    def flush(self, pending: dict[int, CandidateResult]) -> list[int]:
        """Write each pending trial's run that the store lacks, exactly once; the trial numbers written now.

        Raises what the store raises (``tracking_errors``): the caller keeps the trials pending.
        """
        if not pending:
            return []
        logged = self.tracker.logged_trials(self.parent_run_id, pending.keys())
        written = []
        for number, result in sorted(pending.items()):
            run = logged.get(number)
            if run is not None and run[1] != "RUNNING":
                continue  # written before (perhaps by a log whose answer the store never sent)
            if run is not None:
                self.tracker.client.delete_run(run[0])  # a log cut off half-way: write it whole
            self.tracker.log_trial(self.parent_run_id, number, result)
            written.append(number)
        return written


def pending_trials(study: optuna.Study) -> dict[int, CandidateResult]:
    """Every finished trial of the study whose run may still be missing from MLflow, by trial number."""
    import optuna

    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    return {
        t.number: from_data(CandidateResult, t.user_attrs[RESULT_ATTR])
        for t in study.get_trials(deepcopy=False, states=finished)
        if t.user_attrs.get(PENDING_ATTR) and RESULT_ATTR in t.user_attrs
    }


def catch_up(study: optuna.Study, deferred: DeferredTracking, *, parent: bool = True) -> int:
    """Write what the study holds that MLflow lacks: waiting trials' runs, then (with `parent`) the study run's
    end if it was deferred and the run is not ended. The number of trial runs written now; raises what the
    store raises."""
    written = deferred.flush(pending_trials(study))
    deferred.waiting.clear()
    end = study.user_attrs.get(PARENT_PENDING_ATTR)  # paths, metrics and tags, as `finish_study_run` stored them
    if parent and end:
        tracker, run_id = deferred.tracker, deferred.parent_run_id
        tracker.log_artifacts(run_id, [Path(p) for p in end["paths"] if Path(p).is_file()])  # overwrites: once
        if tracker.run_status(run_id) == "RUNNING":  # ended already: its answer reached the store, not us
            tracker.finish(run_id, metrics=end["metrics"], tags=end["tags"])
        study.set_user_attr(PARENT_PENDING_ATTR, None)
    return len(written)


def finish_study_run(
    study: optuna.Study,
    deferred: DeferredTracking,
    *,
    paths: list[Path],
    metrics: dict[str, float],
    tags: dict[str, str],
) -> bool:
    """End the study's MLflow run (its waiting trials first); False, and the end stored in the study, when the
    store does not answer: `recommender report` or a resume writes it later."""
    from recommender.releases.tracking import tracking_errors

    tracker, run_id = deferred.tracker, deferred.parent_run_id
    try:
        catch_up(study, deferred, parent=False)
        tracker.log_artifacts(run_id, paths)
        tracker.finish(run_id, metrics=metrics, tags=tags)  # also a resumed run that was KILLED or FINISHED
    except tracking_errors() as exc:
        study.set_user_attr(
            PARENT_PENDING_ATTR, {"paths": [str(p.resolve()) for p in paths], "metrics": metrics, "tags": tags}
        )
        deferred.tell(exc)
        note(
            f"{len(pending_trials(study))} trial run(s) and the study's results are not in MLflow yet "
            f"({tracker.uri}): `recommender report {run_id} --tracking-uri {tracker.uri}` writes them once it "
            "answers (a resumed search does too)"
        )
        return False
    if study.user_attrs.get(PARENT_PENDING_ATTR):
        study.set_user_attr(PARENT_PENDING_ATTR, None)  # an end an earlier run deferred: this one replaces it
    return True


def catch_up_from_run(uri: str, run_id: str) -> int:
    """`recommender report`: write what the study behind parent run `run_id` holds that MLflow lacks.

    The run's tags name its study and storage; a study this machine cannot read (another machine's file, a
    server out of reach) or a run that is not a study's is left as it is (the report then reads what is
    there). The number of trial runs written now; the user is told when anything was written.
    """
    from recommender.errors import BadInputError
    from recommender.releases.tracking import Tracker, open_client, tracking_errors
    from recommender.study.storage import PARENT_RUN_ATTR, stored_study_attrs

    client = open_client(uri)  # a store that does not answer: one `error:` line, as `report` always said
    try:
        run = client.get_run(run_id)
    except tracking_errors():
        return 0  # the report itself says what is wrong with the id
    storage, name = run.data.tags.get("recommender.storage"), run.data.tags.get("recommender.study")
    if not storage or not name:
        return 0
    try:
        attrs = stored_study_attrs(storage, name)
    except BadInputError:
        return 0
    if attrs is None or attrs.get(PARENT_RUN_ATTR) != run_id:
        return 0
    import optuna

    from recommender.quiet import quiet_optuna

    quiet_optuna()
    study = optuna.load_study(study_name=name, storage=storage)
    parent_waited = bool(study.user_attrs.get(PARENT_PENDING_ATTR))
    written = catch_up(study, DeferredTracking(Tracker(uri, run.info.experiment_id, client), run_id))
    if written or parent_waited:
        what = f"{written} trial run(s)" + (" and the study's results" if parent_waited else "")
        note(f"{what} of study {name!r} waited for the MLflow store and are logged now")
    return written
