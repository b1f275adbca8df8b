"""One `recommender search` per study at a time: the coordinator's lock, a row in the claims table.

Two `search` processes on one study would each create the study's MLflow run, refine around the winner and
write the recommendation: more processes should join as `recommender worker`, which shares the trials. So the
coordinator holds a row keyed by the study (state ``coordinating``, never listed among the running claims) and
beats it while it runs. A second `search` that finds the row with its owner alive refuses in one line naming
it; a row left by a killed coordinator is taken over — at once when its owner was a process of this host that
no longer exists, else once its beat has stood still for three heartbeats by this process's clock.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field

import sqlalchemy as sa

from recommender.errors import BadInputError
from recommender.study.claims import CLAIMS, ClaimStore
from recommender.study.unwound import drop_interrupted_frames

STATE = "coordinating"


def lock_key(study_name: str) -> str:
    return f"coordinator:{study_name}"[:160]


def _here(owner: str) -> bool | None:
    """Whether `owner` (host:pid:random) is a live process of this host; None when it is another host's."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@dataclass
class CoordinatorLock:
    """The study's coordinator row, held (and beaten) from `acquire` until `release`."""

    claims: ClaimStore
    study_name: str
    storage: str
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def key(self) -> str:
        return lock_key(self.study_name)

    def _row(self) -> tuple[str, int] | None:
        found = self.claims.get(self.key)
        return None if found is None else (found[0].owner, found[0].beat)

    def _insert(self) -> bool:
        try:
            with self.claims.engine.begin() as db:
                db.execute(
                    sa.insert(CLAIMS).values(
                        key=self.key,
                        label=f"coordinator of {self.study_name}"[:300],
                        owner=self.claims.owner,
                        state=STATE,
                        beat=0,
                        attempts=1,
                        result=None,
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def _take_over(self, owner: str, beat: int) -> bool:
        with self.claims.engine.begin() as db:
            return (
                db.execute(
                    sa.update(CLAIMS)
                    .where(CLAIMS.c.key == self.key, CLAIMS.c.owner == owner, CLAIMS.c.beat == beat)
                    .values(owner=self.claims.owner, beat=0, attempts=CLAIMS.c.attempts + 1)
                ).rowcount
                == 1
            )

    def _beat(self) -> None:
        with self.claims.engine.begin() as db:
            db.execute(
                sa.update(CLAIMS)
                .where(CLAIMS.c.key == self.key, CLAIMS.c.owner == self.claims.owner)
                .values(beat=CLAIMS.c.beat + 1)
            )

    def acquire(self) -> None:
        """Hold the lock, or refuse (BadInputError) while another live `search` holds it.

        Whatever stops it part-way (Ctrl-C between the insert's commit and its return, or before the heartbeat
        starts) takes this process's row back with it: a lock nobody holds must not outlive the command."""
        try:
            self._take()
            self._thread = threading.Thread(target=self._beating, name="coordinator-heartbeat", daemon=True)
            self._thread.start()
        except BaseException as exc:
            drop_interrupted_frames(exc)
            self._delete_own()
            raise

    def _take(self) -> None:
        seen: tuple[str, int] | None = None
        seen_since = time.monotonic()
        while True:
            row = self._row()
            if row is None and self._insert():
                break
            if row is not None:
                owner, beat = row
                alive = _here(owner)
                if alive or (seen is not None and seen[0] == owner and seen[1] != beat):  # it runs, or beats
                    raise BadInputError(
                        "--storage",
                        f"study {self.study_name!r} in {self.storage} is being searched by another "
                        f"`recommender search` ({owner}, host:pid)",
                        f"join it with `recommender worker --study {self.study_name} --storage {self.storage}`, "
                        "or wait for it to finish",
                    )
                if seen != row:
                    seen, seen_since = row, time.monotonic()
                if (alive is False or time.monotonic() - seen_since > self.claims.grace_s) and self._take_over(
                    owner, beat
                ):
                    break
            time.sleep(min(0.5, self.claims.heartbeat_s / 2))

    def _beating(self) -> None:
        while not self._stop.wait(self.claims.heartbeat_s):
            try:
                self._beat()
            except sa.exc.SQLAlchemyError:  # a dropped connection: the next beat reconnects
                continue

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._delete_own()

    def _delete_own(self) -> None:
        """This process's row of the lock gone (none: nothing to do)."""
        try:
            with self.claims.engine.begin() as db:
                db.execute(sa.delete(CLAIMS).where(CLAIMS.c.key == self.key, CLAIMS.c.owner == self.claims.owner))
        except sa.exc.SQLAlchemyError:
            pass  # left behind: the next search takes it over once its beat has stood still
