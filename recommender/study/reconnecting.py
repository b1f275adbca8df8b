"""Optuna's RDB storage on a database server that may restart mid-search (`recommender.reconnect`).

Every operation Optuna's storage (and its cache, `optuna.storages._CachedStorage`) performs on the
database is retried while the server does not answer, and stale-trial detection pauses for one grace
period once it answers again: otherwise every trial running during a restart longer than the grace period
would look abandoned (its heartbeat is old) and be run again by another worker. Read in the installed
Optuna 5.0: `storages/_rdb/storage.py` (each operation in `_create_scoped_session`, which turns a
dropped connection into `StorageInternalError`), `storages/_heartbeat.py` (a heartbeat thread dies on its
first error), `storages/_cached_storage.py` (the private methods it calls on the backend).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import TrialState

from recommender.reconnect import Reconnect

#: The methods that touch the database: Optuna's storage API and the private ones `_CachedStorage` calls (the
#: stale-trial query and the state update are defined in the class, with more to them than a retry).
OPERATIONS = (
    "create_new_study",
    "delete_study",
    "set_study_user_attr",
    "set_study_system_attr",
    "get_study_id_from_name",
    "get_study_name_from_id",
    "get_study_directions",
    "get_study_user_attrs",
    "get_study_system_attrs",
    "get_all_studies",
    "create_new_trial",
    "_create_new_trial",
    "set_trial_param",
    "_set_trial_param",
    "get_trial_id_from_study_id_trial_number",
    "get_trial_param",
    "set_trial_intermediate_value",
    "set_trial_user_attr",
    "set_trial_system_attr",
    "get_trial",
    "get_all_trials",
    "_get_trials",
    "get_best_trial",
    "_get_best_trial_id",
    "get_trial_user_attrs",
    "get_trial_system_attrs",
    "record_heartbeat",
)


class ReconnectingRDBStorage(optuna.storages.RDBStorage):
    """`RDBStorage` whose operations wait out a restarting server (`Reconnect`), made with `pool_pre_ping`."""

    def __init__(self, url: str, *, reconnect: Reconnect | None = None, **kwargs: Any) -> None:
        engine_kwargs = {"pool_pre_ping": True, **kwargs.pop("engine_kwargs", {})}
        self.reconnect = reconnect or Reconnect(url)
        super().__init__(url, engine_kwargs=engine_kwargs, **kwargs)

    def __getstate__(self) -> dict[Any, Any]:  # the lock is not picklable; a copy starts with no outage
        state = super().__getstate__()
        state["reconnect"] = Reconnect(self.reconnect.url, self.reconnect.patience_s)
        return state

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Any = None
    ) -> bool:  # values: Sequence[float] | None, as Optuna declares it
        def committed_before(exc: BaseException) -> bool | None:
            # The first try committed and only the answer was lost: the retry finds the trial finished as asked.
            if isinstance(exc, optuna.exceptions.UpdateFinishedTrialError):
                return True if optuna.storages.RDBStorage.get_trial(self, trial_id).state == state else None
            return None

        return self.reconnect.call(
            lambda: optuna.storages.RDBStorage.set_trial_state_values(self, trial_id, state, values), committed_before
        )

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        """Optuna's stale trials, none while the heartbeats stored before an outage may be its only trace."""
        grace = self.grace_period if self.grace_period is not None else 2 * (self.heartbeat_interval or 0)
        stale = self.reconnect.call(lambda: optuna.storages.RDBStorage._get_stale_trial_ids(self, study_id))
        # Judged after the read: when the server comes back, the first query answered is often this one, and every
        # heartbeat it reads is as old as the outage.
        # Twice the grace period: every live worker's heartbeat has been stored again by then, even on a busy machine.
        settle = max(2 * grace, grace + 2 * (self.heartbeat_interval or 0))
        return [] if self.reconnect.just_recovered(settle) else stale


def reconnect_of(study: optuna.Study) -> Reconnect | None:
    """The study storage's `Reconnect` (None: SQLite), for the other stores of the same database (the quality
    claims) to share, so an outage is told once per process. Optuna keeps the storage it wraps as `_backend`."""
    storage = getattr(study._storage, "_backend", study._storage)
    return storage.reconnect if isinstance(storage, ReconnectingRDBStorage) else None


def _retried(name: str) -> Callable[..., Any]:
    method = getattr(optuna.storages.RDBStorage, name)

    @functools.wraps(method)
    def call(self: ReconnectingRDBStorage, *args: Any, **kwargs: Any) -> Any:
        return self.reconnect.call(lambda: method(self, *args, **kwargs))

    return call


for _name in OPERATIONS:
    setattr(ReconnectingRDBStorage, _name, _retried(_name))
