"""What a user reads is the tool's own output (issue 13): the real CLI, quiet by default, the libraries back with -v.

Each command runs in a fresh process, as a user's does: the libraries' switches are read at their
import, so only a subprocess shows what a terminal would. The environment the tests set for
themselves (TQDM_DISABLE) is removed, so the command has to quiet the libraries on its own; the
working directory is outside any git repository, where lm-eval's `git describe` complains.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.quiet import _QUIET_ENV, VERBOSE_ENV
from tests.conftest import REPO, write_suite

#: What the libraries print when nothing stops them: tqdm bars, logging records, MLflow's run link,
#: torch's and torchao's import notices, lm-eval's task notes, Python warnings, git's complaint.
CHATTER = (
    "Loading weights",
    "it/s]",
    "s/it]",
    "Running loglikelihood requests",
    "Tokenizing inputs",
    "Building contexts",
    "Generating test split",
    "WARNING",
    "INFO",
    "Warning:",
    "[Task:",
    "[transformers]",
    "Failed to load",
    "_pytree",
    "🏃",
    "fatal:",
)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Not the suite's TQDM_DISABLE, nor what quiet_libraries set in this process when another test ran the
    # command line in-process (its variables would reach the subprocess and hide what --verbose must show).
    quiet = {"TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", VERBOSE_ENV, *_QUIET_ENV}
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env["RECOMMENDER_CACHE_DIR"] = str(cwd / "cache")  # a cold quality cache: lm-eval really runs
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_eval_prints_only_its_own_output(tmp_path: Path, demo_model_dir: Path) -> None:
    suite = write_suite(tmp_path / "suite.yaml", limit=2)
    result = _cli(
        "eval",
        "--model",
        str(demo_model_dir),
        "--method",
        "torchao-int8-wo",
        "--use-case",
        str(suite),
        "--limit",
        "2",
        "--no-adaptive",
        cwd=tmp_path,
    )
    assert result.returncode in (0, 1, 3), result.stderr  # pass, fail or inconclusive: 2 documents decide little
    assert "verdict: " in result.stdout
    assert result.stderr == ""  # the tables go to stdout; nothing else may reach the terminal
    for marker in CHATTER:
        assert marker not in result.stdout, f"{marker!r} in\n{result.stdout}"


def test_verbose_shows_the_libraries_output(tmp_path: Path, demo_model_dir: Path) -> None:
    result = _cli(
        "--verbose",
        "probe",
        "--model",
        str(demo_model_dir),
        "--method",
        "baseline",
        "--prompt-tokens",
        "8",
        "--batch-size",
        "1",
        "--repeats",
        "1",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Loading weights" in result.stderr  # transformers' progress bar, on again


def test_help_documents_verbose() -> None:
    result = _cli("--help", cwd=REPO)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--verbose" in text and "RECOMMENDER_VERBOSE" in text
