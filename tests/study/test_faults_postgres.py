"""Faults of the study's PostgreSQL server: restarted while three workers search, and many workers at once.

Each test runs a server of its own (`benchmarks/many_workers.py:TemporaryPostgres`, as the session's
`postgres_server` fixture starts one), so stopping it disturbs no other test. The processes are the real
command line (`recommender search`, `recommender worker`) on the demo model, with a cold quality cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.benchmark_scripts import load_benchmark
from tests.study.test_faults import CLI, COMPLETE, FAIL, PRUNED, Observer, _assert_nothing_left_running, _env, _spec
from tests.study.test_faults import _wait_for as wait_for

many_workers = load_benchmark("many_workers")


@pytest.fixture()
def own_postgres() -> Iterator[Any]:
    """A PostgreSQL server for this test alone (skipped where none is installed)."""
    pytest.importorskip("psycopg")
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    with many_workers.TemporaryPostgres() as server:
        yield server


def _recommended(out: Path) -> dict[str, Any]:
    """recommendation.json, less what says how the winner's quality was obtained (measured here or read from the
    quality cache: its seconds and documents scored), not what it is."""
    [path] = list(out.rglob("recommendation.json"))
    rec: dict[str, Any] = json.loads(path.read_text())
    for how in ("seconds", "docs_evaluated"):
        (rec["winner"] or {}).get("quality", {}).pop(how, None)
    return rec


@pytest.mark.slow  # about 2 min on two cores, most of it three processes importing torch and two lm-eval runs
def test_postgresql_restart_while_three_workers_search(tmp_path: Path, demo_model_dir: Path, own_postgres: Any) -> None:
    """The server stops (fast: every connection closed) while three processes are inside trials and comes back 8 s
    later, longer than the 6 s grace period after which a trial's heartbeat says its worker died. Each process
    says so in one line, waits, and goes on: no trial lost, failed or retried, each quality evaluation once, and
    the recommendation is the one an undisturbed run makes of the same search."""
    methods = {"bf16": ["baseline"], "fp16": ["fp16"]}
    spec = _spec(tmp_path, demo_model_dir, methods, n_trials=8, documents=150)  # 2 schemes x 2 GPUs x 2 batches
    data = yaml.safe_load(spec.read_text())
    data["space"]["batch_sizes"] = [4, 8]
    data["search"]["heartbeat_s"] = 2  # a trial is taken for dead after 6 s without a heartbeat (a loaded machine)
    spec.write_text(yaml.safe_dump(data))
    storage, tracking = own_postgres.database("restart"), f"sqlite:///{tmp_path}/mlflow.db"
    env, observer = _env(tmp_path, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"), Observer(storage)
    names = ("search", "worker-1", "worker-2")
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in names}
    coordinator = subprocess.Popen(
        [
            *CLI,
            "search",
            str(spec),
            "--storage",
            storage,
            "--tracking-uri",
            tracking,
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=logs["search"],
        stderr=subprocess.STDOUT,
    )
    everyone = [coordinator]
    try:
        wait_for(lambda: "spec_fingerprint" in getattr(observer.study(), "user_attrs", {}), everyone, "the study")
        study_name = observer.study().study_name  # type: ignore[union-attr]
        worker = [*CLI, "worker", "--study", study_name, "--storage", storage]
        everyone += [
            subprocess.Popen(worker, cwd=tmp_path, env=env, stdout=logs[name], stderr=subprocess.STDOUT)
            for name in names[1:]
        ]

        def three_inside_trials() -> bool:  # every process has a trial RUNNING (a heartbeat beating), one a claim
            study = observer.study()
            trials = [] if study is None else study.get_trials(deepcopy=False)
            return sum(t.state.name == "RUNNING" for t in trials) >= 3 and bool(observer.claim_holders())

        wait_for(three_inside_trials, everyone, "three trials running, a quality claim held", timeout=600)
        before = {t.number: (t.state, t.params) for t in observer.study().get_trials(deepcopy=False)}  # type: ignore[union-attr]
        restarted_at = time.time()
        down = own_postgres.restart(down_s=8.0)
        codes = [p.wait(timeout=600) for p in everyone]
    finally:
        for p in everyone:
            if p.poll() is None:
                p.kill()
        for log in logs.values():
            log.close()
    output = {name: (tmp_path / f"{name}.log").read_text() for name in names}
    failed = [
        (t.number, t.datetime_complete.timestamp() - restarted_at)
        for t in Observer(storage).study().trials  # type: ignore[union-attr]
        if t.state == FAIL and t.datetime_complete is not None
    ]
    assert codes[0] in (0, 1) and codes[1:] == [0, 0], ({n: o[-2000:] for n, o in output.items()}, failed, down)
    assert all("stopped answering" in o and "answers again" in o for o in output.values()), output
    assert not any("Traceback" in o for o in output.values())

    observer = Observer(storage)  # the test's own reader: plain Optuna, whose pooled connections the restart closed
    study = _assert_nothing_left_running(observer, tracking)
    trials = study.get_trials(deepcopy=False)
    assert [t.number for t in trials if t.state == FAIL or "failed_trial" in t.system_attrs] == []  # none retried
    after = {t.number: t for t in trials}
    # The trials in flight finished with the parameters they had drawn (a trial draws them one by one).
    assert all(params.items() <= after[n].params.items() for n, (_, params) in before.items())
    assert all(after[n].state in (COMPLETE, PRUNED) for n in before)
    evaluated = Counter(json.dumps(t.params, sort_keys=True) for t in trials if "duplicate_of" not in t.user_attrs)
    assert len(evaluated) == 8 and max(evaluated.values()) == 1, evaluated  # the whole grid, each candidate once
    completed = Counter(label for _, label, _ in observer.claims.completions())
    quality = Counter({label: n for label, n in completed.items() if label.startswith("quality of")})
    assert len(quality) == 2 and max(completed.values()) == 1, completed  # and each candidate's claim once

    # The same search undisturbed (one process, SQLite, the quality cache now warm): the same recommendation.
    alone = subprocess.run(
        [
            *CLI,
            "search",
            str(spec),
            "--storage",
            f"sqlite:///{tmp_path}/alone.db",
            "--tracking-uri",
            f"sqlite:///{tmp_path}/alone-mlflow.db",
            "--output-dir",
            str(tmp_path / "alone"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert alone.returncode in (0, 1), alone.stderr[-2000:]
    disturbed, undisturbed = _recommended(tmp_path / "out"), _recommended(tmp_path / "alone")
    assert disturbed["winner"] is not None and disturbed["winner"] == undisturbed["winner"]
    assert disturbed["counts"] == undisturbed["counts"]
    print(
        f"\nfaults/postgresql restart: server down {down:.1f} s with {len(before)} trials started, 3 workers: "
        f"{len(trials)} trials, lost 0, failed 0, retried 0, quality evaluations {sum(quality.values())} "
        f"(2 needed), recommendation = undisturbed run's"
    )


@pytest.mark.slow  # about 2 min on two cores: four processes importing torch, two lm-eval runs, 16 trials
def test_four_workers_on_one_postgresql_study_lose_and_repeat_nothing(tmp_path: Path, own_postgres: Any) -> None:
    """The benchmark's run (`benchmarks/many_workers.py --workers 4 --batch-sizes 4 8`), its tally checked."""
    result = many_workers.run(own_postgres.database("many"), tmp_path, workers=4, batch_sizes=[4, 8], timeout_s=600)
    assert result["exit_codes"][0] in (0, 1) and result["exit_codes"][1:] == [0, 0, 0], result
    assert result["grid"] == 16 and result["candidates_answered"] == 16, result
    assert result["lost"] == 0 and result["run_twice"] == 0, result
    assert set(result["states"]) <= {"COMPLETE", "PRUNED"}, result
    assert sorted(result["quality_evaluations"].values()) == [1, 1], result
    print(
        f"\nmany workers: 4 processes, {result['trials']} trials, lost 0, run twice 0, "
        f"{result['wall_s_per_trial']} s of wall per trial"
    )


