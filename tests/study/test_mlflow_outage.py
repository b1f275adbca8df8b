"""The MLflow store unreachable mid-run, against a real `mlflow server` on loopback that is stopped and restarted.

The search runs in this process; after its first trial is logged, the server is stopped. The search must
finish with every trial in the study, say once that the runs wait, and `recommender report` (the real command
line, in a subprocess) must write every waiting run once the server is back: each evaluated trial exactly once,
the study's run finished with its evidence, and a second report writes nothing.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import optuna
import pytest
from mlflow import MlflowClient

from recommender.config.spec import load_spec
from recommender.releases.tracking import TRIAL_TAG
from recommender.study import run_search
from recommender.study.deferred_tracking import PARENT_PENDING_ATTR, PENDING_ATTR
from recommender.study.storage import RESULT_ATTR
from tests.conftest import write_contract_prices, write_spec, write_suite

MLFLOW = Path(sys.executable).parent / "mlflow"
CLI = [sys.executable, "-m", "recommender.cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    """A real tracking server on loopback; its database and artifacts in `tmp_path`, kept across restarts."""
    log = (tmp_path / f"server-{time.monotonic_ns()}.log").open("wb")
    server = subprocess.Popen(
        [
            str(MLFLOW),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{tmp_path}/mlflow.db",
            "--artifacts-destination",
            str(tmp_path / "mlartifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, f"mlflow server exited: {log.name}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError("mlflow server did not answer in 120 s")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _spec(tmp_path: Path, demo_model_dir: Path) -> Path:
    return write_spec(
        tmp_path / "outage.yaml",
        {
            "name": "outage",
            "model": {"source": str(demo_model_dir), "release": "test"},
            "use_case": str(write_suite(tmp_path / "suite.yaml", limit=6)),
            "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
            "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
            "space": {
                "methods": {"bf16": ["baseline"], "int4": ["bnb-nf4"]},
                "hardware": ["local", "l4"],
                "batch_sizes": [4],
            },
            "current": {"precision": "bf16", "method": "baseline", "hardware": "l4", "batch_size": 4},
            "local_device": {"price_per_hour_usd": 0.1, "price_source": "test"},
            "hardware_catalog": str(write_contract_prices(tmp_path / "contract.yaml")),
            "search": {"n_trials": 3, "seed": 0},
            "engines": None,
        },
    )


def _children(client: MlflowClient, experiment: str, parent: str) -> Counter[int]:
    runs = client.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{parent}'", max_results=1000)
    return Counter(int(r.data.tags[TRIAL_TAG]) for r in runs)


@pytest.mark.slow  # a search and two server starts: about a minute on two busy cores
def test_store_down_mid_search_then_report_logs_every_trial_once(
    tmp_path: Path, demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # Fail fast against a server that is gone (what `_prepare_store` sets), and undo it after the test.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    port = _free_port()
    uri, storage = f"http://127.0.0.1:{port}", f"sqlite:///{tmp_path}/optuna.db"
    spec = load_spec(_spec(tmp_path, demo_model_dir))
    server: subprocess.Popen[bytes] | None = _server(tmp_path, port)

    def stop_after_first(done: int, planned: int, result: object, cached: bool) -> None:
        nonlocal server
        if server is not None:  # the first trial is logged; the store goes away for the rest of the search
            _stop(server)
            server = None

    try:
        outcome = run_search(
            spec, storage=storage, tracking_uri=uri, output_root=tmp_path / "out", on_trial=stop_after_first
        )
    finally:
        if server is not None:
            _stop(server)
    err = capfd.readouterr().err
    assert err.count(f"note: MLflow store {uri} does not answer") == 1, err
    assert f"recommender report {outcome.parent_run_id}" in err

    # The search finished: every trial in the study holds its result, none running; the later ones wait for MLflow.
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    assert {t.state for t in study.trials} <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    assert all(RESULT_ATTR in t.user_attrs for t in study.trials)
    evaluated = {t.number for t in study.trials if "duplicate_of" not in t.user_attrs}
    assert len(evaluated) == len(outcome.results) >= 3
    waiting = {t.number for t in study.trials if t.user_attrs.get(PENDING_ATTR)}
    assert waiting and waiting == evaluated - {0}
    assert study.user_attrs[PARENT_PENDING_ATTR]["paths"]
    assert outcome.recommendation_path.is_file()

    server = _server(tmp_path, port)  # the store returns
    try:
        client = MlflowClient(tracking_uri=uri)
        parent = client.get_run(outcome.parent_run_id)
        experiment = parent.info.experiment_id
        assert parent.info.status == "RUNNING" and _children(client, experiment, outcome.parent_run_id) == {0: 1}

        report = subprocess.run(
            [*CLI, "report", outcome.parent_run_id, "--tracking-uri", uri, "--output-dir", str(tmp_path / "report")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert report.returncode == 0, report.stderr
        assert f"{len(waiting)} trial run(s) and the study's results" in report.stderr
        assert (tmp_path / "report" / "report.md").is_file()
        assert _children(client, experiment, outcome.parent_run_id) == dict.fromkeys(evaluated, 1)
        parent = client.get_run(outcome.parent_run_id)
        assert parent.info.status == "FINISHED" and "recommender.winner" in parent.data.tags
        assert PARENT_PENDING_ATTR not in {
            k for k, v in optuna.load_study(study_name=spec.study_name, storage=storage).user_attrs.items() if v
        }

        # Idempotent: a second report writes nothing more.
        again = subprocess.run(
            [*CLI, "report", outcome.parent_run_id, "--tracking-uri", uri, "--output-dir", str(tmp_path / "report2")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0 and "waited for the MLflow store" not in again.stderr, again.stderr
        assert _children(client, experiment, outcome.parent_run_id) == dict.fromkeys(evaluated, 1)
    finally:
        _stop(server)
