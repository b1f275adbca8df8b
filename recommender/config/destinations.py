"""Where a command will write, checked before it writes anything: stores, folders, names.

A refusal that comes after an MLflow experiment row, an Optuna table or a progress line
leaves debris and teaches CI to ignore failures, so every command runs these checks
first. Each check only looks (stat, parse) and connects nowhere; the one thing created is a probe file,
removed at once, since ``os.access`` answers from the mode bits and says "writable" on a read-only mount.

Choices made here:
- URI schemes are those the libraries register: Optuna's RDB storage (SQLAlchemy) for
  sqlite, postgresql and mysql; MLflow's tracking stores for those plus mssql, http(s),
  databricks and file. Anything else is refused by name, not by the library's exception.
- The tool creates only its own default folder (``mlruns/``); a SQLite file or output
  folder the user names must sit in a directory that already exists — a typo must not
  grow a new tree (as root, anywhere).
- Names that become file or folder names (a study, a run id) are restricted to letters,
  digits, ``_ . -``, never ``..``, and at most `MAX_NAME_BYTES`, so they cannot leave
  their directory or fail only at the end of a search on the filesystem's 255-byte limit.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

from recommender.errors import CONTROL_CHARACTERS, BadInputError
from recommender.input_files import usable_path
from recommender.paths import CACHE_DIR_ENV, cache_root

#: Study names and run ids become one path component; 255 bytes is the usual filesystem limit and
#: the tool appends suffixes (``.json``, ``-checkpoint``), so names stay well below it.
MAX_NAME_BYTES = 200
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")  # \Z: "$" would let a trailing newline through

STORAGE_SCHEMES = ("sqlite", "postgresql", "mysql")
TRACKING_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "file")
#: The defaults' folder, the only one the tool creates by itself.
DEFAULT_FOLDER = Path("mlruns")


def check_name(name: str, *, field: str, what: str = "name") -> str:
    """A name that becomes a file or folder name: safe characters, no traversal, not too long."""
    if not _SAFE_NAME.match(name) or ".." in name:
        raise BadInputError(
            field,
            f"{what} {name!r} is not a plain name (it becomes a folder name)",
            "use letters, digits, '_', '.' and '-' only, starting with a letter or digit",
        )
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise BadInputError(
            field,
            f"{what} is {len(name.encode('utf-8'))} bytes long, over the {MAX_NAME_BYTES} a folder name may take here",
            "shorten it",
        )
    return name


def _scheme(uri: str) -> str:
    head, sep, _ = uri.partition("://")
    if not sep:
        head = uri.partition(":")[0] if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) else ""
    return head.split("+", 1)[0].lower()


def _owned(path: Path) -> bool:
    """Whether `path` lies inside the tool's own default folder (relative to the working directory)."""
    try:
        path.resolve().relative_to(DEFAULT_FOLDER.resolve())
    except ValueError:
        return False
    return True


def new_path(path: Path, *, field: str) -> Path:
    """`path` if the tool may create it: a usable path (no NUL, no component over 255 bytes) without control
    characters, which would end up in a folder listing and in the commands printed to serve what is there."""
    if CONTROL_CHARACTERS.search(str(path)):
        raise BadInputError(
            field,
            f"{str(path)[:120]!r} holds a control character (a newline, a tab, an escape)",
            "give a path without control characters",
        )
    return usable_path(path, field=field)


def check_parent(path: Path, *, field: str, what: str) -> None:
    """`path` (a file or folder to create) has a parent that exists, is a directory and is writable."""
    if new_path(path, field=field).exists() and path.is_dir() == (what == "file"):
        kind = "a directory" if path.is_dir() else "a file"
        raise BadInputError(field, f"{path} is {kind}, not a {what}", f"give the path of a {what}")
    parent = path.parent
    if _owned(path):
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.exists():
        raise BadInputError(field, f"directory {parent} does not exist", "create it first, or fix the path")
    if not parent.is_dir():
        raise BadInputError(field, f"{parent} is a file, not a directory", "give a path inside a directory")
    probe_writable(parent, field=field)


def probe_writable(directory: Path, *, field: str) -> None:
    """Create and remove a file in `directory`: the one answer a read-only mount, a full disk or an ACL cannot
    fake (``os.access`` reads the mode bits only, and a read-only mount keeps them)."""
    try:
        handle, name = tempfile.mkstemp(prefix=".recommender-probe-", dir=directory)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        raise BadInputError(
            field,
            f"directory {directory} is not writable: {why_unwritable(directory, exc)}",
            "pick a directory you can write to",
        ) from None


#: Filesystems the kernel makes up (their files are views of its state): a file of the user's cannot be made there.
VIRTUAL_FILESYSTEMS = (
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "debugfs",
    "securityfs",
    "configfs",
    "tracefs",
    "bpf",
    "pstore",
    "efivarfs",
    "fusectl",
    "binfmt_misc",
    "devpts",
    "mqueue",
    "hugetlbfs",
)


