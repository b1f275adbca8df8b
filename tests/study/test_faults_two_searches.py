"""Two `recommender search` processes on one study, and a spec edited before `--resume` (issue 57, class 6).

Real processes on a real SQLite study. A second `search` while the first runs refuses in one line, exit 2, naming
the running one (host:pid) and `recommender worker` as the way to add a process; once the first is SIGKILLed a new
`search` takes its place at once (its lock's owner no longer runs on this host). A spec edited after a run, then
`search --resume`, is refused naming the settings that changed (the default study name, which hashes the spec,
and a `search.study_name` set by hand alike)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from recommender.study.claims import CLAIMS
from tests.conftest import write_contract_prices, write_spec, write_suite

CLI = [sys.executable, "-m", "recommender.cli.main"]

# Each starts `search` processes (torch and lm-eval imported) on two shared cores: 30-60 s.
pytestmark = pytest.mark.slow


def _spec(tmp_path: Path, demo_model_dir: Path, study_name: str | None = None) -> Path:
    search: dict[str, object] = {"n_trials": 4, "seed": 0, "heartbeat_s": 1}
    if study_name:
        search["study_name"] = study_name
    return write_spec(
        tmp_path / "spec.yaml",
        {
            "name": "two",
            "model": {"source": str(demo_model_dir), "release": "test"},
            "use_case": str(write_suite(tmp_path / "suite.yaml", limit=200)),  # long enough to be mid-search
            "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
            "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
            "space": {"methods": {"bf16": ["baseline"], "fp16": ["fp16"]}, "hardware": ["l4"], "batch_sizes": [4]},
            "current": {"precision": "bf16", "method": "baseline", "hardware": "l4", "batch_size": 4},
            "hardware_catalog": str(write_contract_prices(tmp_path / "contract.yaml")),
            "search": search,
            "engines": None,
        },
    )


def _command(tmp_path: Path, spec: Path, *extra: str) -> list[str]:
    return [
        *CLI,
        "search",
        str(spec),
        "--storage",
        f"sqlite:///{tmp_path}/optuna.db",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/mlflow.db",
        "--output-dir",
        str(tmp_path / "out"),
        *extra,
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "RECOMMENDER_CACHE_DIR": str(tmp_path / "cache")}


def _lock_owner(tmp_path: Path) -> Callable[[], str | None]:
    engine = sa.create_engine(f"sqlite:///{tmp_path}/optuna.db")

    def owner() -> str | None:
        try:
            with engine.connect() as db:
                row = db.execute(sa.select(CLAIMS.c.owner).where(CLAIMS.c.state == "coordinating")).first()
        except sa.exc.SQLAlchemyError:  # the tables are not there yet
            return None
        return None if row is None else str(row[0])

    return owner


def _study_set_up(tmp_path: Path) -> Callable[[], bool]:
    """Whether the study holds its spec's fingerprint (stored last: the study is whole)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path}/optuna.db")
    query = sa.text("SELECT 1 FROM study_user_attributes WHERE key = 'spec_fingerprint'")

    def done() -> bool:
        try:
            with engine.connect() as db:
                return db.execute(query).first() is not None
        except sa.exc.SQLAlchemyError:
            return False

    return done


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"never saw {what} (exit {process.poll()})")


def _started(tmp_path: Path, command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def test_a_second_search_on_a_running_study_refuses_naming_it(tmp_path: Path, demo_model_dir: Path) -> None:
    spec = _spec(tmp_path, demo_model_dir)
    command, owner = _command(tmp_path, spec), _lock_owner(tmp_path)
    first = _started(tmp_path, command)
    try:
        _wait_for(lambda: (owner() or "").split(":")[1:2] == [str(first.pid)], first, "the first search's lock")
        second = subprocess.run(command, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --storage: "), second.stderr
        assert f":{first.pid}:" in lines[0] and "recommender worker --study" in lines[0]
        assert first.poll() is None  # the running one goes on
        # The first SIGKILLed: a new search takes the study over at once (its owner no longer runs here).
        first.kill()
        first.wait(timeout=30)
        third = _started(tmp_path, command)
        _wait_for(lambda: (owner() or "").split(":")[1:2] == [str(third.pid)], third, "the third search's lock")
        third.send_signal(signal.SIGINT)
        _, stderr = third.communicate(timeout=120)
        assert third.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
        assert owner() is None  # released on Ctrl-C
    finally:
        if first.poll() is None:
            first.kill()


@pytest.mark.parametrize("named", [False, True], ids=["default study name", "search.study_name"])
def test_a_spec_edited_before_resume_is_refused_naming_the_change(
    named: bool, tmp_path: Path, demo_model_dir: Path
) -> None:
    spec = _spec(tmp_path, demo_model_dir, "edited" if named else None)
    run = _started(tmp_path, _command(tmp_path, spec))
    _wait_for(_study_set_up(tmp_path), run, "the search's study set up")
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=120)
    data = yaml.safe_load(spec.read_text())
    data["space"]["batch_sizes"] = [4, 8]
    spec.write_text(yaml.safe_dump(data))
    before = (tmp_path / "optuna.db").read_bytes()
    resumed = subprocess.run(
        _command(tmp_path, spec, "--resume"), cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True
    )
    assert resumed.returncode == 2, resumed.stderr[-2000:]
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and "space.batch_sizes: [4] -> [4, 8]" in lines[0], resumed.stderr
    assert lines[0].startswith("error: search.study_name: " if named else "error: --resume: ")
    assert (tmp_path / "optuna.db").read_bytes() == before  # nothing written
