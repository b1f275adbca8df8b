"""A search killed with SIGKILL mid-trial: the next run retries the killed trial, loses nothing, no run RUNNING."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow import MlflowClient

from tests.conftest import write_suite

# Timing-dependent (the kill must land mid-trial) and ~85 s each: behind the `slow` marker, run by
# `make test-all`, until the poll is made deterministic (a clean-clone CI run once saw the SQLite
# search finish before the poll caught a running trial).
pytestmark = pytest.mark.slow

COMPLETE, RUNNING, FAIL = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING,
                           optuna.trial.TrialState.FAIL)  # fmt: skip


def _spec(tmp_path: Path, demo_model_dir: Path) -> Path:
    spec = {
        "name": "killed",
        "model": {"source": str(demo_model_dir), "release": "test"},
        "use_case": str(write_suite(tmp_path / "suite.yaml", limit=6)),
        "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
        "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
        "space": {
            "methods": {"bf16": ["baseline"], "int8": ["torchao-int8-wo"], "int4": ["bnb-nf4"]},
            "hardware": ["l4", "h100-sxm"],
            "batch_sizes": [4],
        },  # fmt: skip
        "current": {"precision": "bf16", "method": "baseline", "hardware": "h100-sxm", "batch_size": 4},
        "search": {"n_trials": 6, "seed": 0, "heartbeat_s": 1},
    }
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_sigkill_mid_trial_is_retried_on_resume(tmp_path: Path, demo_model_dir: Path) -> None:
    _kill_and_resume(tmp_path, demo_model_dir, f"sqlite:///{tmp_path}/optuna.db")


def test_sigkill_mid_trial_is_retried_on_resume_postgresql(
    tmp_path: Path, demo_model_dir: Path, postgres_url: str
) -> None:
    _kill_and_resume(tmp_path, demo_model_dir, postgres_url)


def _kill_and_resume(tmp_path: Path, demo_model_dir: Path, storage: str) -> None:
    spec = _spec(tmp_path, demo_model_dir)
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    command = [sys.executable, "-m", "recommender.cli", "search", str(spec), "--storage", storage,
               "--tracking-uri", tracking, "--output-dir", str(tmp_path / "out")]  # fmt: skip
    # A cold quality cache: every quality evaluation really runs, so trials last seconds and the kill lands mid-trial.
    env = {**os.environ, "RECOMMENDER_CACHE_DIR": str(tmp_path / "cache")}
    worker = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at: list[optuna.trial.FrozenTrial] = []
    # One observer connection pool for the whole test (a storage per poll would exhaust PostgreSQL's
    # connections); it never creates tables, so it cannot race the worker creating them.
    observer: optuna.storages.RDBStorage | None = None
    deadline = time.monotonic() + 240
    try:
        # Kill it while a trial runs and at least one has completed (the quality evaluations take seconds).
        while time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.2)
            try:
                observer = observer or optuna.storages.RDBStorage(storage, skip_table_creation=True)
                names = optuna.get_all_study_names(observer)
                trials = optuna.load_study(study_name=names[0], storage=observer).get_trials(deepcopy=False)
            except Exception:  # the worker has not created the tables or the study yet
                continue
            if any(t.state == COMPLETE for t in trials) and any(t.state == RUNNING for t in trials):
                os.kill(worker.pid, signal.SIGKILL)
                worker.wait(timeout=30)
                killed_at = list(trials)
                break
    finally:
        if worker.poll() is None:
            worker.kill()
    assert killed_at and observer is not None, "the search finished before it could be killed mid-trial"
    study_name = optuna.get_all_study_names(observer)[0]
    completed_before = {t.number: t.params for t in killed_at if t.state == COMPLETE}
    running = [t for t in killed_at if t.state == RUNNING]
    assert len(running) == 1

    time.sleep(4)  # past the grace period of 3 heartbeats of 1 s
    resumed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode in (0, 1), resumed.stderr

    study = optuna.load_study(study_name=study_name, storage=observer)
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    # The killed trial was failed as stale and retried with the same parameters.
    killed = trials[running[0].number]
    assert killed.state == FAIL
    retries = [t for t in trials.values() if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1 and retries[0].params == running[0].params and retries[0].state == COMPLETE
    # Nothing that had completed is lost or redone.
    for number, params in completed_before.items():
        assert trials[number].state == COMPLETE and trials[number].params == params
    assert not any(t.state == RUNNING for t in trials.values())
    # MLflow: the study's run finished; no run anywhere is left RUNNING.
    client = MlflowClient(tracking_uri=tracking)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, max_results=1000)
    assert runs and all(r.info.status != "RUNNING" for r in runs)
    parent = study.user_attrs["mlflow_parent_run_id"]
    assert client.get_run(parent).info.status == "FINISHED"
