"""The MLflow tracker's lookups of a study's trial runs (a real sqlite-backed MLflow store)."""

from __future__ import annotations

from pathlib import Path

from recommender.releases.tracking import TRIAL_TAG, Tracker


def _child(tracker: Tracker, parent: str, number: int, *, status: str = "FINISHED") -> str:
    run = tracker.client.create_run(tracker.experiment_id, tags={"mlflow.parentRunId": parent, TRIAL_TAG: str(number)})
    if status != "RUNNING":
        tracker.client.set_terminated(run.info.run_id, status)
    return str(run.info.run_id)


def test_logged_trials_finds_one_trial_alone_or_all_of_a_study(tmp_path: Path) -> None:
    tracker = Tracker.open(f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking-test")
    parent = tracker.start_study(study_name="s", tags={}, params={})
    other = tracker.start_study(study_name="t", tags={}, params={})
    ids = {n: _child(tracker, parent, n, status="RUNNING" if n == 11 else "FINISHED") for n in (1, 2, 11)}
    _child(tracker, other, 2)  # another study's trial 2: never this study's

    every = tracker.logged_trials(parent)
    assert every == {1: (ids[1], "FINISHED"), 2: (ids[2], "FINISHED"), 11: (ids[11], "RUNNING")}
    assert tracker.logged_trials(parent, {11}) == {11: (ids[11], "RUNNING")}  # not trial 1 (a prefix of "11")
    assert tracker.logged_trials(parent, {2}) == {2: (ids[2], "FINISHED")}
    assert tracker.logged_trials(parent, {7}) == {}
    assert tracker.logged_trials(parent, {1, 2}) == every  # several: the whole study, filtered by the caller
