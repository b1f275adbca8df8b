"""Files the tool reads back later: written whole or not at all, read back only when their checksum holds.

A crash, a kill or a full disk mid-write must not leave a file that a later run reads as an answer: a
truncated cache entry read as "no documents scored" costs a recomputation, but an entry whose bytes changed
could be read as a verdict that was never computed. So every such file is

- written to a temporary name in its own folder, flushed to the disk, then renamed over its name (a rename
  is atomic on POSIX filesystems): a reader sees the old file or the new one, never half of one;
- refused as one line naming the path and the space needed when the disk (or a quota, or the process's
  file-size limit) runs out, with the temporary file removed;
- sealed with the sha256 of its content, checked when read: an entry that fails the check is reported in
  one line, set aside and computed again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from recommender.errors import BadInputError

#: The key that holds a sealed file's checksum (sha256 of its value as canonical JSON).
CHECKSUM_KEY = "sha256"
#: What the disk running out looks like: no space, a quota, the process's file-size limit (ulimit -f).
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def checksum(value: Any) -> str:
    """The sha256 of `value` as canonical JSON (key order and spacing do not change it)."""
    return hashlib.sha256(_canonical(value)).hexdigest()


def space_errno(exc: BaseException) -> int | None:
    """The errno of running out of room behind `exc`, or None: an OSError's, or one a library wrapped in its own
    exception's text (safetensors' Rust writer says "I/O error: File too large (os error 27)")."""
    seen: BaseException | None = exc
    while seen is not None:
        code = seen.errno if isinstance(seen, OSError) else None
        match = re.search(r"os error (\d+)", str(seen)) if code is None else None
        code = int(match.group(1)) if match else code
        if code in OUT_OF_SPACE:
            return code
        seen = seen.__cause__ or seen.__context__
    return None


def out_of_space(path: Path, exc: BaseException, needed_bytes: int, *, at_least: bool = False) -> BadInputError:
    """The one line for a write that ran out of room: the path, the space it needed (`at_least`: what was
    written before the disk ran out, a lower bound) and what is free there."""
    try:
        free = f"{shutil.disk_usage(path.parent if path.parent.exists() else Path('/')).free / 1e6:,.1f} MB free"
    except OSError:
        free = "free space unknown"
    code = space_errno(exc) or errno.ENOSPC
    limit = "; the process's file-size limit (ulimit -f) is reached" if code == errno.EFBIG else ""
    needs = f"{'over' if at_least else 'about'} {needed_bytes / 1e6:,.1f} MB"
    return BadInputError(
        str(path),
        f"the disk ran out while writing it: it needs {needs}, "
        f"{free}{limit} ({os.strerror(code)}); nothing was left half-written",
        "free space there (or point $RECOMMENDER_CACHE_DIR / --output-dir elsewhere) and run "
        "again: finished work is kept",
    )


def write_atomic(path: Path, data: bytes) -> Path:
    """`data` at `path`, whole or not at all (temporary name, fsync, rename); out of space: one line, no debris."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if space_errno(exc) is not None:
            raise out_of_space(path, exc, len(data)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_sealed(path: Path, value: Any) -> Path:
    """`value` as JSON with its checksum, written atomically (`read_sealed` checks it)."""
    return write_atomic(path, json.dumps({CHECKSUM_KEY: checksum(value), "value": value}).encode("utf-8"))


def read_sealed(path: Path, *, what: str) -> Any | None:
    """The value sealed at `path`; None when there is none, or when the file is not what was written (not JSON,
    truncated, its checksum wrong): then one line says so, the file is set aside (``.corrupt``) and the caller
    computes the value again. A file from before checksums (a JSON object without one) is read as it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return _corrupt(path, what, f"unreadable: {exc}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _corrupt(path, what, f"not JSON ({exc.msg} at byte {exc.pos}): truncated or overwritten")
    if not isinstance(data, dict):
        return _corrupt(path, what, "not a JSON object")
    if CHECKSUM_KEY not in data:
        return data  # written before entries were sealed (atomically, by the same writer)
    if set(data) != {CHECKSUM_KEY, "value"} or checksum(data["value"]) != data[CHECKSUM_KEY]:
        return _corrupt(path, what, "its content does not match its checksum")
    return data["value"]


def _corrupt(path: Path, what: str, why: str) -> Any | None:
    """Report a corrupt file in one line and move it aside, so the next read computes it again."""
    sys.stderr.write(f"note: {what} {path} is corrupt ({why}); it is set aside and computed again\n")
    with contextlib.suppress(OSError):
        os.replace(path, path.with_name(path.name + ".corrupt"))
    return None


def directory_bytes(path: Path) -> int:
    """Bytes of the files under `path` (what a partly written directory already holds)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
