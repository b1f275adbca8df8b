"""A Ctrl-C that leaves a write transaction open in its unwound frames must not block the clean-up's write."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from recommender.study.unwound import drop_interrupted_frames


def _engines(tmp_path: Path) -> tuple[sa.Engine, sa.Engine]:
    url = f"sqlite:///{tmp_path}/study.db"
    interrupted, cleaning = sa.create_engine(url), sa.create_engine(url, connect_args={"timeout": 0.5})
    with interrupted.begin() as db:
        db.execute(sa.text("CREATE TABLE claims (key TEXT)"))
        db.execute(sa.text("INSERT INTO claims VALUES ('mine')"))
    return interrupted, cleaning


def _interrupted_mid_write(engine: sa.Engine) -> None:
    db = engine.connect()  # as a library's session is, part-way through its work when the interrupt lands
    db.begin()
    db.execute(sa.text("INSERT INTO claims VALUES ('theirs')"))
    raise KeyboardInterrupt


def _release(engine: sa.Engine) -> None:
    with engine.begin() as db:
        db.execute(sa.text("DELETE FROM claims WHERE key = 'mine'"))


@pytest.mark.parametrize("dropped", [False, True], ids=["traceback kept", "frames dropped"])
def test_the_release_after_an_interrupt_writes_once_the_interrupted_frames_are_gone(
    tmp_path: Path, dropped: bool
) -> None:
    interrupted, cleaning = _engines(tmp_path)
    try:
        _interrupted_mid_write(interrupted)
    except KeyboardInterrupt as exc:
        if not dropped:  # the failure this module exists for: SQLite's lock held by the frames in the traceback
            with pytest.raises(sa.exc.OperationalError, match="database is locked"):
                _release(cleaning)
            return
        drop_interrupted_frames(exc)
        _release(cleaning)
    with cleaning.connect() as db:
        assert db.execute(sa.text("SELECT key FROM claims")).scalars().all() == []  # 'theirs' rolled back too


def test_any_other_error_keeps_its_traceback() -> None:
    try:
        raise ValueError("shown to the user")
    except ValueError as exc:
        drop_interrupted_frames(exc)
        assert exc.__traceback__ is not None
