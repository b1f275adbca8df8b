"""A small real study: real quantization, lm-eval, probe, Optuna storage and MLflow store."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow import MlflowClient

from recommender.search import run_search
from recommender.spec import load_spec
from tests.conftest import write_suite


def _small_spec(tmp_path: Path, demo_model_dir: Path) -> Path:
    suite = write_suite(tmp_path / "suite.yaml", limit=6)
    spec = {
        "name": "tiny",
        "model": {"source": str(demo_model_dir), "release": "test"},
        "use_case": str(suite),
        "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
        "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
        "space": {
            "methods": {"bf16": ["baseline"], "int4": ["bnb-nf4"]},
            "hardware": ["local", "l4"],
            "batch_sizes": [4],
        },
        "current": {"precision": "bf16", "method": "baseline", "hardware": "l4", "batch_size": 4},
        "local_device": {"price_per_hour_usd": 0.1, "price_source": "test"},
        "search": {"n_trials": 3, "seed": 0},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_small_study_logs_runs_writes_recommendation_and_resumes(tmp_path: Path, demo_model_dir: Path) -> None:
    spec = load_spec(_small_spec(tmp_path, demo_model_dir))
    storage = f"sqlite:///{tmp_path}/optuna.db"
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    outcome = run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out")

    # Optuna: three finished trials, the current deployment first.
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    assert len(study.trials) == 3
    assert study.trials[0].params["hardware"] == "l4" and study.trials[0].params["method"] == "bf16/baseline"
    assert all(t.constraints is not None for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE)

    # MLflow: one parent run with a child run per distinct evaluated candidate.
    client = MlflowClient(tracking_uri=tracking)
    parent = client.get_run(outcome.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["recommender.release"] == "test"
    assert parent.data.tags["recommender.model_fingerprint"].startswith("sha256:")
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'"
    )
    distinct = {t.params["method"] + t.params["hardware"] for t in study.trials}
    assert len(children) == len(distinct) >= 2
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["provenance"] in ("measured", "modeled")
        assert "usd_per_1m_tokens" in child.data.metrics

    # recommendation.json: a winner whose figures come from the trials, with provenance.
    rec = json.loads(outcome.recommendation_path.read_text())
    assert rec["schema_version"] == 1
    assert rec["current"]["key"] == "bf16/baseline@l4x1/bs4"
    if rec["winner"] is not None:
        assert rec["winner"]["quality_verdict"] == "pass"
        assert rec["winner"]["perf_provenance"].split(":")[0] in ("measured", "modeled")
    assert outcome.quality_evaluations >= 1

    # Resume: the same study with the same trial budget runs nothing new and gives the same answer.
    again = run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out")
    assert again.new_trials == 0 and again.quality_evaluations == 0
    assert again.parent_run_id == outcome.parent_run_id
    assert json.loads(again.recommendation_path.read_text())["winner"] == rec["winner"]


def test_interrupted_search_resumes(tmp_path: Path, demo_model_dir: Path) -> None:
    """Ctrl-C mid-study: the parent run is marked KILLED, and a rerun finishes the study without redoing trials."""
    spec = load_spec(_small_spec(tmp_path, demo_model_dir))
    storage = f"sqlite:///{tmp_path}/optuna.db"
    tracking = f"sqlite:///{tmp_path}/mlflow.db"

    def interrupt_after_first(done: int, planned: int, result: object, cached: bool) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out",
                   on_trial=interrupt_after_first)  # fmt: skip
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1 and len(states) == 1
    parent_id = study.user_attrs["mlflow_parent_run_id"]
    assert MlflowClient(tracking_uri=tracking).get_run(parent_id).info.status == "KILLED"

    resumed = run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out")
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    finished = [t for t in study.trials if t.state != optuna.trial.TrialState.FAIL]
    assert len(finished) == 3 and resumed.parent_run_id == parent_id
    assert MlflowClient(tracking_uri=tracking).get_run(parent_id).info.status == "FINISHED"
    assert resumed.recommendation_path.is_file()