@pytest.mark.slow  # 15-30 s: a server of its own, started, restarted, stopped
def test_restart_waits_for_the_server_and_says_so_once(own_postgres: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A storage operation attempted while the server is down waits for it: one note when it stops answering,
    one when it answers again, the value stored once. Optuna's own storage raises instead (checked too)."""
    import threading

    import optuna

    from recommender.study.storage import rdb_storage

    url = own_postgres.database("unit")
    storage = rdb_storage(url, 1.0)
    study = optuna.create_study(storage=storage, study_name="unit")
    plain = optuna.load_study(study_name="unit", storage=optuna.storages.RDBStorage(url))
    trial = study.ask()
    plain.get_trials()  # a pooled connection, closed by the restart
    restart = threading.Thread(target=own_postgres.restart, kwargs={"down_s": 1.5})
    restart.start()
    time.sleep(0.5)  # the server is down now
    trial.set_user_attr("during", 1)  # waits for it
    restart.join()
    study.tell(trial, 1.0)
    with pytest.raises(optuna.exceptions.StorageInternalError):
        plain.get_trials()
    [stored] = optuna.load_study(study_name="unit", storage=url).get_trials()
    assert stored.state == COMPLETE and stored.user_attrs == {"during": 1}
    err = capsys.readouterr().err
    assert err.count("stopped answering") == 1 and err.count("answers again") == 1, err
