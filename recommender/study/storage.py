"""The study's storage: Optuna's RDB storage with heartbeats, and what the coordinator stores in the study.

Any Optuna RDB storage URL works (sqlite under mlruns/ by default, PostgreSQL for several
machines); Optuna's storage is the distributed engine — no home-made scheduler.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from recommender.errors import BadInputError
from recommender.quiet import quiet_optuna

if TYPE_CHECKING:
    import optuna

DEFAULT_STORAGE = "sqlite:///mlruns/optuna.db"
#: What the study minimises: what the decision ranks by ($/month at the spec's traffic, so the sampler steers by
#: the cost that decides), and the quality loss (mean KL against bf16; see CandidateResult).
OBJECTIVES: dict[str, Literal["minimize", "maximize"]] = {
    "usd_per_month": "minimize",
    "quality_loss_mean_kl": "minimize",
}
#: The spec's fingerprint: a rerun with another spec under the same study name is refused. Stored last.
SPEC_FINGERPRINT_ATTR = "spec_fingerprint"
#: The shipped step-cost fit the study's latencies come from (``calibrated.fit_digest``): a study is never
#: continued by a version whose performance model differs, which would mix two models' figures.
PERF_MODEL_ATTR = "perf_model"
#: The spec itself (paths made absolute), so `recommender worker --study NAME` needs nothing else.
SPEC_JSON_ATTR = "spec"
PARENT_RUN_ATTR = "mlflow_parent_run_id"
#: On each trial: its candidate's answer (a serialised ``CandidateResult``), what every worker reads back.
RESULT_ATTR = "result"
#: The MLflow store the coordinator logs to; workers log there too unless told otherwise.
TRACKING_URI_ATTR = "mlflow_tracking_uri"


def rdb_storage(url: str, heartbeat_s: float) -> optuna.storages.BaseStorage | str:
    """An RDB storage with heartbeats: a trial whose process was killed (SIGKILL, preemption)
    is failed once its heartbeat is older than 3 heartbeats, and re-enqueued with the same
    parameters by RetryHeartbeatStaleTrialCallback, so the next run (or another worker) evaluates it. On a
    database server, each operation waits out a restart of the server (`reconnecting.py`)."""
    import optuna
    import sqlalchemy as sa

    from recommender.reconnect import is_server_url
    from recommender.study.reconnecting import ReconnectingRDBStorage

    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    for attempt in range(4):
        try:
            with warnings.catch_warnings():  # heartbeats are marked experimental in Optuna; the kill test covers them
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                # A server's storage waits out a restart (reconnecting.py); a SQLite file has no server.
                kind = ReconnectingRDBStorage if is_server_url(url) else optuna.storages.RDBStorage
                return kind(
                    url,
                    heartbeat_interval=max(1, round(heartbeat_s)),
                    grace_period=max(3, round(3 * heartbeat_s)),
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2),
                )
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
            # Two processes creating Optuna's tables at once on an empty PostgreSQL database: one
            # loses with a duplicate key; the tables exist when it tries again.
            if attempt == 3:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def probe_storage(url: str) -> None:
    """A database storage server answers a connection (opened and closed, no table created); SQLite files are
    checked statically (`recommender.config.destinations`). A missing driver or an unreachable server is bad input."""
    import sqlalchemy as sa

    if url.startswith("sqlite"):
        return
    try:
        engine = sa.create_engine(url)
        with engine.connect():
            pass
        engine.dispose()
    except Exception as exc:  # SQLAlchemy's errors, a missing driver module (ImportError), a bad URL
        raise unusable_storage(url, exc, "pass sqlite:///path.db or a reachable postgresql:// URL") from None


def unusable_storage(storage: str, exc: BaseException, fix: str) -> BadInputError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return BadInputError("--storage", f"cannot open Optuna storage {storage!r}: {first[:200]}", fix)


def open_study(
    storage: str, study_name: str, seed: int, *, exhaustive: bool = False, heartbeat_s: float = 10.0
) -> optuna.Study:
    """Create or load the study; a storage URL that cannot be opened is bad input.

    TPE samples the space; when the trial budget covers the whole grid, Optuna's
    brute-force sampler visits every candidate once instead of sampling some twice.
    """
    import optuna

    with warnings.catch_warnings():  # BruteForceSampler is marked experimental; its behaviour here is tested
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler: optuna.samplers.BaseSampler = (
            optuna.samplers.BruteForceSampler(seed=seed)
            if exhaustive
            else optuna.samplers.TPESampler(seed=seed, n_startup_trials=8)
        )
    quiet_optuna()  # each failed trial's traceback; the search prints its own line per failed candidate
    try:
        if storage.startswith("sqlite:///"):
            Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=study_name,
            storage=rdb_storage(storage, heartbeat_s),
            directions=list(OBJECTIVES.values()),
            sampler=sampler,
            load_if_exists=True,
        )
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server (SQLAlchemy's errors)
        raise unusable_storage(storage, exc, "pass sqlite:///path.db or a reachable postgresql:// URL") from None
    if len(study.directions) != len(OBJECTIVES):
        raise BadInputError(
            "search.study_name",
            f"study {study_name!r} in {storage} has {len(study.directions)} objective(s), this version optimises "
            f"{len(OBJECTIVES)} ({', '.join(OBJECTIVES)})",
            "give the search a new search.study_name",
        )
    return study


def stored_tracking_uri(study: optuna.Study) -> str | None:
    uri = study.user_attrs.get(TRACKING_URI_ATTR)
    return None if uri is None else str(uri)


def check_perf_model(study: optuna.Study | Mapping[str, Any], name: str, *, field: str) -> None:
    """Refuse a study set up by a version whose performance model differs (``PERF_MODEL_ATTR``); `study` is the
    study or its user attributes as `stored_study_attrs` reads them."""
    from recommender.perf.step.calibrated import fit_digest

    attrs = study if isinstance(study, Mapping) else study.user_attrs
    here, stored = fit_digest(), attrs.get(PERF_MODEL_ATTR)
    if SPEC_FINGERPRINT_ATTR in attrs and stored != here:
        was = f"step-cost fit {stored}" if stored else "a performance model from before fits were recorded"
        raise BadInputError(
            field,
            f"study {name!r} holds latencies from {was}; this version ships fit {here}",
            "start a new study (the default name changes with the fit, or set search.study_name): quality "
            "scores are cached and are not recomputed",
        )


def stored_study_names(storage: str) -> list[str]:
    """The names of the studies in `storage`, read without writing anything (as `stored_study_attrs`)."""
    import sqlite3

    import sqlalchemy as sa

    if storage.startswith("sqlite:///"):
        path = Path(storage.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.is_file():
            return []
        engine = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True))
    else:
        engine = sa.create_engine(storage)
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table("studies"):
                return []
            return [str(row[0]) for row in connection.execute(sa.text("SELECT study_name FROM studies"))]
    except sa.exc.SQLAlchemyError as exc:
        raise unusable_storage(storage, exc, "pass the storage URL of an Optuna study, or a new one") from None
    finally:
        engine.dispose()


def stored_study_attrs(storage: str, study_name: str) -> dict[str, Any] | None:
    """The user attributes of study `study_name` in `storage`, read without writing anything (None: no such study).

    Opening the study through Optuna would create its tables, a SQLite file and the study itself, so a refusal
    made after it would leave them behind: `search` and `search --dry-run` read the store this way first. A
    SQLite file is opened read-only; a server's tables are looked up before they are read.
    """
    import json
    import sqlite3

    import sqlalchemy as sa

    if storage.startswith("sqlite:///"):
        path = Path(storage.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.is_file():
            return None
        engine = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True))
    else:
        engine = sa.create_engine(storage)
    query = sa.text(
        "SELECT a.key, a.value_json FROM study_user_attributes a JOIN studies s "
        "ON a.study_id = s.study_id WHERE s.study_name = :name"
    )
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table("studies"):
                return None
            known = connection.execute(sa.text("SELECT 1 FROM studies WHERE study_name = :name"), {"name": study_name})
            if known.first() is None:
                return None
            return {key: json.loads(value) for key, value in connection.execute(query, {"name": study_name})}
    except sa.exc.SQLAlchemyError as exc:  # not an Optuna database, a locked or corrupt file, a server gone
        raise unusable_storage(storage, exc, "pass the storage URL of an Optuna study, or a new one") from None
    finally:
        engine.dispose()
