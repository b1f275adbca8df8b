"""Riding out a database server that restarts: the study's PostgreSQL (or MySQL) stops answering for seconds.

A server restart (`pg_ctl restart`, a failover, a maintenance window) closes every worker's connections at
once. SQLAlchemy reconnects on its own once the server answers (the engines are made with `pool_pre_ping`),
but an operation attempted while it is down fails. Optuna turns that failure into a `StorageInternalError`
that ends the trial, and kills the heartbeat thread that tells other workers the trial is alive, so a few
seconds' outage would fail trials and run them twice. Each operation on the study's database therefore goes
through `Reconnect.call`: a lost connection or a refused one is retried, with one `note:` line to the user,
for up to `patience_s`; any other error (a constraint, a bad query) is raised at once, as before.

`recovered_at` lets heartbeat-based judgements (Optuna's stale trials, the quality claims) wait a grace period
after an outage: every heartbeat is old when the server comes back, and none of their owners is dead.

SQLite has no server to restart: its storage is never wrapped.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

#: How long an operation waits for the server before its error is raised (a restart takes seconds; a
#: failover tens of seconds).
PATIENCE_S = 120.0
#: The longest pause between two tries: heartbeats resume within about this long once the server answers.
MAX_PAUSE_S = 1.0


def is_server_url(url: str) -> bool:
    """A database behind a server (which can restart), as opposed to a SQLite file."""
    return url.startswith(("postgresql", "mysql"))


def connection_lost(exc: BaseException) -> bool:
    """The error, or one it was raised from, says the connection to the server is gone or was refused."""
    return lost_connection_error(exc) is not None


def lost_connection_error(exc: BaseException) -> BaseException | None:
    """The driver's error saying the connection is gone or was refused, if `exc` is or wraps one (else None).

    SQLAlchemy marks a connection dropped mid-use as `connection_invalidated`; a connection refused while the
    server starts, or "the database system is shutting down", is a DBAPI `OperationalError`, as is a deadlock
    (also safe to retry).
    """
    import sqlalchemy as sa

    seen: BaseException | None = exc
    for _ in range(8):  # Optuna wraps SQLAlchemy's error, which wraps the driver's
        if seen is None:
            return None
        if isinstance(seen, sa.exc.DBAPIError):
            lost = seen.connection_invalidated or isinstance(seen, (sa.exc.OperationalError, sa.exc.InterfaceError))
            return seen.orig if lost and seen.orig is not None else (seen if lost else None)
        seen = seen.__cause__ or seen.__context__
    return None


def shown(url: str) -> str:
    """The URL with its password hidden, as the note prints it."""
    import sqlalchemy as sa

    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy parses: print nothing of it
        return "the study's database"


@dataclass
class Reconnect:
    """Retries operations on one database while its server does not answer; shared by a process's threads."""

    url: str
    patience_s: float = PATIENCE_S
    #: `time.monotonic()` when the server answered again after the last outage this process saw (-inf: none).
    recovered_at: float = -math.inf
    _down_since: float | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def call(self, operation: Callable[[], T], retry_check: Callable[[BaseException], T | None] | None = None) -> T:
        """`operation()`, tried again while the connection is lost, up to `patience_s` after the outage began.

        `retry_check`, given the error a retry raised, may return the value the first try had committed (a
        commit whose acknowledgement was lost with the connection); None re-raises the error.
        """
        pause, retried = 0.1, False
        while True:
            try:
                value = operation()
            except Exception as exc:
                if retried and retry_check is not None and not connection_lost(exc):
                    answer = retry_check(exc)
                    if answer is not None:
                        self._answered()
                        return answer
                if not connection_lost(exc) or self._waited(exc) > self.patience_s:
                    raise
                time.sleep(pause)
                pause, retried = min(MAX_PAUSE_S, 2 * pause), True
                continue
            self._answered()
            return value

    def just_recovered(self, within_s: float) -> bool:
        """The server is down or answered again less than `within_s` ago: heartbeats stored before the outage
        are not news. Ask after the read that judges them, which may itself be the one that saw the outage end."""
        return self._down_since is not None or time.monotonic() - self.recovered_at < within_s

    def _waited(self, exc: BaseException) -> float:
        """Seconds since this outage began (the first failure prints the note)."""
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now
                why = lost_connection_error(exc) or exc
                first = (str(why).strip().splitlines() or [type(why).__name__])[0][:160]
                sys.stderr.write(
                    f"note: {shown(self.url)} stopped answering ({first}); retrying for up to {self.patience_s:.0f} s, "
                    "the search goes on where it was\n"
                )
            return now - self._down_since

    def _answered(self) -> None:
        if self._down_since is None:  # the usual case, without taking the lock
            return
        with self._lock:
            if self._down_since is not None:
                now = time.monotonic()
                sys.stderr.write(f"note: {shown(self.url)} answers again after {now - self._down_since:.1f} s\n")
                self._down_since, self.recovered_at = None, now
