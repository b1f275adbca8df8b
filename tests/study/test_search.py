"""A small real study: real quantization, lm-eval, probe, Optuna storage and MLflow store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow import MlflowClient

from recommender.config.candidate import Candidate
from recommender.config.spec import load_spec
from recommender.decision.rules import pick
from recommender.perf.pricing import COST_TOLERANCE
from recommender.report.artifacts import write_documents
from recommender.study import grid, prepare, run_search
from tests.conftest import write_contract_prices, write_spec, write_suite


def _small_spec(tmp_path: Path, demo_model_dir: Path) -> Path:
    suite = write_suite(tmp_path / "suite.yaml", limit=6)
    return write_spec(
        tmp_path / "tiny.yaml",
        {
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
            # L4 and A10G at contract prices: the default price set (RunPod Secure Cloud) lists neither.
            "hardware_catalog": str(write_contract_prices(tmp_path / "contract.yaml")),
            "search": {"n_trials": 3, "seed": 0},
            "engines": None,
        },
    )


def test_small_study_logs_runs_writes_recommendation_and_resumes(tmp_path: Path, demo_model_dir: Path) -> None:
    spec = load_spec(_small_spec(tmp_path, demo_model_dir))
    storage = f"sqlite:///{tmp_path}/optuna.db"
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    outcome = run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out")

    # Optuna: at least three distinct candidates evaluated (duplicates are free), the current deployment first.
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    distinct = [t for t in study.trials if "duplicate_of" not in t.user_attrs]
    assert len(distinct) == len(outcome.results) >= 3
    assert study.trials[0].params["hardware"] == "l4" and study.trials[0].params["method"] == "bf16/baseline"
    assert all(t.constraints is not None for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE)

    # MLflow: one parent run with a child run per distinct evaluated candidate.
    client = MlflowClient(tracking_uri=tracking)
    parent = client.get_run(outcome.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["recommender.release"] == "test"
    assert parent.data.tags["recommender.model_fingerprint"].startswith("sha256:")
    # MLflow's UI opens the experiment on its runs (not the GenAI traces page); the parent names the winner.
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.tags["recommender.storage"] == storage and Path(storage.removeprefix("sqlite:///")).is_absolute()
    winner_key = outcome.recommendation.winner.key if outcome.recommendation.winner else None
    assert parent.data.tags["recommender.winner"] == (winner_key or "none (nothing met every threshold)")
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'"
    )
    distinct = {t.params["method"] + t.params["hardware"] for t in study.trials}
    assert len(children) == len(distinct) >= 2
    assert any(child.data.tags["status"] == "evaluated" for child in children)
    for child in children:
        assert child.info.status == "FINISHED"
        if child.data.tags["status"] == "pruned":  # NF4 on this CPU: no serving engine runs bitsandbytes there
            assert child.data.tags["provenance"] == "" and child.data.tags["broken"].startswith("runnable: ")
            continue
        assert child.data.tags["provenance"] in ("calibrated", "modeled")  # local latencies are simulated
        assert "ttft_p50_ms" in child.data.metrics and "tpot_p95_ms" in child.data.metrics
        assert "usd_per_1m_tokens" in child.data.metrics
        assert child.data.tags["price_set"] in ("hardware_catalog", "local_device") and child.data.tags["price_source"]
        assert child.data.tags["quality_device"] in ("cpu", "not measured")

    # recommendation.json: a winner whose figures come from the trials, with provenance.
    rec = json.loads(outcome.recommendation_path.read_text())
    assert rec["schema_version"] == 2
    assumptions = rec["assumptions"]
    assert assumptions["requests_per_second"] == 5 and assumptions["prompt_tokens"] == 32
    assert {p["hardware"] for p in assumptions["prices"]} == {"local", "l4"}
    assert any(f["role"] == "current" and 0 < f["utilisation"] <= 1 for f in assumptions["fleets"])
    assert Candidate(**rec["current"]["candidate"]).key == "bf16/baseline@l4x1/bs4"
    if rec["winner"] is not None:
        assert rec["winner"]["quality"]["verdict"] == "pass"
        assert rec["winner"]["serving"]["provenance"]["kind"] in ("calibrated", "modeled")
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
        run_search(
            spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out", on_trial=interrupt_after_first
        )
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    states = [t.state for t in study.trials]
    # The interrupted trial failed; the unquantized references enqueued behind it still wait; nothing completed.
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    assert set(states) <= {optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING}
    parent_id = study.user_attrs["mlflow_parent_run_id"]
    assert MlflowClient(tracking_uri=tracking).get_run(parent_id).info.status == "KILLED"

    resumed = run_search(spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out")
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    finished = [t for t in study.trials if t.state != optuna.trial.TrialState.FAIL]
    assert len(finished) >= 3 and len(resumed.results) >= 3 and resumed.parent_run_id == parent_id
    assert MlflowClient(tracking_uri=tracking).get_run(parent_id).info.status == "FINISHED"
    assert resumed.recommendation_path.is_file()


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_search_matches_exhaustive_grid_and_report_regenerates(tmp_path: Path, demo_model_dir: Path) -> None:
    """The study's winner is the exhaustive grid's winner (same real evaluations); its report, launch commands
    and evidence are written, and `recommender report <run id>` rebuilds the same report from MLflow alone."""
    data = yaml.safe_load(_small_spec(tmp_path, demo_model_dir).read_text())
    data["space"] = {
        "methods": {"bf16": ["baseline"], "int8": ["torchao-int8-wo"], "int4": ["bnb-nf4"]},
        "hardware": ["l4", "a10g", "h100-sxm"],
        "batch_sizes": [4],
    }
    data["search"] = {"n_trials": 6, "seed": 0}  # fewer than the 9-candidate grid: TPE, then refinement
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    storage, tracking = f"sqlite:///{tmp_path}/optuna.db", f"sqlite:///{tmp_path}/mlflow.db"
    outcome = run_search(
        spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out", write_documents=write_documents
    )  # the command line passes the report writer

    exhaustive = [prepare(spec).evaluator().evaluate(c) for c in grid(spec)]
    assert len(exhaustive) == 9
    best = pick(exhaustive)
    winner = outcome.recommendation.winner
    assert (winner is None) == (best is None)
    if best is not None:
        assert winner is not None and winner.key == best.candidate.key
        assert winner.usd_per_1m_tokens == pytest.approx(best.usd_per_1m_tokens, rel=1e-9)
        launch = {item.engine: item for item in outcome.recommendation.launch}
        assert set(launch) == {"vllm", "sglang", "tgi", "trtllm"}
        batch_flag = {
            "vllm": "--max-num-seqs 4",
            "sglang": "--max-running-requests 4",
            "tgi": "--max-batch-size 4",
            "trtllm": "--max_batch_size 4",
        }
        supported = [engine for engine, item in launch.items() if item.supported]
        assert supported, launch
        assert all(batch_flag[engine] in (launch[engine].command or "") for engine in supported)

    # The study is a Pareto front over ($/month, quality loss) as well, and its cheapest feasible trial is the
    # decision's winner or one of its ties (the sampler steers by the cost that decides).
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    assert len(study.directions) == 2 and study.best_trials
    if best is not None and winner is not None:
        cheapest = min(study.best_trials, key=lambda t: t.values[0])
        assert cheapest.values[0] == pytest.approx(winner.usd_per_month, rel=COST_TOLERANCE)

    for name in ("recommendation.json", "results.json", "report.md", "report.html"):
        assert (outcome.output_dir / name).is_file(), name
    regenerated = tmp_path / "regenerated"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "recommender.cli.main",
            "report",
            outcome.parent_run_id,
            "--tracking-uri",
            tracking,
            "--output-dir",
            str(regenerated),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (regenerated / "report.md").read_text() == (outcome.output_dir / "report.md").read_text()
    assert "data:image/png;base64," in (regenerated / "report.html").read_text()

    unknown = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "report", "0" * 32, "--tracking-uri", tracking],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr and "run_id" in unknown.stderr


def test_a_worker_parses_each_stored_result_once() -> None:
    """Each trial re-reads what every worker stored; a finished trial's result is parsed the first time only, so
    the trial overhead does not grow with the stored trials' count (it was quadratic over a study)."""
    import optuna

    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.constraints import Constraints
    from recommender.serialization import to_data
    from recommender.study.worker import RESULT_ATTR, load_known

    def stored(batch: int) -> optuna.trial.FrozenTrial:
        c = Candidate(precision="bf16", method="baseline", hardware="l4", batch_size=batch)
        result = CandidateResult(c, "pruned", Constraints.refused("memory"), ["memory: test"])
        attrs = {RESULT_ATTR: to_data(result)}
        return optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED, user_attrs=attrs)

    study = optuna.create_study(directions=["minimize", "minimize"])
    for batch in (4, 8, 4):
        study.add_trial(stored(batch))
    parsed: dict[int, CandidateResult | None] = {}
    known = load_known(study, parsed)
    assert sorted(known) == sorted({Candidate("bf16", "baseline", "l4", b).key for b in (4, 8)})
    assert known[Candidate("bf16", "baseline", "l4", 4).key][0] == 0  # the first trial that answered it
    first = parsed[0]
    study.add_trial(stored(16))
    again = load_known(study, parsed)
    assert len(parsed) == 4 and parsed[0] is first  # the three stored before were not parsed again
    assert len(again) == 3 and again == load_known(study)  # the same answer as a fresh parse
