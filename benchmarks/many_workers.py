"""Many workers on one PostgreSQL study: trials lost, trials run twice, and the time per trial.

    .venv/bin/python benchmarks/many_workers.py [--workers 8] [--batch-sizes 1 2 4 8] [--storage URL]

Starts a temporary PostgreSQL server on loopback (initdb + pg_ctl, as the tests' `postgres_server` fixture
does; as root it runs as the `postgres` user), unless `--storage` names one. Then `recommender search` on
the demo model (bf16 and fp16 on four priced GPUs at `--batch-sizes`: the whole grid, so Optuna's
brute-force sampler hands out each candidate once) and `--workers - 1` processes of `recommender worker`
joining it, each with one thread (`OMP_NUM_THREADS=1`), all on this machine. When they have finished, it
reads the study and the quality claims back:

- lost: a trial left RUNNING or WAITING, a candidate of the grid the study does not hold, or a trial that
  failed without a finished retry;
- run twice: a candidate evaluated by two trials (neither answered from the other), a quality evaluation or a
  candidate's evaluation computed twice (the claims' completion log), a trial retried because its worker
  looked dead;
- the time per trial: the wall time from the search's start to the last process's end, divided by the
  trials, and each trial's own duration (Optuna's start and completion times).

Prints one JSON object, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "recommender" / "demo"
CLI = [sys.executable, "-m", "recommender.cli.main"]
GPUS = ["rtx-4090", "l40s", "a100-80gb", "h100-sxm"]  # all priced by the default price set


@dataclass
class TemporaryPostgres:
    """A PostgreSQL server of its own on loopback, in a temporary folder; `restart()` is `pg_ctl restart`."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="recommender-pg-")))
    port: int = 0
    _prefix: list[str] = field(default_factory=list)
    _pg_ctl: str = "pg_ctl"

    def __enter__(self) -> TemporaryPostgres:
        debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
        search = os.pathsep.join([os.environ.get("PATH", ""), *map(str, debian)])
        initdb, pg_ctl = shutil.which("initdb", path=search), shutil.which("pg_ctl", path=search)
        if initdb is None or pg_ctl is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql)")
        self._pg_ctl = pg_ctl
        if os.geteuid() == 0:  # initdb refuses to run as root
            self._prefix = [shutil.which("runuser") or "runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, user="postgres")
        try:
            subprocess.run(
                [*self._prefix, initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres"],
                check=True,
                capture_output=True,
                timeout=120,
            )
            self._start_on_a_free_port()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start_on_a_free_port(self, tries: int = 5) -> None:
        """Start on a port the kernel found free. It is free only until the probe's socket closes: another process
        (a pytest-xdist worker starting a server of its own, a client's outgoing connection) can take it before the
        server binds it. Then the server stops at once saying the address is in use, and it starts on another."""
        log = self.root / "server.log"
        for attempt in range(1, tries + 1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            logged = log.stat().st_size if log.is_file() else 0
            try:
                self._ctl("start")
                return
            except subprocess.CalledProcessError:
                with log.open("rb") as f:
                    f.seek(logged)
                    taken = b"Address already in use" in f.read()
                if not taken or attempt == tries:
                    raise

    def __exit__(self, *_: object) -> None:
        subprocess.run(
            [*self._prefix, self._pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def restart(self, down_s: float = 0.0) -> float:
        """`pg_ctl restart` (a fast shutdown: every client's connection is closed, then a start); with `down_s`,
        the same in two steps with the server down that long between them. Returns the seconds it did not answer."""
        started = time.perf_counter()
        if down_s <= 0:
            self._ctl("restart")
        else:
            subprocess.run(
                [*self._prefix, self._pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"],
                check=True,
                capture_output=True,
                timeout=120,
            )
            time.sleep(down_s)
            self._ctl("start")
        return time.perf_counter() - started

    def database(self, name: str) -> str:
        """A new, empty database on this server; its URL."""
        import psycopg

        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
            connection.execute(f'CREATE DATABASE "{name}"')
        return f"{self.url}/{name}"

    def _ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        subprocess.run(
            [
                *self._prefix,
                self._pg_ctl,
                "-D",
                str(self.data),
                "-l",
                str(self.root / "server.log"),
                "-o",
                options,
                "-w",
                action,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def write_spec(folder: Path, *, gpus: list[str], batch_sizes: list[int], documents: int = 6) -> Path:
    """The demo model, bf16 and fp16 (two quality evaluations) on `gpus` x `batch_sizes`: n_trials is the grid."""
    suite = folder / "suite.yaml"
    suite.write_text(
        json.dumps(
            {
                "name": "demo-python-code-small",
                "include_path": str(DEMO / "tasks"),
                "limit": documents,
                "batch_size": 8,
                "tasks": [
                    {
                        "task": "demo_code_ppl",
                        "metric": "bits_per_byte",
                        "higher_is_better": False,
                        "threshold": {"max_relative_drop": 0.02},
                        "limit": 4,
                    },
                    {
                        "task": "demo_code_next_line",
                        "metric": "acc",
                        "higher_is_better": True,
                        "threshold": {"max_absolute_drop": 0.03},
                    },
                ],
                "fidelity": {
                    "max_mean_kl": 0.02,
                    "text_task": "demo_code_ppl",
                    "text_windows": 64,
                    "window_tokens": 16,
                },
            }
        )
    )
    spec = folder / "many-workers.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "many-workers",
                "model": {"source": str(DEMO / "model"), "name": "demo-code-llama", "release": "bench"},
                "use_case": str(suite),
                "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
                "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
                "space": {
                    "schemes": {"bf16": ["baseline"], "fp16": ["fp16"]},
                    "hardware": gpus,
                    "batch_sizes": batch_sizes,
                },
                "current": {
                    "precision": "bf16",
                    "scheme": "baseline",
                    "hardware": gpus[-1],
                    "batch_size": batch_sizes[0],
                },
                "search": {"n_trials": 2 * len(gpus) * len(batch_sizes), "seed": 0, "heartbeat_s": 2},
            }
        )
    )
    return spec


def environment(folder: Path) -> dict[str, str]:
    """One thread per process (they share the cores), a cold quality cache of the run's own, offline."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "RECOMMENDER_CACHE_DIR": str(folder / "cache"),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TQDM_DISABLE": "1",
        "PYTHONPATH": path,
    }


def study_name_when_ready(storage: str, timeout_s: float, alive: subprocess.Popen[bytes]) -> str:
    """The study's name once `recommender search` has stored its spec (workers can join from then on)."""
    import optuna

    opened: optuna.storages.RDBStorage | None = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive.poll() is None:
        try:  # Optuna's tables may not exist yet
            opened = opened or optuna.storages.RDBStorage(storage, skip_table_creation=True)
            for name in optuna.get_all_study_names(opened):
                if "spec_fingerprint" in optuna.load_study(study_name=name, storage=opened).user_attrs:
                    opened.engine.dispose()
                    return name
        except Exception:
            opened = None
        time.sleep(0.5)
    raise RuntimeError("`recommender search` never set up its study (see process-0.log)")


def tally(storage: str, study_name: str) -> dict[str, Any]:
    """Trials lost and run twice, read from the study and the claims' completion log."""
    import optuna
    import sqlalchemy as sa

    from recommender.study.claims import ClaimStore

    study = optuna.load_study(study_name=study_name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state.name for t in trials)
    grid = int(study.user_attrs["budget"])
    answered = {
        json.dumps(t.params, sort_keys=True)
        for t in trials
        if t.state.name in ("COMPLETE", "PRUNED") and "result" in t.user_attrs
    }
    evaluated = Counter(
        json.dumps(t.params, sort_keys=True)
        for t in trials
        if "result" in t.user_attrs and "duplicate_of" not in t.user_attrs
    )
    retried = [t.number for t in trials if "failed_trial" in t.system_attrs]
    unretried = [
        t.number
        for t in trials
        if t.state.name == "FAIL" and not any(r.system_attrs.get("failed_trial") == t.number for r in trials)
    ]
    claims = ClaimStore(sa.create_engine(storage))
    completed = Counter(label for _, label, _ in claims.completions())  # quality and candidate claims
    quality = Counter({label: n for label, n in completed.items() if label.startswith("quality of")})
    claims.engine.dispose()
    durations = [
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in trials
        if t.datetime_complete is not None and t.datetime_start is not None
    ]
    return {
        "trials": len(trials),
        "states": dict(states),
        "grid": grid,
        "candidates_answered": len(answered),
        "lost": states["RUNNING"] + states["WAITING"] + max(0, grid - len(answered)) + len(unretried),
        "run_twice": sum(n - 1 for n in evaluated.values()) + sum(n - 1 for n in completed.values()) + len(retried),
        "quality_evaluations": dict(quality),
        "retried_trials": retried,
        "trial_s_median": round(statistics.median(durations), 2) if durations else None,
        "trial_s_max": round(max(durations), 2) if durations else None,
    }


def run(storage: str, folder: Path, *, workers: int, batch_sizes: list[int], timeout_s: float) -> dict[str, Any]:
    """The search and its joined workers, to the end; the tally with the times."""
    spec, env = write_spec(folder, gpus=GPUS, batch_sizes=batch_sizes), environment(folder)
    tracking = f"sqlite:///{folder}/mlflow.db"
    logs = [(folder / f"process-{i}.log").open("w") for i in range(workers)]
    started = time.perf_counter()
    search = subprocess.Popen(
        [
            *CLI,
            "search",
            str(spec),
            "--storage",
            storage,
            "--tracking-uri",
            tracking,
            "--output-dir",
            str(folder / "out"),
        ],
        cwd=folder,
        env=env,
        stdout=logs[0],
        stderr=subprocess.STDOUT,
    )
    processes = [search]
    try:
        name = study_name_when_ready(storage, timeout_s, search)
        processes += [
            subprocess.Popen(
                [*CLI, "worker", "--study", name, "--storage", storage],
                cwd=folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for log in logs[1:]
        ]
        codes = [p.wait(timeout=max(1.0, timeout_s - (time.perf_counter() - started))) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
        for log in logs:
            log.close()
    wall = time.perf_counter() - started
    result = tally(storage, name)
    finished = sum(n for s, n in result["states"].items() if s in ("COMPLETE", "PRUNED", "FAIL"))
    return {
        "workers": workers,
        "exit_codes": codes,
        "wall_s": round(wall, 1),
        "wall_s_per_trial": round(wall / max(1, finished), 2),
        **result,
    }


def table(r: dict[str, Any]) -> str:
    rows = [
        ("workers", r["workers"]),
        ("trials (grid)", f"{r['trials']} ({r['grid']})"),
        ("states", ", ".join(f"{k} {v}" for k, v in sorted(r["states"].items()))),
        ("lost", r["lost"]),
        ("run twice", r["run_twice"]),
        ("quality evaluations", ", ".join(f"{k} x{v}" for k, v in r["quality_evaluations"].items())),
        ("wall, whole search (s)", r["wall_s"]),
        ("wall per trial (s)", r["wall_s_per_trial"]),
        ("one trial, median / max (s)", f"{r['trial_s_median']} / {r['trial_s_max']}"),
    ]
    return "\n".join(f"{k:<30} {v}" for k, v in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8, help="processes in all: the search and workers - 1")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--storage", help="a PostgreSQL URL of an empty database (default: a server of its own)")
    parser.add_argument("--timeout-s", type=float, default=900)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="many-workers-") as tmp:
        if args.storage:
            result = run(
                args.storage, Path(tmp), workers=args.workers, batch_sizes=args.batch_sizes, timeout_s=args.timeout_s
            )
        else:
            with TemporaryPostgres() as server:
                result = run(
                    server.database("many_workers"),
                    Path(tmp),
                    workers=args.workers,
                    batch_sizes=args.batch_sizes,
                    timeout_s=args.timeout_s,
                )
    print(json.dumps(result, indent=2))
    print(table(result))


if __name__ == "__main__":
    main()
