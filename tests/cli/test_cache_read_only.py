"""The cache directory read-only (issue 57, class 6): a real directory of mode 0555 named by $RECOMMENDER_CACHE_DIR,
and each command that writes there (`eval`, `quantize`, `search`) run as a real process that the mode binds. Root
ignores mode bits, so as root the command runs as `nobody` (setpriv), in a folder that user can read. Each is
refused before any model loads: one line naming the variable and the directory, exit 2, nothing written."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DEMO_MODEL, REPO, write_contract_prices, write_spec, write_suite


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can read (pytest's tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="recommender-ro-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and no `nobody` user to run the command as")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and no setpriv to drop to `nobody`")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _commands(folder: Path) -> dict[str, list[str]]:
    suite = write_suite(folder / "suite.yaml", limit=2)
    spec = write_spec(
        folder / "spec.yaml",
        {
            "name": "ro",
            "model": {"source": str(DEMO_MODEL), "release": "test"},
            "use_case": str(suite),
            "space": {"methods": {"bf16": ["baseline"]}, "hardware": ["l4"], "batch_sizes": [4]},
            "current": {"precision": "bf16", "method": "baseline", "hardware": "l4", "batch_size": 4},
            "hardware_catalog": str(write_contract_prices(folder / "contract.yaml")),
            "engines": None,
        },
    )
    model = ["--model", str(DEMO_MODEL)]
    return {
        "eval": ["eval", *model, "--scheme", "fp16", "--use-case", str(suite)],
        "quantize": ["quantize", *model, "--scheme", "w4a16-rtn-g128", "--out", str(folder / "q")],
        "search": [
            "search",
            str(spec),
            "--storage",
            f"sqlite:///{folder}/optuna.db",
            "--tracking-uri",
            f"sqlite:///{folder}/mlflow.db",
            "--output-dir",
            str(folder / "out"),
        ],
    }


@pytest.mark.slow  # a process each, 2.5-10 s on two shared cores (search imports the simulator)
@pytest.mark.parametrize("command", ["eval", "quantize", "search"])
def test_a_read_only_cache_directory_is_one_line_naming_it(command: str, shared_dir: Path) -> None:
    user = _as_user()
    (shared_dir / "work").mkdir(mode=0o777)
    (shared_dir / "work").chmod(0o777)  # where the command may write (the mode was cut by the umask)
    cache = shared_dir / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    args = _commands(shared_dir / "work")[command]
    before = sorted(p.name for p in (shared_dir / "work").iterdir())
    env = {**os.environ, "PYTHONPATH": str(REPO), "RECOMMENDER_CACHE_DIR": str(cache), "HOME": str(shared_dir)}
    result = subprocess.run(
        [*user, sys.executable, "-m", "recommender.cli.main", *args],
        cwd=shared_dir / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"error: $RECOMMENDER_CACHE_DIR: directory {cache} is not writable"), result.stderr
    assert "(fix: " in result.stderr and result.stdout == ""
    assert list(cache.iterdir()) == []
    assert sorted(p.name for p in (shared_dir / "work").iterdir()) == before
