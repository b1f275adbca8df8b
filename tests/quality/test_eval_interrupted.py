"""`recommender eval` interrupted halfway (issue 57, class 6): a real process on the demo model, SIGKILLed once
its first per-document results are in the quality cache, then a rerun interrupted by SIGINT (Ctrl-C) once it has
written more, then a rerun to the end. What a killed run leaves must never be read back as complete: every file
under the cache's quality folder is a whole sealed entry (written by rename, `integrity.write_sealed`), holding
only the documents it scored, and the last run scores the rest and answers for the whole document count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recommender.integrity import read_sealed
from tests.conftest import DEMO_MODEL, REPO, write_suite

# Three eval processes on two shared cores: about 2.5 min.
pytestmark = pytest.mark.slow

LIMIT = 8


def _eval(cache: Path, suite: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "recommender.cli.main",
        "eval",
        "--model",
        str(DEMO_MODEL),
        "--scheme",
        "fp16",
        "--use-case",
        str(suite),
        "--limit",
        str(LIMIT),
        "--no-adaptive",
        "--json",
    ]


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "quality").glob("*/*.json"))


def _interrupt_when(process: subprocess.Popen[str], cache: Path, more_than: int, sig: int) -> int:
    """Send `sig` once the cache holds more than `more_than` entries (the process is past its first scores)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if len(_entries(cache)) > more_than:
            process.send_signal(sig)
            return len(_entries(cache))
        time.sleep(0.05)
    raise AssertionError(f"finished (exit {process.poll()}) before writing more than {more_than} entries")


def _assert_whole(cache: Path) -> None:
    """Every entry is sealed and whole; a staging file (``.name.*.tmp``) is never named like an entry."""
    for path in _entries(cache):
        entry = read_sealed(path, what="quality cache entry")
        assert isinstance(entry, dict), path
        for scores in entry.get("docs", {}).values():
            assert isinstance(scores, list) and scores, path


def test_eval_killed_then_interrupted_leaves_nothing_read_as_complete(tmp_path: Path) -> None:
    cache, suite = tmp_path / "cache", write_suite(tmp_path / "suite.yaml", limit=LIMIT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RECOMMENDER_CACHE_DIR": str(cache)}
    command = _eval(cache, suite)

    def started() -> subprocess.Popen[str]:
        return subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    # 1. SIGKILL after its first scores are cached.
    killed = started()
    after_kill = _interrupt_when(killed, cache, 0, signal.SIGKILL)
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    _assert_whole(cache)

    # 2. A rerun, Ctrl-C once it has cached more: exit 130, one line, no traceback.
    interrupted = started()
    _interrupt_when(interrupted, cache, after_kill, signal.SIGINT)
    stdout, stderr = interrupted.communicate(timeout=120)
    assert interrupted.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "rerun to resume" in stderr and stdout == ""
    _assert_whole(cache)

    # 3. A rerun to the end: every check rests on the documents asked for, none taken from a half-run as done.
    finished = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode in (0, 1, 3), finished.stderr[-2000:]
    assert "Traceback" not in finished.stderr
    result = json.loads(finished.stdout)
    counts = {c["name"]: c["n_docs"] for c in result["checks"] if c["name"] != "fidelity"}
    assert counts == {"demo_code_ppl": LIMIT, "demo_code_next_line": LIMIT}, counts  # --limit: every task
    _assert_whole(cache)
    for path in _entries(cache):  # each task's entries hold exactly the documents scored, the full count
        entry = read_sealed(path, what="quality cache entry")
        assert entry is not None
        if "docs" in entry:
            assert len(entry["docs"]) == counts[entry["task"]], (path, entry["task"])
