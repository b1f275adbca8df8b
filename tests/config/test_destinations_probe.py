"""Destinations probed for real (issue 32): a read-only mount passes `os.access` and fails on write, so the
check writes and removes a file; outputs refused before any work; a failure after the work says where it is."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from recommender.config.destinations import check_output_dir, check_parent
from recommender.errors import BadInputError
from tests.conftest import REPO


def _read_only_mount(*args: object, **kwargs: object) -> tuple[int, str]:
    raise OSError(errno.EROFS, "Read-only file system")


def test_a_read_only_folder_is_refused_though_os_access_says_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda *a, **k: True)  # what a read-only mount answers
    monkeypatch.setattr(tempfile, "mkstemp", _read_only_mount)
    with pytest.raises(BadInputError, match="--plot: directory .* is not writable: its filesystem is mounted read-"):
        check_parent(tmp_path / "plot.png", field="--plot", what="file")
    with pytest.raises(BadInputError, match="--output-dir: directory .* is not writable"):
        check_output_dir(tmp_path / "reports" / "run", field="--output-dir")


@pytest.mark.skipif(not Path("/proc/self/mounts").is_file(), reason="Linux's /proc")
def test_a_folder_under_proc_is_refused_saying_it_is_the_kernels(tmp_path: Path) -> None:
    """Creating a file under /proc fails with ENOENT, though /proc exists: the line says which filesystem it is."""
    with pytest.raises(BadInputError) as caught:
        check_output_dir(Path("/proc/recommender-out"), field="--output-dir")
    text = str(caught.value)
    assert "--output-dir: directory /proc is not writable: it is on the kernel's proc filesystem" in text, text


def test_the_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    check_parent(tmp_path / "plot.png", field="--plot", what="file")
    check_output_dir(tmp_path / "new", field="--output-dir")
    assert list(tmp_path.iterdir()) == []


def test_gpu_fidelity_json_into_a_missing_folder_is_refused_before_any_table(tmp_path: Path) -> None:
    runs = REPO / "recommender" / "perf" / "fit" / "measured_runs" / "serving_runs_h100.csv"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu_fidelity.py"),
            "--predict",
            str(runs),
            "--json",
            str(tmp_path / "missing" / "out.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.splitlines() == [done.stderr.strip()] and "--json: directory" in done.stderr


def test_a_copy_failing_after_quantizing_says_where_the_checkpoint_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work is kept: the store's checkpoint stays and the one line names it."""
    from recommender.cli import checkpoint_export as export
    from recommender.quantize import get_scheme
    from recommender.quantize.llmcompressor import LlmCompressorScheme

    made = tmp_path / "store" / "key"
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(LlmCompressorScheme, "checkpoint", lambda self, source, context: made)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export.shutil, "copytree", disk_full)
    scheme = export.checkpoint_scheme(get_scheme("w4a16-rtn-g128"))
    with pytest.raises(BadInputError, match=f"No space left on device.*the checkpoint is kept at {made}"):
        export.export_checkpoint(scheme, None, None, tmp_path / "out")  # type: ignore[arg-type]
    assert (made / "config.json").is_file()
