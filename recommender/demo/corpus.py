"""The demo corpus: the Python standard library's own source, read from the running interpreter.

Why this corpus: it exists on every machine that can run the tool, it needs no network,
and it is large (about 11 MB) and regular enough that a few-million-parameter model
learns it visibly within minutes on two CPU cores. Nothing of it is committed; the
split into training and evaluation files is a pure function of each file's relative
path, so the training script and the evaluation tasks agree on it without sharing state.
"""

from __future__ import annotations

import functools
import hashlib
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Split = Literal["train", "eval"]

#: Folders of the standard library that are left out: tests (huge, repetitive data
#: tables), the IDE, and third-party installs.
_EXCLUDED_PARTS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"})
#: One file in this many goes to the evaluation split.
_EVAL_EVERY = 16


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One standard-library file: its path relative to the library root, and its text."""

    relpath: str
    text: str


def stdlib_root() -> Path:
    """The directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def split_of(relpath: str) -> Split:
    """Assign a file to a split by a hash of its relative path (stable across machines)."""
    digest = hashlib.sha256(relpath.encode("utf-8")).digest()
    return "eval" if digest[0] % _EVAL_EVERY == 0 else "train"


@functools.cache
def _listing(root: Path) -> tuple[tuple[str, Split], ...]:
    """Every eligible file under `root` in sorted path order, with its split.

    Walking and sorting the standard library is what a corpus read costs (about a second on two cores),
    and one search reads the corpus for each task and calibration set it builds, so the walk is kept for
    the process. The library does not change under a running interpreter.
    """
    listed: list[tuple[str, Split]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if not _EXCLUDED_PARTS.intersection(rel.parts):
            relpath = rel.as_posix()
            listed.append((relpath, split_of(relpath)))
    return tuple(listed)


def iter_source_files(split: Split, *, max_bytes: int = 60_000) -> Iterator[SourceFile]:
    """Yield the split's files in sorted path order; files above `max_bytes` are skipped.

    Sorting makes every consumer (tokenizer training, model training, task data) see
    the same order, which is what makes their outputs reproducible. Files are read as they are yielded.
    """
    root = stdlib_root()
    for relpath, of_split in _listing(root):
        if of_split != split:
            continue
        try:
            raw = (root / relpath).read_bytes()
        except OSError:
            continue
        if len(raw) > max_bytes:
            continue
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
        if text.strip():
            yield SourceFile(relpath=relpath, text=text)
