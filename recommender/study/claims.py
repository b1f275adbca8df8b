"""Work done once across workers: claims kept in the study's own database.

Optuna's storage hands each trial to one worker, but trials on different workers can
need the same expensive result: a method's quality (quantize, lm-eval, KL) does not
depend on the GPU or batch size of the trial that asks for it. Before computing such a
result a worker inserts a row keyed by what it computes; the primary key lets exactly
one insert succeed. The others wait and reuse the stored result.

A killed worker cannot release its claim, so the owner bumps a counter (`beat`) while
it works. A waiter that sees the counter unchanged for `grace_s` by its own clock (no
clock is compared across machines) takes the claim over with a compare-and-swap on
(owner, beat), so exactly one waiter inherits it. Every completed computation appends a
row to a log table: that log is how "evaluated once" is checked, not assumed.

On a database server, every operation waits out a restart (`recommender.reconnect`), and a waiter starts
its silence count again once the server answers: every owner's counter stood still while it was down.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from recommender.reconnect import Reconnect, is_server_url
from recommender.study.unwound import drop_interrupted_frames

_METADATA = sa.MetaData()
CLAIMS = sa.Table(
    "recommender_claims",
    _METADATA,
    sa.Column("key", sa.String(160), primary_key=True),
    sa.Column("label", sa.String(300), nullable=False),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # "running" or "done"
    sa.Column("beat", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("result", sa.Text, nullable=True),
)
COMPLETIONS = sa.Table(
    "recommender_claim_completions",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(160), nullable=False),
    sa.Column("label", sa.String(300), nullable=False),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),
)

#: Called with a line saying what this worker waits for.
WaitFn = Callable[[str], None]


def worker_id() -> str:
    """host:pid:random — unique per process, and says where to look when a claim is stuck."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Claim:
    key: str
    label: str
    owner: str
    state: str
    beat: int
    attempts: int


