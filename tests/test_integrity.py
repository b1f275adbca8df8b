"""What is read back later is whole and checked (issue 44): real files, a real file-size limit in a subprocess.

A truncated, overwritten or edited quality-cache entry is said in one line, set aside and computed again, never
read back as a verdict; a write that runs out of room (here the process's file-size limit, `ulimit -f`, which
the kernel enforces like a full disk) is one line naming the path and the space needed, and leaves nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.integrity import CHECKSUM_KEY, read_sealed, write_sealed
from recommender.quality.cache import QualityCache
from tests.conftest import REPO

ENTRY = {"docs": {"0": [1.0, 0.0], "1": [0.25, 1.0]}, "verdict": "pass"}


def _spoil(path: Path, how: str) -> None:
    text = path.read_text(encoding="utf-8")
    if how == "truncated":
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    elif how == "not json":
        path.write_bytes(b"\x00" * 64)
    elif how == "edited":  # still valid JSON, one score changed: only the checksum tells
        path.write_text(text.replace("0.25", "0.75"), encoding="utf-8")
    elif how == "checksum replaced":
        data = json.loads(text)
        data[CHECKSUM_KEY] = "0" * 64
        path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("how", ["truncated", "not json", "edited", "checksum replaced"])
def test_a_spoiled_cache_entry_is_said_set_aside_and_never_read_back(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = QualityCache(tmp_path)
    cache.put("ab" + "0" * 62, ENTRY)
    path = next(tmp_path.rglob("*.json"))
    assert cache.get("ab" + "0" * 62) == ENTRY
    _spoil(path, how)
    assert cache.get("ab" + "0" * 62) is None  # computed again by the caller, never the spoiled verdict
    notes = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(notes) == 1 and notes[0].startswith(f"note: quality cache entry {path} is corrupt"), notes
    assert not path.exists() and path.with_name(path.name + ".corrupt").is_file()
    cache.put("ab" + "0" * 62, ENTRY)  # recomputed and written again
    assert cache.get("ab" + "0" * 62) == ENTRY


def test_an_entry_from_before_checksums_is_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(ENTRY), encoding="utf-8")
    assert read_sealed(path, what="entry") == ENTRY


def test_key_order_and_spacing_do_not_change_the_checksum(tmp_path: Path) -> None:
    write_sealed(tmp_path / "e.json", ENTRY)
    data = json.loads((tmp_path / "e.json").read_text(encoding="utf-8"))
    (tmp_path / "e.json").write_text(json.dumps(data, indent=4, sort_keys=True), encoding="utf-8")
    assert read_sealed(tmp_path / "e.json", what="entry") == ENTRY


#: Writes a cache entry, then evidence JSON, of about 2 MB each in a process limited to 1 MB per file.
_WRITER = """
import sys
from pathlib import Path
from recommender.errors import BadInputError
from recommender.quality.cache import QualityCache
from recommender.serialization import write_json
value = {"docs": {str(i): [0.123456789, 1.0] for i in range(80_000)}}
try:
    if sys.argv[2] == "cache":
        QualityCache(Path(sys.argv[1])).put("cd" + "1" * 62, value)
    else:
        write_json(Path(sys.argv[1]) / "recommendation.json", value)
except BadInputError as exc:
    sys.stderr.write(f"error: {exc}\\n")
    sys.exit(2)
"""


@pytest.mark.parametrize("what", ["cache", "evidence"])
def test_a_full_disk_while_writing_is_one_line_and_leaves_nothing(what: str, tmp_path: Path) -> None:
    limit = 1 << 20

    def limited() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(tmp_path), what],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=limited,
        timeout=120,
        check=False,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    needed = re.search(r"the disk ran out while writing it: it needs about ([\d.]+) MB", errors[0])
    assert needed and float(needed.group(1)) > limit / 1e6, errors[0]  # the whole file's size, over the limit
    assert "file-size limit (ulimit -f)" in errors[0] and str(tmp_path) in errors[0]
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no temporary file, no half-written entry
