"""A real process SIGKILLed while writing a checkpoint into the store (issue 57, class 6): nothing it leaves is
found as complete — the directory appears under its key only by the final rename — and the next run writes it
whole. The child writes through `CheckpointStore.make` itself (no model: the store is what is under test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from recommender.quantize.checkpoint import CheckpointStore
from tests.conftest import REPO

CHILD = """
import sys, time
from pathlib import Path
from recommender.quantize.checkpoint import CheckpointStore

def write(out: Path) -> None:
    (out / "config.json").write_text("{}")
    (out / "model.safetensors").write_bytes(b"x" * 4096)
    print("half", flush=True)
    time.sleep(60)  # killed here, before the manifest and the rename

CheckpointStore(Path(sys.argv[1])).make("k", write)
"""


def test_a_checkpoint_killed_halfway_is_never_found_and_is_written_whole_next_time(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None and child.stdout.readline().strip() == "half"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    store = CheckpointStore(tmp_path)
    assert store.find("k") is None and not store.path("k").exists()  # the staging folder is not the key

    def write(out: Path) -> None:
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"y" * 4096)

    started = time.monotonic()
    path = store.make("k", write)
    assert (path / "model.safetensors").read_bytes() == b"y" * 4096 and store.find("k") == path
    assert time.monotonic() - started < 5
