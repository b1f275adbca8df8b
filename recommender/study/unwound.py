"""Let go of what an interrupt left mid-statement before the clean-up writes to the same database.

Ctrl-C's KeyboardInterrupt lands between two bytecodes, often while a SQLAlchemy result is being fetched: the
cursor stays open with its SQLite statement un-reset, and a pending read holds the file's SHARED lock. The
frames that hold that cursor live on in the exception's traceback, so a clean-up write in an ``except`` or
``finally`` block (a claim or the coordinator's lock let go) waits out SQLite's busy timeout and fails with
"database is locked", leaving a row that no process holds. Dropping the traceback frees those frames (the cursor
is reset when it is collected) before the write; a KeyboardInterrupt's traceback is never shown to the user.
"""

from __future__ import annotations

import gc

__all__ = ["drop_interrupted_frames"]


def drop_interrupted_frames(exc: BaseException) -> None:
    """When `exc` is a KeyboardInterrupt: forget its tracebacks (and those of the exceptions it was raised during)
    and collect what they held. Any other error keeps its traceback, which is what the user is shown."""
    if not isinstance(exc, KeyboardInterrupt):
        return
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__context__ or current.__cause__
    gc.collect()