@dataclass
class ClaimStore:
    """Claims in the database behind an Optuna RDB storage URL (sqlite, PostgreSQL, MySQL)."""

    engine: sa.Engine
    owner: str = field(default_factory=worker_id)
    heartbeat_s: float = 10.0
    on_wait: WaitFn | None = None
    #: Retries while a database server restarts (None: SQLite, or an engine given as is).
    reconnect: Reconnect | None = None

    @property
    def grace_s(self) -> float:
        """Silence after which a claim's owner is taken for dead: three heartbeats, as for Optuna's trials."""
        return 3 * self.heartbeat_s

    @classmethod
    def open(
        cls,
        url: str,
        *,
        owner: str | None = None,
        heartbeat_s: float = 10.0,
        on_wait: WaitFn | None = None,
        reconnect: Reconnect | None = None,
    ) -> ClaimStore:
        """The claims in `url`'s database (tables created if absent); `reconnect`: the study storage's, if any."""
        connect_args = {"check_same_thread": False} if url.startswith("sqlite") else {}
        engine = sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args)
        for attempt in range(5):
            try:
                _METADATA.create_all(engine)
                break
            except sa.exc.SQLAlchemyError:  # another worker created the tables at the same moment
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        reconnect = reconnect or (Reconnect(url) if is_server_url(url) else None)
        return cls(engine, owner=owner or worker_id(), heartbeat_s=heartbeat_s, on_wait=on_wait, reconnect=reconnect)

    # -- reading -----------------------------------------------------------------------
    def get(self, key: str) -> tuple[Claim, dict[str, Any] | None] | None:
        with self.engine.connect() as db:
            row = db.execute(sa.select(CLAIMS).where(CLAIMS.c.key == key)).mappings().first()
        if row is None:
            return None
        claim = Claim(row["key"], row["label"], row["owner"], row["state"], row["beat"], row["attempts"])
        return claim, (json.loads(row["result"]) if row["result"] is not None else None)

    def running(self) -> list[Claim]:
        """Claims being computed now (or whose owner died and nobody has taken over yet)."""
        with self.engine.connect() as db:
            rows = db.execute(sa.select(CLAIMS).where(CLAIMS.c.state == "running")).mappings().all()
        return [Claim(r["key"], r["label"], r["owner"], r["state"], r["beat"], r["attempts"]) for r in rows]

    def completions(self) -> list[tuple[str, str, str]]:
        """(key, label, owner) of every computation that finished, in order: a key twice is a duplicate."""
        with self.engine.connect() as db:
            rows = db.execute(
                sa.select(COMPLETIONS.c.key, COMPLETIONS.c.label, COMPLETIONS.c.owner).order_by(COMPLETIONS.c.id)
            ).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def reap_abandoned(self) -> list[Claim]:
        """Delete running claims whose owner stayed silent for the grace period (killed workers).

        Called by the coordinator once no trial runs: a claim still running then was left by a
        killed worker whose trial's retry no longer needed that result. Waits one grace period
        only when there is such a claim; a claim whose owner beats meanwhile is kept.
        """
        before = [c for c in self.running() if c.owner != self.owner]
        if not before:
            return []
        time.sleep(self.grace_s + min(1.0, self.heartbeat_s))
        reaped = []
        with self.engine.begin() as db:
            for c in before:
                gone = db.execute(
                    sa.delete(CLAIMS).where(
                        CLAIMS.c.key == c.key,
                        CLAIMS.c.owner == c.owner,
                        CLAIMS.c.beat == c.beat,
                        CLAIMS.c.state == "running",
                    )
                ).rowcount
                if gone:
                    reaped.append(c)
        return reaped

    # -- claiming ----------------------------------------------------------------------
    def _try_insert(self, key: str, label: str) -> bool:
        try:
            with self.engine.begin() as db:
                db.execute(
                    sa.insert(CLAIMS).values(
                        key=key, label=label[:300], owner=self.owner, state="running", beat=0, attempts=1, result=None
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def _try_take_over(self, stale: Claim) -> bool:
        with self.engine.begin() as db:
            taken = db.execute(
                sa.update(CLAIMS)
                .where(
                    CLAIMS.c.key == stale.key,
                    CLAIMS.c.owner == stale.owner,
                    CLAIMS.c.beat == stale.beat,
                    CLAIMS.c.state == "running",
                )
                .values(owner=self.owner, beat=0, attempts=CLAIMS.c.attempts + 1)
            ).rowcount
        return taken == 1

    def _beat(self, key: str) -> bool:
        with self.engine.begin() as db:
            return (
                db.execute(
                    sa.update(CLAIMS)
                    .where(CLAIMS.c.key == key, CLAIMS.c.owner == self.owner)
                    .values(beat=CLAIMS.c.beat + 1)
                ).rowcount
                == 1
            )

    def _release(self, key: str) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.delete(CLAIMS).where(CLAIMS.c.key == key, CLAIMS.c.owner == self.owner, CLAIMS.c.state == "running")
            )

    def _finish(self, key: str, label: str, result: dict[str, Any], seconds: float) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.update(CLAIMS)
                .where(CLAIMS.c.key == key, CLAIMS.c.owner == self.owner)
                .values(state="done", result=json.dumps(result))
            )
            db.execute(sa.insert(COMPLETIONS).values(key=key, label=label[:300], owner=self.owner, seconds=seconds))

    def run_once(self, key: str, label: str, compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """`compute()`'s result for `key`, computed here only if no worker has (or is computing) it.

        Returns the result and whether it was computed here. If `compute` raises, the claim is
        released so another worker (or a later run) can try, and the error propagates.
        """
        seen: tuple[str, int] | None = None
        seen_since = time.monotonic()
        while True:
            found = self.get(key)
            if found is not None and found[0].state == "done" and found[1] is not None:
                return found[1], False
            try:
                mine = self._try_insert(key, label) if found is None else False
                if found is not None:
                    claim = found[0]
                    restarted = self.reconnect is not None and self.reconnect.just_recovered(self.grace_s)
                    if seen != (claim.owner, claim.beat) or restarted:
                        seen, seen_since = (claim.owner, claim.beat), time.monotonic()
                    elif time.monotonic() - seen_since > self.grace_s:
                        mine = self._try_take_over(claim)
                    if not mine and self.on_wait is not None:
                        self.on_wait(f"waiting for {label} on worker {claim.owner}")
                if mine:
                    return self._compute(key, label, compute), True
            except KeyboardInterrupt as interrupt:
                # Ctrl-C between taking the claim and computing under it (the claim is visible the moment it is
                # inserted): let it go, as `_compute` does once it runs. Only a running claim of ours is deleted.
                drop_interrupted_frames(interrupt)
                self._release(key)
                raise
            time.sleep(min(1.0, self.heartbeat_s / 2))

    def _compute(self, key: str, label: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_s):
                try:
                    self._beat(key)
                except sa.exc.SQLAlchemyError:  # a dropped connection: the next beat reconnects
                    continue

        thread = threading.Thread(target=beat, name=f"claim-heartbeat-{key[:12]}", daemon=True)
        thread.start()
        started = time.perf_counter()
        try:
            result = compute()
        except BaseException as exc:
            stop.set()
            thread.join()
            drop_interrupted_frames(exc)
            self._release(key)
            raise
        stop.set()
        thread.join()
        self._finish(key, label, result, time.perf_counter() - started)
        return result


def _riding_out_restarts(name: str) -> Callable[..., Any]:
    method = getattr(ClaimStore, name)

    @functools.wraps(method)
    def call(self: ClaimStore, *args: Any, **kwargs: Any) -> Any:
        if self.reconnect is None:
            return method(self, *args, **kwargs)
        return self.reconnect.call(lambda: method(self, *args, **kwargs))

    return call


for _name in (
    "get",
    "running",
    "completions",
    "reap_abandoned",
    "_try_insert",
    "_try_take_over",
    "_beat",
    "_release",
    "_finish",
):
    setattr(ClaimStore, _name, _riding_out_restarts(_name))