def why_unwritable(directory: Path, exc: OSError) -> str:
    """Why a file cannot be created in `directory`, in words that hold for it: the errno alone misleads (the
    kernel answers "No such file or directory" for a new file under /proc, which exists)."""
    fstype = filesystem_type(directory)
    if fstype in VIRTUAL_FILESYSTEMS:
        return f"it is on the kernel's {fstype} filesystem, which holds no files but its own ({exc.strerror})"
    reasons = {
        errno.EROFS: "its filesystem is mounted read-only",
        errno.ENOSPC: "its filesystem is full",
        errno.EDQUOT: "your disk quota there is used up",
        errno.EACCES: "permission denied",
        errno.EPERM: "the operation is not permitted there",
        errno.ENOENT: f"the filesystem refuses new files there ({fstype or 'unknown'} filesystem: {exc.strerror})",
    }
    return reasons.get(exc.errno or 0, str(exc.strerror or exc))


def filesystem_type(path: Path) -> str:
    """The type of the filesystem `path` lies on (``/proc/self/mounts``' longest mount point above it); "" where
    the mounts cannot be read (not Linux)."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    resolved, best, fstype = str(path.resolve()), -1, ""
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (resolved == point or resolved.startswith(point.rstrip("/") + "/")) and len(point) > best:
            best, fstype = len(point), parts[2]
    return fstype


def _check_sqlite(uri: str, *, field: str) -> None:
    path = uri.partition("://")[2]
    if not path.startswith("/") or path in ("/", "/:memory:"):
        raise BadInputError(
            field, f"{uri!r} names no database file", "write sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    check_parent(Path(path[1:].split("?", 1)[0]), field=field, what="file")


def check_storage_url(url: str, *, field: str = "--storage") -> None:
    """An Optuna storage URL of a scheme its RDB storage accepts; a SQLite file's folder must exist."""
    scheme = _scheme(url)
    if scheme not in STORAGE_SCHEMES:
        raise BadInputError(
            field,
            f"unknown storage scheme {scheme + '://' if scheme else url!r}",
            "pass sqlite:///path.db, postgresql://USER@HOST/DB or mysql://USER@HOST/DB",
        )
    if scheme == "sqlite":
        _check_sqlite(url, field=field)


def check_tracking_uri(uri: str, *, field: str = "--tracking-uri") -> None:
    """An MLflow tracking URI of a scheme MLflow registers; a SQLite file's or file store's folder must exist.
    A folder (the file store) only where MLflow 3 is told to accept it (MLFLOW_ALLOW_FILE_STORE)."""
    scheme = _scheme(uri)
    if scheme in ("", "file") and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
        raise BadInputError(
            field,
            f"{uri[:120]!r} is a folder (MLflow's file store, which MLflow 3 refuses)",
            "pass sqlite:///PATH/mlflow.db, or set MLFLOW_ALLOW_FILE_STORE=true for a file store",
        )
    if scheme == "":
        check_parent(Path(uri), field=field, what="directory")
        return
    if scheme not in TRACKING_SCHEMES:
        raise BadInputError(
            field,
            f"unknown tracking URI scheme {scheme + '://'!r}",
            "pass sqlite:///path.db, http(s)://HOST:PORT, a database URL or a folder",
        )
    if scheme == "sqlite":
        _check_sqlite(uri, field=field)
    elif scheme == "file":
        check_parent(Path(uri.partition(":")[2].removeprefix("//")), field=field, what="directory")


def check_output_dir(path: Path, *, field: str = "--output-dir") -> None:
    """A folder to write into: a directory already, or creatable below an existing writable one."""
    if new_path(path, field=field).exists():
        if not path.is_dir():
            raise BadInputError(field, f"{path} is a file, not a directory", "give a directory (or a new path)")
        probe_writable(path, field=field)
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise BadInputError(field, f"{parent} is a file, not a directory", "give a path inside a directory")
    probe_writable(parent, field=field)


def check_search_destinations(
    *, storage: str, tracking_uri: str, output_root: Path, study_name: str, resume: bool
) -> None:
    """Everything a search writes to, checked before its first row, file or progress line."""
    check_storage_url(storage)
    check_tracking_uri(tracking_uri, field=tracking_uri_field(tracking_uri))
    check_output_dir(output_root)
    check_output_dir(output_root / study_name, field="--output-dir (the study's folder)")
    check_cache_root()
    if resume and storage.startswith("sqlite:///") and not Path(storage.removeprefix("sqlite:///")).is_file():
        raise BadInputError("--resume", f"no study {study_name!r} in {storage} to resume", "drop --resume to start it")


def tracking_uri_field(uri: str) -> str:
    """Which setting a tracking URI came from, so a refusal blames the right one."""
    return "$MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") == uri else "--tracking-uri"


def check_cache_root() -> Path:
    """The cache root, refused up front when it cannot be a directory (the variable names a file, or a path
    below one), so a search does not fail at its first cached document. Looks only; creates nothing."""
    root = cache_root()
    check_output_dir(root, field=f"${CACHE_DIR_ENV}" if os.environ.get(CACHE_DIR_ENV) else "cache directory")
    return root
